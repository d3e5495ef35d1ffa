"""Zero-copy interop: DLPack both ways (numpy, PyTorch, singa itself) and np.asarray.

What is shared is checked by writing on one side and reading on the other; lifetimes by
deleting one side (and by the device's pool counters and weak references: nothing leaks);
capsules by reading them through ctypes with this file's own declaration of the DLPack 1.0
structures; the graph rules by recording a graph around an exported tensor. GPU tests skip
without a usable GPU (SINGA_REQUIRE_GPU=1 makes them fail instead, as in test_gpu.py).
"""
import ctypes
import gc
import os
import sys
import weakref

import numpy as np
import pytest

import tiny_nets
from singa import device, opt, tensor
from singa import singa_wrap as sw

try:
    import torch
except ImportError:  # pragma: no cover - torch is a test dependency, but optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
HAVE_GPU = device.get_num_gpus() > 0
needs_gpu = pytest.mark.skipif(
    not (HAVE_GPU or os.environ.get("SINGA_REQUIRE_GPU") == "1"),
    reason="no CUDA GPU is usable here (singa_wrap.USE_CUDA=%s)" % sw.USE_CUDA)

_dev_ids = iter(range(7000, 8000))


def own_device():
    """A separate host device: its own pool, so its counters see only this test's blocks."""
    return device.create_cpu_device(next(_dev_ids))


DTYPES = [(tensor.float32, np.float32), (tensor.float16, np.float16), (tensor.int32, np.int32)]


# ---- the DLPack 1.0 ABI, declared independently of cython/dlpack.h ----------------------------
class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Versioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


class _Legacy(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_struct(cap):
    """(name, the managed tensor structure) of an unused DLPack capsule."""
    for name, cls in ((b"dltensor_versioned", _Versioned), (b"dltensor", _Legacy)):
        if _api.PyCapsule_IsValid(cap, name):
            return name.decode(), cls.from_address(_api.PyCapsule_GetPointer(cap, name))
    raise AssertionError("not a DLPack capsule: %r" % (cap,))


def host_tensor(values, dtype=tensor.float32, dev=None):
    t = tensor.Tensor(np.shape(values), dev, dtype)
    t.copy_from_numpy(np.asarray(values))
    return t


# ---- export: numpy and torch see singa's memory ------------------------------------------------
@pytest.mark.parametrize("code,np_dtype", DTYPES)
def test_numpy_from_dlpack_shares_memory_both_ways(code, np_dtype):
    t = host_tensor(np.arange(6).reshape(2, 3), code)
    a = np.from_dlpack(t)
    assert a.dtype == np_dtype and a.shape == (2, 3)
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3))
    a[1, 2] = 40                      # numpy writes, singa reads
    assert tensor.to_numpy(t)[1, 2] == 40
    t.set_value(3)                    # singa writes, numpy reads
    np.testing.assert_array_equal(a, np.full((2, 3), 3, np_dtype))


def test_core_tensor_exports_too():
    ct = sw.from_numpy(np.arange(4, dtype=np.float32))
    a = np.from_dlpack(ct)
    a[0] = -5
    assert sw.to_numpy(ct)[0] == -5
    assert ct.__dlpack_device__() == (1, 0)


@needs_torch
@pytest.mark.parametrize("code,np_dtype", DTYPES)
def test_torch_from_dlpack_shares_memory_both_ways(code, np_dtype):
    t = host_tensor(np.arange(6).reshape(3, 2), code)
    tt = torch.from_dlpack(t)
    assert tuple(tt.shape) == (3, 2) and tt.dtype == getattr(torch, np.dtype(np_dtype).name)
    tt[0, 1] = 7
    assert tensor.to_numpy(t)[0, 1] == 7
    t.set_value(2)                    # float16 has no CPU math: set_value writes every dtype
    assert torch.all(tt == 2)


def test_transposed_view_exports_with_strides():
    t = host_tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    v = t.T()                          # a view: shares t's memory, strides (1, 3)
    a = np.from_dlpack(v)
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(2, 3).T)
    assert a.strides == (4, 12)
    a[2, 0] = 100                      # element (0, 2) of t
    assert tensor.to_numpy(t)[0, 2] == 100


def test_broadcast_view_is_flagged_read_only_in_a_versioned_capsule():
    b = sw.Broadcast(sw.from_numpy(np.arange(3, dtype=np.float32)), (4, 3))
    cap = b.__dlpack__(max_version=(1, 0))
    name, m = capsule_struct(cap)
    assert name == "dltensor_versioned" and m.flags & 1
    a = np.from_dlpack(b)
    np.testing.assert_array_equal(a, np.broadcast_to(np.arange(3, dtype=np.float32), (4, 3)))
    assert not a.flags.writeable


# ---- capsules --------------------------------------------------------------------------------
def test_legacy_capsule_by_default_and_versioned_when_asked():
    t = host_tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    ptr = np.from_dlpack(t).ctypes.data
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(0, 8)), t.__dlpack__(max_version=(1, 2))]
    name, m = capsule_struct(caps[0])                      # caps keeps the structures alive
    assert name == "dltensor"
    assert capsule_struct(caps[1])[0] == "dltensor"
    name, v = capsule_struct(caps[2])
    assert name == "dltensor_versioned"
    assert (v.major, v.minor) == (1, 0) and v.flags == 0
    for dl in (m.dl_tensor, v.dl_tensor):
        assert dl.data == ptr and dl.byte_offset == 0
        assert (dl.device.device_type, dl.device.device_id) == (1, 0)
        assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (2, 32, 1)
        assert dl.ndim == 2 and [dl.shape[i] for i in range(2)] == [3, 2]
        assert [dl.strides[i] for i in range(2)] == [2, 1]


def test_copy_true_exports_a_flagged_copy():
    t = host_tensor(np.ones(4, np.float32))
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    name, v = capsule_struct(cap)
    assert v.flags & 2                                     # IS_COPIED
    a = np.from_dlpack(t, copy=True)
    a[:] = 9
    np.testing.assert_array_equal(tensor.to_numpy(t), np.ones(4, np.float32))


def test_export_errors():
    t = host_tensor(np.ones(2, np.float32))
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=1)                             # a host tensor takes no stream
    t.__dlpack__(stream=-1)
    with pytest.raises(BufferError, match=r"\(2, 0\)"):
        t.__dlpack__(dl_device=(2, 0))                     # no host -> GPU export
    with pytest.raises(TypeError, match="max_version"):
        t.__dlpack__(max_version=1)
    with pytest.raises(TypeError, match="copy"):
        t.__dlpack__(copy="yes")
    assert t.__dlpack_device__() == (1, 0)
    assert t.__dlpack__(dl_device=(1, 0)) is not None


# ---- lifetimes ------------------------------------------------------------------------------
def test_a_view_outlives_the_tensor_and_then_frees_its_memory():
    dev = own_device()
    base = dev.mem_stats()["in_use"]
    t = host_tensor(np.arange(4096, dtype=np.float32), dev=dev)
    used = dev.mem_stats()["in_use"]
    assert used > base
    a = np.from_dlpack(t)
    del t
    gc.collect()
    assert dev.mem_stats()["in_use"] == used               # the view holds the block
    np.testing.assert_array_equal(a, np.arange(4096, dtype=np.float32))
    del a
    gc.collect()
    assert dev.mem_stats()["in_use"] == base               # released with the view


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_an_unused_capsule_gives_the_memory_back(max_version):
    dev = own_device()
    base = dev.mem_stats()["in_use"]
    t = host_tensor(np.ones(1024, np.float32), dev=dev)
    cap = t.__dlpack__(max_version=max_version)
    del t
    gc.collect()
    assert dev.mem_stats()["in_use"] > base
    del cap
    gc.collect()
    assert dev.mem_stats()["in_use"] == base


def test_an_imported_array_lives_as_long_as_singa_uses_it():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    alive = weakref.ref(x)
    t = tensor.from_dlpack(x)
    v = t.reshape((4, 3))              # a singa view of the same memory
    del x, t
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(tensor.to_numpy(v), np.arange(12, dtype=np.float32).reshape(4, 3))
    del v
    gc.collect()
    assert alive() is None             # the producer's deleter ran: nothing leaks


# ---- import: singa sees numpy's and torch's memory ----------------------------------------------
@pytest.mark.parametrize("code,np_dtype", DTYPES)
def test_from_dlpack_of_numpy_shares_memory_both_ways(code, np_dtype):
    x = np.arange(6).reshape(2, 3).astype(np_dtype)
    t = tensor.from_dlpack(x)
    assert t.shape == (2, 3) and t.dtype == code and t.device == device.get_default_device()
    x[0, 0] = 11
    assert tensor.to_numpy(t)[0, 0] == 11
    t.set_value(4)
    np.testing.assert_array_equal(x, np.full((2, 3), 4, np_dtype))


def test_singa_ops_write_into_imported_memory():
    x = np.ones((2, 2), np.float32)
    t = tensor.from_dlpack(x)
    t += 2                             # in place: x sees it
    y = tensor.relu(t)                 # a new tensor: its own memory
    np.testing.assert_array_equal(x, np.full((2, 2), 3, np.float32))
    x[:] = -1
    np.testing.assert_array_equal(tensor.to_numpy(y), np.full((2, 2), 3, np.float32))


@needs_torch
@pytest.mark.parametrize("code,np_dtype", DTYPES)
def test_from_dlpack_of_torch_shares_memory_both_ways(code, np_dtype):
    x = torch.arange(6).reshape(3, 2).to(getattr(torch, np.dtype(np_dtype).name))
    t = tensor.from_dlpack(x)
    x[2, 1] = 21
    assert tensor.to_numpy(t)[2, 1] == 21
    t.set_value(5)
    assert torch.all(x == 5)


def test_from_dlpack_of_a_singa_tensor_shares_memory():
    s = host_tensor(np.zeros(3, np.float32))
    t = tensor.from_dlpack(s)
    t.set_value(6)
    np.testing.assert_array_equal(tensor.to_numpy(s), np.full(3, 6, np.float32))


def test_strided_read_only_or_unaligned_memory_is_copied_or_refused():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ro = x.copy()
    ro.setflags(write=False)
    raw = np.zeros(17, np.uint8)
    unaligned = raw[1:].view(np.float32)                   # 4 floats at an odd address
    for src in (x[:, ::2], x.T, x[::-1], ro, unaligned):
        t = tensor.from_dlpack(src)
        np.testing.assert_array_equal(tensor.to_numpy(t), src)
        t.set_value(-3)                                    # a copy: the source is unchanged
        assert not np.any(np.asarray(src) == -3)
        with pytest.raises(BufferError, match="copy=False"):
            tensor.from_dlpack(src, copy=False)
    t = tensor.from_dlpack(x, copy=True)
    t.set_value(0)
    assert x[0, 1] == 1


@pytest.mark.parametrize("np_dtype", [np.float64, np.int64, np.uint8, np.bool_, np.complex64])
def test_unsupported_dtypes_raise_naming_them(np_dtype):
    x = np.zeros(3, np_dtype)
    name = {np.float64: "float64", np.int64: "int64", np.uint8: "uint8", np.bool_: "bool",
            np.complex64: "complex64"}[np_dtype]
    with pytest.raises(TypeError, match=name):
        tensor.from_dlpack(x)


def test_from_dlpack_argument_errors():
    with pytest.raises(TypeError, match="__dlpack__"):
        tensor.from_dlpack([1.0, 2.0])
    with pytest.raises(TypeError, match="Device"):
        tensor.from_dlpack(np.zeros(2, np.float32), device="cpu")
    with pytest.raises(TypeError, match="copy"):
        tensor.from_dlpack(np.zeros(2, np.float32), copy=1)


def test_empty_and_scalar_tensors_round_trip():
    for shape in [(0,), (2, 0), ()]:
        x = np.zeros(shape, np.float32)
        t = tensor.from_dlpack(x)
        assert t.shape == shape
        assert np.from_dlpack(t).shape == shape


# ---- np.asarray --------------------------------------------------------------------------------
def test_np_asarray_is_a_view_and_to_numpy_a_copy():
    t = host_tensor(np.zeros((2, 2), np.float32))
    a = np.asarray(t)
    c = tensor.to_numpy(t)
    a[0, 0] = 1
    assert tensor.to_numpy(t)[0, 0] == 1 and c[0, 0] == 0
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    b = np.array(t)                                        # np.array copies, as for any array
    b[1, 1] = 5
    assert tensor.to_numpy(t)[1, 1] == 0
    with pytest.raises(ValueError, match="copy"):
        np.asarray(t, dtype=np.float64, copy=False)


# ---- graphs -----------------------------------------------------------------------------------
def test_no_export_while_a_graph_is_recorded():
    dev = own_device()
    t = host_tensor(np.ones(3, np.float32), dev=dev)
    dev.EnableGraph(True)
    try:
        with pytest.raises(BufferError, match="recording a graph"):
            np.from_dlpack(t)
        with pytest.raises(BufferError, match="recording a graph"):
            memoryview(t.data)             # the buffer protocol follows the same rule
    finally:
        dev.EnableGraph(False)
        dev.ResetGraph()
    np.testing.assert_array_equal(np.from_dlpack(t), np.ones(3, np.float32))
    assert memoryview(t.data).tolist() == [1.0, 1.0, 1.0]


def _graph_writing_into(dev, y, export):
    """Records y = x + x (x, y held), exports y if asked, drops the Python handle on y, builds
    and runs the graph; returns (the view or None, y's block id, y's graph block)."""
    x = host_tensor(np.arange(4, dtype=np.float32), dev=dev)
    view = np.from_dlpack(y) if export else None
    dev.EnableGraph(True)
    sw.Add(x.data, x.data, out=y.data)
    dev.EnableGraph(False)
    bid = y.data.block_id()
    del y
    gc.collect()
    dev.RunGraph(False)
    info = [b for b in dev.graph_blocks() if b["id"] == bid]
    return view, info[0]


def test_an_exported_block_is_never_recycled_by_a_graph():
    # Control: the same graph without the export plans y's block into the arena.
    dev = own_device()
    _, info = _graph_writing_into(dev, host_tensor(np.zeros(4, np.float32), dev=dev), False)
    assert info["recyclable"]
    dev.ResetGraph()
    # With a consumer holding y's memory, the graph treats it as user-held and writes it.
    dev2 = own_device()
    view, info = _graph_writing_into(dev2, host_tensor(np.zeros(4, np.float32), dev=dev2), True)
    assert not info["recyclable"]
    np.testing.assert_array_equal(view, 2 * np.arange(4, dtype=np.float32))
    dev2.ResetGraph()


def test_parameters_exported_from_a_graph_model_follow_its_replays():
    dev = own_device()
    m = tiny_nets.compiled(opt.SGD(lr=0.1), dev, use_graph=True)
    data = tiny_nets.batches(3)
    tiny_nets.step(m, *data[0])                            # records and runs the graph
    w = m.fc1.W
    view = np.from_dlpack(w)
    before = view.copy()
    tiny_nets.step(m, *data[1])                            # a replay updates W in place
    np.testing.assert_array_equal(view, tensor.to_numpy(w))
    assert not np.array_equal(view, before)


# ---- the buffer protocol ---------------------------------------------------------------------
@pytest.mark.parametrize("code,np_dtype", DTYPES)
def test_memoryview_of_the_core_tensor_shares_memory_both_ways(code, np_dtype):
    t = host_tensor(np.arange(6).reshape(2, 3).astype(np_dtype), dtype=code)
    fmt = np.dtype(np_dtype).char      # f, e, i: struct's codes, as numpy reads them
    m = memoryview(t.data)
    assert (m.format, m.shape, m.readonly) == (fmt, (2, 3), False)
    a = np.asarray(m)                  # numpy through the buffer: a view
    a[1, 2] = 9
    assert tensor.to_numpy(t)[1, 2] == 9
    t.copy_from_numpy(np.full((2, 3), 7, np_dtype))   # singa writes, the view sees it
    assert a[0, 0] == 7


def test_a_buffer_view_holds_the_memory_after_the_tensor_goes():
    t = host_tensor(np.arange(4, dtype=np.float32))
    a = np.frombuffer(t.data, dtype=np.float32)
    del t
    gc.collect()
    np.testing.assert_array_equal(a, np.arange(4, dtype=np.float32))


def test_strided_and_broadcast_views_through_the_buffer():
    t = host_tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    m = memoryview(t.T().data)         # strides in bytes, as the buffer protocol counts
    assert m.shape == (3, 2) and m.strides == (4, 12)
    np.testing.assert_array_equal(np.asarray(m), np.arange(6, dtype=np.float32).reshape(2, 3).T)
    b = sw.Broadcast(sw.from_numpy(np.arange(3, dtype=np.float32)), (4, 3))
    m = memoryview(b)
    assert m.readonly and m.strides == (0, 4)      # one element at many places
    with pytest.raises(TypeError):
        m[0, 0] = 1.0
    assert not np.asarray(m).flags.writeable


@pytest.mark.skipif(sys.version_info < (3, 12), reason="Tensor.__buffer__ is PEP 688 (3.12+)")
def test_memoryview_of_the_python_tensor():
    t = host_tensor(np.arange(3, dtype=np.float32))
    m = memoryview(t)
    m[0] = 5.0
    assert tensor.to_numpy(t)[0] == 5.0


# ---- GPU ------------------------------------------------------------------------------------
@needs_gpu
def test_gpu_export_import_rules():
    gpu = device.create_cuda_gpu_on(0)
    t = tensor.Tensor((2, 3), gpu)
    t.copy_from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert t.__dlpack_device__() == (2, 0)
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=0)
    host = np.from_dlpack(t, device="cpu")                # asks for dl_device=(1, 0): a copy
    np.testing.assert_array_equal(host, np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(1, 0), copy=False)
    g = tensor.from_dlpack(np.ones(3, np.float32), device=gpu)   # a copy on the GPU
    assert g.device == gpu and np.array_equal(tensor.to_numpy(g), np.ones(3, np.float32))
    a = np.asarray(t)                                      # a host copy
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(2, 3))
    if torch is not None and torch.cuda.is_available():
        tt = torch.from_dlpack(t)                          # shares the GPU memory
        tt[0, 0] = 50
        assert tensor.to_numpy(t)[0, 0] == 50
        back = tensor.from_dlpack(tt)                      # and back: singa shares it too
        assert back.device.id() == 0 and not back.device.is_host()
        back.data += 1.0                                   # a singa kernel on torch's memory
        torch.cuda.synchronize()
        assert tt[0, 0].item() == 51
        tt[1, 2] = -7                                      # torch's write...
        torch.cuda.synchronize()                           # ...done before singa reads
        assert tensor.to_numpy(back)[1, 2] == -7
        on_gpu = tensor.from_dlpack(tt, device=gpu)        # on a given device of that GPU
        assert on_gpu.device == gpu and tensor.to_numpy(on_gpu)[0, 0] == 51
        copied = tensor.from_dlpack(tt, copy=True)         # a copy on the GPU
        tt[0, 0] = 0
        assert tensor.to_numpy(copied)[0, 0] == 51
        with pytest.raises(BufferError, match="contiguous"):
            tensor.from_dlpack(tt.t())                     # strided GPU memory
        with pytest.raises(BufferError, match="device"):
            tensor.from_dlpack(tt, device=device.get_default_device())


class _FakeGpuArray:
    """A producer that says its memory is on CUDA device 0 (never asked for it here)."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        raise AssertionError("a CPU build must refuse before asking for the capsule")


@pytest.mark.skipif(sw.USE_CUDA, reason="a CPU build's refusal")
def test_a_cpu_build_refuses_gpu_memory_saying_why():
    with pytest.raises(NotImplementedError, match="built without CUDA"):
        tensor.from_dlpack(_FakeGpuArray())

