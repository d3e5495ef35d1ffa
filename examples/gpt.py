"""Trains a character-level GPT (a decoder-only, causal transformer) on a text file, then samples.

    python examples/gpt.py                         # the GPL-3 text shipped in examples/data
    python examples/gpt.py --steps 2000 --d-model 128 --layers 4 --no-graph
    python examples/gpt.py --text my.txt --sample-len 500 --temperature 0.8

The default text, examples/data/gpl-3.0.txt, is the GNU General Public License version 3 as
Debian ships it (/usr/share/common-licenses/GPL-3); its own terms allow everyone to copy and
distribute verbatim copies of it, which is how it is shipped here.

The model: token embedding + learned positional embedding, ``--layers`` pre-norm transformer
blocks (layer.TransformerEncoder of layer.TransformerEncoderLayer with GELU, run with
is_causal=True, i.e. a decoder-only stack), a final LayerNorm and a linear head over the
characters. Each step trains on ``--batch-size`` random windows of ``--seq-len`` characters to
predict every next character (Adam). With ``--graph`` (the default) the first step is recorded
and later steps replay it in C++ with planned memory.

Printed: the unigram entropy of the text (the loss of a model that knows only character
frequencies), the mean loss every ``--log-every`` steps, the steps per second, then a sample.
Written: the loss curve (``--curve``, a PNG; matplotlib). A progress bar shows on a terminal.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

from singa import autograd, device, layer, model, opt, tensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from monitor import progress  # noqa: E402

DEFAULT_TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpl-3.0.txt")


class GPT(model.Model):
    """Logits (batch * seq, vocab) of the next character at every position of idx (batch, seq)."""

    def __init__(self, vocab, seq_len, d_model=64, nhead=4, num_layers=2, dim_feedforward=None,
                 dropout=0.0):
        super().__init__()
        self.tok = layer.Embedding(vocab, d_model)
        self.pos = layer.LearnedPositionalEmbedding(seq_len, d_model, batch_first=True)
        self.blocks = layer.TransformerEncoder(
            layer.TransformerEncoderLayer(d_model, nhead, dim_feedforward or 4 * d_model,
                                          dropout=dropout, activation="gelu", batch_first=True,
                                          norm_first=True), num_layers)
        self.norm = layer.LayerNorm(d_model)
        self.head = layer.Linear(vocab)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, idx):
        h = self.norm(self.blocks(self.pos(self.tok(idx)), is_causal=True))
        n, L, d = h.shape
        return self.head(autograd.reshape(h, (n * L, d)))

    def train_one_batch(self, idx, target):
        logits = self.forward(idx)
        loss = self.loss(logits, autograd.reshape(target, (-1,)))
        self.optimizer(loss)
        return logits, loss


def unigram_entropy(codes):
    """The entropy (nats per character) of the characters' frequencies."""
    p = np.bincount(codes) / len(codes)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def windows(codes, batch, seq_len, rng):
    """``batch`` random windows of ``seq_len`` characters and the characters that follow each."""
    start = rng.integers(0, len(codes) - seq_len - 1, batch)
    x = np.stack([codes[s:s + seq_len] for s in start])
    y = np.stack([codes[s + 1:s + seq_len + 1] for s in start])
    return x.astype(np.int32), y.astype(np.int32)


def sample(net, dev, codes_of, chars, prompt, length, seq_len, temperature, rng):
    """``length`` characters drawn one at a time after ``prompt`` (the model in eval mode)."""
    net.eval()
    out = [codes_of[c] for c in prompt if c in codes_of] or [0]
    for _ in range(length):
        ctx = np.asarray(out[-seq_len:], dtype=np.int32)[None]
        logits = tensor.to_numpy(net(tensor.from_numpy(ctx, dev)))[-1].astype(np.float64)
        p = np.exp((logits - logits.max()) / max(temperature, 1e-6))
        out.append(int(rng.choice(len(p), p=p / p.sum())))
    net.train()
    return "".join(chars[c] for c in out)


def save_curve(path, losses, entropy, title):
    """The loss of every step, its running mean and the unigram entropy, as a PNG."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        print("matplotlib is not installed (pip install matplotlib): no curve written")
        return None
    fig = Figure(figsize=(7, 4), constrained_layout=True)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, losses, color="#9DB4D9", linewidth=0.8, label="each step")
    k = max(1, len(losses) // 20)
    smooth = np.convolve(losses, np.ones(k) / k, mode="valid")
    ax.plot(steps[k - 1:], smooth, color="#4C72B0", label="mean of %d steps" % k)
    ax.axhline(entropy, color="#C44E52", linestyle="--", label="unigram entropy")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per character)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=100)
    return path


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--text", default=DEFAULT_TEXT, help="the UTF-8 text file to learn")
    ap.add_argument("--steps", type=int, default=600, help="training steps")
    ap.add_argument("--batch-size", type=int, default=16, help="windows per step")
    ap.add_argument("--seq-len", type=int, default=64, help="characters per window (context)")
    ap.add_argument("--d-model", type=int, default=64, help="width of the model")
    ap.add_argument("--heads", type=int, default=4, help="attention heads per block")
    ap.add_argument("--layers", type=int, default=2, help="transformer blocks")
    ap.add_argument("--ff", type=int, default=0,
                    help="hidden width of the feed-forward part (0: 4 * d-model)")
    ap.add_argument("--dropout", type=float, default=0.0, help="dropout ratio in the blocks")
    ap.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate")
    ap.add_argument("--graph", action=argparse.BooleanOptionalAction, default=True,
                    help="record the first step and replay it (--no-graph: run eagerly)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the data and the weights")
    ap.add_argument("--log-every", type=int, default=100, help="print the mean loss this often")
    ap.add_argument("--prompt", default="The ", help="the start of the sample")
    ap.add_argument("--sample-len", type=int, default=200,
                    help="characters to sample after training (0: none)")
    ap.add_argument("--temperature", type=float, default=0.8,
                    help="sampling temperature (lower: more conservative)")
    ap.add_argument("--curve", default="gpt-loss-curve.png", metavar="PNG",
                    help="where to write the loss curve ('' for none)")
    return ap.parse_args(argv)


def run(argv=None):
    """Trains and samples as the command line says; returns (unigram entropy, the mean loss of
    the last 10%% of the steps, the sample)."""
    args = parse_args(argv)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    codes_of = {c: i for i, c in enumerate(chars)}
    codes = np.array([codes_of[c] for c in text], dtype=np.int32)
    if len(codes) <= args.seq_len + 1:
        sys.exit("gpt.py: %s has %d characters, fewer than --seq-len + 2" % (args.text,
                                                                               len(codes)))
    entropy = unigram_entropy(codes)
    print("%s: %d characters, %d distinct; unigram entropy %.3f nats per character"
          % (os.path.basename(args.text), len(codes), len(chars), entropy))

    dev = device.get_default_device()
    dev.SetRandSeed(args.seed)
    rng = np.random.default_rng(args.seed)
    net = GPT(len(chars), args.seq_len, args.d_model, args.heads, args.layers, args.ff,
              args.dropout)
    net.set_optimizer(opt.Adam(lr=args.lr))
    tx = tensor.Tensor((args.batch_size, args.seq_len), dev, tensor.int32)
    ty = tensor.Tensor((args.batch_size, args.seq_len), dev, tensor.int32)
    net.compile([tx], is_train=True, use_graph=args.graph, sequential=False)
    n_params = sum(int(np.prod(p.shape)) for p in net.get_params().values())
    print("GPT: %d blocks, d_model %d, %d heads, %d parameters; %s mode"
          % (args.layers, args.d_model, args.heads, n_params, "graph" if args.graph else "eager"))

    losses = []
    start = time.time()
    for step in progress(range(args.steps), total=args.steps, desc="training"):
        x, y = windows(codes, args.batch_size, args.seq_len, rng)
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _, loss = net(tx, ty)
        losses.append(float(tensor.to_numpy(loss).reshape(-1)[0]))
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            print("step %d: mean loss %.4f over the last %d steps"
                  % (step + 1, np.mean(losses[-args.log_every:]),
                     min(args.log_every, len(losses))))
    seconds = time.time() - start
    tail = float(np.mean(losses[-max(1, len(losses) // 10):]))
    print("%d steps in %.1f s (%.2f steps/s); final loss %.4f = %.0f%% of the unigram entropy"
          % (args.steps, seconds, args.steps / max(seconds, 1e-9), tail, 100 * tail / entropy))
    if args.curve and save_curve(args.curve, losses, entropy, "char GPT on %s"
                                 % os.path.basename(args.text)):
        print("loss curve: %s" % args.curve)
    text_out = ""
    if args.sample_len > 0:
        text_out = sample(net, dev, codes_of, chars, args.prompt, args.sample_len, args.seq_len,
                          args.temperature, rng)
        print("sample:\n%s" % text_out)
    return entropy, tail, text_out


if __name__ == "__main__":
    run()
