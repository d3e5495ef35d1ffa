"""Memory budget met by recomputation: peak memory and time per sample against the budget.

    .venv/bin/python benchmarks/bench_memory_budget.py                       # ResNet-18 CIFAR b32
    .venv/bin/python benchmarks/bench_memory_budget.py --model mlp --batch 512 --steps 10
    .venv/bin/python benchmarks/bench_memory_budget.py --model resnet50 --batch 16 --steps 2 \
        --compile-budgets 0.5 --fit-batch 64          # ResNet-50 224x224 (issue 20's point 5)
    .venv/bin/python benchmarks/bench_memory_budget.py --model gpt --batch 16 --compile-budgets 0.3

For singa, budgets of 100%, 75%, 50%, 35% of the unconstrained plan (persistent blocks + arena)
and the least budget the planner reaches (read from the error a tiny budget raises), with the
greedy planner and with Chen et al.'s sqrt(N) checkpoints; beside them PyTorch eager, plain and
with torch.utils.checkpoint (checkpoint_sequential over the network's top-level modules in
max(2, sqrt(n)) segments: its stem, residual blocks and head). Each row runs in its own
process; its peak RSS is VmHWM, reset through /proc/self/clear_refs just before the first step,
minus the RSS at that point (bench_train.py's measure): activations, workspaces and allocator
slack, not the parameters. "planned" is singa's persistent + arena bytes; time is the median
step over --steps after a warm-up (for a budgeted singa row, the 6 steps after which its
planner runs the plan chosen by measured times), per sample. Default environment; prints a
Markdown table. bench_remat_cost.py compares the planner's cost models side by side.

`--model gpt` is bench_gpt.py's GPT (examples/gpt.py, 4 layers, d_model 256, seq 256, Adam) and
its torch twin; its checkpointed variant checkpoints each transformer block. `--compile-budgets`
adds torch.compile rows with torch._functorch.config.activation_memory_budget at each value
(the first step compiles: its time is reported apart). `--fit-batch B` adds the issue's
"bigger batch in PyTorch's memory" rows: PyTorch eager at --batch, then singa at batch B with a
budget set so that its peak RSS above the pre-step RSS stays within PyTorch's (the budget covers
parameters too, which that RSS does not count: their bytes are added to it).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_gpt import cpu_model  # noqa: E402

SHAPES = {"mlp": ((784,), 10), "cnn": ((1, 28, 28), 10), "resnet18": ((3, 32, 32), 10),
          "resnet50": ((3, 224, 224), 1000)}
GPT = {"vocab": 96, "seq": 256, "d_model": 256, "heads": 4, "layers": 4}


def _timed(step, steps, info=None, warmup=1):
    """(median seconds per step, peak RSS bytes above the RSS before the first step); the first
    step's seconds go to info["first_step"]. `warmup` steps run before the timed ones."""
    from bench_train import reset_peak, rss_kb
    reset_peak()
    base = rss_kb("VmRSS")
    t0 = time.perf_counter()
    step()  # warm-up (singa: records and plans the graph; torch.compile: compiles)
    if info is not None:
        info["first_step"] = time.perf_counter() - t0
    for _ in range(warmup - 1):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], (rss_kb("VmHWM") - base) * 1024



def build_singa(model, batch, dev):
    """(net, tx, ty): the network with its optimizer and one batch of random data on dev."""
    import numpy as np
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    import models
    from singa import opt, tensor
    rng = np.random.default_rng(0)
    if model == "gpt":
        import gpt
        net = gpt.GPT(GPT["vocab"], GPT["seq"], GPT["d_model"], GPT["heads"], GPT["layers"])
        net.set_optimizer(opt.Adam(lr=1e-3))
        tok = (batch, GPT["seq"])
        tx = tensor.from_numpy(rng.integers(0, GPT["vocab"], tok).astype(np.int32), dev)
        ty = tensor.from_numpy(rng.integers(0, GPT["vocab"], tok).astype(np.int32), dev)
    else:
        shape, classes = SHAPES[model]
        net = {"mlp": lambda: models.MLP(num_classes=classes),
               "cnn": lambda: models.CNN(num_classes=classes),
               "resnet18": lambda: models.resnet18(num_classes=classes, cifar=True),
               "resnet50": lambda: models.resnet50(num_classes=classes, cifar=False)}[model]()
        net.set_optimizer(opt.SGD(lr=0.01, momentum=0.9, weight_decay=1e-5))
        tx = tensor.from_numpy(rng.standard_normal((batch,) + shape).astype(np.float32), dev)
        ty = tensor.from_numpy(rng.integers(0, classes, batch).astype(np.int32), dev)
    return net, tx, ty


# Steps before a budgeted graph runs its final plan: the recording step, the graph's timed
# replays (Graph::kTimedRuns) and the step that replans with those times (graph.h: cost model).
SINGA_BUDGET_WARMUP = 6


def run_singa(model, batch, steps, budget, strategy):
    import numpy as np
    from singa import device, graph, singa_wrap
    dev = device.create_cpu_device(0)
    dev.SetRandSeed(0)
    net, tx, ty = build_singa(model, batch, dev)
    if budget is not None:
        dev.SetMemoryBudget(budget, strategy)
    net.compile([tx], is_train=True, use_graph=True)
    info = {}
    try:
        t, rss = _timed(lambda: net(tx, ty), steps, info,
                        warmup=1 if budget is None else SINGA_BUDGET_WARMUP)
    except singa_wrap.OutOfMemoryError as e:
        return {"error": str(e),
                "least": int(re.search(r"needs at least (\d+) bytes", str(e)).group(1))}
    plan = graph.memory_plan(dev)
    params = sum(int(np.prod(p.shape)) * 4 for p in net.get_params().values())
    return {"planned": plan["persistent_bytes"] + plan["arena_bytes"],
            "arena": plan["arena_bytes"], "recomputed": plan["num_recomputed"],
            "rss": rss, "sec_per_sample": t / batch, "params": params, **info}


def torch_gpt_step(batch, checkpoint):
    """bench_gpt.py's torch twin with Adam; checkpoint: each transformer block checkpointed."""
    import torch
    from bench_gpt import torch_gpt
    from torch.utils.checkpoint import checkpoint as ckpt
    cfg = dict(GPT)
    net = torch_gpt(cfg)
    if checkpoint:
        def forward(idx):
            h = net.tok(idx) + net.pos[:idx.shape[1]]
            for blk in net.blocks.layers:
                h = ckpt(blk, h, src_mask=net.mask, is_causal=True, use_reentrant=False)
            return net.head(net.norm(h)).reshape(-1, cfg["vocab"])
        net.forward = forward
    tx = torch.randint(0, cfg["vocab"], (batch, cfg["seq"]))
    ty = torch.randint(0, cfg["vocab"], (batch * cfg["seq"],))
    return net, tx, ty


def _compiled(net, activation_memory_budget):
    """torch.compile(net) with AOTAutograd's min-cut partitioner held to the given fraction of
    the activations it would otherwise save (it recomputes the rest in the backward)."""
    import torch
    import torch._functorch.config
    torch._functorch.config.activation_memory_budget = activation_memory_budget
    return torch.compile(net)


def run_torch(model, batch, steps, checkpoint, compile_budget=None):
    import torch
    import torch_models
    from torch.utils.checkpoint import checkpoint_sequential
    torch.manual_seed(0)
    info = {}
    if model == "gpt":
        net, tx, ty = torch_gpt_step(batch, checkpoint)
        adam = torch.optim.Adam(net.parameters(), lr=1e-3)
        lossf = torch.nn.CrossEntropyLoss()
        fwd = net
        if compile_budget is not None:
            fwd = _compiled(net, compile_budget)

        def step():
            adam.zero_grad()
            loss = lossf(fwd(tx), ty)
            loss.backward()
            adam.step()
        t, rss = _timed(step, steps, info)
        return {"rss": rss, "sec_per_sample": t / batch, **info}
    shape, classes = SHAPES[model]
    net = torch_models.build(model)
    tx = torch.randn((batch,) + shape)
    ty = torch.randint(0, classes, (batch,))
    if compile_budget is not None:
        net = _compiled(net, compile_budget)
    elif checkpoint:
        stages = len(list(net.children()))
        seq = net

        class Ckpt(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.seq = seq

            def forward(self, x):
                return checkpoint_sequential(self.seq, max(2, int(stages ** 0.5)), x,
                                             use_reentrant=False)
        net = Ckpt()
    t, rss = _timed(torch_models.train_step(net, tx, ty), steps, info)
    return {"rss": rss, "sec_per_sample": t / batch, **info}


def child(args):
    if args.framework == "singa":
        budget = None if args.budget == "none" else (
            float(args.budget) if "." in args.budget else int(args.budget))
        out = run_singa(args.model, args.batch, args.steps, budget, args.strategy)
    else:
        out = run_torch(args.model, args.batch, args.steps, args.strategy == "checkpoint",
                        float(args.budget) if args.strategy == "compile" else None)
    print("RESULT " + json.dumps(out))


def spawn(args, framework, budget="none", strategy="greedy", batch=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--framework", framework,
           "--model", args.model, "--batch", str(batch or args.batch), "--steps",
           str(args.steps), "--budget", str(budget), "--strategy", strategy]
    sys.stderr.write("%s ... " % " ".join(cmd[3:]))
    sys.stderr.flush()
    t0 = time.time()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        sys.stderr.write("over %ss\n" % args.timeout)
        return {"error": "over its %ss limit" % args.timeout}
    sys.stderr.write("%.0f s, load %.1f\n" % (time.time() - t0, os.getloadavg()[0]))
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.stderr.write("child failed: %s\n%s\n" % (" ".join(cmd), out.stderr[-3000:]))
    return {"error": "failed (see the log)"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES) + ["gpt"], default="resnet18")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--compile-budgets", type=float, nargs="*", default=[],
                    help="torch.compile rows at these activation_memory_budget values")
    ap.add_argument("--fit-batch", type=int, default=0,
                    help="singa at this batch within PyTorch eager's peak at --batch")
    ap.add_argument("--chen", type=int, default=1, help="0: no sqrt(N) row")
    ap.add_argument("--fractions", type=float, nargs="*", default=[1.0, 0.75, 0.5, 0.35],
                    help="budgets as fractions of the unconstrained plan")
    ap.add_argument("--arena-fractions", type=float, nargs="*", default=[0.5],
                    help="budgets of the persistent blocks + these fractions of the arena")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per row")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--framework", default="singa", help=argparse.SUPPRESS)
    ap.add_argument("--budget", default="none", help=argparse.SUPPRESS)
    ap.add_argument("--strategy", default="greedy", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    mib = 2.0 ** 20
    print("machine: %s, %d cores; %s; load average at the start %.1f; OPENBLAS_CORETYPE=%s"
          % (cpu_model(), os.cpu_count(), time.strftime("%Y-%m-%d %H:%M"), os.getloadavg()[0],
             os.environ.get("OPENBLAS_CORETYPE", "(unset)")), flush=True)
    free = spawn(args, "singa")
    total = free["planned"]
    least = spawn(args, "singa", budget=1)["least"]
    # singa's rows interleaved with PyTorch's, so that a slow spell of the shared machine does
    # not fall on one framework alone.
    torch_rows = []
    if not args.no_torch:
        torch_rows = [("pytorch eager", "plain", "none"),
                      ("pytorch eager + checkpoint per stage", "checkpoint", "none")]
        torch_rows += [("pytorch torch.compile, activation_memory_budget %g" % b, "compile", b)
                       for b in args.compile_budgets]
    rows = [("singa, no budget", free)]
    singa_rows = [("budget %d%% (%.1f MiB)" % (f * 100, f * total / mib), int(f * total))
                  for f in args.fractions]
    # The target is stated on activations: persistent blocks + a fraction of the arena.
    persistent = total - free["arena"]
    for f in args.arena_fractions:
        b = int(persistent + f * free["arena"])
        singa_rows.append(("budget = persistent + %d%% of the arena (%.1f MiB)"
                           % (f * 100, b / mib), b))
    singa_rows.append(("budget = minimum (%.1f MiB, %d%%)" % (least / mib, 100 * least / total),
                       least))
    eager = None
    for k in range(max(len(singa_rows), len(torch_rows))):
        if k < len(singa_rows):
            name, b = singa_rows[k]
            rows.append(("singa, " + name, spawn(args, "singa", budget=b) if b >= least else
                         {"error": "below the minimum (%.1f MiB)" % (least / mib)}))
        if k < len(torch_rows):
            name, strategy, b = torch_rows[k]
            rows.append((name, spawn(args, "torch", budget=b, strategy=strategy)))
            if strategy == "plain":
                eager = rows[-1][1]
    if args.chen:
        rows.append(("singa, Chen sqrt(N) checkpoints", spawn(args, "singa", budget=1.0,
                                                             strategy="sqrt")))
    if args.fit_batch and eager and "rss" in eager:
        # Parameters are in singa's budget but not in either RSS delta: add theirs.
        b = int(eager["rss"] + free["params"])
        rows.append(("singa batch %d, budget = PyTorch eager's batch-%d peak + parameters "
                     "(%.1f MiB)" % (args.fit_batch, args.batch, b / mib),
                     spawn(args, "singa", budget=b, batch=args.fit_batch)))
    print("\n%s, batch %d, median of %d steps after one warm-up step (%d with a budget: the "
          "planner times the first replays and replans by the times)\n"
          % (args.model, args.batch, args.steps, SINGA_BUDGET_WARMUP))
    print("| configuration | planned MiB | arena MiB | recomputed ops | peak RSS MiB | "
          "ms/sample | time vs no budget | first step s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        if "error" in r:
            print("| %s | %s | | | | | | |" % (name, r["error"]))
            continue
        print("| %s | %s | %s | %s | %.1f | %.3f | %.2fx | %.1f |" % (
            name, "%.1f" % (r["planned"] / mib) if "planned" in r else "-",
            "%.1f" % (r["arena"] / mib) if "arena" in r else "-", r.get("recomputed", "-"),
            r["rss"] / mib, 1e3 * r["sec_per_sample"],
            r["sec_per_sample"] / free["sec_per_sample"], r.get("first_step", 0)))
    print("\nload average at the end %.1f" % os.getloadavg()[0])


if __name__ == "__main__":
    main()
