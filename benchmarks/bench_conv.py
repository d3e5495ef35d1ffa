"""Convolution throughput per ResNet-18 layer (CIFAR layout): GFLOP/s of forward, backward-data and
backward-weights, for singa's kernels and PyTorch's, beside the machine's sgemm peak.

    .venv/bin/python benchmarks/bench_conv.py                 # default environment
    .venv/bin/python benchmarks/bench_conv.py --unset-openblas-env

A convolution's FLOPs (each of the three passes): 2 * N * Cout * OH * OW * Cin/groups * kh * kw.
The sgemm peak is singa's own 2048x2048 float32 product on the same threads (OpenBLAS). Each library
runs in its own process (two thread pools in one process slow each other down, LESSONS.md #5);
every singa backend the build has (reference: im2col + OpenBLAS; dnnl: oneDNN) gets its columns.
Times are the best of --repeat after a warm-up.
"""
import argparse
import json
import os
import subprocess
import sys
import time

# (name, Cin, Cout, H=W, kernel, stride, pad, how many times ResNet-18 runs this shape)
LAYERS = [
    ("conv1", 3, 64, 32, 3, 1, 1, 1),
    ("layer1 3x3", 64, 64, 32, 3, 1, 1, 4),
    ("layer2 3x3 s2", 64, 128, 32, 3, 2, 1, 1),
    ("layer2 1x1 s2", 64, 128, 32, 1, 2, 0, 1),
    ("layer2 3x3", 128, 128, 16, 3, 1, 1, 3),
    ("layer3 3x3 s2", 128, 256, 16, 3, 2, 1, 1),
    ("layer3 1x1 s2", 128, 256, 16, 1, 2, 0, 1),
    ("layer3 3x3", 256, 256, 8, 3, 1, 1, 3),
    ("layer4 3x3 s2", 256, 512, 8, 3, 2, 1, 1),
    ("layer4 1x1 s2", 256, 512, 8, 1, 2, 0, 1),
    ("layer4 3x3", 512, 512, 4, 3, 1, 1, 3),
]
PASSES = ("fwd", "bwd_data", "bwd_weight")


def out_size(h, k, s, p):
    return (h + 2 * p - k) // s + 1


def flops(n, layer):
    _, cin, cout, h, k, s, p, _ = layer
    o = out_size(h, k, s, p)
    return 2.0 * n * cout * o * o * cin * k * k


def best_time(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def worker_singa(cfg):
    import numpy as np
    from singa import device, singa_wrap, tensor
    dev = device.get_default_device()
    backend = cfg["backend"]
    if backend != "default":
        dev.set_backend(backend)
    n, rep = cfg["batch"], cfg["repeat"]
    rng = np.random.default_rng(0)
    res = {}
    a = tensor.from_numpy(rng.standard_normal((2048, 2048)).astype(np.float32), dev)
    t = best_time(lambda: tensor.mult(a, a), rep)
    res["sgemm"] = 2.0 * 2048 ** 3 / t / 1e9
    for layer in LAYERS:
        name, cin, cout, h, k, s, p, _ = layer
        x = tensor.from_numpy(rng.standard_normal((n, cin, h, h)).astype(np.float32), dev)
        w = tensor.from_numpy(rng.standard_normal((cout, cin, k, k)).astype(np.float32), dev)
        hd = singa_wrap.ConvHandle(x.data, (k, k), (s, s), (p, p), cin, cout, False)
        empty = singa_wrap.Tensor()
        y = singa_wrap.Conv2dForward(x.data, w.data, empty, hd)
        dy = y
        times = {
            "fwd": best_time(lambda: singa_wrap.Conv2dForward(x.data, w.data, empty, hd), rep),
            "bwd_data": best_time(lambda: singa_wrap.Conv2dBackwardX(dy, w.data, hd), rep),
            "bwd_weight": best_time(lambda: singa_wrap.Conv2dBackwardW(dy, x.data, hd), rep),
        }
        res[name] = {k2: flops(n, layer) / v / 1e9 for k2, v in times.items()}
    print("RESULT " + json.dumps(res))


def worker_torch(cfg):
    import torch
    torch.set_num_threads(os.cpu_count())
    n, rep = cfg["batch"], cfg["repeat"]
    g = torch.Generator().manual_seed(0)
    res = {}
    a = torch.randn(2048, 2048, generator=g)
    res["sgemm"] = 2.0 * 2048 ** 3 / best_time(lambda: a @ a, rep) / 1e9
    for layer in LAYERS:
        name, cin, cout, h, k, s, p, _ = layer
        x = torch.randn(n, cin, h, h, generator=g)
        w = torch.randn(cout, cin, k, k, generator=g)
        y = torch.nn.functional.conv2d(x, w, None, s, p)
        dy = torch.randn(y.shape, generator=g)
        conv_bwd = torch.ops.aten.convolution_backward

        def bwd(mask):
            return conv_bwd(dy, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, mask)
        with torch.no_grad():
            times = {
                "fwd": best_time(lambda: torch.nn.functional.conv2d(x, w, None, s, p), rep),
                "bwd_data": best_time(lambda: bwd([True, False, False]), rep),
                "bwd_weight": best_time(lambda: bwd([False, True, False]), rep),
            }
        res[name] = {k2: flops(n, layer) / v / 1e9 for k2, v in times.items()}
    print("RESULT " + json.dumps(res))


def run(cfg, env):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(cfg)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.stderr.write("worker %s failed:\n%s\n" % (cfg, p.stderr[-2000:]))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--unset-openblas-env", action="store_true",
                    help="run the workers with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        cfg = json.loads(args.worker)
        return worker_torch(cfg) if cfg["lib"] == "torch" else worker_singa(cfg)
    env = dict(os.environ)
    if args.unset_openblas_env:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    from singa import singa_wrap
    backends = ["cpu", "dnnl"] if getattr(singa_wrap, "USE_DNNL", False) else ["default"]
    cols = [("singa " + b if b != "default" else "singa", {"lib": "singa", "backend": b})
            for b in backends]
    try:
        import torch  # noqa: F401
        cols.append(("torch", {"lib": "torch"}))
    except ImportError:
        pass
    results = {}
    for label, cfg in cols:
        cfg.update(batch=args.batch, repeat=args.repeat)
        results[label] = run(cfg, env)
    labels = [lb for lb, _ in cols if results.get(lb)]
    print("machine: %d cores, %s; OPENBLAS_CORETYPE=%s; batch %d; GFLOP/s (best of %d)" % (
        os.cpu_count(), time.strftime("%Y-%m-%d"), env.get("OPENBLAS_CORETYPE", "(unset)"),
        args.batch, args.repeat))
    print("sgemm 2048 peak: " + ", ".join("%s %.0f" % (lb, results[lb]["sgemm"]) for lb in labels))
    print()
    print("| layer | x | GFLOP | " + " | ".join("%s %s" % (lb, ps) for ps in PASSES
                                              for lb in labels) + " |")
    print("|---|---:|---:|" + "---:|" * (len(PASSES) * len(labels)))
    total = {lb: 0.0 for lb in labels}
    for layer in LAYERS:
        name, count = layer[0], layer[7]
        gf = flops(args.batch, layer) / 1e9
        cells = []
        for ps in PASSES:
            for lb in labels:
                r = results[lb][name][ps]
                cells.append("%.0f" % r)
                total[lb] += count * gf / r
        print("| %s | %d | %.2f | %s |" % (name, count, gf, " | ".join(cells)))
    step_gf = sum(3 * flops(args.batch, lay) * lay[7] for lay in LAYERS) / 1e9
    print()
    print("conv work per training step: %.1f GFLOP; time spent in convolutions: %s" % (
        step_gf, ", ".join("%s %.2f s (%.0f GFLOP/s)" % (lb, total[lb], step_gf / total[lb])
                           for lb in labels)))


if __name__ == "__main__":
    main()
