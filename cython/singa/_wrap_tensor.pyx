# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
"""singa._wrap_tensor: the core Tensor class, numpy copies and the buffer protocol.

    from singa import singa_wrap as sw      # re-exports every name below
    t = sw.Tensor((2, 3), sw.get_default_device(), sw.kFloat32)
    sw.copy_from_numpy(t, np.ones((2, 3)))
    a = sw.to_numpy(t)

The op modules cimport Tensor, wrap and the argument converters from _wrap_tensor.pxd. In-place
arithmetic and DLPack are methods here whose work is done by _wrap_elementwise and _wrap_dlpack,
which build on this module: those are imported when first called.
"""
cimport numpy as cnp
import numpy as np
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES, PyBUF_WRITABLE
from libc.stdint cimport int32_t
from libcpp cimport bool
from libcpp.memory cimport shared_ptr
from libcpp.vector cimport vector

from csinga cimport *
from cdlpack cimport BufferCtx, NewBufferCtx, DeleteBufferCtx, HostData
from singa._wrap_device cimport Device, wrap_device, as_device

from singa._wrap_errors import ArgumentError, DTypeError, ShapeError

cnp.import_array()
register_error_classes()


_NP_OF = {kFloat32: np.float32, kInt: np.int32, kFloat16: np.float16}
_DT_OF = {np.dtype(np.float32): kFloat32, np.dtype(np.int32): kInt,
          np.dtype(np.float16): kFloat16}
# bfloat16 in numpy: ml_dtypes.bfloat16 when that package imports, else its uint16 bit patterns.
try:
    import ml_dtypes as _ml_dtypes
    BFLOAT16_NUMPY = np.dtype(_ml_dtypes.bfloat16)
    _DT_OF[BFLOAT16_NUMPY] = kBFloat16
except ImportError:
    BFLOAT16_NUMPY = np.dtype(np.uint16)
_NP_OF[kBFloat16] = BFLOAT16_NUMPY


def bfloat16_bits(a):
    """The bfloat16 bit patterns (uint16) of float values: round to nearest even, NaN kept NaN
    (as the core's FloatToBFloat16)."""
    f = np.ascontiguousarray(a, dtype=np.float32)
    x = f.view(np.uint32).astype(np.uint64)
    r = ((x + 0x7fff + ((x >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    r[nan] = ((x[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def _host_copy_source(a, int dt):
    """The contiguous numpy array whose bytes are copied into a tensor of dtype dt."""
    if dt != kBFloat16:
        return np.ascontiguousarray(a, dtype=_NP_OF[dt])
    if a.dtype == BFLOAT16_NUMPY and a.dtype != np.uint16:  # already bf16 (ml_dtypes)
        return np.ascontiguousarray(a)
    return bfloat16_bits(a)


cdef vector[size_t] as_shape(str op, shape) except *:
    cdef vector[size_t] out
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    for d in shape:
        if not isinstance(d, (int, np.integer)):
            raise TypeError("%s: shape entries must be integers, got %r" % (op, tuple(shape)))
        if d < 0:
            raise ValueError("%s: negative dimension in shape %r" % (op, tuple(shape)))
        out.push_back(<size_t>d)
    return out


cdef double as_real(str op, x) except? -1:
    """A real number operand, as a double: exact for every int32 value (the elementwise ops'
    scalars; a float lost the low bits of ints past 2^24)."""
    if not isinstance(x, (int, float, np.number, np.bool_)) or isinstance(x, complex):
        raise TypeError("%s: expected a Tensor or a real number, got %s" % (op, type(x).__name__))
    return float(x)


cdef float as_float(str op, x) except? -1:
    return <float>as_real(op, x)


cdef DataType as_dtype(dtype) except *:
    if isinstance(dtype, int) and dtype in (kFloat32, kFloat16, kInt, kBFloat16):
        return <DataType>dtype
    try:
        return _DT_OF[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise TypeError("unsupported dtype %r (expected float32, float16, bfloat16 or int32)"
                        % (dtype,))


cdef class Tensor:
    """A core tensor (singa::Tensor). Copies share memory; Clone() copies data.

    Every Python handle marks its block as held (Block::AddExternalRef): a computational graph
    never recycles the memory of a tensor that Python can still read. A tensor created here reads
    as zeros until written (Block::ZeroOnFirstAlloc, as Apache SINGA's CppCPU zeroes memory).
    Calls that run kernels or copy data release the GIL.
    """
    def __init__(self, shape=(), Device device=None, dtype=kFloat32):
        self.c = CTensor(as_shape("Tensor", shape), as_device(device), as_dtype(dtype))
        if self.c.block() != NULL:
            self.c.block().ZeroOnFirstAlloc()
        self._hold()

    cdef void _hold(self):
        """Moves the external reference to the block self.c now uses."""
        cdef shared_ptr[CBlock] b = self.c.block_ptr()
        if b.get() == self.held.get():
            return
        if self.held.get() != NULL:
            self.held.get().RemoveExternalRef()
        self.held = b
        if b.get() != NULL:
            b.get().AddExternalRef()

    def __dealloc__(self):
        if self.held.get() != NULL:
            self.held.get().RemoveExternalRef()
        self.held.reset()

    def shape(self):
        return tuple(self.c.shape())

    def nDim(self):
        return self.c.nDim()

    def Size(self):
        return self.c.Size()

    def MemSize(self):
        return self.c.MemSize()

    def stride(self):
        return tuple(self.c.stride())

    def data_type(self):
        return <int>self.c.data_type()

    def device(self):
        return wrap_device(self.c.device())

    def empty(self):
        return self.c.empty()

    def transpose(self):
        """True when the layout is not row-major contiguous (Apache SINGA's name)."""
        return self.c.transpose()

    def IsContiguous(self):
        return self.c.IsContiguous()

    def initialized(self):
        return self.c.block() != NULL and self.c.block().initialized()

    def Reshape(self, shape):
        self.c.Reshape(as_shape("Reshape", shape))
        self._hold()
        return self

    def ResetLike(self, Tensor t not None):
        self.c.ResetLike(t.c)
        self._hold()
        return self

    def block_id(self):
        """An id of the memory block this tensor uses (0 for none): equal ids share memory. The
        graph's drawings name blocks by these ids (singa.graph.name_blocks)."""
        return <size_t>self.c.block()

    def block_name(self):
        """The name the graph's drawings give this tensor's block ('' when unnamed)."""
        if self.c.block() == NULL:
            return ""
        return self.c.block().name().decode()

    def set_block_name(self, str name not None):
        """Names this tensor's block for the graph's drawings (e.g. 'conv1.W')."""
        if self.c.block() != NULL:
            self.c.block().set_name(name.encode())

    def AsType(self, dtype):
        cdef DataType dt = as_dtype(dtype)
        cdef CTensor r
        with nogil:
            r = self.c.AsType(dt)
        return wrap(r)

    def ToDevice(self, Device dev not None):
        with nogil:
            self.c.ToDevice(dev.c)
        self._hold()
        return self

    def ToHost(self):
        with nogil:
            self.c.ToHost()
        self._hold()
        return self

    def Clone(self, Device dev=None):
        cdef shared_ptr[CDevice] d
        cdef CTensor r
        if dev is not None:
            d = dev.c
        with nogil:
            r = self.c.Clone(d)
        return wrap(r)

    def Contiguous(self):
        cdef CTensor r
        with nogil:
            r = self.c.Contiguous()
        return wrap(r)

    def T(self):
        """Transposes in place (reverses the axes) and returns self."""
        self.c.T()
        return self

    def Repeat(self, repeats, int axis):
        cdef vector[size_t] r = as_shape("Repeat", repeats)
        cdef CTensor out
        with nogil:
            out = self.c.Repeat(r, axis)
        return wrap(out)

    def L1(self):
        cdef float v
        with nogil:
            v = self.c.L1()
        return v

    def L2(self):
        cdef float v
        with nogil:
            v = self.c.L2()
        return v

    def SetFloatValue(self, x):
        cdef float v = <float>x
        with nogil:
            self.c.SetValue[float](v)

    def SetIntValue(self, x):
        cdef int32_t v = <int32_t>x
        with nogil:
            self.c.SetValue[int32_t](v)

    def SetValue(self, x):
        if self.c.data_type() == kInt:
            self.SetIntValue(int(x))
        else:
            self.SetFloatValue(float(x))

    def CopyData(self, Tensor src not None):
        with nogil:
            self.c.CopyData(src.c)

    def CopyFromNumpy(self, arr, size_t offset=0):
        """Copies a numpy array's values (converted to this dtype) from element `offset` on."""
        copy_from_numpy(self, arr, offset)

    def GetValue(self):
        """The values as a numpy array of this tensor's shape."""
        return to_numpy(self)

    def GetFloatValue(self, n=None):
        """The first n values (row-major) as a flat float32 numpy array: Apache SINGA's
        GetFloatValue(num), which its tensor.to_numpy calls with the tensor's size. All values
        when n is None. Unlike SINGA, an int tensor's values are converted, not reinterpreted."""
        return self._flat_values("GetFloatValue", n, np.float32)

    def GetIntValue(self, n=None):
        """The first n values as a flat int32 numpy array (Apache SINGA's GetIntValue(num))."""
        return self._flat_values("GetIntValue", n, np.int32)

    def _flat_values(self, str op, n, dtype):
        size = self.c.Size()
        if n is None:
            n = size
        if isinstance(n, type(True)) or not isinstance(n, (int, np.integer)):
            raise TypeError("%s: the count must be an int, got %r" % (op, n))
        if not 0 <= n <= size:
            raise ValueError("%s: asked for %d values of a tensor of shape %s (%d values)"
                             % (op, n, self.shape(), size))
        return to_numpy(self).reshape(-1)[:n].astype(dtype, copy=True)

    # ---- in-place arithmetic (Apache SINGA's Tensor::operator+= and friends) -------------
    # `W.data += delta.data` (SINGA's LoRA merge), `buf *= 0.9`: the right operand broadcasts
    # into this tensor like numpy's in-place ufuncs; this tensor keeps its shape, dtype and memory
    # (every handle of the block sees the change). The elementwise front computes into a
    # temporary first when the operand aliases this tensor with another layout (x += x.T).
    def __iadd__(self, other):
        return self._inplace("+=", "Add", other)

    def __isub__(self, other):
        return self._inplace("-=", "Sub", other)

    def __imul__(self, other):
        return self._inplace("*=", "EltwiseMult", other)

    def __itruediv__(self, other):
        return self._inplace("/=", "Div", other)

    def _inplace(self, str sym, str fn_name, other):
        from singa import _wrap_elementwise  # builds on this module (see the module comment)
        fn = getattr(_wrap_elementwise, fn_name)
        op = "singa_wrap.Tensor " + sym
        if isinstance(getattr(other, "data", None), Tensor):
            raise TypeError("%s: the operand is a singa.tensor.Tensor; pass its core tensor "
                            "(.data), as in W.data += delta.data" % op)
        if not isinstance(other, Tensor):
            as_real(op, other)  # TypeError for anything but a real number (kept as it is: exact)
        if any(st == 0 and d > 1 for st, d in zip(self.stride(), self.shape())):
            raise ArgumentError("%s: the left operand is a broadcast view of shape %s (several "
                                "elements share memory); Clone() it first" % (op, self.shape()))
        if isinstance(other, Tensor):
            shape, oshape = self.shape(), (<Tensor>other).shape()
            try:
                fits = np.broadcast_shapes(shape, oshape) == shape
            except ValueError:
                fits = False
            if not fits:
                raise ShapeError("%s: an operand of shape %s does not broadcast into this "
                                 "tensor's shape %s (an in-place result keeps the left shape)"
                                 % (op, oshape, shape))
        try:
            fn(self, other, out=self)
        except DTypeError as e:
            raise DTypeError("%s: the result's dtype must be this tensor's (%s): %s"
                             % (op, _dtype_name(self.c.data_type()), e)) from None
        return self

    def __array__(self, dtype=None, copy=None):
        """np.asarray(t): a view of a host tensor's memory (zero-copy, see _wrap_dlpack)."""
        from singa._wrap_dlpack import _as_array
        return _as_array(self, dtype, copy)

    def __getbuffer__(self, Py_buffer* view, int flags):
        """The buffer protocol (memoryview(t), np.frombuffer(t, ...)): host memory, see below."""
        _get_buffer(self, view, flags)

    def __releasebuffer__(self, Py_buffer* view):
        _release_buffer(view)

    # DLPack (the Python array API's protocol; cython/singa/_wrap_dlpack.pyx): np.from_dlpack(t),
    # torch.from_dlpack(t) share this tensor's memory.
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        from singa._wrap_dlpack import _dlpack_export
        return _dlpack_export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        from singa._wrap_dlpack import _dlpack_device
        return _dlpack_device(self)

    def __repr__(self):
        return "singa_wrap.Tensor(shape=%s, dtype=%s)" % (self.shape(),
                                                           _dtype_name(self.data_type()))


cdef str _dtype_name(int dt):
    if dt == kBFloat16:
        return "bfloat16"
    return np.dtype(_NP_OF.get(dt, np.float32)).name


cdef Tensor wrap(CTensor c):
    cdef Tensor t = Tensor.__new__(Tensor)
    t.c = c
    t._hold()
    return t


cdef CTensor opt_tensor(Tensor t):
    """t's C++ tensor, or an empty one for None or a never-written 0-d Tensor() (the Python
    spelling of C++'s empty Tensor(): Tensor() here has shape () and one element)."""
    if t is None or (t.c.nDim() == 0 and (t.c.block() == NULL or not t.c.block().initialized())):
        return CTensor()
    return t.c


def to_numpy(Tensor t not None):
    """A numpy copy of t's values, with t's shape and dtype."""
    dt = t.c.data_type()
    if dt not in _NP_OF:
        raise TypeError("to_numpy: unsupported dtype %d" % dt)
    out = np.empty(tuple(t.c.shape()), dtype=_NP_OF[dt])
    if out.size == 0:
        return out
    cdef CTensor c
    cdef cnp.ndarray arr = out
    cdef void* dst = cnp.PyArray_DATA(arr)
    with nogil:
        c = t.c.Contiguous()
        c.device().get().CopyDataToHostPtr(c.block(), dst, c.MemSize(), 0)
    return out


def copy_from_numpy(Tensor t not None, arr, size_t offset=0):
    """Copies numpy values into t from element `offset` (row-major), converting the dtype."""
    if not t.c.IsContiguous():
        raise ValueError("copy_from_numpy: the tensor is a non-contiguous view; call Contiguous()")
    dt = t.c.data_type()
    if dt not in _NP_OF:
        raise TypeError("copy_from_numpy: unsupported tensor dtype %d" % dt)
    a = np.asarray(arr)
    if a.dtype.kind not in "biuf" and a.dtype != BFLOAT16_NUMPY:
        raise TypeError("copy_from_numpy: expected a numeric array, got dtype %s" % a.dtype)
    cdef cnp.ndarray src = _host_copy_source(a, dt)
    cdef size_t n = src.size
    if offset + n > t.c.Size():
        raise ValueError("copy_from_numpy: %d values at offset %d do not fit a tensor of shape %s"
                         % (n, offset, tuple(t.c.shape())))
    cdef size_t esize = SizeOf(t.c.data_type())
    cdef const void* p = cnp.PyArray_DATA(src)
    if n:
        # `src` (a local) keeps the numpy buffer alive while the GIL is released.
        with nogil:
            t.c.device().get().CopyDataFromHostPtr(t.c.block(), p, n * esize, offset * esize)


def from_numpy(arr, Device dev=None):
    """A new tensor holding a copy of a numpy array (float64 becomes float32, like SINGA)."""
    a = np.asarray(arr)
    if a.dtype == np.float64 or a.dtype.kind == "b":
        a = a.astype(np.float32)
    elif a.dtype.kind in "iu" and a.dtype != np.int32:
        a = a.astype(np.int32)
    if a.dtype not in _DT_OF:
        raise TypeError("from_numpy: unsupported dtype %s (expected float or int)" % a.dtype)
    t = Tensor(a.shape, dev, _DT_OF[a.dtype])
    copy_from_numpy(t, a)
    return t


cdef void check_not_graph_owned(Tensor t, str op="__dlpack__") except *:
    """BufferError when t's memory cannot be handed out (DLPack export, the buffer protocol)."""
    cdef CDevice* dev = t.c.device().get()
    if dev.graph_enabled():
        raise BufferError("%s: the tensor's device is recording a graph "
                          "(EnableGraph(True)): nothing has run yet, so its memory holds no "
                          "values; export after the training step or outside train_one_batch"
                          % op)
    cdef CBlock* b = t.c.block()
    if b == NULL:
        return
    cdef vector[CGraphBlockInfo] infos = dev.graph().BlockList()
    cdef size_t i
    for i in range(infos.size()):
        if infos[i].block == b and infos[i].recyclable:
            raise BufferError("%s: the tensor's memory belongs to the device's graph "
                              "(a recyclable block, shared with other tensors in the planned "
                              "arena); Clone() it, or export after dev.ResetGraph()" % op)


# ---- the buffer protocol (Tensor.__getbuffer__): memoryview(t), np.frombuffer, bytes(t)... ----
# The same rules as a DLPack export of a host tensor: the view holds the block (user-held, so a
# graph never recycles it) until released, a broadcast view is read-only, GPU tensors and a
# device recording a graph are refused with BufferError.
_BUFFER_FORMATS = {kFloat32: b"f", kInt: b"i", kFloat16: b"e"}


cdef int _get_buffer(Tensor t, Py_buffer* view, int flags) except -1:
    if not t.c.device().get().is_host():
        raise BufferError("Tensor buffer: the tensor is on %r; the buffer protocol exposes host "
                          "memory (to_host() first, or __dlpack__ for GPU consumers)"
                          % wrap_device(t.c.device()))
    check_not_graph_owned(t, "Tensor buffer")
    dt = t.c.data_type()
    if dt not in _BUFFER_FORMATS:
        raise BufferError("Tensor buffer: dtype %s has no buffer format" % _dtype_name(dt))
    read_only = any(st == 0 and d > 1 for st, d in zip(t.c.stride(), t.c.shape()))
    if read_only and (flags & PyBUF_WRITABLE):
        raise BufferError("Tensor buffer: a broadcast view is read-only (one element at many "
                          "places); Clone() it for a writable buffer")
    if not t.c.IsContiguous() and not (flags & PyBUF_STRIDES):
        raise BufferError("Tensor buffer: the tensor is a strided view and the consumer did "
                          "not ask for strides")
    cdef BufferCtx* ctx = NewBufferCtx(t.c)
    cdef Py_ssize_t esize = SizeOf(<DataType>dt)
    view.buf = HostData(t.c)
    view.obj = t
    view.len = <Py_ssize_t>t.c.Size() * esize
    view.readonly = 1 if read_only else 0
    view.itemsize = esize
    view.format = <char*>(<bytes>_BUFFER_FORMATS[dt]) if flags & PyBUF_FORMAT else NULL
    view.ndim = <int>ctx.shape.size()
    view.shape = ctx.shape.data() if flags & PyBUF_ND else NULL
    view.strides = ctx.strides.data() if flags & PyBUF_STRIDES else NULL
    view.suboffsets = NULL
    view.internal = <void*>ctx
    return 0


cdef void _release_buffer(Py_buffer* view) noexcept:
    DeleteBufferCtx(view.internal)
