# csinga.pxd: the thin layer, C++ declarations of libsinga for Cython (no Python objects here,
# but for the one helper every extension module calls at import: register_error_classes).
#
#   from csinga cimport CTensor, CDevice, c_Mult
#
# Every call that can fail is declared `except +raise_py_error`, which turns singa::Error and its
# subclasses into the matching Python exception (cython/error_translate.h). Elementwise operators
# are declared by the generated elementwise_ops.pxi instead (from cpp/include/singa/ops/elementwise.def,
# included by singa/_wrap_elementwise.pyx).
#
# The GIL: the extern blocks of the core classes and the ops are `nogil`, and the wrappers call
# every call that runs kernels or copies inside `with nogil:`, so other Python threads run
# meanwhile. Cython re-acquires the GIL before calling raise_py_error, so exceptions arrive as
# before. What runs without the GIL is thread-safe: see "Threads" in singa/core/device.h.
from libc.stdint cimport uint64_t, int32_t
from libcpp cimport bool
from libcpp.memory cimport shared_ptr
from libcpp.string cimport string
from libcpp.utility cimport pair
from libcpp.vector cimport vector

cdef extern from "error_translate.h":
    void raise_py_error "singa_raise_py_error"()
    void register_exception "singa_register_exception"(int kind, object type)


cdef inline int register_error_classes() except -1:
    """Fills this extension module's translation table with singa's error classes (each module
    has its own copy of error_translate.h's table): every singa/_wrap_*.pyx calls it at import."""
    from singa._wrap_errors import BY_KIND
    for kind, cls in enumerate(BY_KIND):
        register_exception(kind, cls)
    return 0

cdef extern from "singa/core/common.h" namespace "singa":
    ctypedef enum DataType "singa::DataType":
        kFloat32 "singa::kFloat32"
        kFloat16 "singa::kFloat16"
        kInt "singa::kInt"
        kChar "singa::kChar"
        kDouble "singa::kDouble"
        kUChar "singa::kUChar"
        kBFloat16 "singa::kBFloat16"
    ctypedef enum LangType "singa::LangType":
        kCpp "singa::kCpp"
        kCuda "singa::kCuda"
        kOpencl "singa::kOpencl"
    size_t SizeOf(DataType t) except +raise_py_error

cdef extern from "singa/core/cpu_features.h" namespace "singa":
    const vector[string]& CpuFeatures() except +raise_py_error

cdef extern from "singa/memory/pool.h" namespace "singa":
    cdef cppclass PoolStats:
        size_t in_use
        size_t peak_in_use
        size_t reserved
        size_t peak_reserved
        size_t num_mallocs
        size_t num_chunks

cdef extern from "singa/core/block.h" namespace "singa" nogil:
    cdef cppclass CBlock "singa::Block":
        size_t size()
        bool allocated()
        bool initialized()
        void AddExternalRef()
        void RemoveExternalRef()
        int external_refs()
        void ZeroOnFirstAlloc()
        bool zero_on_alloc()
        const string& name()
        void set_name(string name)

cdef extern from "singa/graph/graph.h" namespace "singa" nogil:
    cdef cppclass GraphMemoryPlan:
        size_t arena_bytes
        size_t lower_bound_bytes
        size_t recyclable_bytes
        size_t persistent_bytes
        size_t num_recyclable
        size_t budget_bytes
        size_t unconstrained_arena_bytes
        size_t num_recomputed
        double recompute_cost
        bool cost_measured
    cdef cppclass CGraphBlockInfo "singa::Graph::BlockInfo":
        CBlock* block
        int kind
        bool recyclable
        bool recomputed
        size_t first, last, offset
    ctypedef int RematStrategy "singa::remat::Strategy"
    ctypedef int GraphCostModel "singa::Graph::CostModel"
    cdef cppclass CFusionCounts "singa::Graph::FusionCounts":
        size_t batch_norm, add, relu
        size_t relu_backward
    cdef cppclass CLayoutCounts "singa::Graph::LayoutCounts":
        size_t blocks, bytes
        size_t channels_last
    cdef cppclass CGraph "singa::Graph":
        const CFusionCounts& fusion_counts()
        void SetPlanning(bool planned)
        void SetFusion(bool on)
        bool fusion()
        size_t num_fused()
        bool planning()
        void SetMemoryBudget(size_t bytes)
        void SetMemoryBudgetFraction(double fraction) except +raise_py_error
        size_t memory_budget()
        double memory_budget_fraction()
        void SetRecomputeStrategy(RematStrategy s)
        void SetCostModel(GraphCostModel m)
        int timed_runs()
        bool IsRecomputeAt(size_t pos)
        size_t num_nodes()
        const GraphMemoryPlan& memory_plan()
        vector[CGraphBlockInfo] BlockList() except +raise_py_error
        const string& OpNameAt(size_t pos) except +raise_py_error
        const vector[size_t]& order()
        bool profiling()
        string ToDot() except +raise_py_error
        string TimeProfile(int skip) except +raise_py_error
        int iterations()
        bool captured()
        void SetLayouts(bool on)
        bool layouts()
        const CLayoutCounts& layout_counts()

cdef extern from "singa/core/device.h" namespace "singa" nogil:
    cdef cppclass CDevice "singa::Device":
        int id()
        LangType lang()
        bool is_host()
        void SetRandSeed(uint64_t seed) except +raise_py_error
        void Sync() except +raise_py_error
        void SetCaptureEnabled(bool on)
        bool capture_enabled()
        void SetCheckFinite(bool on)
        bool check_finite()
        PoolStats mem_stats()
        void ResetPeak()
        void EnableGraph(bool enable)
        bool graph_enabled()
        CGraph* graph()
        void RunGraph(bool sequential) except +raise_py_error
        void ResetGraph() except +raise_py_error
        uint64_t graph_version()
        void SetVerbosity(int verbosity)
        int verbosity()
        void SetSkipIteration(int n)
        int skip_iteration()
        void PrintTimeProfiling() except +raise_py_error
        void AddHandle()
        int RemoveHandle()
        int handles()
        void CopyDataFromHostPtr(CBlock* dst, const void* src, size_t nbytes,
                                 size_t dst_offset) except +raise_py_error
        void CopyDataToHostPtr(CBlock* src, void* dst, size_t nbytes,
                               size_t src_offset) except +raise_py_error
    cdef cppclass CppCPU "singa::CppCPU"(CDevice):
        CppCPU(int id) except +raise_py_error
    shared_ptr[CDevice] defaultDevice() except +raise_py_error
    void SetNumThreads(int n) except +raise_py_error
    int GetNumThreads()

cdef extern from "singa/core/cuda_gpu.h" namespace "singa" nogil:
    bool BuiltWithCuda()
    int GetNumGPUs()
    vector[int] GetGPUIDs()
    pair[size_t, size_t] GetGPUMemSize(int id) except +raise_py_error
    string DeviceQuery(int id, bool verbose) except +raise_py_error
    shared_ptr[CDevice] CreateCudaGPUOn(int id) except +raise_py_error

cdef extern from "singa/core/tensor.h" namespace "singa" nogil:
    cdef cppclass CTensor "singa::Tensor":
        CTensor() except +raise_py_error
        CTensor(const vector[size_t]& shape, shared_ptr[CDevice] device,
                DataType dtype) except +raise_py_error
        const vector[size_t]& shape()
        size_t nDim()
        size_t Size()
        size_t MemSize()
        const vector[long]& stride()
        DataType data_type()
        const shared_ptr[CDevice]& device()
        CBlock* block()
        const shared_ptr[CBlock]& block_ptr()
        bool empty()
        bool IsContiguous()
        bool transpose()
        void CopyData(const CTensor& src) except +raise_py_error
        void SetValue[T](T x) except +raise_py_error
        CTensor Clone(shared_ptr[CDevice] device) except +raise_py_error
        CTensor Contiguous() except +raise_py_error
        CTensor& ToDevice(shared_ptr[CDevice] device) except +raise_py_error
        CTensor& ToHost() except +raise_py_error
        CTensor AsType(DataType dtype) except +raise_py_error
        CTensor& Reshape(const vector[size_t]& shape) except +raise_py_error
        CTensor& ResetLike(const CTensor& t) except +raise_py_error
        CTensor& T() except +raise_py_error
        CTensor Repeat(const vector[size_t]& repeats, int axis) except +raise_py_error
        float L1() except +raise_py_error
        float L2() except +raise_py_error

cdef extern from "singa/ops/elementwise.h" namespace "singa" nogil:
    CTensor c_Clamp "singa::Clamp"(const CTensor& x, float low, float high) except +raise_py_error

cdef extern from "singa/ops/reduce.h" namespace "singa" nogil:
    CTensor c_ReduceSum "singa::ReduceSum"(const CTensor&, const vector[int]&, bool) except +raise_py_error
    CTensor c_ReduceMean "singa::ReduceMean"(const CTensor&, const vector[int]&, bool) except +raise_py_error
    CTensor c_ReduceMax "singa::ReduceMax"(const CTensor&, const vector[int]&, bool) except +raise_py_error
    CTensor c_ReduceMin "singa::ReduceMin"(const CTensor&, const vector[int]&, bool) except +raise_py_error
    CTensor c_Argmax "singa::Argmax"(const CTensor&, int, bool) except +raise_py_error
    CTensor c_Argmin "singa::Argmin"(const CTensor&, int, bool) except +raise_py_error
    CTensor c_Sum "singa::Sum"(const CTensor&, int) except +raise_py_error
    CTensor c_Average "singa::Average"(const CTensor&, int) except +raise_py_error
    float c_SumAll "singa::SumAll"(const CTensor&) except +raise_py_error
    CTensor c_SumRows "singa::SumRows"(const CTensor&) except +raise_py_error
    CTensor c_SumColumns "singa::SumColumns"(const CTensor&) except +raise_py_error
    CTensor c_RowMax "singa::RowMax"(const CTensor&) except +raise_py_error

cdef extern from "singa/ops/blas.h" namespace "singa" nogil:
    CTensor c_Mult "singa::Mult"(const CTensor&, const CTensor&) except +raise_py_error
    void c_MultWithScale "singa::Mult"(float, const CTensor&, const CTensor&, float, CTensor*) except +raise_py_error
    void c_Axpy "singa::Axpy"(float, const CTensor&, CTensor*) except +raise_py_error
    void c_AxpyT "singa::Axpy"(const CTensor&, const CTensor&, CTensor*) except +raise_py_error
    float c_Dot "singa::Dot"(const CTensor&, const CTensor&) except +raise_py_error
    void c_AddColumn "singa::AddColumn"(const CTensor&, CTensor*) except +raise_py_error
    void c_AddColumnWithScale "singa::AddColumn"(float, float, const CTensor&, CTensor*) except +raise_py_error
    void c_AddRow "singa::AddRow"(const CTensor&, CTensor*) except +raise_py_error
    void c_AddRowWithScale "singa::AddRow"(float, float, const CTensor&, CTensor*) except +raise_py_error
    void c_SubColumn "singa::SubColumn"(const CTensor&, CTensor*) except +raise_py_error
    void c_SubRow "singa::SubRow"(const CTensor&, CTensor*) except +raise_py_error
    void c_MultColumn "singa::MultColumn"(const CTensor&, CTensor*) except +raise_py_error
    void c_MultRow "singa::MultRow"(const CTensor&, CTensor*) except +raise_py_error
    void c_DivColumn "singa::DivColumn"(const CTensor&, CTensor*) except +raise_py_error
    void c_DivRow "singa::DivRow"(const CTensor&, CTensor*) except +raise_py_error

cdef extern from "singa/ops/shape.h" namespace "singa" nogil:
    CTensor c_Reshape "singa::Reshape"(const CTensor&, const vector[int]&) except +raise_py_error
    CTensor c_Transpose "singa::Transpose"(const CTensor&) except +raise_py_error
    CTensor c_TransposeAxes "singa::Transpose"(const CTensor&, const vector[size_t]&) except +raise_py_error
    CTensor c_Broadcast "singa::Broadcast"(const CTensor&, const vector[size_t]&) except +raise_py_error
    CTensor c_ConcatOn "singa::ConcatOn"(const vector[CTensor]&, int) except +raise_py_error
    CTensor c_ConcatenateRows "singa::ConcatenateRows"(const vector[CTensor]&) except +raise_py_error
    CTensor c_ConcatenateColumns "singa::ConcatenateColumns"(const vector[CTensor]&) except +raise_py_error
    CTensor c_SliceOn "singa::SliceOn"(const CTensor&, size_t, size_t, int) except +raise_py_error
    CTensor c_SliceRows "singa::SliceRows"(const CTensor&, size_t, size_t) except +raise_py_error
    CTensor c_SliceColumns "singa::SliceColumns"(const CTensor&, size_t, size_t) except +raise_py_error
    CTensor c_CopyRows "singa::CopyRows"(const CTensor&, size_t, size_t) except +raise_py_error
    CTensor c_CopyColumns "singa::CopyColumns"(const CTensor&, size_t, size_t) except +raise_py_error
    void c_CopyDataToFrom "singa::CopyDataToFrom"(CTensor*, const CTensor&, size_t, size_t, size_t) except +raise_py_error

cdef extern from "singa/ops/random.h" namespace "singa" nogil:
    void c_Uniform "singa::Uniform"(float, float, CTensor*) except +raise_py_error
    void c_Gaussian "singa::Gaussian"(float, float, CTensor*) except +raise_py_error
    void c_Bernoulli "singa::Bernoulli"(float, CTensor*) except +raise_py_error

cdef extern from "singa/ops/optim.h" namespace "singa" nogil:
    void c_SGDUpdate "singa::SGDUpdate"(CTensor*, const CTensor&, CTensor*, const CTensor&,
                                        const CTensor&, const CTensor&, const CTensor&,
                                        bool) except +raise_py_error
    void c_AdamUpdate "singa::AdamUpdate"(CTensor*, const CTensor&, CTensor*, CTensor*,
                                          const CTensor&, const CTensor&, const CTensor&,
                                          const CTensor&, const CTensor&, const CTensor&,
                                          bool) except +raise_py_error
