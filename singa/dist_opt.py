"""Distributed data-parallel training over MPI: Apache SINGA 3.3's opt.DistOpt (re-exported there).

    # started with: mpirun -np 2 python train.py
    from singa import opt
    sgd = opt.DistOpt(opt.SGD(lr=0.05, momentum=0.9))
    print(sgd.global_rank, sgd.world_size)   # outside mpirun: 0 and 1
    x_shard = x[sgd.global_rank::sgd.world_size]
    ...
    sgd(loss)                                # backward, all-reduce the gradients, update

Each rank computes the gradients of its own batch; DistOpt sums them over the ranks
(singa_wrap.Communicator, MPI) and updates with sum / world_size, so with a loss averaged over the
batch N ranks on batch B take the step one process takes on the N*B concatenated batch. Every
collective is an operation of the device: with the graph on it is recorded and replayed.

Differences from SINGA 3.3, on purpose:
  * The collectives run after backward has finished, not while it runs. They reduce the gradient
    tensors in place, and backward may still read a tensor it has yielded (a gradient shared with
    the flow to the inputs: SINGA would then propagate already-reduced values); reducing after
    backward keeps every rank's backward exact. (On the CPU the MPI calls block anyway.)
  * backward_and_partial_update updates from the parameters' local gradients after backward, for
    the same reason (SINGA updates a weight that backward still reads).
  * fused_all_reduce(..., send=False) stages nothing: the tensors are packed when the send=True
    call runs (same result; SINGA stages early to overlap copies on CUDA streams).
A rank that raises an uncaught exception stops the whole job (MPI_Abort from sys.excepthook,
installed by the first DistOpt of a world larger than 1), so the other ranks do not wait forever
in a collective.
"""
import sys

from . import autograd
from . import singa_wrap as singa
from . import tensor

__all__ = ["DistOpt"]

_hook_installed = False


def _install_abort_hook():
    """Prints the traceback, then MPI_Abort: mpirun stops every other rank at once."""
    global _hook_installed
    if _hook_installed:
        return
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            previous(kind, value, tb)
            sys.stderr.write("singa DistOpt: uncaught %s on this rank; aborting the MPI job\n"
                             % kind.__name__)
            sys.stderr.flush()
        finally:
            singa.mpi_abort(1)

    sys.excepthook = hook
    _hook_installed = True


def _default_sgd():
    from .opt import SGD
    return SGD()


class DistOpt(object):
    """Wraps an optimizer for data-parallel training (SINGA 3.3's API; see the module doc).

    Args:
        opt: the wrapped optimizer (default: opt.SGD()).
        nccl_id: an NcclIdHolder (NCCL, CUDA builds only); None: the MPI world of mpirun.
        local_rank, world_size: with nccl_id only.
        buffSize: elements of the fusion buffer (a larger fused list is reduced in rounds).

    Attributes: world_size, local_rank, global_rank.
    """

    def __init__(self, opt=None, nccl_id=None, local_rank=None, world_size=None,
                 buffSize=4194304):
        if not singa.USE_DIST:
            raise NotImplementedError(
                "DistOpt: this singa was built without MPI (singa_wrap.USE_DIST is False); "
                "install openmpi-bin libopenmpi-dev and rebuild")
        self.opt = _default_sgd() if opt is None else opt
        if nccl_id is None:
            self.communicator = singa.Communicator(buffSize)
        else:
            self.communicator = singa.Communicator(local_rank, world_size, nccl_id, buffSize)
        self.world_size = self.communicator.world_size
        self.local_rank = self.communicator.local_rank
        self.global_rank = self.communicator.global_rank
        if self.world_size > 1:
            _install_abort_hook()

    def __call__(self, loss):
        self.backward_and_update(loss)

    def update(self, param, grad):
        """Updates ``param`` from the all-reduced (summed) ``grad``: grad / world_size."""
        grad /= self.world_size
        self.opt.update(param, grad)

    # ---- collectives (in place, sums over the ranks) -------------------------------------------
    def all_reduce(self, tensor):
        self.communicator.synch(tensor)

    def fused_all_reduce(self, tensor, send=True):
        self.communicator.fusedSynch(singa.VecTensor(tensor), send)

    def all_reduce_half(self, tensor):
        self.communicator.synchHalf(tensor)

    def fused_all_reduce_half(self, tensor, send=True):
        self.communicator.fusedSynchHalf(singa.VecTensor(tensor), send)

    def sparsification(self, tensor, accumulation, spars, topK):
        """Sparse all-reduce: |g| >= spars (topK False) or the spars fraction of largest |g|;
        ``accumulation`` (or None) keeps what was not sent, for the next step."""
        if accumulation is None:
            self.communicator.sparsification(tensor, spars, topK)
        else:
            self.communicator.sparsification(tensor, accumulation, spars, topK)

    def fused_sparsification(self, tensor, accumulation, spars, topK):
        tensor = singa.VecTensor(tensor)
        if accumulation is None:
            self.communicator.fusedSparsification(tensor, spars, topK)
        else:
            self.communicator.fusedSparsification(tensor, accumulation, spars, topK)

    def wait(self):
        self.communicator.wait()

    # ---- training steps ------------------------------------------------------------------------
    @staticmethod
    def _buckets(items, size, threshold):
        """SINGA's fusion: an item larger than threshold alone (as ("one", [item])); smaller ones
        together until their sum exceeds threshold (as ("fused", [items]))."""
        out, group, acc = [], [], 0
        for it in items:
            n = size(it)
            if n > threshold:
                out.append(("one", [it]))
                continue
            group.append(it)
            acc += n
            if acc > threshold:
                out.append(("fused", group))
                group, acc = [], 0
        if group:
            out.append(("fused", group))
        return out

    def _reduce_and_update(self, plist, threshold, one, fused):
        for kind, group in self._buckets(plist, lambda pg: pg[1].size(), threshold):
            if kind == "one":
                one(group[0][1].data)
            else:
                fused([g.data for _, g in group])
        self.wait()
        for p, g in plist:
            self.update(p, g)
        self.opt.step()

    def backward_and_update(self, loss, threshold=2097152):
        """Backward, all-reduce the gradients (those <= threshold elements fused), update."""
        self._reduce_and_update(list(autograd.backward(loss)), threshold, self.all_reduce,
                                self.fused_all_reduce)

    def backward_and_update_half(self, loss, threshold=2097152, clipping=False, clip_Value=100):
        """As backward_and_update, the gradients travelling as float16; optionally clipped to
        [-clip_Value, clip_Value] first."""
        plist = list(autograd.backward(loss))
        if clipping:
            plist = [(p, autograd.clip(g, -clip_Value, clip_Value)) for p, g in plist]
        self._reduce_and_update(plist, threshold, self.all_reduce_half,
                                self.fused_all_reduce_half)

    def backward_and_partial_update(self, loss, threshold=2097152):
        """Local update of every parameter, then one partition of the parameters (a bucket, in
        turn from step to step) is averaged over the ranks."""
        if not hasattr(self, "partial"):
            self.partial = 0
        self.partial += 1
        plist = list(autograd.backward(loss))
        for p, g in plist:
            self.opt.update(p, g)
        buckets = self._buckets([p for p, _ in plist], lambda p: p.size(), threshold)
        reduced = []
        if self.partial <= len(buckets):
            kind, group = buckets[self.partial - 1]
            if kind == "one":
                self.all_reduce(group[0].data)
            else:
                self.fused_all_reduce([p.data for p in group])
            reduced = group
        self.wait()
        for r in reduced:
            r /= self.world_size
        if self.partial >= len(buckets):
            self.partial = 0
        self.opt.step()

    def backward_and_sparse_update(self, loss, threshold=2097152, spars=0.05, topK=False,
                                   corr=True):
        """Backward, sparse all-reduce of the gradients (see sparsification), update. With
        ``corr`` each bucket keeps a local accumulation of what it did not send."""
        if corr and not hasattr(self, "sparsInit"):
            self.gradAccumulation = []
            self.sparsInit = False
        plist = list(autograd.backward(loss))
        for k, (kind, group) in enumerate(
                self._buckets(plist, lambda pg: pg[1].size(), threshold)):
            grads = [g.data for _, g in group]
            acc = None
            if corr:
                if not self.sparsInit:
                    p = group[0][0]
                    flag = p.device.graph_enabled()
                    p.device.EnableGraph(False)
                    t = tensor.Tensor((sum(g.size() for _, g in group),), p.device, p.dtype)
                    t.set_value(0.0)
                    self.gradAccumulation.append(t)
                    p.device.EnableGraph(flag)
                acc = self.gradAccumulation[k].data
            if kind == "one":
                self.sparsification(grads[0], acc, spars, topK)
            else:
                self.fused_sparsification(grads, acc, spars, topK)
        self.wait()
        for p, g in plist:
            self.update(p, g)
        if corr:
            self.sparsInit = True
        self.opt.step()
