"""Trains a transformer encoder to classify padded token sequences (synthetic, offline).

    python examples/transformer_classifier.py
    python examples/transformer_classifier.py --layers 1 --epochs 3 --no-graph

The task: each sequence has 6 to --max-len tokens, padded to --max-len; its tokens are noise
tokens and 4 marker tokens, one of which occurs more often than each other marker; the class is
that marker (4 classes, 25% by chance). Counting needs every position, and padding must be
ignored: token embedding + sinusoidal positions, a layer.TransformerEncoder whose attention
gets the padding as ``src_key_padding_mask`` (an int32 Tensor, 1 = padding), a mean over the
real positions, a linear head. Prints the loss and the test accuracy per epoch and writes the
curve (``--curve``).
"""
import argparse
import os
import sys
import time

import numpy as np

from singa import autograd, device, layer, model, opt, tensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from monitor import History, progress  # noqa: E402

PAD, MARKERS, NOISE = 0, (1, 2, 3, 4), 8  # token ids: 0 pad, 1-4 markers, 5.. noise
VOCAB = 1 + len(MARKERS) + NOISE


def make_data(n, max_len, rng):
    """(tokens int32 (n, max_len), padding int32 (n, max_len), labels int32 (n,))."""
    tokens = np.zeros((n, max_len), np.int32)
    labels = rng.integers(0, len(MARKERS), n).astype(np.int32)
    for i in range(n):
        length = rng.integers(6, max_len + 1)
        counts = rng.integers(0, 3, len(MARKERS))
        counts[labels[i]] = counts.max() + 1 + rng.integers(0, 2)
        seq = np.concatenate([np.full(c, m) for c, m in zip(counts, MARKERS)])[:length]
        seq = np.concatenate([seq, rng.integers(5, VOCAB, length - len(seq))])
        tokens[i, :length] = rng.permutation(seq)
        labels[i] = MARKERS.index(np.bincount(seq, minlength=VOCAB)[1:5].argmax() + 1)
    return tokens, (tokens == PAD).astype(np.int32), labels


class EncoderClassifier(model.Model):
    def __init__(self, num_classes, max_len, d_model=32, nhead=4, num_layers=2, dropout=0.1):
        super().__init__()
        self.tok = layer.Embedding(VOCAB, d_model)
        self.pos = layer.SinusoidalPositionalEmbedding(d_model, max_len, batch_first=True)
        self.encoder = layer.TransformerEncoder(
            layer.TransformerEncoderLayer(d_model, nhead, 2 * d_model, dropout=dropout,
                                          batch_first=True), num_layers)
        self.head = layer.Linear(num_classes)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, tokens, padding):
        h = self.encoder(self.pos(self.tok(tokens)), src_key_padding_mask=padding)
        n, L, d = h.shape
        real = autograd.reshape(autograd.sub(1.0, autograd.cast(padding, tensor.float32)),
                                (n, L, 1))
        pooled = autograd.div(autograd.reduce_sum(autograd.mul(h, real), [1], 0),
                              autograd.reduce_sum(real, [1], 0))
        return self.head(pooled)

    def train_one_batch(self, tokens, padding, y):
        out = self.forward(tokens, padding)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


def accuracy(net, data, tx, tp, bs):
    net.eval()
    tokens, padding, labels = data
    correct = 0
    for i in range(0, len(labels) - bs + 1, bs):
        tx.copy_from_numpy(tokens[i:i + bs])
        tp.copy_from_numpy(padding[i:i + bs])
        correct += int((tensor.to_numpy(net(tx, tp)).argmax(1) == labels[i:i + bs]).sum())
    net.train()
    return correct / (len(labels) // bs * bs)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--train", type=int, default=2048, help="training sequences")
    ap.add_argument("--test", type=int, default=512, help="test sequences")
    ap.add_argument("--max-len", type=int, default=16, help="padded sequence length")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate")
    ap.add_argument("--graph", action=argparse.BooleanOptionalAction, default=True,
                    help="record the first step and replay it (--no-graph: run eagerly)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--curve", default="transformer-classifier-curve.png", metavar="PNG",
                    help="where to write the loss/accuracy curve ('' for none)")
    return ap.parse_args(argv)


def run(argv=None):
    """Trains and evaluates; returns the final test accuracy."""
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    train, test = make_data(args.train, args.max_len, rng), make_data(args.test, args.max_len, rng)
    dev = device.get_default_device()
    dev.SetRandSeed(args.seed)
    net = EncoderClassifier(len(MARKERS), args.max_len, args.d_model, args.heads, args.layers)
    net.set_optimizer(opt.Adam(lr=args.lr))
    bs = args.batch_size
    tx = tensor.Tensor((bs, args.max_len), dev, tensor.int32)
    tp = tensor.Tensor((bs, args.max_len), dev, tensor.int32)
    ty = tensor.Tensor((bs,), dev, tensor.int32)
    net.compile([tx, tp], is_train=True, use_graph=args.graph, sequential=False)
    print("%d training and %d test sequences of up to %d tokens, %d classes (chance %.2f)"
          % (args.train, args.test, args.max_len, len(MARKERS), 1 / len(MARKERS)))
    hist = History()
    steps = args.train // bs
    for epoch in range(args.epochs):
        start = time.time()
        order = rng.permutation(args.train)
        for s in progress(range(steps), total=steps, desc="epoch %d" % (epoch + 1)):
            idx = order[s * bs:(s + 1) * bs]
            tx.copy_from_numpy(train[0][idx])
            tp.copy_from_numpy(train[1][idx])
            ty.copy_from_numpy(train[2][idx])
            _, loss = net(tx, tp, ty)
            hist.step(tensor.to_numpy(loss).reshape(-1)[0])
        seconds = time.time() - start
        acc = accuracy(net, test, tx, tp, bs)
        print("epoch %d: mean loss %.4f, test accuracy %.4f, %.1f s"
              % (epoch + 1, hist.epoch(seconds, acc), acc, seconds))
    if args.curve and hist.save_curve(args.curve, title="transformer encoder classifier"):
        print("loss and accuracy curve: %s" % args.curve)
    return acc


if __name__ == "__main__":
    run()
