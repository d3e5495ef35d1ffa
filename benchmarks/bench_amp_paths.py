"""bf16 AMP training steps with today's convolution paths against the paths before them,
interleaved in one process: each side records its graph on its own CPU device, then the two
replay in turn, timed per step in wall time and in this process's CPU time (user + system:
robust to other processes sharing the cores).

    .venv/bin/python benchmarks/bench_amp_paths.py --models resnet18 resnet50 --rounds 3
    .venv/bin/python benchmarks/bench_amp_paths.py --old castgrad     # only weight grads cast
    .venv/bin/python benchmarks/bench_amp_paths.py --old matmul1x1    # only 1x1 convs as convs

"Old" switches off, while its graph is recorded: castgrad, the float32 weight gradients of
the convolutions (autograd.Cast.float32_grads = False: dW rounded to bf16, cast back by an
AsType op); matmul1x1, the 1x1 convolutions run as oneDNN matmuls (SINGA_DNNL_CONV_MATMUL=0,
read when the primitives are made); both (the default), the two. The table keeps each side's
fastest step of every round.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from bench_fusion import SHAPES, setup, timed  # noqa: E402


def build(name, batch, dev_id, old):
    from singa import autograd, device
    net, tx, ty = setup(name, batch, device.create_cpu_device(dev_id))
    autograd.Cast.float32_grads = not (old in ("castgrad", "both"))
    if old in ("matmul1x1", "both"):
        os.environ["SINGA_DNNL_CONV_MATMUL"] = "0"
    try:
        net.compile([tx], is_train=True, use_graph=True, precision="bfloat16")
        net(tx, ty)  # records the graph: its primitives and casts are settled here
    finally:
        autograd.Cast.float32_grads = True
        os.environ.pop("SINGA_DNNL_CONV_MATMUL", None)
    return lambda: net(tx, ty)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet18", "resnet50"],
                    choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=0, help="0: 32 for resnet18, 16 for resnet50")
    ap.add_argument("--steps", type=int, default=2, help="timed replays per side and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old", default="both", choices=["both", "castgrad", "matmul1x1"])
    args = ap.parse_args()
    print("machine: %d cores, %s; OPENBLAS_CORETYPE=%s; OMP_NUM_THREADS=%s; old = %s" % (
        os.cpu_count(), time.strftime("%Y-%m-%d"), os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        os.environ.get("OMP_NUM_THREADS", "(unset)"), args.old))
    print("\n| Model | Wall new (s) | Wall old (s) | Speedup wall | CPU new (s) | CPU old (s) "
          "| Speedup CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for i, name in enumerate(args.models):
        batch = args.batch or (32 if name == "resnet18" else 16)
        steps = {"new": build(name, batch, 40 + 2 * i, "none"),
                 "old": build(name, batch, 41 + 2 * i, args.old)}
        best = {k: [float("inf")] * 2 for k in steps}
        for _ in range(args.rounds):
            for k, step in steps.items():
                step()  # one untimed replay after the other side's
                w, c = timed(step, args.steps)
                best[k] = [min(best[k][0], w), min(best[k][1], c)]
        (wn, cn), (wo, co) = best["new"], best["old"]
        print("| %s b%d | %.3f | %.3f | %.3fx | %.3f | %.3f | %.3fx |" % (
            name, batch, wn, wo, wo / wn, cn, co, co / cn), flush=True)


if __name__ == "__main__":
    main()
