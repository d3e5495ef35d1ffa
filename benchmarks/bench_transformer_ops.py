"""layer_norm and gelu, forward and forward + backward, singa beside PyTorch, side by side.

    .venv/bin/python benchmarks/bench_transformer_ops.py [--shape 16 256 256] [--repeat 100]

Both run in this one process on the same float32 input (default (16, 256, 256), normalised over
the last axis, with weight and bias), through their autograd: singa's autograd.layer_norm /
autograd.gelu with autograd.gradients, torch.nn.functional's with Tensor.backward. Each cell is
the best of --repeat timed calls, in milliseconds, every cell timed once per round (after two
warm-up rounds): a call takes about a millisecond, so on a shared machine a median mostly
measures who else runs (the header prints the load average); torch runs with as many threads
as singa's OpenMP (the machine's cores). singa runs on each CPU backend in turn:
"dnnl" (the default when built with oneDNN) and "cpu" (the reference kernels). Neither op runs
a oneDNN primitive by default (gelu: the table's loops; layer_norm: oneDNN 2.6's primitives
measured slower); SINGA_DNNL_LAYER_NORM=1 in the environment makes the "dnnl" column run
oneDNN's layer_normalization forward and backward, for the comparison in BENCHMARKS.md.
"""
import argparse
import os
import platform
import time

import numpy as np

from singa import autograd, device, tensor
from singa import singa_wrap as sw


def best_ms(cells, repeat):
    """{key: best time in ms} of each (key, setup, fn) cell, timed in interleaved rounds: on a
    shared machine every cell gets the same chances of a quiet moment."""
    best = {key: float("inf") for key, _, _ in cells}
    for r in range(repeat + 2):  # two warm-up rounds
        for key, setup, fn in cells:
            setup()
            t0 = time.perf_counter()
            fn()
            if r >= 2:
                best[key] = min(best[key], 1e3 * (time.perf_counter() - t0))
    return best


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def singa_cases(x, w, b, dy):
    def forward(fn):
        def run():
            autograd.training = False
            fn(x)  # a CPU device runs each op at the call
        return run

    def both(fn):
        def run():
            autograd.training = True
            y = fn(x)
            autograd.gradients(y, dy)
            autograd.training = False
        return run

    ln = lambda v: autograd.layer_norm(v, v.shape[-1], w, b)  # noqa: E731
    return {"layer_norm": (forward(ln), both(ln)),
            "gelu": (forward(autograd.gelu), both(autograd.gelu)),
            "gelu tanh": (forward(lambda v: autograd.gelu(v, "tanh")),
                          both(lambda v: autograd.gelu(v, "tanh")))}


def torch_cases(torch, x, w, b, dy):
    F = torch.nn.functional

    def forward(fn):
        def run():
            with torch.no_grad():
                fn(x)
        return run

    def both(fn):
        def run():
            x.grad = w.grad = b.grad = None
            fn(x).backward(dy)
        return run

    ln = lambda v: F.layer_norm(v, (v.shape[-1],), w, b)  # noqa: E731
    return {"layer_norm": (forward(ln), both(ln)),
            "gelu": (forward(F.gelu), both(F.gelu)),
            "gelu tanh": (forward(lambda v: F.gelu(v, approximate="tanh")),
                          both(lambda v: F.gelu(v, approximate="tanh")))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs="+", default=[16, 256, 256])
    ap.add_argument("--repeat", type=int, default=100)
    args = ap.parse_args()
    import torch
    torch.set_num_threads(os.cpu_count())
    rng = np.random.default_rng(0)
    shape, n = tuple(args.shape), args.shape[-1]
    x_np = rng.standard_normal(shape, dtype=np.float32)
    w_np, b_np = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    dy_np = rng.standard_normal(shape, dtype=np.float32)
    dev = device.get_default_device()
    x, dy = tensor.from_numpy(x_np, dev), tensor.from_numpy(dy_np, dev)
    w, b = tensor.from_numpy(w_np, dev), tensor.from_numpy(b_np, dev)
    for t in (x, w, b):
        t.requires_grad = t.stores_grad = True
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
    tdy = torch.tensor(dy_np)
    ours, theirs = singa_cases(x, w, b, dy), torch_cases(torch, tx, tw, tb, tdy)
    print("machine: %s, %d cores, load average %.1f; oneDNN in singa: %s "
          "(SINGA_DNNL_LAYER_NORM=%s); OPENBLAS_CORETYPE=%s; torch %s, %d threads; input %s "
          "float32" % (
              cpu_name(), os.cpu_count(), os.getloadavg()[0], sw.USE_DNNL,
              os.environ.get("SINGA_DNNL_LAYER_NORM", "(unset)"),
              os.environ.get("OPENBLAS_CORETYPE", "(unset)"), torch.__version__,
              torch.get_num_threads(), shape))
    backends = ["dnnl", "cpu"] if sw.USE_DNNL else ["cpu"]
    cells = []
    for name in ours:
        for k in range(2):
            for bk in backends:  # "cpu": the reference kernels, for comparison
                cells.append(((name, k, bk), lambda bk=bk: dev.set_backend(bk), ours[name][k]))
            cells.append(((name, k, "torch"), lambda: dev.set_backend(backends[0]),
                          theirs[name][k]))
    best = best_ms(cells, args.repeat)
    print("| op | pass | " + " | ".join("singa %s (ms)" % b for b in backends) +
          " | torch (ms) | torch / singa %s |" % backends[0])
    print("|---|---|" + "---:|" * (len(backends) + 2))
    for name in ours:
        for k, label in enumerate(("forward", "forward + backward")):
            ts = [best[(name, k, bk)] for bk in backends]
            t_pt = best[(name, k, "torch")]
            print("| %s | %s | %s | %.2f | %.2f |" % (
                name, label, " | ".join("%.2f" % t for t in ts), t_pt, t_pt / ts[0]))

if __name__ == "__main__":
    main()
