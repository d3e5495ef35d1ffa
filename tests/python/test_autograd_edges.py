"""Autograd behaviours at the edges that the op table does not reach (found by mutation testing,
TESTING.md): error classes and messages that name the op, inputs the table does not draw
(1-d times batched matmul, odd-padded pooling, (N, 1) labels, integral float indices), defaults,
and what infer_dependency / reductions over no axis return."""
import numpy as np
import pytest

from gradcheck import check_op
from singa import autograd, tensor
from singa import singa_wrap as sw
from singa.errors import InputError

R = np.random.RandomState(7)


def t(a, grad=False):
    x = tensor.from_numpy(np.asarray(a, dtype=np.float32) if np.asarray(a).dtype.kind == "f"
                          else np.asarray(a))
    x.requires_grad = grad
    x.stores_grad = grad
    return x


def u(*shape):
    return R.uniform(-1, 1, size=shape).astype(np.float32)


def raises(cls, fn, start, *also):
    with pytest.raises(cls) as e:
        fn()
    msg = str(e.value)
    assert msg.startswith(start), msg
    for part in also:
        assert part in msg, msg
    return msg


# ---- values the op table does not draw -----------------------------------------------------
def test_matmul_of_a_vector_and_a_batch_of_matrices():
    check_op(lambda ag, a, b: ag.matmul(a, b), np.matmul, [u(4), u(3, 4, 5)])


def test_avg_pooling_with_odd_padding_pads_bottom_and_right():
    # the handle describes the padded input (SINGA's layer builds it that way for SAME padding)
    handle = sw.PoolingHandle(sw.Tensor((1, 2, 6, 6)), (2, 2), (2, 2), (0, 0), False)

    def ref(x):
        p = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)))
        return p.reshape(1, 2, 3, 2, 3, 2).mean(axis=(3, 5))

    check_op(lambda ag, x: ag.pooling_2d(handle, x, (0, 1, 0, 1)), ref, [u(1, 2, 5, 5)])


def test_softmax_cross_entropy_takes_labels_as_a_column():
    x = u(4, 5)
    labels = np.array([1, 0, 4, 2], np.int32)
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    want = -np.log(p[np.arange(4), labels]).mean()
    for tl in (labels, labels.reshape(4, 1)):
        got = tensor.to_numpy(autograd.softmax_cross_entropy(t(x), t(tl)))
        np.testing.assert_allclose(got.reshape(-1)[0], want, rtol=1e-5)


def test_softmax_cross_entropy_rejects_a_wrong_number_of_labels():
    raises(ValueError, lambda: autograd.softmax_cross_entropy(t(u(4, 5)), t(np.zeros(3, np.int32))),
           "softmax_cross_entropy: target of shape (3,) does not match logits of shape (4, 5)")
    raises(ValueError, lambda: autograd.softmax_cross_entropy(t(u(4, 5)), t(u(4, 4))),
           "softmax_cross_entropy: target of shape (4, 4) does not match")


def test_gather_accepts_integral_float_indices_and_rejects_others():
    x = u(5, 3)
    got = tensor.to_numpy(autograd.gather(t(x), 0, [4.0, 0.0, 2.0]))
    np.testing.assert_array_equal(got, x[[4, 0, 2]])
    raises(TypeError, lambda: autograd.gather(t(x), 0, [0.5]), "gather: indices must be integers")
    raises(IndexError, lambda: autograd.gather(t(x), 5, [0]), "gather:")


def test_globalaveragepool_of_a_matrix_is_the_matrix():
    # no spatial axes: nothing to average (an (N, C) input passes through)
    x = u(3, 4)
    np.testing.assert_array_equal(tensor.to_numpy(autograd.globalaveragepool(t(x))), x)
    raises(ValueError, lambda: autograd.globalaveragepool(t(u(3))),
           "globalaveragepool: expected an input of rank >= 2 (N, C, spatial...)")


def test_reductions_over_no_axis_copy_their_input():
    x = u(2, 3)
    for fn in (autograd.reduce_sum, autograd.reduce_mean):
        xt = t(x)
        y = fn(xt, axes=[])
        np.testing.assert_array_equal(tensor.to_numpy(y), x)
        y.copy_from_numpy(np.zeros((2, 3), np.float32))  # a new tensor: x keeps its values
        np.testing.assert_array_equal(tensor.to_numpy(xt), x)


def test_defaults_of_gemm_and_dropout():
    a, b = u(2, 3), u(3, 4)
    np.testing.assert_allclose(tensor.to_numpy(autograd.Gemm()(t(a), t(b))[0]), a @ b,
                               rtol=1e-5, atol=1e-6)
    op = autograd.Dropout()
    assert (op.seed, op.ratio) == (0, 0.5)
    autograd.training = True
    try:
        y = tensor.to_numpy(op(t(np.ones((100, 100), np.float32)))[0])
    finally:
        autograd.training = False
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert 0.45 < (y == 0).mean() < 0.55


def test_infer_dependency_counts_every_use_of_a_tensor():
    autograd.training = True
    try:
        a, b = t(u(2, 2), grad=True), t(u(2, 2), grad=True)
        y = autograd.mul(autograd.add(a, b), a)  # a feeds two operators
        _, uses = autograd.infer_dependency(y.creator)
    finally:
        autograd.training = False
    assert uses[id(a)] == 2 and uses[id(b)] == 1


# ---- errors name the op, with the exception class SINGA code catches -------------------------
def test_binary_operands_must_be_tensors_or_numbers():
    raises(TypeError, lambda: autograd.add(1.0, 2.0),
           "add: at least one operand must be a singa Tensor, got float and float")
    raises(TypeError, lambda: autograd.add(t(u(2)), ["a", "b"]),
           "add: expected a Tensor or numeric data, got ['a', 'b']")


def test_shape_and_index_errors_start_with_the_op():
    raises(IndexError, lambda: autograd.reduce_mean(t(u(2, 3)), axes=[5]), "reduce_mean:")
    raises(IndexError, lambda: autograd.unsqueeze(t(u(2, 3)), [1, 1]),
           "unsqueeze: repeated axis in [1, 1]")
    raises(ValueError, lambda: autograd.scatter_elements(t(u(3, 3)), t(np.zeros((2, 2), np.int32)),
                                                         t(u(3, 3))),
           "scatter_elements: indices (2, 2) and updates (3, 3) must have the same shape")


def test_argument_errors_are_value_errors_naming_the_op():
    raises(InputError, lambda: autograd.UpSample("nearest", [1, 1, 0, 2]),
           "upsample: scales must be positive integers, got [1, 1, 0, 2]")
    raises(InputError, lambda: autograd.DepthToSpace(2, "XYZ"),
           "depth_to_space: mode must be 'DCR' or 'CRD', got 'XYZ'")
    raises(InputError, lambda: autograd.AddBias(2),
           "add_bias: axis must be 0 (rows) or 1 (columns), got 2")
    raises(ValueError, lambda: autograd.add_bias(t(u(2, 3, 4)), t(u(4))),
           "add_bias: x must be a matrix, got shape (2, 3, 4)")
    raises(ValueError, lambda: autograd.add_bias(t(u(2, 3)), t(u(2)), axis=0),
           "add_bias: b of shape (2,) does not match the columns of x (2, 3)")
    raises(ValueError, lambda: autograd.add_bias(t(u(2, 3)), t(u(3)), axis=1),
           "add_bias: b of shape (3,) does not match the rows of x (2, 3)")


def test_a_missing_autograd_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError) as e:
        autograd.no_such_operator
    assert str(e.value) == "module 'singa.autograd' has no attribute 'no_such_operator'"


def test_an_operator_without_backward_names_its_class():
    class Forward(autograd.Operator):
        def forward(self, x):
            return x

    with pytest.raises(NotImplementedError) as e:
        Forward().backward(None)
    assert str(e.value) == "Forward.backward"


def test_shape_backward_is_a_float_zero_gradient_of_the_input_shape():
    x = t(u(2, 3), grad=True)
    autograd.training = True
    try:
        s = autograd.shape(x)
    finally:
        autograd.training = False
    assert s.creator is not None and type(s.creator).__name__ == "Shape"
    dy = tensor.from_numpy(np.ones(2, np.int32))  # the shape's own dtype
    dx = s.creator.backward(dy.data)
    assert dx.data_type() == sw.kFloat32
    np.testing.assert_array_equal(tensor.to_numpy(tensor.from_raw_tensor(dx)), np.zeros((2, 3)))


def test_release_graph_releases_each_operator_once(monkeypatch):
    from singa.autograd import base
    released = []
    real = base._release
    monkeypatch.setattr(base, "_release", lambda op: (released.append(op), real(op)))
    autograd.training = True
    try:
        y = t(u(2, 2), grad=True)
        for _ in range(6):  # six diamonds: 2**6 paths from the top to the input
            y = autograd.add(autograd.relu(y), y)
        autograd.release_graph(y)
    finally:
        autograd.training = False
    assert len(released) == len(set(map(id, released))) == 12


def _softmax_rows(x, axis):
    """SINGA's softmax: x as a (prod(shape[:axis]), prod(shape[axis:])) matrix, rows normalised."""
    m = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
    e = np.exp(m - m.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


@pytest.mark.parametrize("axis", [1, 2, 3, 0, -1, -3])
def test_softmax_normalises_the_axes_from_axis_on_as_singa_does(axis):
    # SINGA's C++ SoftMax coerces x to 2-d at axis: with the default axis=1 a 4-d input is
    # normalised over C*H*W per sample, not over C alone
    x = R.uniform(-2, 2, size=(2, 3, 2, 2)).astype(np.float32)
    check_op(lambda ag, t: ag.softmax(t, axis), lambda a: _softmax_rows(a, axis % 4), [x])


def test_softmax_layer_keeps_singas_default_axis():
    from singa import layer
    x = R.uniform(-2, 2, size=(2, 3, 4)).astype(np.float32)
    got = tensor.to_numpy(layer.SoftMax()(t(x)))
    np.testing.assert_allclose(got, _softmax_rows(x, 1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got.reshape(2, -1).sum(axis=1), [1.0, 1.0], rtol=1e-5)


def test_dropout_with_a_ratio_in_the_seed_position_says_how_to_call_it(monkeypatch):
    # the pre-3.x call dropout(x, 0.5) meant the ratio; SINGA 3.x's second parameter is the seed,
    # which SINGA truncates to 0 (its own test_dropout_cpu calls it so): accepted, with a warning
    from singa.autograd import nn as autograd_nn
    monkeypatch.setattr(autograd_nn, "_warned_ratio_as_seed", False)
    with pytest.warns(UserWarning, match=r"0\.5 was passed in the seed position.*ratio=0\.5"):
        op = autograd.Dropout(0.5)
    assert op.seed == 0 and op.ratio == 0.5
    raises(ValueError, lambda: autograd.dropout(t(u(2, 2)), 1.5),
           "dropout: seed must be a non-negative int, got 1.5", "ratio=")


@pytest.mark.parametrize("lo,hi", [(0, None), (None, 5), (-3, 3), (-1e10, 1e10), (None, None)])
def test_clip_of_int32_with_open_or_huge_bounds_matches_numpy(lo, hi):
    # an open bound is +-inf for the kernel: an integer type saturates it (it gave INT_MIN)
    x = np.array([-2147483648, -7, -1, 0, 4, 9, 2147483647], np.int32)
    got = tensor.to_numpy(autograd.clip(tensor.from_numpy(x), lo, hi))
    exp = x.astype(np.float64)
    if lo is not None:
        exp = np.maximum(exp, lo)
    if hi is not None:
        exp = np.minimum(exp, hi)
    exp = exp.astype(np.int32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("value,count", [(3.0, 1), (0.0, 0), (float("nan"), 1)])
def test_nonzero_of_a_0d_tensor_follows_onnx(value, count):
    # ONNX NonZero: (rank, count) indices, so (0, 1) or (0, 0) for a scalar (numpy raises for
    # 0-d input, and the error used to leak out of singa unexplained).
    y = autograd.nonzero(tensor.from_numpy(np.array(value, np.float32)))
    assert y.shape == (0, count) and y.dtype == tensor.int32


def test_nonzero_of_an_empty_tensor_has_rank_rows():
    y = autograd.nonzero(tensor.from_numpy(np.zeros((2, 0, 3), np.float32)))
    assert y.shape == (3, 0)


def test_batchnorm_gradients_take_their_parameters_shapes():
    # The core accepts per-channel tensors of any shape holding C values; the gradients came
    # back (C,) and backward raised for (1, C, 1, 1) parameters (found by tools/fuzz_api.py).
    autograd.training = True
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    dy = tensor.from_numpy(rng.standard_normal((2, 3, 4, 4)).astype(np.float32))
    grads = {}
    for shape in [(3,), (1, 3, 1, 1)]:
        x = tensor.from_numpy(x_np)
        scale = tensor.from_numpy(np.linspace(0.5, 1.5, 3).astype(np.float32).reshape(shape))
        bias = tensor.from_numpy(np.full(shape, 0.1, np.float32))
        for t in (x, scale, bias):
            t.requires_grad = t.stores_grad = True
        rm, rv = tensor.from_numpy(np.zeros(3, np.float32)), tensor.from_numpy(np.ones(3, np.float32))
        y = autograd.batchnorm_2d(sw.BatchNormHandle(0.9, x.data), x, scale, bias, rm, rv)
        g = dict((id(p), tensor.to_numpy(d)) for p, d in autograd.backward(y, dy))
        assert g[id(scale)].shape == shape and g[id(bias)].shape == shape
        grads[shape] = [g[id(x)], g[id(scale)].reshape(-1), g[id(bias)].reshape(-1)]
    for a, b in zip(grads[(3,)], grads[(1, 3, 1, 1)]):
        np.testing.assert_array_equal(a, b)
