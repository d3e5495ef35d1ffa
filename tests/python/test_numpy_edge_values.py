"""Valid edge-case inputs on which singa gave numbers, shapes or dtypes other than numpy's (or
torch's), found by the differential fuzzer tools/fuzz_numpy.py; each test fails before its fix."""
import numpy as np
import pytest

from singa import autograd, tensor
from singa.errors import AxisError

R = np.random.RandomState(11)


def t(a, grad=False):
    x = tensor.from_numpy(np.asarray(a))
    x.requires_grad = x.stores_grad = grad
    return x


def grads_of(y, dy, *xs):
    g = autograd.gradients(y, tensor.from_numpy(np.asarray(dy, np.float32)))
    return [tensor.to_numpy(g[x]) for x in xs]


@pytest.mark.parametrize("shape", [(2, 3), (2, 1, 5), (3, 4, 2, 2), (4,)])
def test_flatten_negative_axis_counts_from_the_rank(shape):
    # flatten(x, -1) of a (2, 3) tensor was (6, 1): -1 was taken modulo rank + 1
    a = R.randn(*shape).astype(np.float32)
    r = a.ndim
    for axis in range(-r, r + 1):
        k = axis + r if axis < 0 else axis
        want = a.reshape(int(np.prod(a.shape[:k])), -1)
        np.testing.assert_array_equal(tensor.to_numpy(autograd.flatten(t(a), axis)), want)


def test_flatten_axis_below_minus_rank_raises():
    with pytest.raises(AxisError, match="flatten"):
        autograd.flatten(t(np.zeros((2, 3), np.float32)), -3)
