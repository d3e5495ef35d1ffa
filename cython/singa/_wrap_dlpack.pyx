# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_dlpack: zero-copy exchange with numpy, PyTorch, CuPy... through DLPack (the Python
# array API's __dlpack__ / from_dlpack protocol); Tensor.__dlpack__ and __array__ call in here.
#
#   a = np.from_dlpack(t)            # t: a singa_wrap.Tensor on the host; a shares its memory
#   t2 = from_dlpack(torch_tensor)   # a singa_wrap.Tensor sharing the torch tensor's memory
#
# What is zero-copy, what copies, and why (the README's "Interop" section says the same):
#   export  the tensor's own memory, with its shape and strides (a transposed view keeps its
#           strides; a broadcast view has zero strides and is flagged read-only in a versioned
#           capsule). copy=True, or dl_device=(kDLCPU, 0) for a GPU tensor, exports a copy.
#   import  host memory (kDLCPU, kDLCUDAHost) that is row-major contiguous, element-aligned,
#           writable and float32/float16/int32 becomes a tensor over that memory; anything else
#           readable on the host (strided, read-only, unaligned) is copied unless copy=False,
#           which raises BufferError. Other dtypes raise DTypeError (tensor.from_numpy converts).
#           GPU (kDLCUDA) memory that is contiguous and aligned becomes a tensor over it on
#           a singa CUDA device of that GPU (device=, else one device per GPU made for imports):
#           the producer is asked for it on that device's stream (__dlpack__(stream=...)), so
#           its pending writes are ordered before singa's kernels. Read-only GPU memory or
#           copy=True gives a copy on the GPU; strided GPU memory raises BufferError (make it
#           contiguous first). A CPU-only build raises SingaNotImplementedError.
#   graph   while the device records a graph (EnableGraph(True)) nothing has run, so export
#           raises BufferError, like to_numpy. An exported block counts as held by the user:
#           a graph built while a consumer holds it never recycles or moves it, so the view
#           stays valid and sees every replay's writes. A block the device's current graph
#           planned as recyclable (its memory is shared in the arena) is refused.
cimport numpy as cnp
import numpy as np
from cpython.pycapsule cimport (PyCapsule_New, PyCapsule_IsValid, PyCapsule_GetPointer,
                                PyCapsule_SetName)
from libc.stdint cimport uint8_t, int32_t, uint64_t, uintptr_t
from libcpp cimport bool
from libcpp.memory cimport shared_ptr
from libcpp.vector cimport vector

from csinga cimport *
from cdlpack cimport *
from singa._wrap_device cimport Device, wrap_device
from singa._wrap_tensor cimport Tensor, wrap, as_shape, _dtype_name, check_not_graph_owned

from singa._wrap_device import USE_CUDA, create_cuda_gpu_on
from singa._wrap_errors import DTypeError, SingaNotImplementedError
from singa._wrap_tensor import _NP_OF, copy_from_numpy, to_numpy

cnp.import_array()
register_error_classes()


# singa dtype <-> DLPack (code, bits)
_DL_OF = {kFloat32: (kSingaDLFloat, 32), kFloat16: (kSingaDLFloat, 16), kInt: (kSingaDLInt, 32)}
_DT_OF_DL = {v: k for k, v in _DL_OF.items()}
_DL_CODE_NAMES = {kSingaDLInt: "int", kSingaDLUInt: "uint", kSingaDLFloat: "float",
                  kSingaDLBfloat: "bfloat", kSingaDLComplex: "complex", kSingaDLBool: "bool"}


cdef void _legacy_capsule_dtor(object cap) noexcept:
    # An unconsumed capsule gives the tensor back; a consumer renames it "used_dltensor".
    cdef DLManagedTensor* m
    if PyCapsule_IsValid(cap, b"dltensor"):
        m = <DLManagedTensor*>PyCapsule_GetPointer(cap, b"dltensor")
        if m.deleter != NULL:
            m.deleter(m)


cdef void _versioned_capsule_dtor(object cap) noexcept:
    cdef DLManagedTensorVersioned* m
    if PyCapsule_IsValid(cap, b"dltensor_versioned"):
        m = <DLManagedTensorVersioned*>PyCapsule_GetPointer(cap, b"dltensor_versioned")
        if m.deleter != NULL:
            m.deleter(m)


cdef object _copy_flag(str op, copy):
    if copy is None or isinstance(copy, (type(True), np.bool_)):
        return None if copy is None else (True if copy else False)
    raise TypeError("%s: copy must be None, True or False, got %r" % (op, copy))


cdef tuple _dl_device_of(CDevice* dev):
    if dev.is_host():
        return (kSingaDLCPU, 0)
    if dev.lang() == kCuda:
        return (kSingaDLCUDA, dev.id())
    raise BufferError("__dlpack__: tensors of a device of lang %d cannot be exported"
                      % <int>dev.lang())


def _dlpack_device(Tensor t not None):
    return _dl_device_of(t.c.device().get())


def _dlpack_export(Tensor t not None, stream=None, max_version=None, dl_device=None, copy=None):
    """Tensor.__dlpack__: a "dltensor" capsule, or a "dltensor_versioned" one (DLPack 1.0) when
    max_version >= (1, 0). See the file comment for what is shared and what is refused."""
    cdef CDevice* dev = t.c.device().get()
    own = _dl_device_of(dev)
    if max_version is not None and (not isinstance(max_version, tuple) or len(max_version) != 2):
        raise TypeError("__dlpack__: max_version must be None or a (major, minor) tuple, got %r"
                        % (max_version,))
    versioned = max_version is not None and max_version[0] >= 1
    copy = _copy_flag("__dlpack__", copy)
    to_host = False
    if dl_device is not None and tuple(dl_device) != own:
        if tuple(dl_device) == (kSingaDLCPU, 0) and copy is not False:
            to_host = True
        else:
            raise BufferError("__dlpack__: cannot export a tensor on %s to device %s%s"
                              % (own, tuple(dl_device),
                                 " without a copy (copy=False)" if copy is False else ""))
    if own[0] == kSingaDLCPU:
        if stream is not None and stream != -1:
            raise ValueError("__dlpack__: a host tensor takes stream=None (or -1), got %r"
                             % (stream,))
    else:
        if stream is not None and (not isinstance(stream, int) or stream == 0 or stream < -1):
            raise ValueError("__dlpack__: stream must be None, -1 or a CUDA stream handle "
                             "(0 is ambiguous and disallowed by DLPack), got %r" % (stream,))
    check_not_graph_owned(t)
    dt = t.c.data_type()
    if dt not in _DL_OF:
        raise DTypeError("__dlpack__: dtype %s has no DLPack export" % _dtype_name(dt))
    code, bits = _DL_OF[dt]
    cdef CTensor src = t.c
    cdef uint64_t flags = 0
    cdef shared_ptr[CDevice] host
    if to_host:
        host = defaultDevice()
        with nogil:
            src = t.c.Clone(host)
        own = (kSingaDLCPU, 0)
        flags |= SINGA_DLPACK_FLAG_IS_COPIED
    elif copy:
        with nogil:
            src = t.c.Clone(shared_ptr[CDevice]())
        flags |= SINGA_DLPACK_FLAG_IS_COPIED
    elif any(s == 0 and d > 1 for s, d in zip(src.stride(), src.shape())):
        flags |= SINGA_DLPACK_FLAG_READ_ONLY  # a broadcast view: one element at many places
    if own[0] == kSingaDLCUDA and stream != -1:
        # Every operation so far is enqueued on the device's stream; waiting for it makes the
        # memory ready for the consumer's stream whichever it is (stronger than an event).
        with nogil:
            dev.Sync()
    cdef void* m
    cdef int32_t dev_type = own[0]
    cdef int32_t did = own[1]
    cdef uint8_t c8 = code
    cdef uint8_t b8 = bits
    cdef bool ver = versioned
    with nogil:
        m = ExportTensor(src, ver, dev_type, did, c8, b8, flags)
    if versioned:
        return PyCapsule_New(m, b"dltensor_versioned", _versioned_capsule_dtor)
    return PyCapsule_New(m, b"dltensor", _legacy_capsule_dtor)


cdef _dlpack_dtype_name(DLDataType d):
    return "%s%d%s" % (_DL_CODE_NAMES.get(d.code, "code%d_" % d.code), d.bits,
                       "x%d" % d.lanes if d.lanes != 1 else "")


cdef object _capsule_of(x, stream=None):
    """Asks x for a capsule (for use on `stream`, a CUDA stream handle), preferring DLPack 1.0
    (older producers take no max_version)."""
    kw = {} if stream is None else {"stream": stream}
    try:
        return x.__dlpack__(max_version=(1, 0), **kw)
    except TypeError:
        return x.__dlpack__(**kw)


_IMPORT_GPUS = {}  # GPU id -> the singa device that from_dlpack(x) of that GPU's memory uses


cdef Device _gpu_for_import(int dev_id, Device device):
    """The singa CUDA device a tensor imported from CUDA device dev_id lives on."""
    if not USE_CUDA:
        raise SingaNotImplementedError(
            "from_dlpack: x lives on CUDA device %d and this singa was built without CUDA "
            "(move it to the host first, e.g. x.cpu(), or install the CUDA build)" % dev_id)
    if device is None:
        if dev_id not in _IMPORT_GPUS:
            _IMPORT_GPUS[dev_id] = create_cuda_gpu_on(dev_id)
        return _IMPORT_GPUS[dev_id]
    if device.c.get().is_host() or device.c.get().id() != dev_id:
        raise BufferError("from_dlpack: x lives on CUDA device %d; device= must be a singa device "
                          "on that GPU, got %r (import, then move it with to_device)"
                          % (dev_id, device))
    return device


def from_dlpack(x, Device device=None, copy=None):
    """A singa_wrap.Tensor over the memory of x, any object with __dlpack__ (the array API's
    from_dlpack). Zero-copy when x is host memory, row-major contiguous, aligned, writable and
    float32/float16/int32, keeping x's memory alive while any tensor or graph uses it; strided,
    read-only or unaligned host memory is copied (copy=False raises BufferError instead); copy=True
    always copies. Other dtypes raise DTypeError (tensor.from_numpy converts them); device: a
    host device (default: the default host device) or a GPU device, which gets a copy."""
    copy = _copy_flag("from_dlpack", copy)
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise TypeError("from_dlpack: expected an object with __dlpack__ and __dlpack_device__ "
                        "(numpy array, torch tensor, CuPy array, singa tensor...), got %s"
                        % type(x).__name__)
    dev_type, dev_id = x.__dlpack_device__()
    cdef Device gpu = None
    if dev_type == kSingaDLCUDA:
        gpu = _gpu_for_import(dev_id, device)
        cap = _capsule_of(x, DeviceStream(gpu.c.get()))
    elif dev_type in (kSingaDLCPU, kSingaDLCUDAHost):
        cap = _capsule_of(x)
    else:
        raise BufferError("from_dlpack: x lives on DLPack device type %r, which singa cannot "
                          "read" % (dev_type,))
    cdef bool versioned = PyCapsule_IsValid(cap, b"dltensor_versioned")
    if not versioned and not PyCapsule_IsValid(cap, b"dltensor"):
        raise BufferError("from_dlpack: __dlpack__ returned %r, not an unused DLPack capsule"
                          % (cap,))
    cdef DLManagedTensorVersioned* mv = NULL
    cdef DLManagedTensor* ml = NULL
    cdef DLTensor* dl
    cdef uint64_t flags = 0
    if versioned:
        mv = <DLManagedTensorVersioned*>PyCapsule_GetPointer(cap, b"dltensor_versioned")
        if mv.version.major != 1:
            raise BufferError("from_dlpack: DLPack version %d.%d is not supported (1.x is)"
                              % (mv.version.major, mv.version.minor))
        dl = &mv.dl_tensor
        flags = mv.flags
    else:
        ml = <DLManagedTensor*>PyCapsule_GetPointer(cap, b"dltensor")
        dl = &ml.dl_tensor
    key = (dl.dtype.code, dl.dtype.bits)
    if dl.dtype.lanes != 1 or key not in _DT_OF_DL:
        raise DTypeError("from_dlpack: dtype %s is not supported (float32, float16 or int32; "
                         "tensor.from_numpy converts other dtypes)" % _dlpack_dtype_name(dl.dtype))
    cdef DataType dt = <DataType>_DT_OF_DL[key]
    cdef size_t esize = dl.dtype.bits // 8
    shape = [dl.shape[i] for i in range(dl.ndim)]
    if any(d < 0 for d in shape):
        raise BufferError("from_dlpack: negative extent in shape %s" % (tuple(shape),))
    strides = None if dl.strides == NULL else [dl.strides[i] for i in range(dl.ndim)]
    cdef char* data = <char*>dl.data + dl.byte_offset
    contiguous = strides is None or all(
        st == int(np.prod(shape[i + 1:], dtype=np.int64)) for i, (st, n) in
        enumerate(zip(strides, shape)) if n > 1)
    aligned = <uintptr_t>data % esize == 0
    read_only = (flags & SINGA_DLPACK_FLAG_READ_ONLY) != 0
    zero_copy = contiguous and aligned and not read_only and copy is not True
    if gpu is not None and not (contiguous and aligned):
        raise BufferError("from_dlpack: x's GPU memory is %s; singa shares or copies contiguous "
                          "GPU memory only (make it contiguous first, e.g. x.contiguous())"
                          % ("strided" if not contiguous else "unaligned"))
    if not zero_copy and copy is False:
        raise BufferError("from_dlpack: x's memory cannot be shared (%s) and copy=False"
                          % ", ".join(w for w, bad in (("strided", not contiguous),
                                                       ("unaligned", not aligned),
                                                       ("read-only", read_only)) if bad))
    cdef shared_ptr[CDevice] host = defaultDevice()
    if gpu is not None:
        host = gpu.c  # where the memory is (the name stays: everything below runs there)
    elif device is not None and device.c.get().is_host():
        host = device.c
    cdef vector[size_t] cshape = as_shape("from_dlpack", shape)
    cdef void* managed = <void*>mv if versioned else <void*>ml
    cdef CTensor ct
    if gpu is not None:
        # A view of the GPU memory; a copy (on that GPU) when it is read-only or copy=True.
        PyCapsule_SetName(cap, b"used_dltensor_versioned" if versioned else b"used_dltensor")
        out = wrap(ImportTensor(host, data, cshape, dt, managed, versioned))
        return out if zero_copy else out.Clone(gpu)
    if zero_copy:
        # From here singa owns the DLPack tensor: the capsule must not give it back too.
        PyCapsule_SetName(cap, b"used_dltensor_versioned" if versioned else b"used_dltensor")
        ct = ImportTensor(host, data, cshape, dt, managed, versioned)
        out = wrap(ct)
    else:
        out = Tensor(shape, wrap_device(host), <int>dt)
        _copy_dl_into(out, cap, dl, data, shape, strides)
    if device is not None and not device.c.get().is_host():
        out = out.Clone(device)
    return out


def _as_array(Tensor t not None, dtype=None, copy=None):
    """Tensor.__array__ (np.asarray(t)): a numpy view of a host tensor's memory, through DLPack,
    so the view keeps the memory alive even if t is later reshaped or deleted; a copy for a GPU
    tensor, with copy=True, or when dtype converts (copy=False then raises ValueError, as numpy's
    protocol asks). While the device records a graph it raises like to_numpy."""
    cdef CDevice* dev = t.c.device().get()
    if copy or dev.graph_enabled() or not dev.is_host():
        if copy is False:
            raise ValueError("__array__: a tensor on %r cannot be viewed without a copy "
                             "(copy=False)" % wrap_device(t.c.device()))
        a = to_numpy(t)
    else:
        a = np.from_dlpack(t)
    if dtype is None or np.dtype(dtype) == a.dtype:
        return a
    if copy is False:
        raise ValueError("__array__: converting %s to %s needs a copy (copy=False)"
                         % (a.dtype, np.dtype(dtype)))
    return a.astype(dtype)


class _HostView(object):
    """x's strided host memory described to numpy (__array_interface__), holding the capsule
    that gives the memory back when the numpy view goes."""
    __slots__ = ("__array_interface__", "capsule")


cdef _copy_dl_into(Tensor out, cap, DLTensor* dl, char* data, shape, strides):
    """Copies the (possibly strided, read-only or unaligned) host memory at `data` into out."""
    esize = dl.dtype.bits // 8
    if strides is None:
        strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
    holder = _HostView()
    holder.capsule = cap
    holder.__array_interface__ = {
        "version": 3, "shape": tuple(shape), "strides": tuple(s * esize for s in strides),
        "typestr": np.dtype(_NP_OF[_DT_OF_DL[(dl.dtype.code, dl.dtype.bits)]]).str,
        "data": (<uintptr_t>data, True)}
    copy_from_numpy(out, np.asarray(holder))
