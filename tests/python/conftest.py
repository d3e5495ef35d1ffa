"""Shared helpers for the Python tests of singa."""
import numpy as np
import pytest

from singa import tensor


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def close(t, expected, rtol=1e-5, atol=1e-6):
    """Asserts that Tensor t holds `expected` (values, shape, and dtype when expected is an
    ndarray)."""
    got = tensor.to_numpy(t)
    exp = np.asarray(expected)
    assert got.shape == exp.shape, "shape %s != expected %s" % (got.shape, exp.shape)
    if isinstance(expected, np.ndarray):
        assert got.dtype == exp.dtype, "dtype %s != expected %s" % (got.dtype, exp.dtype)
    np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol)


def t_(a):
    """A Tensor holding a copy of numpy array a."""
    return tensor.from_numpy(np.asarray(a))


@pytest.fixture(autouse=True)
def _reset_training_flag():
    """Model.train() and some tests switch autograd.training on; every test starts from off."""
    from singa import autograd
    autograd.training = False
    yield
    autograd.training = False


@pytest.fixture(autouse=True)
def _restore_default_backend():
    """device.create_cpu_device() is the default device (as in SINGA): a test that switches its
    kernels (dev.set_backend("cpu")) must not hand the reference kernels to the tests after it."""
    from singa import device
    dev = device.get_default_device()
    old, settings = dev.backend(), dev.graph_settings()
    yield
    if dev.backend() != old:
        dev.set_backend(old)
    # the graph's switches too: a test that left fusion off made a later one, in another
    # order (mutmut's), count no fused operations
    now = dev.graph_settings()
    if now != settings:
        dev.SetGraphPlanning(settings["planning"])
        dev.SetGraphFusion(settings["fusion"])
        dev.SetGraphLayouts(settings["layouts"])
