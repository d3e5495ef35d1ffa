"""Autograd behaviours that mutation testing (tools/mutate.py, TESTING.md) found unpinned: each
test fails on a one-line change of singa.autograd that the rest of the suite let through.

The op tables (test_autograd_ops.py) differentiate every input at once; the cases here are the
ones where only SOME inputs need a gradient, where an option is passed on, and where a
non-default argument matters. References are numpy (the documented formula)."""
import numpy as np
import pytest

from singa import autograd, tensor

F32 = np.float32


def N(t):
    return tensor.to_numpy(t)


def T(a, grad):
    """A tensor of ``a``; a leaf whose gradient backward() yields when ``grad``."""
    return tensor.Tensor(data=np.asarray(a, F32), requires_grad=grad, stores_grad=grad)


def grads(loss):
    """{id(tensor): numpy gradient} for every tensor backward() yields."""
    return {id(p): N(g) for p, g in autograd.backward(loss)}


@pytest.fixture
def rng():
    return np.random.default_rng(3)


@pytest.fixture
def training():
    autograd.training = True
    yield
    autograd.training = False


@pytest.mark.parametrize("x_grad,slope_grad", [(True, False), (False, True), (True, True)])
def test_prelu_gradient_of_each_input_alone(rng, training, x_grad, slope_grad):
    # y = x (x > 0), slope * x (x <= 0); loss = sum(y * w)
    xv = rng.standard_normal((3, 4)).astype(F32)
    sv = rng.uniform(0.1, 0.5, (3, 4)).astype(F32)
    wv = rng.standard_normal((3, 4)).astype(F32)
    x, s = T(xv, x_grad), T(sv, slope_grad)
    y = autograd.prelu(x, s)
    np.testing.assert_allclose(N(y), np.where(xv > 0, xv, sv * xv), rtol=1e-6)
    g = grads(autograd.reduce_sum(autograd.mul(y, T(wv, False)), None, 0))
    assert (id(x) in g) == x_grad and (id(s) in g) == slope_grad
    if x_grad:
        np.testing.assert_allclose(g[id(x)], wv * np.where(xv > 0, 1, sv), rtol=1e-5)
    if slope_grad:
        np.testing.assert_allclose(g[id(s)], wv * np.minimum(xv, 0), rtol=1e-5)


@pytest.mark.parametrize("axes", [[1, 1], [1, -1]])
def test_slice_rejects_an_axis_named_twice(axes):
    # [1, -1] names the same axis of a 2-d input twice
    x = T(np.arange(12).reshape(3, 4), False)
    with pytest.raises(IndexError, match="slice: repeated axis"):
        autograd.slice(x, [0, 1], [2, 3], axes)
    # distinct axes are fine and match numpy
    np.testing.assert_array_equal(N(autograd.slice(x, [0, 1], [2, 3], [0, -1])),
                                  np.arange(12).reshape(3, 4)[0:2, 1:3])


@pytest.mark.parametrize("shape,hw", [((2, 3, 5, 7), (5, 7)), ((4, 6), (1, 1))])
def test_batchnorm_handle_geometry(shape, hw):
    # SINGA's batch-norm handles expose batchsize, channels, height, width (1 when absent), and
    # accept (x, momentum) as well as singa_wrap's (momentum, x)
    x = tensor.Tensor(shape)
    for h in (autograd.BatchNormHandle(x, 0.8), autograd.BatchNormHandle(0.8, x)):
        assert (h.batchsize, h.channels, h.height, h.width) == shape[:2] + hw
        assert h.factor == pytest.approx(0.8)
