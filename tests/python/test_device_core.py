"""Core tensor and device behaviour a SINGA 3.3 user relies on: GetFloatValue(n), new tensors
reading as zeros, the seeded random stream (checked against a numpy reproduction of libstdc++'s
distributions, the ones SINGA's CppCPU draws with), PrintTimeProfiling's hint and a dropped
device not leaking its graph."""
import gc
import os

import numpy as np
import pytest

from singa import device, singa_wrap as sw, tensor


# ---- GetFloatValue / GetIntValue ------------------------------------------------------------
def test_get_float_value_is_flat_with_n_values():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    t = sw.from_numpy(a)
    v = t.GetFloatValue(12)
    assert v.shape == (12,) and v.dtype == np.float32
    np.testing.assert_array_equal(v, a.reshape(-1))
    # SINGA's tensor.to_numpy: GetFloatValue(int(size)) then reshape to the tensor's shape.
    np.testing.assert_array_equal(t.GetFloatValue(int(t.Size())).reshape(t.shape()), a)
    np.testing.assert_array_equal(t.GetFloatValue(5), a.reshape(-1)[:5])
    assert t.GetFloatValue(0).shape == (0,)


def test_get_int_value_and_views():
    a = np.arange(6, dtype=np.int32).reshape(2, 3) - 2
    t = sw.from_numpy(a)
    v = t.GetIntValue(6)
    assert v.dtype == np.int32
    np.testing.assert_array_equal(v, a.reshape(-1))
    # A transposed view gives its values in its own row-major order.
    tt = sw.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3)).T()
    np.testing.assert_array_equal(tt.GetFloatValue(6), np.arange(6).reshape(2, 3).T.reshape(-1))


def test_get_value_count_errors():
    t = sw.Tensor((2, 2))
    with pytest.raises(ValueError, match=r"GetFloatValue: asked for 5 values .*\(2, 2\)"):
        t.GetFloatValue(5)
    with pytest.raises(ValueError, match="GetIntValue"):
        t.GetIntValue(-1)
    with pytest.raises(TypeError, match="GetFloatValue"):
        t.GetFloatValue(2.0)


# ---- a new tensor reads as zeros --------------------------------------------------------------
def test_new_tensor_reads_zeros_even_on_reused_pool_memory():
    dev = device.create_cpu_device(7)
    shape = (64, 33)
    for _ in range(3):
        t = sw.Tensor(shape, dev)
        np.testing.assert_array_equal(sw.to_numpy(t), np.zeros(shape, np.float32))
        t.SetFloatValue(7.5)   # dirty the pool's memory: the next tensor reuses this piece
        del t
    ti = sw.Tensor((10,), dev, sw.kInt)
    np.testing.assert_array_equal(sw.to_numpy(ti), np.zeros(10, np.int32))


def test_tensor_plus_equals_on_a_new_tensor():
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    t = tensor.Tensor((4, 5))
    t += tensor.from_numpy(x)
    np.testing.assert_array_equal(tensor.to_numpy(t), x)


def test_partial_copy_leaves_the_rest_zero():
    t = sw.Tensor((8,))
    sw.copy_from_numpy(t, np.array([1, 2, 3], np.float32), 4)
    np.testing.assert_array_equal(sw.to_numpy(t), [0, 0, 0, 0, 1, 2, 3, 0])


# ---- the random stream: libstdc++'s algorithms, as SINGA draws them ---------------------------
def _raw(seed, n):
    """The first n outputs of std::mt19937(seed): numpy's legacy MT19937 seeding is the same
    init_genrand."""
    bg = np.random.MT19937()
    bg._legacy_seeding(seed)
    return iter(bg.random_raw(n).astype(np.uint64).tolist())


def _canonical_float(g):
    r = np.float32(next(g)) / np.float32(4294967296.0)
    return np.nextafter(np.float32(1), np.float32(0)) if r >= 1 else r


def _uniform_ref(seed, n, low, high):
    g = _raw(seed, n)
    span = np.float32(high) - np.float32(low)
    return np.array([_canonical_float(g) * span + np.float32(low) for _ in range(n)], np.float32)


def _gaussian_ref(seed, n, mean, std):
    g = _raw(seed, 4 * n + 64)
    out = []
    f32 = np.float32
    while len(out) < n:
        while True:
            x = f32(f32(2) * _canonical_float(g) - 1.0)
            y = f32(f32(2) * _canonical_float(g) - 1.0)
            r2 = f32(x * x + y * y)
            if not (r2 > 1 or r2 == 0):
                break
        mult = np.sqrt(f32(f32(-2) * np.log(r2)) / r2, dtype=f32)
        out += [f32(y * mult) * f32(std) + f32(mean), f32(x * mult) * f32(std) + f32(mean)]
    return np.array(out[:n], np.float32)


def _bernoulli_ref(seed, n, p):
    g = _raw(seed, 2 * n)
    out = []
    for _ in range(n):
        lo, hi = next(g), next(g)
        u = (float(lo) + float(hi) * 4294967296.0) / 18446744073709551616.0
        out.append(1.0 if u < float(np.float32(p)) else 0.0)
    return np.array(out, np.float32)


@pytest.mark.parametrize("seed", [0, 42, 5489])
def test_uniform_matches_singa_stream(seed):
    dev = device.create_cpu_device(7)
    dev.SetRandSeed(seed)
    t = sw.Tensor((1000,), dev)
    sw.Uniform(-2.0, 3.0, t)
    np.testing.assert_array_equal(sw.to_numpy(t), _uniform_ref(seed, 1000, -2.0, 3.0))


@pytest.mark.parametrize("n", [999, 1000])
def test_gaussian_matches_singa_stream(n):
    dev = device.create_cpu_device(7)
    dev.SetRandSeed(7)
    t = sw.Tensor((n,), dev)
    sw.Gaussian(0.5, 2.0, t)
    np.testing.assert_allclose(sw.to_numpy(t), _gaussian_ref(7, n, 0.5, 2.0), rtol=2e-6,
                               atol=2e-6)


def test_bernoulli_matches_singa_stream():
    dev = device.create_cpu_device(7)
    dev.SetRandSeed(3)
    t = sw.Tensor((2000,), dev)
    sw.Bernoulli(0.3, t)
    np.testing.assert_array_equal(sw.to_numpy(t), _bernoulli_ref(3, 2000, 0.3))


def test_unseeded_device_uses_mt19937_default_seed():
    dev = device.create_cpu_device(7)
    t = sw.Tensor((16,), dev)
    sw.Uniform(0.0, 1.0, t)
    # std::mt19937's first output for its default seed 5489 is 3499211612.
    assert sw.to_numpy(t)[0] == np.float32(np.float32(3499211612) / np.float32(2 ** 32))
    np.testing.assert_array_equal(sw.to_numpy(t), _uniform_ref(5489, 16, 0.0, 1.0))


# ---- PrintTimeProfiling -----------------------------------------------------------------------
def test_print_time_profiling_off_prints_a_hint(capfd):
    dev = device.create_cpu_device(7)
    dev.PrintTimeProfiling()
    out = capfd.readouterr().out
    assert out.count("\n") == 1 and "SetVerbosity(1)" in out and "off" in out


def test_print_time_profiling_on_prints_the_table(capfd):
    dev = device.create_cpu_device(7)
    x = sw.from_numpy(np.ones((8, 8), np.float32), dev)
    dev.SetVerbosity(1)
    dev.SetSkipIteration(0)
    dev.EnableGraph(True)
    y = sw.Mult(x, x)
    dev.EnableGraph(False)
    dev.RunGraph()
    dev.PrintTimeProfiling()
    out = capfd.readouterr().out
    assert "Mult" in out and "ms/iter" in out and "1 iterations measured" in out
    np.testing.assert_allclose(sw.to_numpy(y), np.full((8, 8), 8.0))
    dev.ResetGraph()


def test_profile_switched_on_after_warmup_counts_only_timed_replays(capfd):
    # The per-iteration times divide by the replays that were timed: a profile switched on
    # after three untimed replays and measured over two says 2, not 5.
    dev = device.create_cpu_device(7)
    x = sw.from_numpy(np.ones((8, 8), np.float32), dev)
    dev.EnableGraph(True)
    sw.Mult(x, x)
    dev.EnableGraph(False)
    for _ in range(3):
        dev.RunGraph()
    dev.SetSkipIteration(0)
    dev.SetVerbosity(1)
    dev.RunGraph()
    dev.RunGraph()
    assert "2 iterations measured" in dev.GetTimeProfiling()
    dev.ResetGraph()


# ---- a dropped device does not keep its graph -------------------------------------------------
def _rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / float(1 << 20)


def _record_and_drop():
    dev = device.create_cpu_device(7)
    x = sw.Tensor((1024, 1024), dev)             # 4 MiB
    dev.EnableGraph(True)
    y = sw.Mult(x, x)
    z = sw.Add(y, 1.0)
    dev.EnableGraph(False)
    dev.RunGraph()
    assert sw.to_numpy(z)[0, 0] == 1.0            # zeros @ zeros + 1
    assert dev.graph_num_nodes() >= 2
    return dev.num_handles()


def test_device_handles_count_wrappers():
    dev = device.create_cpu_device(7)
    assert dev.num_handles() == 1
    t = sw.Tensor((2,), dev)
    d2 = t.device()
    assert d2 == dev and dev.num_handles() == 2
    del d2
    assert dev.num_handles() == 1


def test_dropped_device_with_recorded_graph_does_not_leak():
    assert _record_and_drop() == 1
    gc.collect()
    before = _rss_mib()
    for _ in range(30):
        _record_and_drop()
    gc.collect()
    grown = _rss_mib() - before
    # Each cycle holds 12 MiB (x, y, z) while it runs; with the Device <-> graph cycle the 30
    # cycles kept 360 MiB alive.
    assert grown < 60, "RSS grew by %.0f MiB over 30 create/record/drop cycles" % grown


def test_default_device_graph_survives_dropped_wrappers():
    dev = device.get_default_device()
    dev.ResetGraph()
    x = sw.from_numpy(np.full((2, 2), 2.0, np.float32))
    dev.EnableGraph(True)
    y = sw.EltwiseMult(x, 3.0)
    dev.EnableGraph(False)
    n = dev.graph_num_nodes()
    assert n >= 1
    del dev
    gc.collect()
    d = device.get_default_device()
    try:
        assert d.graph_num_nodes() == n
        d.RunGraph()
        np.testing.assert_array_equal(sw.to_numpy(y), np.full((2, 2), 6.0))
    finally:
        d.ResetGraph()
