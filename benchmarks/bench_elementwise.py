"""The elementwise table's CPU loops: the AVX-512 copy beside the x86-64-v2 baseline, PyTorch and
numpy, side by side.

    .venv/bin/python benchmarks/bench_elementwise.py [--n 4194304] [--repeat 30]

libsinga is built for x86-64-v2 (4 floats a vector) and carries a second copy of the table's
loops compiled for AVX-512 (cpp/src/ops/cpu/elementwise_avx512.cc), run when the CPU has it.
The "baseline" column is the same script in a subprocess with SINGA_CPU_FEATURES_MASK=avx512f
(the copy masked off), alternating with this process's rounds; the others run here. Each cell is
the best of --repeat calls in milliseconds on float32 vectors of --n elements (outputs
allocated per call, as an op's are), cells timed in interleaved rounds after two warm-up
rounds; torch uses as many threads as singa's OpenMP. Columns: singa (the default: AVX-512 copy
where the CPU has it), singa baseline, baseline / default, PyTorch, PyTorch / singa (> 1: singa
faster), numpy (one thread).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from singa import device, tensor
from singa import singa_wrap as sw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_transformer_ops import cpu_name  # noqa: E402


def singa_ops(x, y, dy):
    return {
        "Add": lambda: sw.Add(x, y),
        "EltwiseMult": lambda: sw.EltwiseMult(x, y),
        "ReLU": lambda: sw.ReLU(x),
        "Sigmoid": lambda: sw.Sigmoid(x),
        "Tanh": lambda: sw.Tanh(x),
        "Exp": lambda: sw.Exp(x),
        "GELU": lambda: sw.GELU(x),
        "GELUBackward": lambda: sw.GELUBackward(dy, x),
        "GELUTanh": lambda: sw.GELUTanh(x),
        "FloorDiv": lambda: sw.FloorDiv(x, y),
        "Pow (x ** 2.5)": lambda: sw.Pow(x, 2.5),
        "Maximum": lambda: sw.Maximum(x, y),
    }


def torch_ops(torch, x, y, dy):
    F = torch.nn.functional
    return {
        "Add": lambda: torch.add(x, y), "EltwiseMult": lambda: torch.mul(x, y),
        "ReLU": lambda: torch.relu(x), "Sigmoid": lambda: torch.sigmoid(x),
        "Tanh": lambda: torch.tanh(x), "Exp": lambda: torch.exp(x), "GELU": lambda: F.gelu(x),
        "GELUBackward": lambda: torch.ops.aten.gelu_backward(dy, x),
        "GELUTanh": lambda: F.gelu(x, approximate="tanh"),
        "FloorDiv": lambda: torch.floor_divide(x, y), "Pow (x ** 2.5)": lambda: torch.pow(x, 2.5),
        "Maximum": lambda: torch.maximum(x, y),
    }


def numpy_ops(x, y):
    return {"Add": lambda: np.add(x, y), "EltwiseMult": lambda: np.multiply(x, y),
            "ReLU": lambda: np.maximum(x, 0), "Exp": lambda: np.exp(x),
            "Tanh": lambda: np.tanh(x), "FloorDiv": lambda: np.floor_divide(x, y),
            "Pow (x ** 2.5)": lambda: np.power(x, np.float32(2.5)),
            "Maximum": lambda: np.maximum(x, y)}


def best_ms(cells, repeat):
    best = {k: float("inf") for k in cells}
    for r in range(repeat + 2):
        for k, fn in cells.items():
            t0 = time.perf_counter()
            fn()
            if r >= 2:
                best[k] = min(best[k], 1e3 * (time.perf_counter() - t0))
    return best


def inputs(n):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    y = (rng.standard_normal(n) + 4).astype(np.float32)  # away from 0: FloorDiv's divisor
    dy = rng.standard_normal(n).astype(np.float32)
    return x, y, dy


def singa_times(n, repeat):
    x, y, dy = (tensor.from_numpy(a).data for a in inputs(n))
    return best_ms(singa_ops(x, y, dy), repeat)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--singa-only", action="store_true", help="(the baseline's subprocess)")
    a = ap.parse_args()
    if a.singa_only:
        print(json.dumps(singa_times(a.n, a.repeat)))
        return
    feats = set(device.cpu_features())
    wide = {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= feats
    env = dict(os.environ, SINGA_CPU_FEATURES_MASK="avx512f")
    # The memory-bound rows move with the machine's memory traffic from minute to minute: the
    # baseline's subprocess and this process alternate, three rounds, best of all.
    base, ours = {}, {}
    for _ in range(3):
        b = json.loads(subprocess.run(
            [sys.executable, __file__, "--singa-only", "--n", str(a.n), "--repeat",
             str(max(1, a.repeat // 3))], env=env, check=True, capture_output=True,
            text=True).stdout.splitlines()[-1])
        o = singa_times(a.n, max(1, a.repeat // 3))
        base = {k: min(v, base.get(k, v)) for k, v in b.items()}
        ours = {k: min(v, ours.get(k, v)) for k, v in o.items()}
    try:
        import torch
        torch.set_num_threads(os.cpu_count())
        tx, ty, tdy = (torch.from_numpy(v) for v in inputs(a.n))
        theirs = best_ms(torch_ops(torch, tx, ty, tdy), a.repeat)
    except ImportError:
        theirs = {}
    nx, ny, _ = inputs(a.n)
    with np.errstate(all="ignore"):
        nps = best_ms(numpy_ops(nx, ny), a.repeat)
    print("machine: %s, %d cores, load average %.1f; AVX-512 copy %s; n = %d float32"
          % (cpu_name(), os.cpu_count(), os.getloadavg()[0], "on" if wide else "absent", a.n))
    print()
    print("| op | singa (ms) | singa baseline (ms) | baseline / singa | PyTorch (ms) | "
          "PyTorch / singa | numpy (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for k in ours:
        t = theirs.get(k)
        print("| %s | %.2f | %.2f | %.2fx | %s | %s | %s |" % (
            k, ours[k], base[k], base[k] / ours[k], "%.2f" % t if t else "-",
            "%.2fx" % (t / ours[k]) if t else "-", "%.2f" % nps[k] if k in nps else "-"))


if __name__ == "__main__":
    main()
