"""A DistOpt training worker for tests/python/test_dist.py (SINGA's train_mpi.py style).

    mpirun -np 2 python worker.py --option plain --graph 1 --out /tmp/d   # or without mpirun

Every rank builds the same MLP from the same seed, takes its shard (rows r*B..(r+1)*B) of each
global batch of world_size*B rows, and writes its parameters after every step to
<out>/rank<r>.npz (keys "init/<param>" and "<step>/<param>") plus its losses and the number of
buckets its first step all-reduced.
"""
import argparse
import os
import signal

import numpy as np

from singa import device, layer, model, opt, tensor

FEATURES, HIDDEN, CLASSES = 12, 16, 4


class MLP(model.Model):
    def __init__(self, hidden=HIDDEN):
        super().__init__()
        self.linear1 = layer.Linear(hidden)
        self.relu = layer.ReLU()
        self.linear2 = layer.Linear(CLASSES)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.linear2(self.relu(self.linear1(x)))

    def train_one_batch(self, x, y, dist_option, spars, threshold=2097152):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        if dist_option == "plain":
            self.optimizer.backward_and_update(loss, threshold)
        elif dist_option == "half":
            self.optimizer.backward_and_update_half(loss, threshold)
        elif dist_option == "partialUpdate":
            self.optimizer.backward_and_partial_update(loss)
        elif dist_option == "sparseTopK":
            self.optimizer.backward_and_sparse_update(loss, topK=True, spars=spars)
        elif dist_option == "sparseThreshold":
            self.optimizer.backward_and_sparse_update(loss, topK=False, spars=spars)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--option", default="plain")
    ap.add_argument("--graph", type=int, default=0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=6, help="rows per rank")
    ap.add_argument("--global-batch", type=int, default=0,
                    help="rows per step of the global data (default batch * world size)")
    ap.add_argument("--spars", type=float, default=0.05)
    ap.add_argument("--fail-rank", type=int, default=-1, help="this rank raises at step 1")
    ap.add_argument("--die-rank", type=int, default=-1, help="this rank is killed at step 1")
    ap.add_argument("--mismatch", action="store_true",
                    help="rank 1 has a wider hidden layer (parameter shapes differ)")
    ap.add_argument("--overlap", type=int, default=1, help="DistOpt(overlap=...)")
    ap.add_argument("--comm-overlap", type=int, default=1,
                    help="Communicator.set_overlap (0: buckets reduce at their start)")
    ap.add_argument("--threshold", type=int, default=2097152, help="bucket size (elements)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    sgd = opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9), overlap=bool(a.overlap))
    sgd.communicator.set_overlap(bool(a.comm_overlap))
    rank, world = sgd.global_rank, sgd.world_size
    dev = device.create_cpu_device(7)
    net = MLP(HIDDEN + 1 if a.mismatch and rank == 1 else HIDDEN)
    net.set_optimizer(sgd)
    tx = tensor.Tensor((a.batch, FEATURES), dev)
    ty = tensor.Tensor((a.batch,), dev, tensor.int32)
    net.compile([tx], is_train=True, use_graph=bool(a.graph), sequential=False)
    # the same initial parameters on every rank (SINGA's scripts rely on the same seed)
    rng = np.random.default_rng(0)
    init = {k: (0.3 * rng.standard_normal(v.shape)).astype(np.float32)
            for k, v in sorted(net.get_states().items())}
    net.set_states({k: tensor.from_numpy(v, dev) for k, v in init.items()})

    data = np.random.default_rng(1)
    gb = a.global_batch or a.batch * world
    saved, losses = {"init/" + k: v for k, v in init.items()}, []
    for step in range(a.steps):
        x = data.standard_normal((gb, FEATURES)).astype(np.float32)
        y = (np.abs(x[:, :CLASSES]).argmax(1)).astype(np.int32)  # learnable labels
        lo = rank * a.batch
        tx.copy_from_numpy(x[lo:lo + a.batch])
        ty.copy_from_numpy(y[lo:lo + a.batch])
        if step == 1 and rank == a.die_rank:
            os.kill(os.getpid(), signal.SIGKILL)  # dies without Python's cleanup
        if step == 1 and rank == a.fail_rank:
            raise RuntimeError("worker: rank %d fails on purpose" % rank)
        _, loss = net(tx, ty, a.option, a.spars, a.threshold)
        losses.append(float(tensor.to_numpy(loss).ravel()[0]))
        if step == 0:
            buckets = sgd.last_step_buckets
        assert sgd.communicator.pending_buckets == 0
        for k, v in net.get_states().items():
            saved["%d/%s" % (step, k)] = tensor.to_numpy(v).copy()
    os.makedirs(a.out, exist_ok=True)
    np.savez(os.path.join(a.out, "rank%d.npz" % rank), losses=np.array(losses),
             world=np.array(world),
             buckets=np.array(buckets), **saved)


if __name__ == "__main__":
    main()
