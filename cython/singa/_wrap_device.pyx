# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
"""singa._wrap_device: the Device class, device-level functions, dtype and device-kind numbers.

    from singa import singa_wrap as sw      # re-exports every name below
    dev = sw.get_default_device()
    dev.EnableGraph(True); ...; dev.RunGraph()

The root of the extension modules (cython/singa/): the others cimport Device and wrap_device
from _wrap_device.pxd.
"""
from libc.stdint cimport uint64_t
from libcpp cimport bool
from libcpp.memory cimport shared_ptr, make_shared
from libcpp.utility cimport pair
from libcpp.vector cimport vector

from csinga cimport *

from singa._wrap_errors import ArgumentError

register_error_classes()

# Data types and device kinds (the numbers of Apache SINGA's core.proto).
# (The C enums of the same names are cimported, so the Python attributes go through globals().)
for _name, _value in (("kFloat32", <int>kFloat32), ("kFloat16", <int>kFloat16), ("kInt", <int>kInt),
                      ("kChar", <int>kChar), ("kDouble", <int>kDouble), ("kUChar", <int>kUChar),
                      ("kBFloat16", <int>kBFloat16),
                      ("kCpp", <int>kCpp), ("kCuda", <int>kCuda), ("kOpencl", <int>kOpencl)):
    globals()[_name] = _value
del _name, _value

# Build flags, as Apache SINGA exposes them (USE_DIST: _wrap_dist).
USE_PYTHON3 = True
USE_OPENCL = False


cdef class Device:
    """A device: where tensors live and operations run (wraps std::shared_ptr<singa::Device>).

    Each wrapper counts itself as a handle of the C++ device (Device::AddHandle): when the last
    wrapper goes, a recorded graph is reset, so a dropped device does not keep its graph's
    tensors (and itself) alive. RunGraph, ResetGraph and Sync release the GIL.
    """
    def __dealloc__(self):
        if self.c.get() != NULL:
            self.c.get().RemoveHandle()
            self.c.reset()

    def id(self):
        return self.c.get().id()

    def lang(self):
        return <int>self.c.get().lang()

    def is_host(self):
        return self.c.get().is_host()

    def SetRandSeed(self, seed):
        if seed < 0:
            raise ValueError("SetRandSeed: the seed must be >= 0, got %r" % (seed,))
        self.c.get().SetRandSeed(<uint64_t>seed)

    def Sync(self):
        with nogil:
            self.c.get().Sync()

    def mem_stats(self):
        """Bytes in use, peak in use, reserved from the system, and counters, as a dict."""
        cdef PoolStats s = self.c.get().mem_stats()
        return dict(in_use=s.in_use, peak_in_use=s.peak_in_use, reserved=s.reserved,
                    peak_reserved=s.peak_reserved, num_mallocs=s.num_mallocs,
                    num_chunks=s.num_chunks)

    def ResetPeak(self):
        self.c.get().ResetPeak()

    # ---- the computational graph (Apache SINGA's names) ----
    def EnableGraph(self, bool enable):
        """Buffering on: operations are recorded into the graph instead of running."""
        self.c.get().EnableGraph(enable)

    def graph_enabled(self):
        return self.c.get().graph_enabled()

    def RunGraph(self, bool sequential=False):
        """Runs the recorded operations (BFS order, or submission order when sequential), without
        the GIL: other Python threads run during the step."""
        with nogil:
            self.c.get().RunGraph(sequential)

    def ResetGraph(self):
        with nogil:
            self.c.get().ResetGraph()

    def graph_version(self):
        """Changes whenever the recorded operations change (an operation recorded, a reset)."""
        return self.c.get().graph_version()

    def SetVerbosity(self, int verbosity):
        self.c.get().SetVerbosity(verbosity)

    def SetSkipIteration(self, int n):
        self.c.get().SetSkipIteration(n)

    def PrintTimeProfiling(self):
        """Prints the per-operation profile, or a one-line hint when profiling is off."""
        self.c.get().PrintTimeProfiling()

    def profiling(self):
        """True when the graph times each operation (SetVerbosity(1) or more)."""
        return self.c.get().graph().profiling()

    def GetTimeProfiling(self):
        return self.c.get().graph().TimeProfile(self.c.get().skip_iteration()).decode()

    def SetGraphPlanning(self, bool planned):
        """Static memory planning (True, default) or dynamic recycling through the pool."""
        self.c.get().graph().SetPlanning(planned)

    def SetGraphFusion(self, bool on):
        """Epilogue fusion (True, default; with planned memory): a convolution or batch norm
        absorbs the inference batch norm, residual add and ReLU that follow it when nothing else
        reads their intermediates (graph.h). Takes effect when the graph is next built."""
        self.c.get().graph().SetFusion(on)

    def graph_settings(self):
        """{"planning", "fusion", "layouts"}: the graph's switches as the Set... calls left them
        (a test or tool that changes them can put them back)."""
        return {"planning": self.c.get().graph().planning(),
                "fusion": self.c.get().graph().fusion(),
                "layouts": self.c.get().graph().layouts()}

    def SetGraphLayouts(self, bool on):
        """Blocked layouts (True, default; with fusion on and planned memory, budget or not):
        activations whose every reader and writer has a oneDNN kernel for it stay in oneDNN's
        channel-blocked layout between operations instead of being reordered to NCHW and back
        at each convolution (graph.h). Takes effect when the graph is next built."""
        self.c.get().graph().SetLayouts(on)

    def graph_layout_counts(self):
        """What the last graph build kept in a non-plain layout: {"blocks": count, "bytes": their
        size, "channels_last": how many of those blocks are NHWC (the others nChw16c)}."""
        c = self.c.get().graph().layout_counts()
        return {"blocks": c.blocks, "bytes": c.bytes, "channels_last": c.channels_last}

    def SetMemoryBudget(self, budget, strategy="greedy", cost="measured"):
        """A budget for the graph's memory (its persistent blocks plus the planned arena), met by
        recomputing activations in backward instead of keeping them: an int is bytes, a float
        in (0, 1] a fraction of the unconstrained plan, None (or 0) removes it. Read when the
        graph is next built (the next step replays with it); a budget no plan reaches raises
        OutOfMemoryError there, stating the least budget that works. ``strategy``: "greedy"
        (default, the planner of singa/graph/remat.h), or for comparison "sqrt" (Chen et al.'s
        sqrt(N) checkpoints: one plan whatever the budget) and "greedy-unrefined" (the greedy
        without early reruns, as it was before them). ``cost``: what the greedy
        minimises, "measured" (default: the first steps run the estimate's plan and time every
        operation, and the sixth step replans with those times) or "estimate" (a roofline over
        bytes and flops, deterministic); graph.h's "Cost model"."""
        strategies = {"greedy": 0, "sqrt": 1, "greedy-unrefined": 2}
        costs = {"measured": 0, "estimate": 1}
        if strategy not in strategies:
            raise ArgumentError("SetMemoryBudget: strategy must be 'greedy', 'sqrt' or "
                                "'greedy-unrefined', got %r" % (strategy,))
        if cost not in costs:
            raise ArgumentError("SetMemoryBudget: cost must be 'measured' or 'estimate', got %r"
                                % (cost,))
        cdef CGraph* g = self.c.get().graph()
        cdef int sid = strategies[strategy]
        cdef int cid = costs[cost]
        if budget is None or (not isinstance(budget, type(True)) and budget == 0):
            g.SetMemoryBudget(0)
        elif isinstance(budget, type(True)) or not isinstance(budget, (int, float)):
            raise ArgumentError("SetMemoryBudget: expected bytes (int), a fraction in (0, 1] "
                                "(float) or None, got %r" % (budget,))
        elif isinstance(budget, int):
            if budget < 0:
                raise ArgumentError("SetMemoryBudget: a budget in bytes must be positive, got %d"
                                    % budget)
            g.SetMemoryBudget(<size_t>budget)
        else:
            if not 0.0 < budget <= 1.0:
                raise ArgumentError("SetMemoryBudget: a fraction of the unconstrained plan must "
                                    "lie in (0, 1], got %r (give larger budgets in bytes, as an "
                                    "int)" % (budget,))
            g.SetMemoryBudgetFraction(budget)
        g.SetRecomputeStrategy(<RematStrategy>sid)
        g.SetCostModel(<GraphCostModel>cid)

    def GetMemoryBudget(self):
        """The graph's memory budget as set: bytes (int), a fraction (float) or None."""
        cdef CGraph* g = self.c.get().graph()
        if g.memory_budget() > 0:
            return g.memory_budget()
        if g.memory_budget_fraction() > 0:
            return g.memory_budget_fraction()
        return None

    def SetCaptureEnabled(self, bool on):
        """Replays launched as one captured CUDA Graph (True, default, on a GPU device whose graph
        allows it); False enqueues the operations one by one. No effect on the host."""
        self.c.get().SetCaptureEnabled(on)

    def capture_enabled(self):
        return self.c.get().capture_enabled()

    def SetCheckFinite(self, bool on):
        """Opt-in NaN/Inf detection (PyTorch's detect_anomaly): after each operation this device
        runs, eager or in a graph replay, its float outputs are scanned and the first operation
        producing NaN or Inf raises NonFiniteError (a FloatingPointError) naming it, the output
        shape and the counts. A NaN already in an input is reported at the first operation that
        reads it. Off by default (costs one branch per operation); on a GPU each check copies
        the output to the host and replays are not captured as a CUDA Graph."""
        self.c.get().SetCheckFinite(on)

    def check_finite(self):
        return self.c.get().check_finite()

    def graph_captured(self):
        """Whether the graph's replays currently launch a captured CUDA Graph."""
        return self.c.get().graph().captured()

    def graph_num_fused(self):
        """How many operations the last graph build fused into their producers (or, a ReLU
        backward, into its consumer)."""
        return self.c.get().graph().num_fused()

    def graph_fusion_counts(self):
        """The operations the last graph build fused, by kind: {"batch_norm", "add", "relu"}
        into a producer's epilogue, "relu_backward" read through by the batch-norm backward."""
        c = self.c.get().graph().fusion_counts()
        return {"batch_norm": c.batch_norm, "add": c.add, "relu": c.relu,
                "relu_backward": c.relu_backward}

    def graph_num_nodes(self):
        return self.c.get().graph().num_nodes()

    def graph_dot(self):
        """The graph as Graphviz source (operations as nodes, blocks as edges)."""
        return self.c.get().graph().ToDot().decode()

    def graph_blocks(self):
        """Every block the last built graph analysed, as dicts ordered by first use: id (the
        block_id of tensors using it), name, size (bytes), kind ('input', 'intermediate',
        'end'), recyclable, first and last (positions in the execution order), offset (in the
        planned arena; meaningful for recyclable blocks when planning is on) and recomputed
        (under a memory budget a dropped block has a second entry, recomputed=True, for its
        range after the recomputation)."""
        cdef vector[CGraphBlockInfo] infos = self.c.get().graph().BlockList()
        kinds = ("input", "intermediate", "end")
        out = []
        for info in infos:
            out.append(dict(id=<size_t>info.block, name=info.block.name().decode(),
                            size=info.block.size(), kind=kinds[info.kind],
                            recyclable=info.recyclable, first=info.first, last=info.last,
                            offset=info.offset, recomputed=info.recomputed))
        return out

    def graph_op_names(self):
        """The operations' names in execution order (empty before the first RunGraph); a
        recomputation under a memory budget reads "NAME (recomputed)"."""
        cdef CGraph* g = self.c.get().graph()
        return [g.OpNameAt(i).decode() + (" (recomputed)" if g.IsRecomputeAt(i) else "")
                for i in range(g.order().size())]

    def num_handles(self):
        """Python wrappers counted on the C++ device (see the class comment)."""
        return self.c.get().handles()

    def graph_memory_plan(self):
        cdef GraphMemoryPlan p = self.c.get().graph().memory_plan()
        return dict(arena_bytes=p.arena_bytes, lower_bound_bytes=p.lower_bound_bytes,
                    recyclable_bytes=p.recyclable_bytes, persistent_bytes=p.persistent_bytes,
                    num_recyclable=p.num_recyclable, budget_bytes=p.budget_bytes,
                    unconstrained_arena_bytes=p.unconstrained_arena_bytes,
                    num_recomputed=p.num_recomputed, recompute_cost=p.recompute_cost,
                    cost_measured=p.cost_measured)

    # ---- the kernel backend (singa/core/kernel.h): "cpu" (reference), "dnnl", "cuda" ----
    def backend(self):
        """The kernel family this device computes with: "dnnl" (oneDNN) or "cpu" (reference)."""
        return singa_device_backend(self.c.get()).decode()

    def set_backend(self, str name):
        """Switches the kernels, e.g. set_backend("cpu") to compare with the reference ones."""
        singa_device_set_backend(self.c.get(), backend_id(name))

    def supports_backend(self, str name):
        return singa_device_supports_backend(self.c.get(), backend_id(name))

    def __eq__(self, other):
        return isinstance(other, Device) and (<Device>other).c.get() == self.c.get()

    def __hash__(self):
        return <size_t>self.c.get()

    def __repr__(self):
        return "<singa Device %s:%d>" % ("cpu" if self.is_host() else "cuda", self.id())


cdef extern from *:
    """
    #include "singa/core/device.h"
    static const char* singa_device_backend(singa::Device* d) {
      return singa::BackendName(d->backend());
    }
    static void singa_device_set_backend(singa::Device* d, int b) {
      d->set_backend(static_cast<singa::Backend>(b));
    }
    static bool singa_device_supports_backend(singa::Device* d, int b) {
      return d->SupportsBackend(static_cast<singa::Backend>(b));
    }
    """
    const char* singa_device_backend(CDevice* d)
    void singa_device_set_backend(CDevice* d, int b) except +raise_py_error
    bint singa_device_supports_backend(CDevice* d, int b)


_BACKENDS = ("cpu", "dnnl", "cuda")  # singa::Backend's order and BackendName's spelling


cdef int backend_id(str name) except -1:
    if name not in _BACKENDS:
        raise ValueError("set_backend: unknown backend %r, expected one of %s"
                         % (name, ", ".join(_BACKENDS)))
    return _BACKENDS.index(name)


def built_with_dnnl():
    """Whether libsinga has the oneDNN backend (the host device can compute with it)."""
    return singa_device_supports_backend(defaultDevice().get(), 1)


cdef Device wrap_device(shared_ptr[CDevice] d):
    """A Python handle of d (counted on the C++ device, see the class comment)."""
    cdef Device dev = Device.__new__(Device)
    dev.c = d
    if d.get() != NULL:
        d.get().AddHandle()
    return dev


def cpu_features():
    """The instruction sets of this CPU (cpuid, and the OS's xgetbv for AVX/AMX state) as a
    frozenset of names spelt as /proc/cpuinfo does: 'avx2', 'avx512f', 'avx512_bf16',
    'amx_bf16', 'amx_tile'... Names listed in the environment variable SINGA_CPU_FEATURES_MASK
    (comma-separated, read at the first call) are left out, to test what a smaller CPU does."""
    return frozenset(s.decode() for s in CpuFeatures())


def get_default_device():
    """The process-wide host device."""
    return wrap_device(defaultDevice())


def create_cpu_device(int id=-1):
    """A new host device with its own memory pool and random generator."""
    cdef shared_ptr[CDevice] d = <shared_ptr[CDevice]>make_shared[CppCPU](id)
    return wrap_device(d)


def set_num_threads(int n):
    """Threads used by OpenMP kernels and OpenBLAS; 0 restores the default."""
    SetNumThreads(n)


def get_num_threads():
    return GetNumThreads()


# ---- CUDA GPUs (singa/core/cuda_gpu.h; a build without CUDA reports none) ----
USE_CUDA = BuiltWithCuda()


def get_num_gpus():
    """The number of usable CUDA GPUs (0 without CUDA, a driver or a GPU)."""
    return GetNumGPUs()


def get_gpu_ids():
    return list(GetGPUIDs())


def get_gpu_mem_size(int id):
    """(free, total) bytes of GPU ``id``."""
    cdef pair[size_t, size_t] p = GetGPUMemSize(id)
    return (p.first, p.second)


def device_query(int id, bool verbose=False):
    return DeviceQuery(id, verbose).decode()


def create_cuda_gpu_on(int id):
    """A new CUDA GPU device on GPU ``id`` (DeviceError when it cannot be used)."""
    cdef shared_ptr[CDevice] d
    with nogil:
        d = CreateCudaGPUOn(id)
    return wrap_device(d)


cdef shared_ptr[CDevice] as_device(dev) except *:
    if dev is None:
        return defaultDevice()
    if not isinstance(dev, Device):
        raise TypeError("expected a singa_wrap.Device, got %s" % type(dev).__name__)
    return (<Device>dev).c


USE_DNNL = built_with_dnnl()
