"""Data-parallel training over MPI with opt.DistOpt (Apache SINGA's train_mpi.py, on CPUs).

    mpirun -np 2 --oversubscribe python examples/dist/train_mpi.py mlp --dist-option plain
    mpirun -np 2 python examples/dist/train_mpi.py cnn --graph --dist-option sparseTopK --spars 0.05
    python -m singa.launch -n 2 examples/dist/train_mpi.py mlp --no-overlap   # no mpirun typed
    python examples/dist/train_mpi.py mlp          # no mpirun: one process, world size 1

Each rank trains on its shard of the training set (rank r takes every world_size-th example);
DistOpt all-reduces the gradients, so the replicas stay identical. --dist-option picks SINGA's
variants: plain, half (float16 transfer), partialUpdate, sparseTopK, sparseThreshold. plain and
half overlap the all-reduce with backward unless --no-overlap (same numbers).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import datasets  # noqa: E402
import models  # noqa: E402
from monitor import History  # noqa: E402
from singa import device, opt, tensor  # noqa: E402


class DistStep(models.Classifier):
    """SINGA's train_one_batch(x, y, dist_option, spars) for the example models (mixed in
    before the model's class: MLP(DistStep, models.MLP))."""

    def train_one_batch(self, x, y, dist_option="plain", spars=None):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        if dist_option == "plain":
            self.optimizer(loss)
        elif dist_option == "half":
            self.optimizer.backward_and_update_half(loss)
        elif dist_option == "partialUpdate":
            self.optimizer.backward_and_partial_update(loss)
        elif dist_option == "sparseTopK":
            self.optimizer.backward_and_sparse_update(loss, topK=True, spars=spars)
        elif dist_option == "sparseThreshold":
            self.optimizer.backward_and_sparse_update(loss, topK=False, spars=spars)
        else:
            raise ValueError("train_one_batch: unknown dist_option %r" % (dist_option,))
        return out, loss


class MLP(DistStep, models.MLP):
    pass


class CNN(DistStep, models.CNN):
    pass


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=["mlp", "cnn"])
    ap.add_argument("--dist-option", default="plain",
                    choices=["plain", "half", "partialUpdate", "sparseTopK", "sparseThreshold"])
    ap.add_argument("--spars", type=float, default=0.05)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32, help="per process")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--no-overlap", action="store_true",
                    help="all-reduce after backward instead of while it runs")
    ap.add_argument("--max-steps", type=int, default=0, help="stop each epoch early (0: no)")
    ap.add_argument("--curve", default=None, metavar="PNG",
                    help="rank 0 writes the loss curve there at the end (default: "
                    "MODEL-dist-curve.png; '' for none)")
    a = ap.parse_args(argv)

    sgd = opt.DistOpt(opt.SGD(lr=a.lr, momentum=0.9, weight_decay=1e-5),
                      overlap=not a.no_overlap)
    rank, world = sgd.global_rank, sgd.world_size
    (x, y), (xt, yt) = datasets.load_digits_28()
    if a.model == "mlp":
        x, xt = x.reshape(len(x), -1), xt.reshape(len(xt), -1)
    x, y = x[rank::world], y[rank::world]  # this rank's shard

    dev = device.create_cpu_device(0)
    dev.SetRandSeed(0)  # the same initial parameters on every rank
    net = MLP(data_size=x.shape[1]) if a.model == "mlp" else CNN()
    net.set_optimizer(sgd)
    tx = tensor.Tensor((a.batch_size,) + x.shape[1:], dev)
    ty = tensor.Tensor((a.batch_size,), dev, tensor.int32)
    net.compile([tx], is_train=True, use_graph=a.graph, sequential=False)

    rng = np.random.default_rng(rank)
    hist = History()
    for epoch in range(a.epochs):
        t0 = time.time()
        order = rng.permutation(len(x))
        steps = len(x) // a.batch_size
        if a.max_steps:
            steps = min(steps, a.max_steps)
        for s in range(steps):
            idx = order[s * a.batch_size:(s + 1) * a.batch_size]
            tx.copy_from_numpy(x[idx])
            ty.copy_from_numpy(y[idx])
            _, loss = net(tx, ty, a.dist_option, a.spars)
            hist.step(tensor.to_numpy(loss).ravel()[0])
        mean_loss = hist.epoch(time.time() - t0)
        if rank == 0:
            print("epoch %d: loss %.4f, %.1f s, world size %d"
                  % (epoch, mean_loss, hist.seconds[-1], world), flush=True)
    curve = "%s-dist-curve.png" % a.model if a.curve is None else a.curve
    if rank == 0 and curve and hist.save_curve(curve, title="%s, %d processes" % (a.model, world)):
        print("loss curve: %s" % curve)


if __name__ == "__main__":
    main()
