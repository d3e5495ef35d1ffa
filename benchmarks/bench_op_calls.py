"""Eager per-call time of single ops (the front, the launch and the kernel) in two checkouts side
by side: what moving an op's glue into the op schema costs or saves per call.

    python benchmarks/bench_op_calls.py --before /work/main --after . [--rounds 3]

Each checkout must be built (its singa/ holds the extension modules). Per round the two run in
fresh interpreters, alternating which goes first; each prints, per case, the median over
--reps timed batches of --calls calls (microseconds per call, the result's data synchronised
once per batch). The table shows the median over rounds per checkout and after / before. Small
shapes show the per-call overhead, ResNet-sized ones the kernel (batch norm, softmax,
convolution: the schema's NN rows).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CASES = {  # name -> (x shape, what runs)
    "bn_train 8x16x8x8": ((8, 16, 8, 8), "bn_train"),
    "bn_infer 8x16x8x8": ((8, 16, 8, 8), "bn_infer"),
    "bn_backward 8x16x8x8": ((8, 16, 8, 8), "bn_backward"),
    "bn_train 32x64x32x32": ((32, 64, 32, 32), "bn_train"),
    "softmax 64x10": ((64, 10), "softmax"),
    "softmax_backward 64x10": ((64, 10), "softmax_backward"),
    "softmax 256x1000": ((256, 1000), "softmax"),
    "conv 8x16x8x8 3x3 bias": ((8, 16, 8, 8), "conv"),
    "conv_backward_x 8x16x8x8": ((8, 16, 8, 8), "conv_backward_x"),
    "conv_backward_w 8x16x8x8": ((8, 16, 8, 8), "conv_backward_w"),
    "conv_backward_b 8x16x8x8": ((8, 16, 8, 8), "conv_backward_b"),
    "conv 32x64x32x32 3x3 bias": ((32, 64, 32, 32), "conv"),
}


def _worker(calls, reps):
    import time

    import numpy as np
    from singa import device, tensor
    from singa import singa_wrap as sw

    dev = device.get_default_device()
    out = {}
    for name, (shape, what) in CASES.items():
        x = tensor.from_numpy(np.random.RandomState(0).randn(*shape).astype(np.float32), dev).data
        c = shape[1]
        one, zero = (tensor.from_numpy(np.full(c, v, np.float32), dev).data for v in (1, 0))
        rm, rv = (tensor.from_numpy(np.full(c, v, np.float32), dev).data for v in (0, 1))
        _, mean, var = sw.BatchNormForwardTraining(x, one, zero, None, None, 0.1, 1e-5)
        y = sw.SoftMax(x, -1)
        if len(shape) == 4:  # a 3x3 convolution keeping x's shape (dy: x itself)
            h = sw.ConvHandle(x, (3, 3), (1, 1), (1, 1), c, c, True)
            w = tensor.from_numpy(0.1 * np.ones((c, c, 3, 3), np.float32), dev).data
        run = {
            "bn_train": lambda: sw.BatchNormForwardTraining(x, one, zero, rm, rv, 0.1, 1e-5)[0],
            "bn_infer": lambda: sw.BatchNormForwardInference(x, one, zero, rm, rv, 1e-5),
            "bn_backward": lambda: sw.BatchNormBackward(x, x, one, mean, var, 1e-5)[0],
            "softmax": lambda: sw.SoftMax(x, -1),
            "softmax_backward": lambda: sw.SoftMaxBackward(x, y, -1),
            "conv": lambda: sw.Conv2dForward(x, w, zero, h),
            "conv_backward_x": lambda: sw.Conv2dBackwardX(x, w, h),
            "conv_backward_w": lambda: sw.Conv2dBackwardW(x, x, h),
            "conv_backward_b": lambda: sw.Conv2dBackwardB(x, h),
        }[what]
        run().GetFloatValue(1)  # warm: primitives, pools
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(calls):
                r = run()
            r.GetFloatValue(1)
            times.append((time.perf_counter() - t0) / calls * 1e6)
        out[name] = statistics.median(times)
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="the checkout to compare against (required)")
    ap.add_argument("--after", default=".")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return _worker(args.calls, args.reps)
    if not args.before:
        ap.error("--before is required")
    sides = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    results = {k: [] for k in sides}
    for r in range(args.rounds):
        for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
            env = dict(os.environ, PYTHONPATH=sides[side])
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--calls",
                   str(args.calls), "--reps", str(args.reps)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=sides[side])
            if done.returncode != 0:
                sys.exit("%s (%s) failed:\n%s" % (side, sides[side], done.stderr[-2000:]))
            results[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("us per call, median of %d rounds (alternating); load %.2f; before %s, after %s"
          % (args.rounds, os.getloadavg()[0], sides["before"], sides["after"]))
    print("%-26s %10s %10s %8s" % ("case", "before", "after", "after/b"))
    for name in CASES:
        b, a = (statistics.median(run[name] for run in results[s]) for s in ("before", "after"))
        print("%-26s %10.1f %10.1f %8.3f" % (name, b, a, a / b))


if __name__ == "__main__":
    main()
