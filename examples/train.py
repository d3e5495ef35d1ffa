"""Trains one of the example models on real data and reports test accuracy.

    python examples/train.py cnn --data digits --epochs 3          # offline (scikit-learn digits)
    python examples/train.py mlp --data mnist --data-dir ~/mnist
    python examples/train.py resnet18 --data cifar10 --data-dir ~/cifar-10-batches-py
    python examples/train.py cnn --graph                            # buffered graph + replay

The loop is the Apache SINGA 3.x Model API: placeholders tx/ty, compile(), then model(tx, ty)
per batch with copy_from_numpy; evaluation runs eagerly under model.eval().
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datasets  # noqa: E402
import models  # noqa: E402
from singa import device, opt, tensor  # noqa: E402

try:
    from tqdm import tqdm
except ImportError:  # tqdm is optional: plain iteration without a progress bar
    def tqdm(it, **kwargs):
        return it


def load(name, data_dir):
    if name == "digits":
        return datasets.load_digits_28()
    if name == "mnist":
        return datasets.load_mnist(data_dir)
    if name == "cifar10":
        return datasets.load_cifar10(data_dir)
    raise ValueError("unknown data set %r" % name)


def build(name, num_classes, channels, image_size=32):
    if name == "mlp":
        return models.MLP(num_classes=num_classes)
    if name == "cnn":
        return models.CNN(num_classes=num_classes, num_channels=channels)
    if name == "resnet18":
        return models.resnet18(num_classes=num_classes, num_channels=channels, cifar=True)
    if name == "resnet50":
        return models.resnet50(num_classes=num_classes, num_channels=channels, cifar=True)
    if name == "xception":
        return models.Xception(num_classes=num_classes, num_channels=channels,
                               image_size=image_size)
    raise ValueError("unknown model %r" % name)


def accuracy(net, x, y, tx, batch_size):
    net.eval()
    correct = total = 0
    for xb, yb in datasets.batches(x, y, batch_size, shuffle=False):
        tx.copy_from_numpy(xb)
        out = tensor.to_numpy(net(tx))
        correct += int((out.argmax(axis=1) == yb).sum())
        total += len(yb)
    net.train()
    return correct / max(total, 1)


def run(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=["mlp", "cnn", "resnet18", "resnet50", "xception"])
    ap.add_argument("--data", default="digits", choices=["digits", "mnist", "cifar10"])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--graph", action="store_true", help="buffer the step and replay it")
    ap.add_argument("--max-steps", type=int, default=0, help="stop each epoch early (0: no)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    (x_train, y_train), (x_test, y_test) = load(args.data, args.data_dir)
    if args.model == "mlp":
        x_train = x_train.reshape(len(x_train), -1)
        x_test = x_test.reshape(len(x_test), -1)
    num_classes = int(max(y_train.max(), y_test.max())) + 1
    channels = x_train.shape[1] if x_train.ndim == 4 else 1
    print("%s on %s: %d training and %d test samples of shape %s, %d classes"
          % (args.model, args.data, len(x_train), len(x_test), x_train.shape[1:], num_classes))

    dev = device.get_default_device()
    dev.SetRandSeed(args.seed)
    net = build(args.model, num_classes, channels, image_size=x_train.shape[-1])
    net.set_optimizer(opt.SGD(lr=args.lr, momentum=0.9, weight_decay=1e-5))
    bs = args.batch_size
    tx = tensor.Tensor((bs,) + x_train.shape[1:], dev, tensor.float32)
    ty = tensor.Tensor((bs,), dev, tensor.int32)
    net.compile([tx], is_train=True, use_graph=args.graph, sequential=False)

    start = time.time()
    for epoch in range(args.epochs):
        net.train()
        losses, steps = [], 0
        bar = tqdm(datasets.batches(x_train, y_train, bs, seed=args.seed + epoch),
                   total=len(x_train) // bs, desc="epoch %d" % (epoch + 1), leave=False)
        for xb, yb in bar:
            tx.copy_from_numpy(xb)
            ty.copy_from_numpy(yb)
            out, loss = net(tx, ty)
            losses.append(float(tensor.to_numpy(loss).reshape(-1)[0]))
            steps += 1
            if args.max_steps and steps >= args.max_steps:
                break
        acc = accuracy(net, x_test, y_test, tx, bs)
        print("epoch %d: mean loss %.4f, test accuracy %.4f (%.1f s)"
              % (epoch + 1, np.mean(losses), acc, time.time() - start))
    acc = accuracy(net, x_test, y_test, tx, bs)
    print("final test accuracy: %.4f" % acc)
    return acc


if __name__ == "__main__":
    run()
