"""Attention alone, forward + backward: singa's fused scaled_dot_product_attention beside
PyTorch's torch.nn.functional.scaled_dot_product_attention on the CPU (issue 19, point 5).

    .venv/bin/python benchmarks/bench_attention.py                    # the table of BENCHMARKS.md
    .venv/bin/python benchmarks/bench_attention.py --seq 1024 --repeat 3 --causal

Each measurement runs in a fresh process (two thread pools in one process slow each other
down, LESSONS.md #5), the libraries alternating, `--rounds` times; a cell is the best of all
its rounds' best-of-`--repeat` steps (the machines are shared and noisy). A step is one forward
and one backward of q, k, v of shape (B, H, L, d) with d = 64, float32, dy = ones.

Memory: `peak RSS +` is the process's peak resident memory during its first step above the
resident memory just before it (inputs already allocated), so it counts everything the step
allocates, the library's workspaces included. For singa, `pool peak +` is the same from its
device memory statistics (get_peak_memory above get_memory_in_use before the step).
`naive (L, S)` is one float32 (L, S) matrix per batch and head, B * H * L * L * 4 bytes: what
an unfused attention keeps for backward (at least the probabilities; the scores too before the
softmax), and what the fused kernels never allocate.
"""
import argparse
import json
import os
import subprocess
import sys
import time

D = 64


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no %s in /proc/self/status" % field)


def _reset_peak_rss():
    """Restarts the kernel's resident high-water mark (VmHWM) from the current RSS (Linux 4.0+),
    so that the import and the input set-up do not count."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def worker(lib, B, H, L, causal, repeat):
    """One process: time and memory of one library on one shape; prints a JSON line."""
    import numpy as np
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((B, H, L, D)).astype(np.float32) for _ in range(3)]
    dy = np.ones((B, H, L, D), np.float32)
    pool = None
    if lib == "torch":
        import torch
        F = torch.nn.functional
        xs = [torch.tensor(a, requires_grad=True) for a in arrays]
        g = torch.tensor(dy)

        def step():
            F.scaled_dot_product_attention(*xs, is_causal=causal).backward(g)
            for x in xs:
                x.grad = None
    else:
        from singa import autograd, device, tensor
        dev = device.get_default_device()
        xs = [tensor.from_numpy(a) for a in arrays]
        for x in xs:
            x.requires_grad, x.stores_grad = True, True
        g = tensor.from_numpy(dy)
        autograd.training = True

        def step():
            y = autograd.scaled_dot_product_attention(*xs, is_causal=causal)
            for _ in autograd.backward(y, g):
                pass

        in_use = device.get_memory_in_use(dev)
        device.reset_peak_memory(dev)
    _reset_peak_rss()
    base = _status("VmRSS")
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    rss_growth = max(0, _status("VmHWM") - base)
    if lib != "torch":
        pool = device.get_peak_memory(dev) - in_use
    best = first
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"ms": best * 1e3, "rss": rss_growth, "pool": pool}))


def run(lib, B, H, L, causal, repeat):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, "--batch", str(B),
           "--heads", str(H), "--seq", str(L), "--repeat", str(repeat)]
    if causal:
        cmd.append("--causal")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def mib(n):
    return "%.0f MiB" % (n / 2**20) if n >= 2**20 else "%.1f MiB" % (n / 2**20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", type=int, nargs="*", default=[1024, 4096])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3, help="timed steps per process")
    ap.add_argument("--rounds", type=int, default=2, help="processes per library and shape")
    ap.add_argument("--causal", action="store_true", help="only the causal case")
    ap.add_argument("--worker", choices=("singa", "torch"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.batch, a.heads, a.seq[0], a.causal, a.repeat)
    import torch  # noqa: F401  (fail early, before the first round, if it is missing)
    print("| B, H, L, d | causal | torch ms | singa ms | singa/torch speed | torch peak RSS + "
          "| singa peak RSS + | singa pool peak + | naive (L, S) per step |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for L in a.seq:
        for causal in ((True,) if a.causal else (False, True)):
            best = {"torch": None, "singa": None}
            for _ in range(a.rounds):
                for lib in ("torch", "singa"):
                    r = run(lib, a.batch, a.heads, L, causal, a.repeat)
                    if best[lib] is None or r["ms"] < best[lib]["ms"]:
                        keep = r
                    else:
                        keep = dict(best[lib])
                    # memory: the first round's process (every round measures the same first step)
                    keep["rss"] = r["rss"] if best[lib] is None else best[lib]["rss"]
                    keep["pool"] = r["pool"] if best[lib] is None else best[lib]["pool"]
                    best[lib] = keep
            t, s = best["torch"], best["singa"]
            naive = a.batch * a.heads * L * L * 4
            print("| %d, %d, %d, %d | %s | %.1f | %.1f | %.2fx | %s | %s | %s | %s |"
                  % (a.batch, a.heads, L, D, "yes" if causal else "no", t["ms"], s["ms"],
                     t["ms"] / s["ms"], mib(t["rss"]), mib(s["rss"]), mib(s["pool"]),
                     mib(naive)), flush=True)


if __name__ == "__main__":
    main()
