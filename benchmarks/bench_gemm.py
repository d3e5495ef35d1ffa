"""GEMM: singa.tensor.mult against numpy.matmul on square float32 matrices, side by side.

    .venv/bin/python benchmarks/bench_gemm.py [--sizes 256 512 1024 2048] [--repeat 5]

Both run in this one process on the same inputs; each cell is the best of --repeat timed calls
after one warm-up. numpy uses its bundled OpenBLAS (pthreads), singa Debian's OpenBLAS (OpenMP).
The ratio column is singa GFLOP/s over numpy GFLOP/s (> 1: singa faster).
"""
import argparse
import os
import platform
import time

import numpy as np

from singa import device, tensor


def best_time(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    dev = device.get_default_device()
    print("machine: %s, %d cores; OPENBLAS_CORETYPE=%s" % (
        platform.processor() or platform.machine(), os.cpu_count(),
        os.environ.get("OPENBLAS_CORETYPE", "(unset)")))
    print("| n | numpy GFLOP/s | singa GFLOP/s | singa/numpy |")
    print("|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for n in args.sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        ta, tb = tensor.from_numpy(a, dev), tensor.from_numpy(b, dev)
        flops = 2.0 * n ** 3
        t_np = best_time(lambda: a @ b, args.repeat)
        # numpy's OpenBLAS threads spin for a while after a call; on 2 cores they would steal
        # the time of singa's threads (and the reverse), so let them go to sleep first.
        time.sleep(1.0)
        t_sg = best_time(lambda: tensor.mult(ta, tb), args.repeat)
        time.sleep(1.0)
        err = np.abs(tensor.to_numpy(tensor.mult(ta, tb)) - a @ b).max()
        assert err < 1e-2 * n ** 0.5, "mismatch %g" % err
        g_np, g_sg = flops / t_np / 1e9, flops / t_sg / 1e9
        print("| %d | %.1f | %.1f | %.2f |" % (n, g_np, g_sg, g_sg / g_np))


if __name__ == "__main__":
    main()
