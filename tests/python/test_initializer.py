"""singa.initializer: fans, the distributions' bounds and spreads, determinism, errors."""
import math

import numpy as np
import pytest

from singa import device, initializer, tensor
from stats_check import assert_normal, assert_uniform


def N(t):
    return tensor.to_numpy(t)


def fill(fn, shape, *args):
    t = tensor.Tensor(shape)
    out = fn(t, *args)
    assert out is t
    return N(t)


def test_compute_fans():
    assert initializer.compute_fans((300, 200)) == (300, 200)
    assert initializer.compute_fans((16, 8, 3, 3)) == (72, 144)
    assert initializer.compute_fans((3, 3, 8, 16), "channels_last") == (72, 144)
    assert initializer.compute_fans((64,)) == (8.0, 8.0)
    with pytest.raises(ValueError):
        initializer.compute_fans((2, 3, 4), "nhwc")


# (function, shape, limit of a uniform or std of a normal)
UNIFORM = [
    (initializer.he_uniform, (400, 300), math.sqrt(6 / 400)),
    (initializer.glorot_uniform, (400, 300), math.sqrt(6 / 700)),
    (initializer.xavier_uniform, (64, 32, 3, 3), math.sqrt(6 / ((32 + 64) * 9))),
    (initializer.lecun_uniform, (400, 300), math.sqrt(3 / 400)),
]
NORMAL = [
    (initializer.he_normal, (400, 300), math.sqrt(2 / 400)),
    (initializer.glorot_normal, (400, 300), math.sqrt(2 / 700)),
    (initializer.xavier_normal, (400, 300), math.sqrt(2 / 700)),
    (initializer.lecun_normal, (64, 32, 3, 3), math.sqrt(1 / (32 * 9))),
]


@pytest.mark.parametrize("fn,shape,limit", UNIFORM, ids=lambda v: getattr(v, "__name__", ""))
def test_uniform_initializers(fn, shape, limit):
    assert_uniform(fill(fn, shape), limit, fn.__name__)


@pytest.mark.parametrize("fn,shape,std", NORMAL, ids=lambda v: getattr(v, "__name__", ""))
def test_normal_initializers(fn, shape, std):
    assert_normal(fill(fn, shape), std, fn.__name__)


def test_older_helpers():
    assert_uniform(fill(initializer.uniform, (300, 300), 300, 300), 0.1)  # sqrt(3 * 2 / 600)
    assert_uniform(fill(initializer.uniform, (300, 300), 300), 0.1)  # fan_in only: sqrt(3/300)
    assert_uniform(fill(initializer.uniform, (300, 300), 0, 300), 0.1)  # fan_out only
    assert_normal(fill(initializer.gaussian, (300, 300), 0, 400), math.sqrt(2 / 400))
    assert_normal(fill(initializer.gaussian, (300, 300), 100, 300), math.sqrt(4 / 400))
    with pytest.raises(ValueError):
        initializer.uniform(tensor.Tensor((2, 2)))
    assert_uniform(fill(initializer.xavier, (200, 100)), math.sqrt(6 / 300))
    assert_normal(fill(initializer.glorot, (300, 300)), math.sqrt(2 / 600))
    assert_normal(fill(initializer.msra, (300, 300)), math.sqrt(2 / 300))


def test_constant_eye_orthogonal():
    np.testing.assert_array_equal(fill(initializer.constant, (2, 3), 1.5), np.full((2, 3), 1.5))
    np.testing.assert_array_equal(fill(initializer.zeros, (2,)), [0, 0])
    np.testing.assert_array_equal(fill(initializer.ones, (2,)), [1, 1])
    np.testing.assert_array_equal(fill(initializer.eye, (2, 3)), np.eye(2, 3))
    for shape in ((5, 3), (3, 5), (4, 4)):
        q = fill(initializer.orthogonal, shape, 2.0)
        small = q.T @ q if shape[0] >= shape[1] else q @ q.T
        np.testing.assert_allclose(small, 4 * np.eye(min(shape)), atol=1e-5)
    with pytest.raises(ValueError):
        initializer.eye(tensor.Tensor((2, 2, 2)))
    with pytest.raises(ValueError):
        initializer.orthogonal(tensor.Tensor((4,)))


def test_variance_scaling_checks_its_arguments():
    t = tensor.Tensor((3, 3))
    with pytest.raises(ValueError):
        initializer.variance_scaling(t, scale=0)
    with pytest.raises(ValueError):
        initializer.variance_scaling(t, mode="fan_max")
    with pytest.raises(ValueError):
        initializer.variance_scaling(t, distribution="cauchy")
    with pytest.raises(TypeError):
        initializer.he_normal(np.zeros((3, 3), np.float32))
    with pytest.raises(TypeError):
        initializer.he_normal(tensor.Tensor((3, 3), dtype=tensor.int32))


def test_draws_come_from_the_device_generator():
    dev = device.create_cpu_device(41)

    def draw():
        dev.SetRandSeed(123)
        t = tensor.Tensor((50, 40), dev)
        initializer.he_normal(t)
        initializer.glorot_uniform(t)
        return N(t)

    np.testing.assert_array_equal(draw(), draw())


@pytest.mark.parametrize("fn", [initializer.xavier, initializer.glorot, initializer.msra,
                                initializer.he_normal, initializer.glorot_uniform,
                                initializer.lecun_normal])
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (2, 0, 3, 3)])
def test_an_empty_weight_is_left_as_it_is(fn, shape):
    # PyTorch's init functions do nothing to a zero-element tensor; SINGA's older helpers
    # divided by the zero fan (ZeroDivisionError, found by tools/fuzz_api.py).
    t = tensor.Tensor(shape)
    assert fn(t) is t and t.shape == shape


def test_older_helpers_name_the_axes_they_need():
    with pytest.raises(ValueError, match=r"initializer\.xavier: .*2 or more axes.*\(5,\)"):
        initializer.xavier(tensor.Tensor((5,)))
    with pytest.raises(ValueError, match=r"initializer\.msra: .*1 or more axes.*\(\)"):
        initializer.msra(tensor.Tensor(()))
    assert_normal(tensor.to_numpy(initializer.msra(tensor.Tensor((40000,)))), math.sqrt(2 / 40000))
