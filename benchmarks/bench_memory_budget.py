"""Memory budget met by recomputation: peak memory and time per sample against the budget.

    .venv/bin/python benchmarks/bench_memory_budget.py                       # ResNet-18 CIFAR b32
    .venv/bin/python benchmarks/bench_memory_budget.py --model mlp --batch 512 --steps 10

For singa, budgets of 100%, 75%, 50%, 35% of the unconstrained plan (persistent blocks + arena)
and the least budget the planner reaches (read from the error a tiny budget raises), with the
greedy planner and with Chen et al.'s sqrt(N) checkpoints; beside them PyTorch eager, plain and
with torch.utils.checkpoint (checkpoint_sequential over the network's top-level modules in
max(2, sqrt(n)) segments: its stem, residual blocks and head). Each row runs in its own
process; its peak RSS is VmHWM, reset through /proc/self/clear_refs just before the first step,
minus the RSS at that point (bench_train.py's measure): activations, workspaces and allocator
slack, not the parameters. "planned" is singa's persistent + arena bytes; time is the median
step over --steps after a warm-up, per sample. Default environment; prints a Markdown table.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {"mlp": ((784,), 10), "cnn": ((1, 28, 28), 10), "resnet18": ((3, 32, 32), 10),
          "resnet50": ((3, 224, 224), 1000)}


def _timed(step, steps):
    """(median seconds per step, peak RSS bytes above the RSS before the first step)."""
    from bench_train import reset_peak, rss_kb
    reset_peak()
    base = rss_kb("VmRSS")
    step()  # warm-up (singa: records and plans the graph)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], (rss_kb("VmHWM") - base) * 1024


sys.path.insert(0, HERE)


def run_singa(model, batch, steps, budget, strategy):
    import numpy as np
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    import models
    from singa import device, graph, opt, singa_wrap, tensor
    shape, classes = SHAPES[model]
    dev = device.create_cpu_device(0)
    dev.SetRandSeed(0)
    rng = np.random.default_rng(0)
    net = {"mlp": lambda: models.MLP(num_classes=classes),
           "cnn": lambda: models.CNN(num_classes=classes),
           "resnet18": lambda: models.resnet18(num_classes=classes, cifar=True),
           "resnet50": lambda: models.resnet50(num_classes=classes, cifar=False)}[model]()
    net.set_optimizer(opt.SGD(lr=0.01, momentum=0.9, weight_decay=1e-5))
    tx = tensor.from_numpy(rng.standard_normal((batch,) + shape).astype(np.float32), dev)
    ty = tensor.from_numpy(rng.integers(0, classes, batch).astype(np.int32), dev)
    if budget is not None:
        dev.SetMemoryBudget(budget, strategy)
    net.compile([tx], is_train=True, use_graph=True)
    try:
        t, rss = _timed(lambda: net(tx, ty), steps)
    except singa_wrap.OutOfMemoryError as e:
        return {"error": str(e),
                "least": int(re.search(r"needs at least (\d+) bytes", str(e)).group(1))}
    plan = graph.memory_plan(dev)
    return {"planned": plan["persistent_bytes"] + plan["arena_bytes"],
            "arena": plan["arena_bytes"], "recomputed": plan["num_recomputed"],
            "rss": rss, "sec_per_sample": t / batch}


def run_torch(model, batch, steps, checkpoint):
    import torch
    import torch_models
    from torch.utils.checkpoint import checkpoint_sequential
    torch.manual_seed(0)
    shape, classes = SHAPES[model]
    net = torch_models.build(model)
    tx = torch.randn((batch,) + shape)
    ty = torch.randint(0, classes, (batch,))
    if checkpoint:
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
    t, rss = _timed(torch_models.train_step(net, tx, ty), steps)
    return {"rss": rss, "sec_per_sample": t / batch}


def child(args):
    if args.framework == "singa":
        budget = None if args.budget == "none" else (
            float(args.budget) if "." in args.budget else int(args.budget))
        out = run_singa(args.model, args.batch, args.steps, budget, args.strategy)
    else:
        out = run_torch(args.model, args.batch, args.steps, args.strategy == "checkpoint")
    print("RESULT " + json.dumps(out))


def spawn(args, framework, budget="none", strategy="greedy"):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--framework", framework,
           "--model", args.model, "--batch", str(args.batch), "--steps", str(args.steps),
           "--budget", str(budget), "--strategy", strategy]
    out = subprocess.run(cmd, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError("child failed: %s\n%s" % (" ".join(cmd), out.stderr[-3000:]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES), default="resnet18")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--framework", default="singa", help=argparse.SUPPRESS)
    ap.add_argument("--budget", default="none", help=argparse.SUPPRESS)
    ap.add_argument("--strategy", default="greedy", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    mib = 2.0 ** 20
    free = spawn(args, "singa")
    total = free["planned"]
    least = spawn(args, "singa", budget=1)["least"]
    rows = [("singa, no budget", free)]
    for frac in (1.0, 0.75, 0.5, 0.35):
        b = int(frac * total)
        r = spawn(args, "singa", budget=b) if b >= least else {"error": "below the minimum"}
        rows.append(("singa, budget %d%% (%.1f MiB)" % (frac * 100, b / mib), r))
    rows.append(("singa, budget = minimum (%.1f MiB, %d%%)" % (least / mib, 100 * least / total),
                 spawn(args, "singa", budget=least)))
    rows.append(("singa, Chen sqrt(N) checkpoints", spawn(args, "singa", budget=1.0,
                                                         strategy="sqrt")))
    if not args.no_torch:
        rows.append(("pytorch eager", spawn(args, "torch", strategy="plain")))
        rows.append(("pytorch eager + checkpoint_sequential", spawn(args, "torch",
                                                                    strategy="checkpoint")))
    print("%s, batch %d, median of %d steps\n" % (args.model, args.batch, args.steps))
    print("| configuration | planned MiB | arena MiB | recomputed ops | peak RSS MiB | "
          "ms/sample | time vs no budget |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        if "error" in r:
            print("| %s | below the minimum (%.1f MiB) | | | | | |" % (name, least / mib))
            continue
        print("| %s | %s | %s | %s | %.1f | %.3f | %.2fx |" % (
            name, "%.1f" % (r["planned"] / mib) if "planned" in r else "-",
            "%.1f" % (r["arena"] / mib) if "arena" in r else "-", r.get("recomputed", "-"),
            r["rss"] / mib, 1e3 * r["sec_per_sample"],
            r["sec_per_sample"] / free["sec_per_sample"]))


if __name__ == "__main__":
    main()
