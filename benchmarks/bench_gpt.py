"""Training a GPT (issue 19's size): singa graph and eager beside PyTorch eager and torch.compile.

    .venv/bin/python benchmarks/bench_gpt.py                      # 4 layers, d 256, 4 heads,
    .venv/bin/python benchmarks/bench_gpt.py --iters 3 --modes graph torch   # seq 256, batch 16
    .venv/bin/python benchmarks/bench_gpt.py --layers 2 --seq 128 --profile

The model is examples/gpt.py's GPT (token + learned positional embedding, pre-norm blocks with
GELU and causal attention, a final LayerNorm, a linear head over --vocab tokens) and a PyTorch
twin built from torch.nn's modules of the same names (its attention runs PyTorch's
scaled_dot_product_attention); both train with Adam (lr 1e-3) on random tokens.

Each configuration runs in its own process, as in bench_train.py: Mem(MB) is the process's
peak resident memory after the imports (VmHWM minus VmRSS at the start, measured by the kernel),
Speed covers --iters steps after --warmup ones (the graph's first step records it;
torch.compile's compiles). For graph mode Plan(MB) is what singa's planner reserves
(parameters, optimizer state and inputs + the arena) and LB(MB) the liveness lower bound.
--profile adds singa's per-operation profile of one graph step (where the time goes).
"OpenBLAS sgemm" runs the matrix products through OpenBLAS (device.set_gemm_backend), as all
products ran before oneDNN's sgemm was chosen where OpenBLAS' kernels are older than the CPU;
"bf16 AMP" is Model.compile(..., precision="bfloat16") beside PyTorch's torch.autocast("cpu",
bfloat16) around the forward and loss; "unfused Adam" updates with the ~10 core ops per
parameter that opt.Adam ran before its fused step (opt.Adam.fused = False); "before" is both.
The workers run in the machine's default environment.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)
from bench_train import reset_peak, rss_kb, run_one  # noqa: E402

MODES = [("graph", "singa graph, bfs"), ("graph-serial", "singa graph, serial"),
         ("graph-openblas", "singa graph, bfs, OpenBLAS sgemm"),
         ("graph-unfused", "singa graph, bfs, unfused Adam"),
         ("graph-before", "singa graph, bfs, OpenBLAS sgemm + unfused Adam"),
         ("graph-bf16", "singa graph, bfs, bf16 AMP"),
         ("eager", "singa eager"), ("torch", "pytorch eager"),
         ("torch-bf16", "pytorch eager, autocast bf16"),
         ("torch-compile", "pytorch torch.compile")]


def torch_gpt(cfg):
    import torch
    from torch import nn

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["d_model"]
            self.tok = nn.Embedding(cfg["vocab"], d)
            self.pos = nn.Parameter(torch.randn(cfg["seq"], d) * 0.02)
            block = nn.TransformerEncoderLayer(d, cfg["heads"], 4 * d, dropout=0.0,
                                               activation="gelu", batch_first=True,
                                               norm_first=True)
            self.blocks = nn.TransformerEncoder(block, cfg["layers"], enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, cfg["vocab"])
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(
                cfg["seq"]), persistent=False)

        def forward(self, idx):
            h = self.tok(idx) + self.pos[:idx.shape[1]]
            h = self.norm(self.blocks(h, mask=self.mask, is_causal=True))
            return self.head(h).reshape(-1, cfg["vocab"])

    return GPT()


def torch_trainer(mode, make_net, x, y, on_gpu=False):
    """(step, resident KB at the start) of PyTorch training make_net() with Adam (lr 1e-3) on
    int32 tokens x -> labels y: eager, torch.compile ("torch-compile") or autocast bf16 ("-bf16"
    modes), on CUDA GPU 0 if on_gpu. make_net runs after the peak-memory reset, as singa's model
    is built."""
    import torch
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    reset_peak()
    base = rss_kb("VmRSS")
    net = make_net()
    tx, ty = torch.from_numpy(x).long(), torch.from_numpy(y).long().reshape(-1)
    if on_gpu:
        net, tx, ty = net.cuda(), tx.cuda(), ty.cuda()
    adam = torch.optim.Adam(net.parameters(), lr=1e-3)
    lossf = torch.nn.CrossEntropyLoss()
    fwd = torch.compile(net) if mode == "torch-compile" else net
    amp = mode.endswith("-bf16")

    def step():
        adam.zero_grad()
        with torch.autocast("cuda" if on_gpu else "cpu", dtype=torch.bfloat16, enabled=amp):
            loss = lossf(fwd(tx), ty)
        loss.backward()
        adam.step()
        return loss

    return step, base


def time_and_report(cfg, step, base, dev=None):
    """Runs cfg's warm-up and timed steps and prints the worker's RESULT line: time, peak memory
    (above `base` on the CPU; on a GPU the peak of the GPU memory: singa's pool, PyTorch's
    allocator) and, for a singa graph (dev given), its plan and (cfg["profile"]) one step's
    per-operation profile."""
    def finish(loss):  # waits for the step that produced loss (and so for all before it)
        if dev is None:
            loss.item()
        else:
            from singa import tensor
            tensor.to_numpy(loss)

    loss = None
    for _ in range(cfg["warmup"]):
        loss = step()
    if loss is not None:
        finish(loss)
    t0 = time.perf_counter()
    for _ in range(cfg["iters"]):
        loss = step()
    finish(loss)
    out = {"time": time.perf_counter() - t0, "mem_mb": (rss_kb("VmHWM") - base) / 1024.0}
    if cfg.get("device") == "gpu":
        if dev is None:
            import torch
            out["mem_mb"] = torch.cuda.max_memory_allocated() / 2**20
        else:
            from singa import device
            out["mem_mb"] = device.get_memory_stats(dev)["peak_in_use"] / 2**20
    if dev is not None and cfg["mode"].startswith("graph"):
        plan = dev.graph_memory_plan()
        out.update(lb_mb=(plan["persistent_bytes"] + plan["lower_bound_bytes"]) / 2**20,
                   plan_mb=(plan["persistent_bytes"] + plan["arena_bytes"]) / 2**20)
        if cfg.get("profile"):
            dev.SetSkipIteration(0)
            dev.SetVerbosity(1)
            step()
            out["profile"] = dev.GetTimeProfiling()
    print("RESULT " + json.dumps(out))


def worker(cfg):
    import numpy as np
    mode = cfg["mode"]
    rng = np.random.default_rng(0)
    shape = (cfg["batch"], cfg["seq"])
    x = rng.integers(0, cfg["vocab"], shape).astype(np.int32)
    y = rng.integers(0, cfg["vocab"], shape).astype(np.int32)
    if mode.startswith("torch"):
        step, base = torch_trainer(mode, lambda: torch_gpt(cfg), x, y, on_gpu(cfg))
        return time_and_report(cfg, step, base)
    import gpt
    from singa import device, opt, tensor
    dev = singa_device(cfg)
    dev.SetRandSeed(0)
    if mode.endswith(("-openblas", "-before")):  # the products' library before oneDNN's
        device.set_gemm_backend("openblas")
    adam = opt.Adam(lr=1e-3)
    adam.fused = not mode.endswith(("-unfused", "-before"))  # Adam as ~10 ops per tensor
    reset_peak()
    base = rss_kb("VmRSS")
    net = gpt.GPT(cfg["vocab"], cfg["seq"], cfg["d_model"], cfg["heads"], cfg["layers"])
    net.set_optimizer(adam)
    tx, ty = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
    net.compile([tx], is_train=True, use_graph=mode.startswith("graph"),
                sequential=mode == "graph-serial",
                precision="bfloat16" if mode.endswith("-bf16") else "float32")
    time_and_report(cfg, lambda: net(tx, ty)[1], base, dev)


def on_gpu(cfg):
    return cfg.get("device") == "gpu"


def singa_device(cfg):
    """singa's device for cfg: CUDA GPU 0 (--device gpu) or the default (CPU) device."""
    from singa import device
    return device.create_cuda_gpu() if on_gpu(cfg) else device.get_default_device()


def add_device_arg(ap):
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                    help="gpu: train on CUDA GPU 0 (a CUDA build); Mem(MB) is then the peak of "
                         "the GPU memory (singa's pool, torch.cuda.max_memory_allocated)")


def machine_line(device_arg):
    """The table's first line: the CPU (or the GPU), cores, date, library versions."""
    import torch
    from singa import singa_wrap
    where = cpu_model()
    if device_arg == "gpu":
        where = "%s; CPU %s" % (torch.cuda.get_device_name(0), where)
    return ("machine: %s, %d cores; %s; torch %s; singa oneDNN %s; OPENBLAS_CORETYPE=%s"
            % (where, os.cpu_count(), time.strftime("%Y-%m-%d"), torch.__version__,
               "on" if getattr(singa_wrap, "USE_DNNL", False) else "off",
               os.environ.get("OPENBLAS_CORETYPE", "(unset)")))


def cpu_model():
    """The CPU's model name and its widest vector ISA extensions (from /proc/cpuinfo)."""
    name, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    return "%s (%s)" % (name, " ".join(isa) or "no AVX2")


def print_profile(text, top, label):
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].endswith("%") and parts[1].isdigit():
            rows.append(parts)
    print("\n%s, one step, per operation (synchronised after each):\n" % label)
    print("| operation | calls/step | ms/step | share |\n|---|---:|---:|---:|")
    for name, calls, ms, share in rows[:top]:
        print("| %s | %s | %.1f | %s |" % (name, calls, float(ms), share))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--modes", nargs="+", default=[m for m, _ in MODES],
                    choices=[m for m, _ in MODES])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=96)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every configuration this many times, interleaved; keep the fastest")
    ap.add_argument("--profile", action="store_true", help="print the graph's per-op profile")
    ap.add_argument("--top", type=int, default=15, help="profile rows to print")
    add_device_arg(ap)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    print(machine_line(args.device))
    print("\nGPT: %d layers, d_model %d, %d heads, seq %d, batch %d, vocab %d; Adam; %d steps "
          "after %d warm-up\n" % (args.layers, args.d_model, args.heads, args.seq, args.batch,
                                  args.vocab, args.iters, args.warmup))
    rows = {mode: None for mode in args.modes}
    for _ in range(args.rounds):  # interleaved, so that a slow spell hits every mode
        for mode in args.modes:
            cfg = {"mode": mode, "layers": args.layers, "d_model": args.d_model,
                   "heads": args.heads, "seq": args.seq, "batch": args.batch,
                   "vocab": args.vocab, "iters": args.iters, "warmup": args.warmup,
                   "timeout": args.timeout, "device": args.device,
                   "profile": args.profile and mode in ("graph", "graph-bf16")}
            r = run_one(cfg, dict(os.environ), __file__)
            if r is not None and (rows[mode] is None or r["time"] < rows[mode]["time"]):
                rows[mode] = r
    pt = rows.get("torch")
    print("| Cases | Mem(MB) | Speed(steps/s) | Tokens/s | LB(MB) | Plan(MB) | Speed / PyTorch "
          "| Mem / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode, label in MODES:
        r = rows.get(mode)
        if mode not in rows:
            continue
        if r is None:
            print("| %s | failed | | | | | | |" % label)
            continue
        speed = args.iters / r["time"]
        print("| %s | %.0f | %.3f | %.0f | %s | %s | %s | %s |" % (
            label, r["mem_mb"], speed, speed * args.batch * args.seq,
            "%.0f" % r["lb_mb"] if "lb_mb" in r else "",
            "%.0f" % r["plan_mb"] if "plan_mb" in r else "",
            "%.2fx" % (pt["time"] / r["time"]) if pt else "",
            "%.2fx" % (r["mem_mb"] / pt["mem_mb"]) if pt and pt["mem_mb"] > 0 else ""),
            flush=True)
    for mode in ("graph", "graph-bf16"):
        if rows.get(mode) and "profile" in rows[mode]:
            print_profile(rows[mode]["profile"], args.top, dict(MODES)[mode])


if __name__ == "__main__":
    main()
