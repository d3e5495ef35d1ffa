"""Epilogue fusion (or blocked layouts) on and off, interleaved in one process: ResNet training
steps and inference forwards replayed from the graph, timed per step in wall time and in this
process's CPU time (user + system: what the step computed, robust to other processes sharing the
cores).

    .venv/bin/python benchmarks/bench_fusion.py --models resnet18 --batch 32 --steps 3 --rounds 3
    .venv/bin/python benchmarks/bench_fusion.py --models resnet50 --batch 16 --steps 1 --rounds 2
    .venv/bin/python benchmarks/bench_fusion.py --compare layouts --modes train   # fusion on
    .venv/bin/python benchmarks/bench_fusion.py --models resnet18 --modes train --threads 1
    .venv/bin/python benchmarks/bench_fusion.py --compare layouts --modes train --precision bfloat16
    .venv/bin/python benchmarks/bench_fusion.py --modes train --trees /tmp/before .  # two builds

--trees runs the same comparison against other checkouts' built packages (PYTHONPATH), one
process per tree and round, the trees alternating round by round so that all see the same load;
one row per tree, each side's fastest step over the rounds.

--compare layouts switches dev.SetGraphLayouts(on/off) with fusion on both sides (today's fp32
is fusion without layouts); the "Fused" column then shows the blocks kept blocked.

One model per row: the graph is recorded once; dev.SetGraphFusion(on/off) rebuilds it at the next
replay (its first replay is not timed). Each round times `steps` replays with fusion on, then off;
the table keeps each side's fastest step. The fused counts come from dev.graph_fusion_counts()
(bn/add/relu into producers, then the ReLU backwards read through by batch-norm backwards: a
build without that count shows "-").
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from trees import commit_of, worker_results  # noqa: E402
from bench_train import eval_step  # noqa: E402  (records the inference forward by hand)

SHAPES = {"resnet18": ((3, 32, 32), 10), "resnet50": ((3, 224, 224), 1000)}


def setup(name, batch, dev):
    """The model (with its optimizer), a batch and its labels on dev."""
    import models
    from singa import opt, tensor
    dev.SetRandSeed(0)
    shape, classes = SHAPES[name]
    rng = np.random.default_rng(0)
    tx = tensor.from_numpy(rng.standard_normal((batch,) + shape).astype(np.float32), dev)
    ty = tensor.from_numpy(rng.integers(0, classes, batch).astype(np.int32), dev)
    net = models.resnet18() if name == "resnet18" else models.resnet50(cifar=False)
    net.set_optimizer(opt.SGD(lr=0.01, momentum=0.9, weight_decay=1e-5))
    return net, tx, ty


def build(name, batch, inference, precision="float32"):
    from singa import device
    dev = device.get_default_device()
    net, tx, ty = setup(name, batch, dev)
    if not inference:
        net.compile([tx], is_train=True, use_graph=True, precision=precision)
        return dev, lambda: net(tx, ty)
    net.compile([tx], is_train=False, use_graph=False)
    return dev, eval_step(net, dev, tx, graph=True)


def timed(step, steps):
    best_wall = best_cpu = float("inf")
    for _ in range(steps):
        w0, c0 = time.perf_counter(), time.process_time()
        step()
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best_wall, best_cpu


def measure(name, mode, args):
    """{True/False: [best wall, best cpu]} of fusion (or layouts) on and off, and the counts."""
    dev, step = build(name, args.batch, mode == "inference", args.precision)
    best = {True: [float("inf")] * 2, False: [float("inf")] * 2}
    counts = None
    for _ in range(args.rounds):
        for on in (True, False):
            if args.compare == "layouts":
                dev.SetGraphLayouts(on)
            else:
                dev.SetGraphFusion(on)
            step()  # rebuilds the graph with the new setting
            if on:
                counts = dev.graph_fusion_counts()
                counts["blocked"] = dev.graph_layout_counts()["blocks"]
            w, c = timed(step, args.steps)
            best[on] = [min(best[on][0], w), min(best[on][1], c)]
    dev.ResetGraph()
    return best, counts


def across_trees(args, argv):
    """--trees: this script in a process per tree and round (--rounds 1), trees alternating."""
    rows = {}
    for _ in range(args.rounds):
        for tree in args.trees:
            for r in worker_results(__file__, ["--worker"] + argv, tree):
                key = (tree, r["model"], r["mode"])
                old = rows.setdefault(key, r)
                for side in ("on", "off"):
                    old[side] = [min(a, b) for a, b in zip(old[side], r[side])]
    return rows


def row(label, name, batch, mode, what, on, off):
    (won, con), (woff, coff) = on, off
    print("| %s%s b%d | %s | %s | %.3f | %.3f | %.3fx | %.3f | %.3f | %.3fx |" % (
        label, name, batch, mode, what, won, woff, woff / won, con, coff, coff / con), flush=True)


def fused_cell(counts, compare):
    if compare == "layouts":
        return str(counts["blocked"])
    return "%d/%d/%d/%s" % (counts["batch_norm"], counts["add"], counts["relu"],
                            counts.get("relu_backward", "-"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet18"], choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3, help="timed replays per side and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=["train", "inference"],
                    choices=["train", "inference"])
    ap.add_argument("--precision", default="float32", choices=["float32", "bfloat16"],
                    help="training steps in this precision (model.compile's; bfloat16: AMP)")
    ap.add_argument("--compare", default="fusion", choices=["fusion", "layouts"],
                    help="what is switched on and off")
    ap.add_argument("--threads", type=int, default=0,
                    help="singa's OpenMP threads (0: the default); one thread is the least "
                         "disturbed by other processes sharing the cores")
    ap.add_argument("--trees", nargs="+",
                    help="checkouts with a built singa package, compared round by round")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:  # one tree's round (--trees): results as JSON lines
        args.rounds = 1
        if args.threads:
            from singa import singa_wrap
            singa_wrap.set_num_threads(args.threads)
        for name in args.models:
            for mode in args.modes:
                best, counts = measure(name, mode, args)
                print("RESULT " + json.dumps({"model": name, "mode": mode, "on": best[True],
                                              "off": best[False], "counts": counts}), flush=True)
        return
    if args.threads:
        from singa import singa_wrap
        singa_wrap.set_num_threads(args.threads)
    print("machine: %d cores, %s; OPENBLAS_CORETYPE=%s" % (
        os.cpu_count(), time.strftime("%Y-%m-%d"), os.environ.get("OPENBLAS_CORETYPE", "(unset)")))
    switched = ("Fused (bn/add/relu/relu bwd)" if args.compare == "fusion" else
                "Blocked blocks")
    print("\n| Model | Mode | %s | Wall on (s) | Wall off (s) | Speedup wall "
          "| CPU on (s) | CPU off (s) | Speedup CPU |" % switched)
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    if args.trees:
        rows = across_trees(args, ["--models", *args.models, "--modes", *args.modes,
                                   "--batch", str(args.batch), "--steps", str(args.steps),
                                   "--precision", args.precision, "--compare", args.compare,
                                   "--threads", str(args.threads)])
        for name in args.models:
            for mode in args.modes:
                for tree in args.trees:
                    r = rows[(tree, name, mode)]
                    row(commit_of(tree) + " ", name, args.batch, mode,
                        fused_cell(r["counts"], args.compare), r["on"], r["off"])
        return
    for name in args.models:
        for mode in args.modes:
            best, counts = measure(name, mode, args)
            row("", name, args.batch, mode, fused_cell(counts, args.compare), best[True],
                best[False])


if __name__ == "__main__":
    main()
