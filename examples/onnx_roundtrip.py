"""Trains the seed CNN on the digits, exports it to ONNX, checks the file with onnxruntime and
with sonnx, then fine-tunes the imported network for an epoch with the graph on.

    python examples/onnx_roundtrip.py --epochs 1 --out /tmp/cnn.onnx
    python examples/onnx_roundtrip.py --max-steps 5            # a quick smoke run

Needs onnx and onnxruntime (pip install onnx onnxruntime).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datasets  # noqa: E402
import models  # noqa: E402
from singa import autograd, device, opt, sonnx, tensor  # noqa: E402


class FineTuned(sonnx.SONNXModel):
    """The imported network with SINGA's training step (SINGA's examples/onnx/training)."""

    def train_one_batch(self, x, y):
        out = self.forward(x)[0]
        loss = autograd.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


def train(net, x, y, tx, ty, args):
    """One pass over (x, y) with net(tx, ty); the mean loss."""
    losses = []
    for step, (xb, yb) in enumerate(datasets.batches(x, y, args.batch_size, seed=args.seed)):
        if args.max_steps and step >= args.max_steps:
            break
        tx.copy_from_numpy(xb)
        ty.copy_from_numpy(yb)
        _, loss = net(tx, ty)
        losses.append(float(np.asarray(tensor.to_numpy(loss)).reshape(-1)[0]))
    return float(np.mean(losses))


def accuracy(logits, y):
    return float((np.asarray(logits).argmax(axis=1) == y).mean())


def run(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--max-steps", type=int, default=0, help="stop each epoch early (0: no)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="cnn.onnx", help="where the ONNX file is written")
    args = ap.parse_args(argv)

    import onnxruntime as ort
    (x_tr, y_tr), (x_te, y_te) = datasets.load_digits_28()
    dev = device.get_default_device()
    dev.SetRandSeed(args.seed)
    tx = tensor.Tensor((args.batch_size, 1, 28, 28), dev, tensor.float32)
    ty = tensor.Tensor((args.batch_size,), dev, tensor.int32)

    # 1. train natively
    net = models.CNN(num_classes=10)
    net.set_optimizer(opt.SGD(lr=args.lr, momentum=0.9))
    net.compile([tx], is_train=True, use_graph=True, sequential=False)
    for epoch in range(args.epochs):
        print("epoch %d: mean loss %.4f" % (epoch, train(net, x_tr, y_tr, tx, ty, args)))

    # 2. export: a traced forward (training mode records the operators)
    net.train()
    x_in = tensor.from_numpy(x_te)
    y_out = net.forward(x_in)
    sonnx.save(sonnx.to_onnx([x_in], [y_out]), args.out)
    net.eval()
    ours = tensor.to_numpy(net.forward(tensor.from_numpy(x_te)))

    # 3. reload with onnxruntime and with sonnx; compare
    sess = ort.InferenceSession(args.out, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {sess.get_inputs()[0].name: x_te})[0]
    back = sonnx.prepare(sonnx.load(args.out), dev).run([x_te])[0]
    scale = np.abs(ref).max()
    print("test accuracy: singa %.4f, onnxruntime %.4f, sonnx %.4f"
          % (accuracy(ours, y_te), accuracy(ref, y_te), accuracy(back, y_te)))
    print("max relative difference: singa vs onnxruntime %.2e, sonnx vs onnxruntime %.2e"
          % (np.abs(ours - ref).max() / scale, np.abs(back - ref).max() / scale))

    # 4. fine-tune the imported network for an epoch with the graph on
    tuned = FineTuned(sonnx.load(args.out))
    tuned.set_optimizer(opt.SGD(lr=args.lr / 10, momentum=0.9))
    tuned.compile([tx], is_train=True, use_graph=True, sequential=False)
    print("fine-tune: mean loss %.4f" % train(tuned, x_tr, y_tr, tx, ty, args))
    tuned.eval()
    tuned_out = tuned.forward(tensor.from_numpy(x_te))[0]
    acc = accuracy(tensor.to_numpy(tuned_out), y_te)
    print("test accuracy after fine-tuning: %.4f" % acc)
    return acc


if __name__ == "__main__":
    run()
