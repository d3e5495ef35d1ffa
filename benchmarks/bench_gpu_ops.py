"""The GPT's slow operations one at a time, singa's core call beside PyTorch's, on a GPU or CPU.

    PYTHONPATH=build/gpu/py python3 benchmarks/bench_gpu_ops.py --device gpu   # a CUDA build
    .venv/bin/python benchmarks/bench_gpu_ops.py                              # the CPU

The third GPU day's profile of the GPT step (BENCHMARKS.md) put ReduceSum (the bias gradients'
column sums), the attention's backward and forward and LayerNormBackward ahead of the matrix
products; this times each at the GPT's shapes (tokens = batch 16 x seq 256 = 4096, d_model 256,
4 heads of 64, causal), beside the PyTorch call that does the same work, so a kernel change
reads as a ratio of its own. singa's cells call the core ops (singa_wrap) directly, without
autograd; PyTorch's run its functional ops (the backward cells through autograd, as a training
step runs them). Each cell: --inner calls back to back, then one synchronisation, best of
--repeat such rounds, in microseconds per call; cells interleave, round by round.
"""
import argparse
import os
import time

import numpy as np

from singa import device, tensor
from singa import singa_wrap as sw


def shapes(args):
    T, d, h = args.batch * args.seq, args.d_model, args.heads
    return T, d, h, d // h


def singa_cells(args, dev):
    T, d, h, e = shapes(args)
    rng = np.random.default_rng(0)

    def put(*shape):
        return tensor.from_numpy(rng.standard_normal(shape).astype(np.float32), dev).data

    g256, g1024 = put(T, d), put(T, 4 * d)
    x, dy, w, b = put(T, d), put(T, d), put(d), put(d)
    _, mean, rstd = sw.LayerNormForward(x, w, b, (d,), 1e-5)
    q, k, v = (put(args.batch, h, args.seq, e) for _ in range(3))
    out, lse, seed = sw.ScaledDotProductAttention(q, k, v, None, 0.0, 0.0, True)
    dout = put(args.batch, h, args.seq, e)
    a, wt = put(T, d), put(d, 4 * d)
    return {
        "bias grad (4096, 256) -> 256": lambda: sw.ReduceSum(g256, [0], False),
        "bias grad (4096, 1024) -> 1024": lambda: sw.ReduceSum(g1024, [0], False),
        "layer norm forward": lambda: sw.LayerNormForward(x, w, b, (d,), 1e-5),
        "layer norm backward": lambda: sw.LayerNormBackward(dy, x, w, mean, rstd, (d,)),
        "attention forward (causal)": lambda: sw.ScaledDotProductAttention(
            q, k, v, None, 0.0, 0.0, True),
        "attention backward (causal)": lambda: sw.ScaledDotProductAttentionBackward(
            dout, q, k, v, None, out, lse, seed, 0.0, 0.0, True),
        "matmul (4096, 256) x (256, 1024)": lambda: sw.Mult(a, wt),
    }


def torch_cells(torch, args, on_gpu):
    T, d, h, e = shapes(args)
    F = torch.nn.functional
    dev = "cuda" if on_gpu else "cpu"
    gen = torch.Generator(device="cpu").manual_seed(0)

    def put(*shape, grad=False):
        return torch.randn(*shape, generator=gen).to(dev).requires_grad_(grad)

    g256, g1024 = put(T, d), put(T, 4 * d)
    x, dy, w, b = put(T, d, grad=True), put(T, d), put(d, grad=True), put(d, grad=True)
    q, k, v = (put(args.batch, h, args.seq, e, grad=True) for _ in range(3))
    dout = put(args.batch, h, args.seq, e)
    a, wt = put(T, d), put(d, 4 * d)
    ln = F.layer_norm(x, (d,), w, b)
    att = F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def no_grad(fn):
        def run():
            with torch.no_grad():
                fn()
        return run

    return {
        "bias grad (4096, 256) -> 256": lambda: g256.sum(0),
        "bias grad (4096, 1024) -> 1024": lambda: g1024.sum(0),
        "layer norm forward": no_grad(lambda: F.layer_norm(x, (d,), w, b)),
        "layer norm backward": lambda: torch.autograd.grad(ln, (x, w, b), dy,
                                                           retain_graph=True),
        "attention forward (causal)": no_grad(
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        "attention backward (causal)": lambda: torch.autograd.grad(att, (q, k, v), dout,
                                                                   retain_graph=True),
        "matmul (4096, 256) x (256, 1024)": lambda: a @ wt,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--inner", type=int, default=10, help="calls per synchronised round")
    ap.add_argument("--repeat", type=int, default=10, help="rounds; the best is kept")
    args = ap.parse_args()
    on_gpu = args.device == "gpu"
    dev = device.create_cuda_gpu() if on_gpu else device.get_default_device()
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and on_gpu and not torch.cuda.is_available():
        torch = None
    if torch is not None:
        torch.set_num_threads(os.cpu_count())
    where = torch.cuda.get_device_name(0) if torch is not None and on_gpu else (
        "%d CPU cores" % os.cpu_count())
    print("%s; %s; torch %s; GPT shapes: %d tokens, d_model %d, %d heads\n"
          % (where, time.strftime("%Y-%m-%d"), torch.__version__ if torch else "absent",
             args.batch * args.seq, args.d_model, args.heads))

    def sync_singa():
        dev.Sync()

    def sync_torch():
        if on_gpu:
            torch.cuda.synchronize()

    cells = [("singa", name, fn, sync_singa) for name, fn in singa_cells(args, dev).items()]
    if torch is not None:
        cells += [("torch", name, fn, sync_torch)
                  for name, fn in torch_cells(torch, args, on_gpu).items()]
    best = {}
    for r in range(args.repeat + 1):  # one warm-up round
        for lib, name, fn, sync in cells:
            sync()
            t0 = time.perf_counter()
            for _ in range(args.inner):
                fn()
            sync()
            us = 1e6 * (time.perf_counter() - t0) / args.inner
            if r > 0:
                best[lib, name] = min(best.get((lib, name), float("inf")), us)
    print("| operation | singa us | torch us | singa / torch time |")
    print("|---|---:|---:|---:|")
    for name in dict.fromkeys(n for _, n, _, _ in cells):
        s, t = best.get(("singa", name)), best.get(("torch", name))
        print("| %s | %.1f | %s | %s |" % (name, s, "%.1f" % t if t else "",
                                            "%.2fx" % (s / t) if t else ""))


if __name__ == "__main__":
    main()
