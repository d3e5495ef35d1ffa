"""Trains one of the example models on real data and reports test accuracy.

    python examples/train.py cnn --data digits --epochs 3          # offline (scikit-learn digits)
    python examples/train.py mlp --data mnist --data-dir ~/mnist
    python examples/train.py resnet18 --data cifar10 --data-dir ~/cifar-10-batches-py
    python examples/train.py cnn --graph                            # buffered graph + replay

The loop is the Apache SINGA 3.x Model API: placeholders tx/ty, compile(), then model(tx, ty)
per batch with copy_from_numpy; evaluation runs eagerly under model.eval() over every test sample.
Each epoch prints its own time; at the end the loss and accuracy curve is written to a PNG
(--curve). Progress bars appear only on a terminal (monitor.py).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datasets  # noqa: E402
import models  # noqa: E402
from monitor import History, progress  # noqa: E402
from singa import device, opt, tensor  # noqa: E402

DEFAULT_DATA_DIRS = {"mnist": "~/data/mnist", "cifar10": "~/data/cifar-10-batches-py"}


def load(name, data_dir):
    """The data set's ((x_train, y_train), (x_test, y_test)); datasets.DataNotFoundError (with
    where to put the files) when they are not in data_dir (default DEFAULT_DATA_DIRS[name])."""
    if name == "digits":
        return datasets.load_digits_28()
    folder = data_dir or DEFAULT_DATA_DIRS.get(name)
    if name == "mnist":
        return datasets.load_mnist(folder)
    if name == "cifar10":
        return datasets.load_cifar10(folder)
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


def evaluate(net, x, y, tx, batch_size):
    """(correct, total) over every sample of (x, y): the last partial batch is padded to the
    placeholder's batch size and only its real rows are counted (eval mode: a sample's output
    does not depend on the others in its batch)."""
    net.eval()
    correct = total = 0
    for xb, yb in datasets.batches(x, y, batch_size, shuffle=False, drop_last=False):
        n = len(yb)
        if n < batch_size:
            xb = np.concatenate([xb, np.zeros((batch_size - n,) + xb.shape[1:], xb.dtype)])
        tx.copy_from_numpy(np.ascontiguousarray(xb))
        out = tensor.to_numpy(net(tx))[:n]
        correct += int((out.argmax(axis=1) == yb).sum())
        total += n
    net.train()
    return correct, total


def accuracy(net, x, y, tx, batch_size):
    correct, total = evaluate(net, x, y, tx, batch_size)
    return correct / max(total, 1)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=["mlp", "cnn", "resnet18", "resnet50", "xception"])
    ap.add_argument("--data", default="digits", choices=["digits", "mnist", "cifar10"])
    ap.add_argument("--data-dir", default=None,
                    help="folder of the data set's files (default: %s)"
                    % ", ".join("%s for %s" % (d, k) for k, d in DEFAULT_DATA_DIRS.items()))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--graph", action="store_true", help="buffer the step and replay it")
    ap.add_argument("--max-steps", type=int, default=0, help="stop each epoch early (0: no)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--curve", default=None, metavar="PNG",
                    help="where the loss/accuracy curve is written at the end (default: "
                    "MODEL-DATA-curve.png in the current folder; '' for none)")
    return ap.parse_args(argv)


def run(argv=None):
    """Trains as the command line says; returns the final test accuracy (over every test
    sample). Raises datasets.DataNotFoundError when the data set's files are missing."""
    args = parse_args(argv)
    (x_train, y_train), (x_test, y_test) = load(args.data, args.data_dir)
    if args.model == "mlp":
        x_train = x_train.reshape(len(x_train), -1)
        x_test = x_test.reshape(len(x_test), -1)
    num_classes = int(max(y_train.max(), y_test.max())) + 1
    channels = x_train.shape[1] if x_train.ndim == 4 else 1
    bs = args.batch_size
    steps = len(x_train) // bs
    if args.max_steps:
        steps = min(steps, args.max_steps)
    print("%s on %s: %d training and %d test samples of shape %s, %d classes; "
          "%d steps of %d per epoch (reshuffled each epoch)"
          % (args.model, args.data, len(x_train), len(x_test), x_train.shape[1:], num_classes,
             steps, bs))

    dev = device.get_default_device()
    dev.SetRandSeed(args.seed)
    net = build(args.model, num_classes, channels, image_size=x_train.shape[-1])
    net.set_optimizer(opt.SGD(lr=args.lr, momentum=0.9, weight_decay=1e-5))
    tx = tensor.Tensor((bs,) + x_train.shape[1:], dev, tensor.float32)
    ty = tensor.Tensor((bs,), dev, tensor.int32)
    net.compile([tx], is_train=True, use_graph=args.graph, sequential=False)

    hist = History()
    for epoch in range(args.epochs):
        start = time.time()
        net.train()
        batches = datasets.batches(x_train, y_train, bs, seed=args.seed + epoch)
        for step, (xb, yb) in enumerate(progress(batches, total=steps,
                                                 desc="epoch %d" % (epoch + 1))):
            if step >= steps:
                break
            tx.copy_from_numpy(xb)
            ty.copy_from_numpy(yb)
            out, loss = net(tx, ty)
            hist.step(tensor.to_numpy(loss).reshape(-1)[0])
        train_seconds = time.time() - start
        correct, total = evaluate(net, x_test, y_test, tx, bs)
        mean_loss = hist.epoch(train_seconds, correct / max(total, 1))
        print("epoch %d: mean loss %.4f, test accuracy %.4f (%d/%d), %.1f s training + %.1f s "
              "test" % (epoch + 1, mean_loss, correct / max(total, 1), correct, total,
                        train_seconds, time.time() - start - train_seconds))
    correct, total = evaluate(net, x_test, y_test, tx, bs)
    print("final test accuracy: %.4f (%d/%d test samples)" % (correct / max(total, 1), correct,
                                                             total))
    curve = "%s-%s-curve.png" % (args.model, args.data) if args.curve is None else args.curve
    if curve and hist.save_curve(curve, title="%s on %s" % (args.model, args.data)):
        print("loss and accuracy curve: %s" % curve)
    return correct / max(total, 1)


def main(argv=None):
    try:
        run(argv)
    except datasets.DataNotFoundError as e:
        sys.exit("train.py: %s" % e)


if __name__ == "__main__":
    main()
