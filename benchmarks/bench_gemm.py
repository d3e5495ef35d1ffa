"""GEMM: singa.tensor.mult through each CPU library beside numpy.matmul and torch.matmul.

    .venv/bin/python benchmarks/bench_gemm.py [--repeat 7] [--rounds 3]
    .venv/bin/python benchmarks/bench_gemm.py --shapes 1024x1024x1024 64x784x100:TN

Shapes are MxKxN (A is MxK, B is KxN), optionally ":TN" / ":NT" for a transposed operand as the
backward products of a Linear layer pass them (dW = X^T dY is TN, dX = dY W^T is NT), or
"BxMxKxN" for a batched product. Defaults: the MLP's layers (64x784x100), a ResNet FC, GPT's
(issue 19's 4 layers, d 256, 16 x 256 tokens) Linear products forward and backward, its
attention heads as a batch, and 1024^3.

Every library runs in this one process on the same inputs, interleaved: --rounds rounds, each
timing every cell as the best of --repeat calls after a warm-up; a cell reports its best round.
singa's rows switch the library with device.set_gemm_backend ("openblas", "dnnl", and "auto",
the process's default choice, named in the header with its reason). numpy uses its bundled
OpenBLAS (pthreads), torch its own sgemm (oneDNN / MKL), singa Debian's OpenBLAS (OpenMP) or
oneDNN. The default environment: nothing here sets OPENBLAS_* or OMP_*.
"""
import argparse
import os
import platform
import time

import numpy as np

from singa import device, singa_wrap, tensor

DEFAULT_SHAPES = ["64x784x100", "64x784x100:TN", "64x100x10", "64x384x384", "32x512x10",
                  "4096x256x768", "4096x256x1024", "4096x1024x256:NT", "256x4096x1024:TN",
                  "4096x384x1536", "64x256x64x256", "1024x1024x1024"]


def parse(spec):
    dims, _, trans = spec.partition(":")
    d = [int(v) for v in dims.split("x")]
    batch, (m, k, n) = (d[0], d[1:]) if len(d) == 4 else (None, d)
    return batch, m, k, n, trans.upper() or "NN"


def operands(rng, batch, m, k, n, trans):
    """numpy operands whose product is (m, n): a transposed operand is a transposed view."""
    lead = () if batch is None else (batch,)
    a = rng.standard_normal(lead + ((k, m) if trans[0] == "T" else (m, k)), dtype=np.float32)
    b = rng.standard_normal(lead + ((n, k) if trans[1] == "T" else (k, n)), dtype=np.float32)
    return a, b


def swap(x, t):
    return np.swapaxes(x, -1, -2) if t == "T" else x


def best_time(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            pass
    dev = device.get_default_device()
    auto = device.gemm_backend(reason=True)
    print("machine: %s, %d cores, %d threads; OPENBLAS_CORETYPE=%s; SINGA_GEMM=%s" % (
        cpu_name(), os.cpu_count(), singa_wrap.get_num_threads(),
        os.environ.get("OPENBLAS_CORETYPE", "(unset)"), os.environ.get("SINGA_GEMM", "(unset)")))
    print("singa auto = %s (%s); torch %s" % (auto[0], auto[1],
                                               torch.__version__ if torch else "absent"))
    libs = ["openblas", "dnnl", "auto"] if singa_wrap.USE_DNNL else ["openblas"]
    cols = ["numpy"] + (["torch"] if torch else []) + ["singa " + lib for lib in libs]
    rng = np.random.default_rng(0)
    cases = []
    for spec in args.shapes:
        batch, m, k, n, trans = parse(spec)
        a, b = operands(rng, batch, m, k, n, trans)
        sa, sb = tensor.from_numpy(a, dev), tensor.from_numpy(b, dev)
        va = sa.transpose() if trans[0] == "T" and batch is None else sa
        vb = sb.transpose() if trans[1] == "T" and batch is None else sb
        if batch is not None and trans != "NN":
            raise SystemExit("batched shapes take no :TN/:NT (%s)" % spec)
        ref = swap(a, trans[0]) @ swap(b, trans[1])
        fns = {"numpy": lambda a=a, b=b, t=trans: swap(a, t[0]) @ swap(b, t[1])}
        if torch:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            ta = ta.transpose(-1, -2) if trans[0] == "T" else ta
            tb = tb.transpose(-1, -2) if trans[1] == "T" else tb
            fns["torch"] = lambda ta=ta, tb=tb: torch.matmul(ta, tb)
        for lib in libs:
            fns["singa " + lib] = lambda va=va, vb=vb: tensor.mult(va, vb)
        flops = 2.0 * m * n * k * (batch or 1)
        cases.append((spec, fns, flops, ref, va, vb))
    best = {}
    for _ in range(args.rounds):
        for spec, fns, flops, ref, va, vb in cases:
            for col in cols:
                if col.startswith("singa "):
                    device.set_gemm_backend(col.split()[1])
                # numpy's OpenBLAS threads spin for a while after a call; on few cores they
                # would steal the next library's time, so let them go to sleep first.
                time.sleep(0.2)
                t = best_time(fns[col], args.repeat)
                best[spec, col] = min(best.get((spec, col), float("inf")), t)
                if col.startswith("singa "):
                    err = np.abs(tensor.to_numpy(fns[col]()) - ref).max()
                    tol = 1e-3 * max(1.0, float(np.abs(ref).max()))
                    assert err <= tol, "%s %s: mismatch %g" % (spec, col, err)
    device.set_gemm_backend("auto")
    print()
    print("| shape (MxKxN) | " + " | ".join(c + " GFLOP/s" for c in cols) +
          " | singa auto / torch |" * bool(torch))
    print("|---|" + "---:|" * (len(cols) + bool(torch)))
    for spec, fns, flops, _, _, _ in cases:
        g = {c: flops / best[spec, c] / 1e9 for c in cols}
        row = "| %s | " % spec + " | ".join("%.1f" % g[c] for c in cols) + " |"
        if torch:
            row += " %.2f |" % (g["singa auto"] / g["torch"])
        print(row)


if __name__ == "__main__":
    main()
