"""Training a character-level recurrent network (SINGA's char-rnn shape): singa graph and eager
beside PyTorch's nn.LSTM / GRU / RNN, eager and torch.compile.

    .venv/bin/python benchmarks/bench_rnn.py                        # LSTM, hidden 256, seq 64
    .venv/bin/python benchmarks/bench_rnn.py --cell gru --hidden 512 --rounds 3
    .venv/bin/python benchmarks/bench_rnn.py --modes graph --profile  # where the step goes
    .venv/bin/python benchmarks/bench_rnn.py --padded    # lengths differ: CudnnRNN + seq_lengths

The model: token embedding (--vocab x --input), a --layers LSTM (GRU, tanh RNN) of --hidden units
over --seq steps of --batch sequences (singa: layer.LSTM / GRU / RNN on a (seq, batch, input)
tensor; PyTorch: nn.LSTM / GRU / RNN), a linear head on every step's output, softmax
cross-entropy, Adam (lr 1e-3), random tokens. Each configuration runs in its own process
(bench_train.py's workers): Mem(MB) is the process's peak resident memory after the imports,
Speed covers --iters steps after --warmup ones. "composed cells" runs each step as autograd's
cell operators (an LSTM's ~14, ~30 backward) instead of the layer's one op each way
(autograd.rnn._LSTMLayer / _GRULayer / _RNNLayer.enabled = False), what the layers did before.
--profile adds the graph's per-operation profile of one step. The workers run in the machine's
default environment.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_gpt import (add_device_arg, machine_line, on_gpu, print_profile,  # noqa: E402
                       singa_device, time_and_report, torch_trainer)
from bench_train import reset_peak, rss_kb, run_one  # noqa: E402

MODES = [("graph", "singa graph, bfs"), ("eager", "singa eager"),
         ("graph-composed", "singa graph, bfs, composed cells"),
         ("eager-composed", "singa eager, composed cells"),
         ("torch", "pytorch eager"), ("torch-compile", "pytorch torch.compile")]


def lengths(cfg):
    """--padded's sequence lengths: uniform in [seq / 2, seq], fixed seed."""
    import numpy as np
    rng = np.random.default_rng(1)
    return rng.integers(cfg["seq"] // 2, cfg["seq"] + 1, cfg["batch"]).astype(np.int32)


def singa_model(cfg, dev):
    from singa import autograd, layer, model, tensor

    rnn_cls = {"lstm": layer.LSTM, "gru": layer.GRU, "rnn": layer.RNN}[cfg["cell"]]
    mode = {"lstm": "lstm", "gru": "gru", "rnn": "tanh"}[cfg["cell"]]

    class CharRNN(model.Model):
        def __init__(self):
            super().__init__()
            self.embed = layer.Embedding(cfg["vocab"], cfg["input"])
            if cfg["padded"]:  # SINGA's padded-batch layer: seq_lengths as a mask
                self.rnn = layer.CudnnRNN(cfg["hidden"], num_layers=cfg["layers"],
                                          rnn_mode=mode, use_mask=True, batch_first=False)
                self.lengths = tensor.from_numpy(lengths(cfg), dev)
            else:
                self.rnn = rnn_cls(cfg["input"], cfg["hidden"], num_layers=cfg["layers"])
            self.head = layer.Linear(cfg["vocab"])
            self.loss = layer.SoftMaxCrossEntropy()

        def forward(self, idx):  # idx (seq, batch)
            emb = self.embed(idx)
            if cfg["padded"]:
                out = self.rnn(emb, seq_lengths=self.lengths)
            else:
                out = self.rnn(emb)[0]  # (seq, batch, hidden)
            return self.head(autograd.reshape(out, (-1, cfg["hidden"])))

        def train_one_batch(self, idx, target):
            logits = self.forward(idx)
            loss = self.loss(logits, autograd.reshape(target, (-1,)))
            self.optimizer(loss)
            return logits, loss

    return CharRNN()


def torch_model(cfg):
    import torch
    from torch import nn

    rnn_cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cfg["cell"]]

    class CharRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(cfg["vocab"], cfg["input"])
            self.rnn = rnn_cls(cfg["input"], cfg["hidden"], num_layers=cfg["layers"])
            self.head = nn.Linear(cfg["hidden"], cfg["vocab"])
            self.lengths = torch.from_numpy(lengths(cfg)).long()

        def forward(self, idx):
            emb = self.embed(idx)
            if cfg["padded"]:  # PyTorch's packed sequences
                pack = nn.utils.rnn.pack_padded_sequence(emb, self.lengths, enforce_sorted=False)
                out = nn.utils.rnn.pad_packed_sequence(self.rnn(pack)[0],
                                                       total_length=cfg["seq"])[0]
            else:
                out = self.rnn(emb)[0]
            return self.head(out.reshape(-1, cfg["hidden"]))

    return CharRNN()


def worker(cfg):
    import numpy as np
    mode = cfg["mode"]
    rng = np.random.default_rng(0)
    shape = (cfg["seq"], cfg["batch"])
    x = rng.integers(0, cfg["vocab"], shape).astype(np.int32)
    y = rng.integers(0, cfg["vocab"], shape).astype(np.int32)
    if mode.startswith("torch"):
        step, base = torch_trainer(mode, lambda: torch_model(cfg), x, y, on_gpu(cfg))
        return time_and_report(cfg, step, base)
    from singa import device, opt, tensor
    from singa.autograd import rnn as ag_rnn
    fused = not mode.endswith("-composed")
    ag_rnn._LSTMLayer.enabled = ag_rnn._GRULayer.enabled = ag_rnn._RNNLayer.enabled = fused
    dev = singa_device(cfg)
    dev.SetRandSeed(0)
    reset_peak()
    base = rss_kb("VmRSS")
    net = singa_model(cfg, dev)
    net.set_optimizer(opt.Adam(lr=1e-3))
    tx, ty = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
    net.compile([tx], is_train=True, use_graph=mode.startswith("graph"))
    time_and_report(dict(cfg, profile=cfg.get("profile") and mode == "graph"),
                    lambda: net(tx, ty)[1], base, dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--modes", nargs="+", default=["graph", "eager", "torch"],
                    choices=[m for m, _ in MODES])
    ap.add_argument("--cell", choices=["lstm", "gru", "rnn"], default="lstm",
                    help="rnn: the plain (tanh) RNN")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--input", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=96)
    ap.add_argument("--padded", action="store_true",
                    help="sequences of random lengths in [seq / 2, seq]: singa's CudnnRNN with "
                         "use_mask and seq_lengths beside PyTorch's packed sequences")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every configuration this many times, interleaved; keep the fastest")
    ap.add_argument("--profile", action="store_true", help="print the graph's per-op profile")
    ap.add_argument("--top", type=int, default=15, help="profile rows to print")
    add_device_arg(ap)
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    print(machine_line(args.device))
    print("\n%s: %d layers, input %d, hidden %d, seq %d%s, batch %d, vocab %d; Adam; %d steps "
          "after %d warm-up\n" % (args.cell.upper(), args.layers, args.input, args.hidden,
                                  args.seq, " (padded: lengths from seq / 2)" if args.padded
                                  else "", args.batch, args.vocab, args.iters, args.warmup))
    keys = ("cell", "layers", "input", "hidden", "seq", "batch", "vocab", "iters", "warmup",
            "timeout", "padded", "device")
    rows = {mode: None for mode in args.modes}
    for _ in range(args.rounds):  # interleaved, so that a slow spell hits every mode
        for mode in args.modes:
            cfg = dict({k: getattr(args, k) for k in keys}, mode=mode, profile=args.profile)
            r = run_one(cfg, dict(os.environ), __file__)
            if r is not None and (rows[mode] is None or r["time"] < rows[mode]["time"]):
                rows[mode] = r
    pt = rows.get("torch")
    print("| Cases | Mem(MB) | Speed(steps/s) | ms/step | Speed / PyTorch | Mem / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode, label in MODES:
        if mode not in rows:
            continue
        r = rows[mode]
        if r is None:
            print("| %s | failed | | | | |" % label)
            continue
        print("| %s | %.0f | %.2f | %.1f | %s | %s |" % (
            label, r["mem_mb"], args.iters / r["time"], 1e3 * r["time"] / args.iters,
            "%.2fx" % (pt["time"] / r["time"]) if pt else "",
            "%.2fx" % (r["mem_mb"] / pt["mem_mb"]) if pt and pt["mem_mb"] > 0 else ""))
    if rows.get("graph") and "profile" in rows["graph"]:
        print_profile(rows["graph"]["profile"], args.top, "singa graph, bfs")


if __name__ == "__main__":
    main()
