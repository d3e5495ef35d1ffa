"""The loss operators in Apache SINGA 3.3's convention: ``Loss(t)`` takes the target,
``forward(x)`` (or calling the operator on x) gives a (1,) tensor, ``backward(dy=1.0)`` the
gradient of x. Values and gradients are checked against numpy re-implementations of SINGA's
formulas, and gradients also by finite differences.
"""
import numpy as np
import pytest

from gradcheck import check_op, numeric_grads
from singa import autograd, tensor
from singa import singa_wrap as sw

R = np.random.RandomState(5)
EPS = 1e-4  # SINGA's epsilon inside binary_cross_entropy's logarithms


def np_(t):
    return tensor.to_numpy(t) if isinstance(t, tensor.Tensor) else sw.to_numpy(t)


def softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def onehot(labels, c):
    return np.eye(c, dtype=np.float32)[labels]


# SINGA 3.3's formulas, in numpy: value(x, t) and the gradient SINGA's backward returns (dy = 1)
def sce_value(x, t):
    return -np.sum(t * np.log(softmax(x))) / x.shape[0]


def sce_grad(x, t):
    return (softmax(x) - t) / x.shape[0]


def ce_value(x, t):
    return -np.sum(t * np.log(x)) / x.shape[0]


def ce_grad(x, t):
    return -t / x / x.shape[0]


def bce_value(x, t):
    return -np.sum(t * np.log(x + EPS) + (1 - t) * np.log(1 + EPS - x)) / x.shape[0]


def bce_grad(x, t):
    return -(t / (x + EPS) - (1 - t) / (1 + EPS - x)) / x.shape[0]


def mse_value(x, t):
    return np.sum((x - t) ** 2) / x.size


def mse_grad(x, t):
    return 2 * (x - t) / x.size


PROBS = softmax(R.uniform(-1, 1, (4, 3))).astype(np.float32)
LABELS = np.array([0, 2, 1, 2])
LOSSES = [
    ("softmax_cross_entropy", autograd.SoftMaxCrossEntropy, autograd.softmax_cross_entropy,
     sce_value, sce_grad, R.uniform(-2, 2, (4, 3)).astype(np.float32), onehot(LABELS, 3)),
    ("cross_entropy", autograd.CrossEntropy, autograd.cross_entropy, ce_value, ce_grad,
     PROBS, onehot(LABELS, 3)),
    ("binary_cross_entropy", autograd.BinaryCrossEntropy, autograd.binary_cross_entropy,
     bce_value, bce_grad, R.uniform(0.05, 0.95, (4, 3)).astype(np.float32),
     R.uniform(0, 1, (4, 3)).astype(np.float32)),
    ("mse", autograd.MeanSquareError, autograd.mse_loss, mse_value, mse_grad,
     R.uniform(-1, 1, (2, 3, 4)).astype(np.float32),
     R.uniform(-1, 1, (2, 3, 4)).astype(np.float32)),
]
IDS = [c[0] for c in LOSSES]


@pytest.mark.parametrize("name,cls,fn,value,grad,x,t", LOSSES, ids=IDS)
def test_operator_takes_the_target_in_the_constructor(name, cls, fn, value, grad, x, t):
    autograd.training = True
    op = cls(tensor.from_numpy(t))
    y = op(tensor.from_numpy(x))[0]
    assert y.shape == (1,)
    np.testing.assert_allclose(np_(y), [value(x, t)], rtol=1e-5, atol=1e-6)
    dx = op.backward()  # dy defaults to 1.0; a single gradient: the target has none
    assert isinstance(dx, sw.Tensor)
    np.testing.assert_allclose(np_(dx), grad(x, t), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np_(op.backward(2.5)), 2.5 * grad(x, t), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np_(op.backward(np.float32(0.5))), 0.5 * grad(x, t), rtol=1e-4,
                               atol=1e-6)
    seed = tensor.from_numpy(np.array([-2.0], np.float32))
    np.testing.assert_allclose(np_(op.backward(seed)), -2.0 * grad(x, t), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np_(op.forward(tensor.from_numpy(x).data)), [value(x, t)],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,cls,fn,value,grad,x,t", LOSSES, ids=IDS)
def test_function_value_and_finite_differences(name, cls, fn, value, grad, x, t):
    check_op(lambda ag, a, b: fn(a, b), lambda a, b: np.array([value(a, b)]), [x, t], grad=[0])


@pytest.mark.parametrize("name,cls,fn,value,grad,x,t", LOSSES, ids=IDS)
def test_singa_gradient_formula_is_the_derivative_of_its_value(name, cls, fn, value, grad, x, t):
    # guards the numpy formulas above: SINGA's backward is the derivative of its forward
    want = numeric_grads(lambda a: np.array([value(a, t)]), [x.astype(np.float64)], [0],
                         [np.ones(1)])[0]
    np.testing.assert_allclose(grad(x.astype(np.float64), t), want, rtol=1e-5, atol=1e-7)


def test_mse_is_the_mean_over_all_elements_not_half_the_batch_mean():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    t = np.zeros((2, 2), np.float32)
    y = autograd.mse_loss(tensor.from_numpy(x), tensor.from_numpy(t))
    np.testing.assert_allclose(np_(y), [7.5])  # (1 + 4 + 9 + 16) / 4


def test_binary_cross_entropy_is_finite_at_0_and_1():
    autograd.training = True
    x = np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)
    t = np.array([[0.0, 1.0], [0.0, 1.0]], np.float32)
    op = autograd.BinaryCrossEntropy(tensor.from_numpy(t))
    y = np_(op(tensor.from_numpy(x))[0])
    dx = np_(op.backward())
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(dx))
    np.testing.assert_allclose(y, [bce_value(x, t)], rtol=1e-4)
    np.testing.assert_allclose(dx, bce_grad(x, t), rtol=1e-4)


def test_softmax_cross_entropy_with_integer_labels_equals_one_hot():
    x = R.uniform(-2, 2, (4, 3)).astype(np.float32)
    a = autograd.softmax_cross_entropy(tensor.from_numpy(x),
                                       tensor.from_numpy(LABELS.astype(np.int32)))
    np.testing.assert_allclose(np_(a), [sce_value(x, onehot(LABELS, 3))], rtol=1e-5)


def test_loss_as_the_root_of_backward_scales_with_dy():
    autograd.training = True
    x_np = R.uniform(-1, 1, (3, 4)).astype(np.float32)
    t_np = R.uniform(-1, 1, (3, 4)).astype(np.float32)
    x = tensor.from_numpy(x_np)
    x.stores_grad = True
    loss = autograd.mse_loss(x, tensor.from_numpy(t_np))
    grads = autograd.gradients(loss, 3.0)
    np.testing.assert_allclose(np_(grads[id(x)]), 3.0 * mse_grad(x_np, t_np), rtol=1e-5)


def test_qa_lstm_loss_backward_default_dy():
    autograd.training = True
    pos = np.array([0.9, 0.1, 0.5], np.float32)
    neg = np.array([0.2, 0.5, 0.6], np.float32)
    op = autograd.QALSTMLoss(0.2)
    y = op(tensor.from_numpy(pos), tensor.from_numpy(neg))[0]
    np.testing.assert_allclose(np_(y), [np.mean(np.maximum(0, 0.2 - pos + neg))], rtol=1e-6)
    dpos, dneg = op.backward()
    active = (0.2 - pos + neg > 0).astype(np.float32) / 3
    np.testing.assert_allclose(np_(dpos), -active)
    np.testing.assert_allclose(np_(dneg), active)


def test_loss_without_a_target_says_so():
    with pytest.raises(ValueError, match="target"):
        autograd.MeanSquareError()(tensor.from_numpy(np.ones((2, 2), np.float32)))


# ---- MeanSquareError broadcasts its target (SINGA 3.3's x - t), the mean over numel(x) ----------
BROADCAST_TARGETS = [((2, 4), (2, 1)), ((2, 4), (4,)), ((3, 2, 4), (2, 1)), ((2, 3), (1, 1)),
                     ((2, 3), ())]


@pytest.mark.parametrize("x_shape,t_shape", BROADCAST_TARGETS,
                         ids=["%s-%s" % c for c in BROADCAST_TARGETS])
def test_mse_operator_broadcasts_the_target(x_shape, t_shape):
    autograd.training = True
    x = R.uniform(-1, 1, x_shape).astype(np.float32)
    t = np.asarray(R.uniform(-1, 1, t_shape), np.float32)
    op = autograd.MeanSquareError(tensor.from_numpy(t))
    y = op(tensor.from_numpy(x))[0]
    np.testing.assert_allclose(np_(y), [np.mean((x - t) ** 2)], rtol=1e-5, atol=1e-7)
    dx = np_(op.backward(1.5))
    assert dx.shape == x_shape
    # finite differences of numpy's broadcast mean in float64 (the target is a constant)
    want = numeric_grads(lambda a: np.array([np.mean((a - t) ** 2)]), [x.astype(np.float64)],
                         [0], [np.ones(1)])[0]
    np.testing.assert_allclose(dx, 1.5 * want, rtol=1e-4, atol=1e-6)


def test_mse_broadcast_target_through_autograd_backward():
    autograd.training = True
    x_np = R.uniform(-1, 1, (2, 4)).astype(np.float32)
    t_np = R.uniform(-1, 1, (2, 1)).astype(np.float32)
    x = tensor.from_numpy(x_np)
    x.requires_grad = x.stores_grad = True
    loss = autograd.MeanSquareError(tensor.from_numpy(t_np))(x)[0]
    grads = {id(p): g for p, g in autograd.backward(loss)}
    np.testing.assert_allclose(np_(grads[id(x)]), 2 * (x_np - t_np) / x_np.size, rtol=1e-5)


@pytest.mark.parametrize("x_shape,t_shape", [((2, 1), (2, 4)), ((4,), (2, 4)), ((2, 4), (3, 4))])
def test_mse_target_that_would_change_the_output_shape_raises(x_shape, t_shape):
    op = autograd.MeanSquareError(tensor.from_numpy(np.ones(t_shape, np.float32)))
    with pytest.raises(sw.ShapeError, match=r"%s.*%s" % (
            str(t_shape).replace("(", r"\(").replace(")", r"\)"),
            str(x_shape).replace("(", r"\(").replace(")", r"\)"))):
        op(tensor.from_numpy(np.ones(x_shape, np.float32)))


def test_mse_loss_function_still_asks_for_equal_shapes():
    # SINGA's mse_loss asserts x.shape == t.shape; only the operator broadcasts
    with pytest.raises(AssertionError, match=r"\(2, 1\).*\(2, 4\)"):
        autograd.mse_loss(tensor.from_numpy(np.ones((2, 4), np.float32)),
                          tensor.from_numpy(np.ones((2, 1), np.float32)))


@pytest.mark.parametrize("use_layer", [False, True])
def test_mse_of_0d_predictions_keeps_a_0d_gradient(use_layer):
    # The (1,) seed of backward used to broadcast a 0-d x's gradient to (1,): backward raised.
    from singa import layer
    autograd.training = True
    x = tensor.from_numpy(np.array(2.5, np.float32))
    x.requires_grad = x.stores_grad = True
    t = tensor.from_numpy(np.array(1.0, np.float32))
    y = layer.MeanSquareError()(x, t) if use_layer else autograd.mse_loss(x, t)
    np.testing.assert_allclose(np_(y), [2.25])
    (p, g), = list(autograd.backward(y))
    assert p is x and g.shape == ()
    np.testing.assert_allclose(np_(g), 2 * (2.5 - 1.0))
