"""What a build says about CUDA, checked in both builds on a machine without a GPU.

    cd /tmp && SINGA_EXPECT_CUDA=1 PYTHONPATH=$WT/build/cuda/py python -m pytest test_cuda_build.py

``singa_wrap.USE_CUDA`` comes from libsinga (not a constant): the CUDA build registers kCuda
kernels and answers a bad GPU id with DeviceError, the CPU build has no kCuda kernel and answers
NotImplementedError. Without a usable GPU every function that would create or query one raises
DeviceUnavailableError (a RuntimeError and an AssertionError) instead of aborting. With
SINGA_EXPECT_CUDA=1 (what `make cuda-test` sets) the extension under test must be the CUDA one.
"""
import os

import numpy as np
import pytest

from singa import device, errors, tensor
from singa import singa_wrap as sw

NO_GPU = device.get_num_gpus() == 0


def _cuda_kernels():
    return [op for op, backend, status in sw.kernel_table()
            if backend == "cuda" and status == "kernel"]


def test_use_cuda_is_a_bool_from_the_build():
    assert sw.USE_CUDA is True or sw.USE_CUDA is False
    if os.environ.get("SINGA_EXPECT_CUDA") == "1":
        assert sw.USE_CUDA, "SINGA_EXPECT_CUDA=1 but this singa_wrap was built without CUDA"


def test_use_cuda_agrees_with_the_kernel_table():
    kernels = _cuda_kernels()
    if not sw.USE_CUDA:
        assert kernels == [], "a build without CUDA registers kCuda kernels: %s" % kernels[:5]
    elif not kernels:
        # The CUDA foundation compiles the device before any kernel file exists; the kernel
        # branches add them (then this asserts).
        pytest.skip("USE_CUDA build without any kCuda kernel registered yet")
    else:
        assert len(kernels) > 10


def test_a_bad_gpu_id_raises_the_builds_error():
    """The core's answer for GPU 5 (none here): DeviceError in a CUDA build, NotImplementedError
    in a CPU build; never an abort, always a message."""
    expected = sw.DeviceError if sw.USE_CUDA else NotImplementedError
    with pytest.raises(expected) as info:
        sw.create_cuda_gpu_on(5)
    msg = str(info.value)
    assert msg.split(":")[0] in ("CreateCudaGPUOn", "create_cuda_gpu_on"), msg  # names the call
    if not sw.USE_CUDA:
        assert "without CUDA" in msg, msg
    elif device.get_num_gpus() == 0:
        assert "no CUDA GPU is usable" in msg, msg
    else:
        assert "GPU id 5" in msg, msg


@pytest.mark.skipif(not NO_GPU, reason="checks a machine without a usable GPU")
def test_no_gpu_is_reported_not_an_abort():
    assert device.get_num_gpus() == 0
    assert device.get_gpu_ids() == []
    assert sw.get_num_gpus() == 0
    assert sw.get_gpu_ids() == []


GPU_FUNCTIONS = [
    ("create_cuda_gpu", ()), ("create_cuda_gpu_on", (0,)), ("create_cuda_gpus", (1,)),
    ("create_cuda_gpus_on", ([0],)), ("get_gpu_mem_size", (0,)), ("device_query", (0,)),
]


@pytest.mark.skipif(not NO_GPU, reason="checks a machine without a usable GPU")
@pytest.mark.parametrize("name,args", GPU_FUNCTIONS, ids=[n for n, _ in GPU_FUNCTIONS])
def test_gpu_functions_raise_device_unavailable(name, args):
    with pytest.raises(errors.DeviceUnavailableError) as info:
        getattr(device, name)(*args)
    err = info.value
    assert isinstance(err, AssertionError)  # SINGA's checks were assertions
    assert isinstance(err, RuntimeError)
    assert device.DeviceUnavailableError is errors.DeviceUnavailableError
    msg = str(err)
    assert msg.startswith(name + ":"), msg  # names the function called
    if sw.USE_CUDA:
        assert "no GPU is usable" in msg, msg
    else:
        assert "without CUDA" in msg, msg


@pytest.mark.skipif(not NO_GPU, reason="checks a machine without a usable GPU")
def test_the_default_device_is_untouched_by_a_failed_gpu_request():
    before = device.get_default_device()
    with pytest.raises(errors.DeviceUnavailableError):
        device.create_cuda_gpu_on(0, set_default=True)
    assert device.get_default_device() is before
    assert before.is_host()


def test_capture_switch_exists_on_every_device():
    """SetCaptureEnabled / capture_enabled / graph_captured belong to every device, so a GPU
    script that sets them also runs on the CPU: a host device has nothing to capture, so it
    reports capture off whatever the switch says, and its graphs are never captured."""
    dev = sw.create_cpu_device(3)
    for on in (True, False, True):
        dev.SetCaptureEnabled(on)
        assert dev.capture_enabled() is False
    x = tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3), dev)
    dev.EnableGraph(True)
    try:
        y = tensor.exp(x)
    finally:
        dev.EnableGraph(False)
    dev.RunGraph()
    dev.RunGraph()
    assert dev.graph_captured() is False
    np.testing.assert_allclose(tensor.to_numpy(y), np.exp(np.arange(6).reshape(2, 3)),
                               rtol=1e-6)


class _GpuLike(object):
    """Answers is_host() like a GPU device (for the host-side choice of a layer's handle)."""

    def is_host(self):
        return False


def test_layers_use_the_common_handles_on_a_gpu_device():
    """Apache SINGA built CudnnConvHandle / CudnnPoolingHandle / CudnnBatchNormHandle on a GPU.
    Our handles only carry the geometry (the op's front picks the CUDA kernel), so a GPU
    device gets the build's Cudnn* class where it defines one and the common one otherwise."""
    from singa import autograd
    from singa.layers import _util
    gpu = _GpuLike()
    for cpu_name, gpu_name in (("ConvHandle", "CudnnConvHandle"),
                               ("PoolingHandle", "CudnnPoolingHandle"),
                               ("BatchNormHandle", "CudnnBatchNormHandle")):
        want = getattr(sw, gpu_name, None) or getattr(sw, cpu_name, None) or \
            getattr(autograd, cpu_name)
        assert _util.handle_class(cpu_name, gpu_name, gpu) is want, cpu_name
    assert _util.handle_class("NoSuchHandle", "CudnnNoSuchHandle", gpu) is None
    with pytest.raises(NotImplementedError, match="CudnnNoSuchHandle"):
        _util.make_handle("NoSuchHandle", "CudnnNoSuchHandle", gpu)


def test_nccl_comes_with_cuda():
    assert sw.USE_NCCL == sw.USE_CUDA


@pytest.mark.skipif(not sw.USE_NCCL, reason="the NCCL form needs a CUDA build")
def test_nccl_form_of_the_communicator_checks_its_arguments():
    with pytest.raises(TypeError, match="NcclIdHolder"):
        sw.Communicator(0, 2, object(), 1024)
    try:
        holder = sw.NcclIdHolder()
    except sw.SingaError as e:  # NCCL may need a GPU even to make an id: an error, not an abort
        assert "NewNcclId" in str(e)
        return
    import pickle
    assert isinstance(holder.id, bytes) and len(holder.id) == 128
    assert pickle.loads(pickle.dumps(holder)).id == holder.id  # multiprocessing hands it over
    with pytest.raises(sw.ArgumentError, match="outside a world"):
        sw.Communicator(3, 2, holder, 1024)
    comm = sw.Communicator(0, 1, holder, 1024)
    assert (comm.world_size, comm.global_rank, comm.local_rank) == (1, 0, 0)
    t = tensor.from_numpy(np.ones(4, np.float32))
    with pytest.raises(sw.DeviceError, match="CUDA tensors only"):
        comm.synch(t.data)
