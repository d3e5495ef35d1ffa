"""Where a graph-mode training step spends its time: per-operation times of a replay, grouped by
operation name, for one of the benchmark models.

    .venv/bin/python benchmarks/profile_ops.py resnet18 --iters 10
    .venv/bin/python benchmarks/profile_ops.py mlp --iters 500 --top 12
    .venv/bin/python benchmarks/profile_ops.py resnet18 --precision bfloat16   # bf16 AMP step
    .venv/bin/python benchmarks/profile_ops.py resnet18 --iters 5 --no-fusion  # epilogues unfused
    .venv/bin/python benchmarks/profile_ops.py resnet18 --precision bfloat16 --castgrad  # before
    python3 benchmarks/profile_ops.py resnet50 --batch 16 --device gpu         # on a CUDA build

Profiling syncs and times each operation (Device.SetVerbosity(1)); the first --skip replays are
warm-up. Prints a table: operation, calls per step, ms per step, share of the step.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)


def main():
    from bench_train import DEFAULT_BATCH, SHAPES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--precision", default="float32", help="model.compile's precision")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                    help="gpu: a CUDA device (create_cuda_gpu); each operation is timed to its "
                         "stream's end")
    ap.add_argument("--no-layouts", action="store_true",
                    help="dev.SetGraphLayouts(False): every activation plain (NCHW)")
    ap.add_argument("--threads", type=int, default=0,
                    help="singa's OpenMP threads (0: the default)")
    ap.add_argument("--no-fusion", action="store_true",
                    help="dev.SetGraphFusion(False): no epilogue fused into its producer")
    ap.add_argument("--castgrad", action="store_true",
                    help="AMP: weight gradients rounded to the low dtype and cast back (before)")
    args = ap.parse_args()
    import numpy as np
    import models
    from singa import autograd, device, opt, tensor
    autograd.Cast.float32_grads = not args.castgrad
    shape, classes = SHAPES[args.model]
    bs = args.batch or DEFAULT_BATCH[args.model]
    rng = np.random.default_rng(0)
    dev = device.create_cuda_gpu() if args.device == "gpu" else device.get_default_device()
    net = {"mlp": models.MLP, "cnn": models.CNN, "resnet18": models.resnet18,
           "resnet50": lambda: models.resnet50(cifar=False)}[args.model]()
    net.set_optimizer(opt.SGD(lr=0.01, momentum=0.9, weight_decay=1e-5))
    tx = tensor.from_numpy(rng.standard_normal((bs,) + shape).astype(np.float32), dev)
    ty = tensor.from_numpy(rng.integers(0, classes, bs).astype(np.int32), dev)
    if args.no_layouts:
        dev.SetGraphLayouts(False)
    if args.threads:
        from singa import singa_wrap
        singa_wrap.set_num_threads(args.threads)
    if args.no_fusion:
        dev.SetGraphFusion(False)
    net.compile([tx], is_train=True, use_graph=True, precision=args.precision)
    net(tx, ty)  # records and runs once
    dev.SetSkipIteration(args.skip)
    dev.SetVerbosity(1)
    t0 = time.perf_counter()
    for _ in range(args.iters + args.skip):
        net(tx, ty)
    wall = (time.perf_counter() - t0) / (args.iters + args.skip)
    rows = []
    for line in dev.GetTimeProfiling().splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].endswith("%") and parts[1].isdigit():
            rows.append((parts[0], int(parts[1]), float(parts[2]), parts[3]))
    total = sum(r[2] for r in rows)
    print("%s, batch %d, %s on %s: %.2f ms per step summed over operations (%.2f ms wall per profiled "
          "step, which syncs after each operation)" % (args.model, bs, args.precision, args.device,
                                               total, wall * 1e3))
    # a fused operation keeps its row and count (its time is its producer's, or consumer's)
    print("fused: %s; kept blocked: %d blocks" % (dev.graph_fusion_counts(),
                                                  dev.graph_layout_counts()["blocks"]))
    print("\n| operation | calls/step | ms/step | share |\n|---|---:|---:|---:|")
    for name, calls, ms, share in rows[:args.top]:
        print("| %s | %d | %.3f | %s |" % (name, calls, ms, share))


if __name__ == "__main__":
    main()
