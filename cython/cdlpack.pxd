# cdlpack.pxd: C declarations of DLPack (dlpack.h, our copy of the spec's header, its names
# prefixed) and of dlpack_bridge.h (the C++ side of export, import and the buffer protocol).
#
#   from cdlpack cimport DLManagedTensor, ExportTensor      # _wrap_dlpack
#   from cdlpack cimport BufferCtx, NewBufferCtx            # _wrap_tensor (the buffer protocol)
from libc.stdint cimport uint8_t, uint16_t, uint32_t, int32_t, int64_t, uint64_t, uintptr_t
from libcpp cimport bool
from libcpp.memory cimport shared_ptr
from libcpp.vector cimport vector

from csinga cimport CDevice, CTensor, DataType, raise_py_error

cdef extern from "dlpack.h" nogil:
    enum:
        kSingaDLCPU
        kSingaDLCUDA
        kSingaDLCUDAHost
        kSingaDLInt
        kSingaDLUInt
        kSingaDLFloat
        kSingaDLBfloat
        kSingaDLComplex
        kSingaDLBool
    uint64_t SINGA_DLPACK_FLAG_READ_ONLY
    uint64_t SINGA_DLPACK_FLAG_IS_COPIED
    ctypedef struct DLPackVersion:
        uint32_t major
        uint32_t minor
    ctypedef struct DLDevice:
        int32_t device_type
        int32_t device_id
    ctypedef struct DLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct DLTensor:
        void* data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset
    ctypedef struct DLManagedTensor:
        DLTensor dl_tensor
        void* manager_ctx
        void (*deleter)(DLManagedTensor*)
    ctypedef struct DLManagedTensorVersioned:
        DLPackVersion version
        void* manager_ctx
        void (*deleter)(DLManagedTensorVersioned*)
        uint64_t flags
        DLTensor dl_tensor

cdef extern from "dlpack_bridge.h" namespace "singa_dlpack" nogil:
    uintptr_t DeviceStream(CDevice* device)
    cdef cppclass BufferCtx:
        vector[Py_ssize_t] shape
        vector[Py_ssize_t] strides
    BufferCtx* NewBufferCtx(const CTensor& t)
    void DeleteBufferCtx(void* ctx)
    void* HostData(const CTensor& t)
    void* ExportTensor(const CTensor& t, bool versioned, int32_t device_type, int32_t device_id,
                       uint8_t code, uint8_t bits, uint64_t flags) except +raise_py_error
    CTensor ImportTensor(shared_ptr[CDevice] device, void* data, const vector[size_t]& shape,
                         DataType dtype, void* managed, bool versioned) except +raise_py_error
