"""singa.device: host devices, the no-CUDA behaviour, lazy allocation and memory statistics."""
import numpy as np
import pytest

from singa import device, singa_wrap, tensor


def test_default_device_is_host():
    dev = device.get_default_device()
    assert isinstance(dev, singa_wrap.Device)
    assert dev.is_host()
    assert dev == device.default_device
    assert device.get_default_device() is device.get_default_device()


def test_create_cpu_device_default_and_separate():
    assert device.create_cpu_device() == device.get_default_device()
    other = device.create_cpu_device(3)
    assert other.id() == 3 and other.is_host()
    assert other != device.get_default_device()


def test_tensors_on_different_devices_do_not_mix():
    other = device.create_cpu_device(4)
    a = tensor.Tensor((2,), other).set_value(1)
    b = tensor.Tensor((2,)).set_value(1)
    with pytest.raises(singa_wrap.DeviceError, match="Add"):
        a + b
    b.to_device(other)
    np.testing.assert_array_equal(tensor.to_numpy(a + b), np.full(2, 2, np.float32))


def test_set_default_device_is_used_by_tensors():
    old = device.get_default_device()
    other = device.create_cpu_device(6)
    try:
        device.set_default_device(other)
        assert tensor.Tensor((2,)).device == other
        assert tensor.zeros((2,)).device == other
    finally:
        device.set_default_device(old)
    assert tensor.Tensor((2,)).device == old
    with pytest.raises(TypeError):
        device.set_default_device("cpu")


@pytest.mark.skipif(singa_wrap.USE_CUDA, reason="checks the behaviour of a build without CUDA")
def test_without_cuda():
    assert device.get_num_gpus() == 0
    assert device.get_gpu_ids() == []
    for fn, args in [(device.create_cuda_gpu, ()), (device.create_cuda_gpus, (2,)),
                     (device.create_cuda_gpu_on, (0,)), (device.create_cuda_gpus_on, ([0],)),
                     (device.get_gpu_mem_size, (0,)), (device.device_query, (0,))]:
        with pytest.raises(RuntimeError, match="without CUDA") as info:
            fn(*args)
        assert isinstance(info.value, device.DeviceUnavailableError)
        assert isinstance(info.value, AssertionError)  # SINGA's checks were assertions


@pytest.mark.skipif(getattr(singa_wrap, "USE_OPENCL", False), reason="build has OpenCL")
def test_without_opencl():
    with pytest.raises(RuntimeError, match="OpenCL"):
        device.create_opencl_device()


def test_enable_lazy_alloc_is_recorded():
    try:
        device.enable_lazy_alloc(False)
        assert device.is_lazy_alloc_enabled() is False
        device.enbale_lazy_alloc(True)
        assert device.is_lazy_alloc_enabled() is True
    finally:
        device.enable_lazy_alloc(True)


def test_memory_statistics_follow_tensors():
    dev = device.create_cpu_device(11)  # a private pool: nothing else allocates here
    stats = device.get_memory_stats(dev)
    assert {"in_use", "peak_in_use", "reserved", "peak_reserved"} <= set(stats)
    before = device.get_memory_in_use(dev)
    t = tensor.Tensor((1000,), dev).set_value(1)
    during = device.get_memory_in_use(dev)
    assert during >= before + 4000
    assert device.get_peak_memory(dev) >= during
    del t
    assert device.get_memory_in_use(dev) <= during - 4000
    assert device.get_peak_memory(dev) >= during
    device.reset_peak_memory(dev)
    assert device.get_peak_memory(dev) == device.get_memory_in_use(dev)


def test_memory_statistics_of_default_device():
    before = device.get_memory_in_use()
    t = tensor.Tensor((4096,)).set_value(0)
    assert device.get_memory_in_use() >= before + 4096 * 4
    assert device.get_peak_memory() >= device.get_memory_in_use()
    del t
    with pytest.raises(TypeError):
        device.get_memory_in_use("cpu")


def test_rand_seed_per_device():
    dev = device.create_cpu_device(12)
    dev.SetRandSeed(7)
    a = tensor.to_numpy(tensor.Tensor((20,), dev).uniform(0, 1))
    dev.SetRandSeed(7)
    b = tensor.to_numpy(tensor.Tensor((20,), dev).uniform(0, 1))
    np.testing.assert_array_equal(a, b)


def test_graph_settings_follow_the_set_calls():
    dev = device.create_cpu_device(1)  # a separate device: the default's switches stay as they are
    assert dev.graph_settings() == {"planning": True, "fusion": True, "layouts": True}
    dev.SetGraphFusion(False)
    dev.SetGraphLayouts(False)
    assert dev.graph_settings() == {"planning": True, "fusion": False, "layouts": False}
    dev.SetGraphPlanning(False)
    assert not dev.graph_settings()["planning"]


def test_a_test_that_leaves_fusion_off_1():
    # conftest puts the default device's graph switches back after each test: the next test
    # (run after this one in file order) sees fusion on again
    device.get_default_device().SetGraphFusion(False)


def test_a_test_that_leaves_fusion_off_2():
    assert device.get_default_device().graph_settings()["fusion"]
