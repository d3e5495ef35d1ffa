"""layer_norm and gelu, forward and forward + backward, singa beside PyTorch, side by side.

    .venv/bin/python benchmarks/bench_transformer_ops.py [--shape 16 256 256] [--repeat 20]

Both run in this one process on the same float32 input (default (16, 256, 256), normalised over
the last axis, with weight and bias), through their autograd: singa's autograd.layer_norm /
autograd.gelu with autograd.gradients, torch.nn.functional's with Tensor.backward. Each cell is
the median of --repeat timed calls after two warm-ups, in milliseconds; torch runs with as many
threads as singa's OpenMP (the machine's cores). singa rows run on the default backend (oneDNN
when built with it; layer norm and gelu have no oneDNN kernel, so both backends run the
reference kernels, see cpp/src/ops/cpu/layer_norm.cc).
"""
import argparse
import os
import platform
import statistics
import time

import numpy as np

from singa import autograd, device, tensor
from singa import singa_wrap as sw


def median_ms(fn, repeat):
    fn()
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


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
    ap.add_argument("--repeat", type=int, default=20)
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
    print("machine: %s, %d cores; oneDNN in singa: %s; OPENBLAS_CORETYPE=%s; torch %s, "
          "%d threads; input %s float32" % (
              cpu_name(), os.cpu_count(), sw.USE_DNNL, os.environ.get("OPENBLAS_CORETYPE",
                                                                       "(unset)"),
              torch.__version__, torch.get_num_threads(), shape))
    print("| op | pass | singa (ms) | torch (ms) | torch / singa |")
    print("|---|---|---:|---:|---:|")
    for name in ours:
        for k, label in enumerate(("forward", "forward + backward")):
            t_sg = median_ms(ours[name][k], args.repeat)
            t_pt = median_ms(theirs[name][k], args.repeat)
            print("| %s | %s | %.2f | %.2f | %.2f |" % (name, label, t_sg, t_pt, t_pt / t_sg))


if __name__ == "__main__":
    main()
