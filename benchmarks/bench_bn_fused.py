"""Batch norm with its fused epilogue (ReLU, residual Add + ReLU) against the unfused operations,
float32 training, on ResNet-18's (CIFAR) batch-norm shapes, per layout and thread count.

    .venv/bin/python benchmarks/bench_bn_fused.py                       # every shape, 2 rounds
    .venv/bin/python benchmarks/bench_bn_fused.py --channels 64 --threads 1 --rounds 3
    .venv/bin/python benchmarks/bench_bn_fused.py --trees /tmp/before .   # two builds, interleaved

Each configuration trains one residual block of 1x1 convolutions on a batch of (32, C, H, W)
(h = relu(bn1(conv1(x))); y = relu(bn2(conv2(h)) + h)), graph mode, and reads the per-operation
profile of its replays (Device.SetVerbosity(1): each operation synced and timed). Fusion on: the
graph runs bn1 + ReLU and bn2 + Add + ReLU as two batch-norm kernels; off: two batch norms, an Add
and two ReLUs. Layouts on: the convolutions keep the activations in nChw16c, and batch norm runs
on them in that layout; off: plain NCHW. Every configuration is its own process (a profile
accumulates over a graph's life); the rounds alternate fusion on and off, layout by layout, so
both sides see the same load; each cell keeps its fastest round. --trees runs the same workers
against other checkouts' built packages (PYTHONPATH), alternating with this one, one row each.

Columns (ms per step, both batch norms of the block; "on" fusion on, "off" off): "BN fwd" the
two training forwards (fused: with their epilogues), "ReLU+Add" every ReLU and Add left (the
backward's gradient sum for h is an Add on both sides), "BN bwd" the two backwards, "ReLU bwd"
the ReLU masks left (fused: bn1's is read through by its backward, relu_backward; bn2's gradient
also feeds the shortcut and stays). The layout is the fused side's: a graph keeps
blocked layouts only with fusion on, so the unfused side is plain in both rows.
"""
import argparse
import itertools
import json
import os
import time

from trees import commit_of, worker_results

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {64: 32, 128: 16, 256: 8, 512: 4}  # channels -> height = width, ResNet-18 CIFAR b32
OPS = ("BatchNormForwardTraining", "ReLU", "Add", "BatchNormBackward", "ReLUBackward")


def worker(cfg):
    import numpy as np
    from singa import device, layer, model, opt, singa_wrap, tensor
    singa_wrap.set_num_threads(cfg["threads"])
    C, H = cfg["channels"], SHAPES[cfg["channels"]]

    class Block(model.Model):
        def __init__(self):
            super().__init__()
            self.conv1 = layer.Conv2d(C, 1, bias=False)
            self.bn1 = layer.BatchNorm2d()
            self.relu1 = layer.ReLU()
            self.conv2 = layer.Conv2d(C, 1, bias=False)
            self.bn2 = layer.BatchNorm2d()
            self.add = layer.Add()
            self.relu2 = layer.ReLU()
            self.pool = layer.AvgPool2d(H)  # keeps y's layout (a Flatten would make it plain)
            self.flat = layer.Flatten()
            self.fc = layer.Linear(10)
            self.loss = layer.SoftMaxCrossEntropy()

        def forward(self, x):
            h = self.relu1(self.bn1(self.conv1(x)))
            y = self.relu2(self.add(self.bn2(self.conv2(h)), h))
            return self.fc(self.flat(self.pool(y)))

        def train_one_batch(self, x, t):
            out = self.forward(x)
            loss = self.loss(out, t)
            self.optimizer(loss)
            return out, loss

    dev = device.get_default_device()
    dev.SetRandSeed(0)
    rng = np.random.default_rng(0)
    tx = tensor.from_numpy(rng.standard_normal((32, C, H, H)).astype(np.float32), dev)
    ty = tensor.from_numpy(rng.integers(0, 10, 32).astype(np.int32), dev)
    net = Block()
    net.set_optimizer(opt.SGD(lr=0.01, momentum=0.9))
    dev.SetGraphFusion(cfg["fusion"])
    dev.SetGraphLayouts(cfg["layouts"])
    net.compile([tx], is_train=True, use_graph=True)
    net(tx, ty)  # records and runs once
    dev.SetSkipIteration(2)
    dev.SetVerbosity(1)
    for _ in range(cfg["iters"] + 2):
        net(tx, ty)
    ms = {}
    for line in dev.GetTimeProfiling().splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].endswith("%") and parts[1].isdigit():
            ms[parts[0]] = float(parts[2])
    fused = dev.graph_fusion_counts()
    blocked = dev.graph_layout_counts()["blocks"]
    print("RESULT " + json.dumps({"ms": ms, "fused": fused, "blocked": blocked}), flush=True)


def run(cfg, tree):
    return worker_results(__file__, ["--worker", json.dumps(cfg)], tree, timeout=600)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", nargs="+", type=int, default=sorted(SHAPES),
                    choices=sorted(SHAPES))
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--layouts", nargs="+", default=["nChw16c", "plain"],
                    choices=["nChw16c", "plain"])
    ap.add_argument("--iters", type=int, default=10, help="profiled replays per configuration")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--trees", nargs="+", default=[os.path.join(HERE, "..")],
                    help="checkouts with a built singa package to compare (default: this one)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    print("machine: %d cores, %s; OPENBLAS_CORETYPE=%s" % (
        os.cpu_count(), time.strftime("%Y-%m-%d"), os.environ.get("OPENBLAS_CORETYPE", "(unset)")))
    best = {}
    configs = list(itertools.product(args.channels, args.threads, args.layouts))
    for _ in range(args.rounds):
        for (C, threads, lay), tree, fusion in itertools.product(configs, args.trees,
                                                                 (True, False)):
            cfg = {"channels": C, "threads": threads, "layouts": lay == "nChw16c",
                   "fusion": fusion, "iters": args.iters}
            r = run(cfg, tree)
            old = best.setdefault((tree, C, threads, lay, fusion), r)
            for op, v in r["ms"].items():
                old["ms"][op] = min(old["ms"].get(op, v), v)
    label = {t: commit_of(t) for t in args.trees}
    print("\n| build | C x HxW | threads | layout | fused bn/add/relu/relu bwd | BN fwd on "
          "| BN fwd off | ReLU+Add on | ReLU+Add off | fwd on/off | BN bwd on | BN bwd off "
          "| ReLU bwd on | ReLU bwd off | bwd on/off |")
    print("|---|---|---:|---|---|" + "---:|" * 10)
    for (C, threads, lay), tree in itertools.product(configs, args.trees):
        on, off = best[(tree, C, threads, lay, True)], best[(tree, C, threads, lay, False)]
        cells = []
        for r in (on, off):
            ms = lambda op: r["ms"].get(op, 0.0)  # noqa: E731
            cells.append((ms(OPS[0]), ms("ReLU") + ms("Add"), ms(OPS[3]), ms(OPS[4])))
        (f1, e1, b1, m1), (f0, e0, b0, m0) = cells
        f = on["fused"]
        print("| %s | %d x %dx%d | %d | %s%s | %d/%d/%d/%s | %.3f | %.3f | %.3f | %.3f | %.3fx "
              "| %.3f | %.3f | %.3f | %.3f | %.3fx |" % (
                  label[tree], C, SHAPES[C], SHAPES[C], threads, lay,
                  "" if on["blocked"] or lay == "plain" else " (none kept)",
                  f["batch_norm"], f["add"], f["relu"], f.get("relu_backward", "-"), f1, f0, e1,
                  e0, (f0 + e0) / (f1 + e1),
                  b1, b0, m1, m0, (b0 + m0) / (b1 + m1)), flush=True)

if __name__ == "__main__":
    main()
