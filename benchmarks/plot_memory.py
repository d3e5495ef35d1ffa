"""Draws the planned memory of one training step: ResNet-18 (CIFAR layout, batch 32) by default.

    .venv/bin/python benchmarks/plot_memory.py                      # -> resnet18_memory.png
    .venv/bin/python benchmarks/plot_memory.py --model cnn --batch 64 --out cnn.png --dot cnn.dot

Records the step as a graph (Model with use_graph=True), runs it once so that the planner lays
out the arena, then writes singa.graph.plot_memory's picture: top, each recyclable block as a
rectangle (x: its lifetime in the execution order, y: its offset in the arena); bottom, the bytes
live at each operation beside the liveness lower bound and the arena size. --dot also writes the
Graphviz drawing, whose blocks carry the names the Model gave them (conv1.W, input[0], ...).
Needs matplotlib.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

from singa import device, graph, opt, tensor  # noqa: E402

import models  # noqa: E402

SHAPES = {"mlp": ((784,), 10), "cnn": ((1, 28, 28), 10), "resnet18": ((3, 32, 32), 10),
          "resnet50": ((3, 224, 224), 1000)}


def build(name, num_classes):
    if name == "mlp":
        return models.MLP(num_classes=num_classes)
    if name == "cnn":
        return models.CNN(num_classes=num_classes)
    if name == "resnet18":
        return models.resnet18(num_classes=num_classes, cifar=True)
    return models.resnet50(num_classes=num_classes, cifar=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES), default="resnet18")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", default=None, help="PNG (or .svg/.pdf) path")
    ap.add_argument("--dot", default=None, help="also write the Graphviz source here")
    ap.add_argument("--sequential", action="store_true", help="submission order, not BFS")
    args = ap.parse_args(argv)
    out = args.out or "%s_memory.png" % args.model

    shape, classes = SHAPES[args.model]
    dev = device.create_cpu_device(0)
    dev.SetRandSeed(0)
    rng = np.random.default_rng(0)
    net = build(args.model, classes)
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    tx = tensor.from_numpy(rng.standard_normal((args.batch,) + shape).astype(np.float32), dev)
    ty = tensor.from_numpy(rng.integers(0, classes, args.batch).astype(np.int32), dev)
    net.compile([tx], is_train=True, use_graph=True, sequential=args.sequential)
    net.train()
    net(tx, ty)                                    # records the step, plans and runs it
    plan = graph.memory_plan(dev)
    title = ("%s (batch %d, %s order): arena %.1f MiB, liveness lower bound %.1f MiB, "
             "%.1f MiB persistent" % (args.model, args.batch,
                                      "serial" if args.sequential else "BFS",
                                      plan["arena_bytes"] / 2.0 ** 20,
                                      plan["lower_bound_bytes"] / 2.0 ** 20,
                                      plan["persistent_bytes"] / 2.0 ** 20))
    graph.plot_memory(dev, out, title=title)
    print("wrote %s: %s" % (out, title))
    if args.dot:
        graph.save_dot(dev, args.dot)
        print("wrote %s" % args.dot)
    dev.ResetGraph()


if __name__ == "__main__":
    main()
