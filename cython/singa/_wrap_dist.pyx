# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_dist: distributed collectives (singa/dist/communicator.h).
#
#     from singa import singa_wrap as sw
#     comm = sw.Communicator(4194304)      # MPI world (world size 1 outside mpirun)
#     comm.synch(t)                        # t <- sum over ranks, in place
#     comm.fusedSynch([a, b], True)        # both through one buffer
#     h = comm.startBucket([a, b])         # overlap: reduces on the communication thread...
#     comm.waitBucket(h, 0.5)              # ...a, b <- 0.5 * sum over ranks
#
# Method names are Apache SINGA's (its SWIG Communicator). Collectives release the GIL.
from libcpp cimport bool
from libcpp.memory cimport unique_ptr
from libcpp.string cimport string
from libcpp.vector cimport vector

from csinga cimport *
from singa._wrap_tensor cimport Tensor

register_error_classes()


cdef extern from "singa/dist/communicator.h" namespace "singa" nogil:
    bool c_BuiltWithDist "singa::BuiltWithDist"()
    cdef cppclass CCommunicator "singa::Communicator":
        CCommunicator(size_t) except +raise_py_error
        int world_size()
        int global_rank()
        int local_rank()
        void Synch(CTensor&, float) except +raise_py_error
        void FusedSynch(vector[CTensor]&, bool, float) except +raise_py_error
        void SynchHalf(CTensor&, float) except +raise_py_error
        void FusedSynchHalf(vector[CTensor]&, bool, float) except +raise_py_error
        void Sparsification(CTensor&, float, bool) except +raise_py_error
        void Sparsification(CTensor&, CTensor&, float, bool) except +raise_py_error
        void FusedSparsification(vector[CTensor]&, float, bool) except +raise_py_error
        void FusedSparsification(vector[CTensor]&, CTensor&, float, bool) except +raise_py_error
        void Wait() except +raise_py_error
        int StartBucket(vector[CTensor]&, bool) except +raise_py_error
        void WaitBucket(int, float) except +raise_py_error
        int pending_buckets()
        void set_overlap(bool)
        bool overlap()
    void c_CommAbort "singa::Communicator::Abort"(int)
    void c_CommFinalize "singa::Communicator::Finalize"()

USE_DIST = c_BuiltWithDist()

cdef extern from *:
    """
    #include <algorithm>
    #include <cstring>
    #include <string>
    #include "singa/dist/communicator.h"
    // The NCCL id crosses into Python as 128 bytes (picklable: multiprocessing hands it to the
    // child processes, as Apache SINGA's NcclIdHolder is used).
    static std::string singa_new_nccl_id() {
      singa::NcclUniqueId id = singa::NewNcclId();
      return std::string(id.bytes.data(), id.bytes.size());
    }
    static singa::Communicator* singa_nccl_communicator(int rank, int world, const std::string& id,
                                                        size_t buff) {
      singa::NcclUniqueId u;
      std::memcpy(u.bytes.data(), id.data(), std::min(id.size(), u.bytes.size()));
      return new singa::Communicator(rank, world, u, buff);
    }
    """
    bool c_BuiltWithNccl "singa::BuiltWithNccl"()
    string singa_new_nccl_id() except +raise_py_error
    CCommunicator* singa_nccl_communicator(int, int, const string&, size_t) except +raise_py_error

USE_NCCL = c_BuiltWithNccl()


cdef vector[CTensor] _tensor_list(str op, tensors) except *:
    cdef vector[CTensor] v
    cdef Tensor t
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError("%s: item %d is a %s, expected a singa_wrap.Tensor"
                            % (op, i, type(x).__name__))
        t = x
        v.push_back(t.c)
    return v


def VecTensor(tensors):
    """Apache SINGA's std::vector<Tensor> wrapper: here a checked list of singa_wrap.Tensor."""
    _tensor_list("VecTensor", tensors)
    return list(tensors)


_mpi_finalize_registered = False


def mpi_abort(int code=1):
    """Stops every rank of the MPI job (MPI_Abort); no-op when MPI is not running."""
    c_CommAbort(code)


cdef class Communicator:
    """All-reduce of float32 CPU tensors across MPI ranks (see singa/dist/communicator.h).

    Communicator(buffSize) joins the MPI world started by mpirun (a plain `python script.py`
    is a world of size 1). SINGA's Communicator(local_rank, world_size, nccl_id, buffSize) is
    the NCCL form: it needs a CUDA build.
    """
    cdef unique_ptr[CCommunicator] c

    def __init__(self, *args):
        global _mpi_finalize_registered
        if len(args) == 4:
            self._init_nccl(*args)
            return
        if len(args) > 1:
            raise TypeError("Communicator(buffSize=4194304): got %d arguments" % len(args))
        buff = args[0] if args else 4194304
        if not isinstance(buff, int) or buff <= 0:
            raise ValueError("Communicator: buffSize must be a positive int, got %r" % (buff,))
        self.c.reset(new CCommunicator(<size_t>buff))
        if not _mpi_finalize_registered:
            # MPI_Finalize at exit: mpirun reports a rank that exits without it as failed
            import atexit
            atexit.register(c_CommFinalize)
            _mpi_finalize_registered = True

    def _init_nccl(self, local_rank, world_size, nccl_id, buffSize):
        if not USE_NCCL:
            raise NotImplementedError(
                "Communicator(local_rank, world_size, nccl_id, buffSize) uses NCCL, which needs "
                "singa built with CUDA; for CPU devices start the script with "
                "`mpirun -np N python script.py` or `python -m singa.launch -n N script.py` "
                "and use Communicator(buffSize) (opt.DistOpt(opt) without nccl_id)")
        if not isinstance(nccl_id, NcclIdHolder):
            raise TypeError("Communicator: nccl_id must be an NcclIdHolder, got %s"
                            % type(nccl_id).__name__)
        cdef string raw = nccl_id.id
        self.c.reset(singa_nccl_communicator(int(local_rank), int(world_size), raw,
                                             <size_t>int(buffSize)))

    @property
    def world_size(self):
        return self.c.get().world_size()

    @property
    def global_rank(self):
        return self.c.get().global_rank()

    @property
    def local_rank(self):
        return self.c.get().local_rank()

    def synch(self, Tensor t not None, float scale=1.0):
        with nogil:
            self.c.get().Synch(t.c, scale)

    def fusedSynch(self, tensors, bool send=True, float scale=1.0):
        cdef vector[CTensor] v = _tensor_list("Communicator.fusedSynch", tensors)
        with nogil:
            self.c.get().FusedSynch(v, send, scale)

    def synchHalf(self, Tensor t not None, float scale=1.0):
        with nogil:
            self.c.get().SynchHalf(t.c, scale)

    def fusedSynchHalf(self, tensors, bool send=True, float scale=1.0):
        cdef vector[CTensor] v = _tensor_list("Communicator.fusedSynchHalf", tensors)
        with nogil:
            self.c.get().FusedSynchHalf(v, send, scale)

    def sparsification(self, Tensor t not None, *args):
        """sparsification(t, spars, topK) or sparsification(t, accumulation, spars, topK)."""
        cdef Tensor acc
        cdef float spars
        cdef bool topk
        if len(args) == 3:
            acc, spars, topk = args
            with nogil:
                self.c.get().Sparsification(t.c, acc.c, spars, topk)
        elif len(args) == 2:
            spars, topk = args
            with nogil:
                self.c.get().Sparsification(t.c, spars, topk)
        else:
            raise TypeError("Communicator.sparsification(t, [accumulation,] spars, topK)")

    def fusedSparsification(self, tensors, *args):
        """fusedSparsification(ts, spars, topK) or (ts, accumulation, spars, topK)."""
        cdef vector[CTensor] v = _tensor_list("Communicator.fusedSparsification", tensors)
        cdef Tensor acc
        cdef float spars
        cdef bool topk
        if len(args) == 3:
            acc, spars, topk = args
            with nogil:
                self.c.get().FusedSparsification(v, acc.c, spars, topk)
        elif len(args) == 2:
            spars, topk = args
            with nogil:
                self.c.get().FusedSparsification(v, spars, topk)
        else:
            raise TypeError("Communicator.fusedSparsification(ts, [accumulation,] spars, topK)")

    def wait(self):
        with nogil:
            self.c.get().Wait()

    def startBucket(self, tensors, bool half=False):
        """Starts the all-reduce of ``tensors`` as one bucket (float16 on the wire when half)
        and returns its handle; the tensors are only read, so they may still be used."""
        cdef vector[CTensor] v = _tensor_list("Communicator.startBucket", tensors)
        cdef int h
        with nogil:
            h = self.c.get().StartBucket(v, half)
        return h

    def waitBucket(self, int handle, float scale=1.0):
        """Waits for bucket ``handle``: its tensors <- scale * sum over ranks."""
        with nogil:
            self.c.get().WaitBucket(handle, scale)

    @property
    def pending_buckets(self):
        """Buckets started whose wait has not been submitted."""
        return self.c.get().pending_buckets()

    def set_overlap(self, bool on):
        """True (default): buckets reduce on the communication thread while computation goes
        on; False: each bucket reduces at its start operation (for comparison)."""
        self.c.get().set_overlap(on)

    @property
    def overlap(self):
        return self.c.get().overlap()


class NcclIdHolder(object):
    """Apache SINGA's holder of an NCCL unique id (for multiprocess training without mpirun).

        holder = singa_wrap.NcclIdHolder()          # in the parent, before starting processes
        # each process: opt.DistOpt(sgd, nccl_id=holder, local_rank=r, world_size=n)

    ``id`` is the id's 128 bytes, so the holder pickles into the child processes. A build
    without CUDA cannot make one: on CPU devices start the script with mpirun or singa.launch,
    one MPI rank per process.
    """

    def __init__(self):
        if not USE_NCCL:
            raise NotImplementedError(
                "NcclIdHolder needs singa built with CUDA and NCCL; multiprocessing training on "
                "CPU devices is not supported: start the script with `mpirun -np N python "
                "script.py` or `python -m singa.launch -n N script.py` and use "
                "opt.DistOpt(opt) without nccl_id")
        self.id = singa_new_nccl_id()
