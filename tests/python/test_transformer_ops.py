"""The transformer ops (issue 19): layer_norm, gelu, cumsum, gather_elements, gather_nd,
masked_fill, softmax's mask, isnan / isinf. Each row of TRANSFORMER is checked forward against
numpy, backward by finite differences (gradcheck.py) and in a graph against eager mode;
test_gpu.py runs the same rows on a GPU. Then PyTorch comparisons (skipped without torch), NaN
propagation and the errors bad arguments raise.
"""
import math

import numpy as np
import pytest

from gradcheck import check_graph, check_op
from test_autograd_ops import case, u, away
from singa import autograd, tensor
from singa import singa_wrap as sw
from singa.errors import InputError, NoGradientError

R = np.random.RandomState(19)
_erf = np.vectorize(math.erf)


def layer_norm_np(x, ns, w=None, b=None, eps=1e-5):
    axes = tuple(range(-len(ns), 0))
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    if w is not None:
        y = y * w
    return y if b is None else y + b


def gelu_np(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2.0)))


def gelu_tanh_np(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def cumsum_np(x, axis, exclusive=False, reverse=False):
    if reverse:
        x = np.flip(x, axis)
    c = np.cumsum(x, axis=axis)
    if exclusive:
        c = c - x
    return np.flip(c, axis) if reverse else c


def gather_elements_np(x, idx, axis):
    grid = list(np.indices(idx.shape))
    grid[axis] = np.where(idx < 0, idx + x.shape[axis], idx)
    return x[tuple(grid)]


def gather_nd_np(x, idx, b=0):
    q = idx.shape[-1]
    bshape = idx.shape[:b]
    xs = x.reshape((-1,) + x.shape[b:])
    ids = idx.reshape((xs.shape[0], -1, q))
    out = [[xs[i][tuple(k)] for k in ids[i]] for i in range(xs.shape[0])]
    return np.asarray(out).reshape(bshape + idx.shape[b:-1] + x.shape[b + q:])


def masked_softmax_np(x, mask, axis):
    m = np.broadcast_to(mask, x.shape)
    z = np.where(m != 0, x, -np.inf).reshape(int(np.prod(x.shape[:axis])), -1)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


def ln(ns, eps=1e-5, weight=True, bias=True):
    def op(ag, x, *p):
        p = list(p)
        return ag.layer_norm(x, ns, p.pop(0) if weight else None, p.pop(0) if bias else None,
                             eps)

    def ref(x, *p):
        p = list(p)
        return layer_norm_np(x, ns, p.pop(0) if weight else None, p.pop(0) if bias else None,
                             eps)
    return op, ref


IDX_E = np.array([[1, -1, 0], [2, 2, -3]], np.int32)          # repeats and negatives
IDX_ND = np.array([[[0, 1], [2, -1]], [[1, 0], [1, 0]]], np.int32)  # (2, 2, 2): repeats
MASK = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1]], np.float32)

TRANSFORMER = [
    case("layer_norm_affine", *ln((6,)), [u(3, 4, 6, lo=-2, hi=2), u(6, lo=0.5, hi=1.5), u(6)]),
    case("layer_norm_two_axes", *ln((3, 4)), [u(2, 3, 4, lo=-2, hi=2), u(3, 4), u(3, 4)]),
    case("layer_norm_plain", *ln((5,), weight=False, bias=False), [u(4, 5, lo=-2, hi=2)]),
    case("layer_norm_weight_only", *ln((5,), bias=False), [u(4, 5, lo=-2, hi=2), u(5)]),
    case("layer_norm_bias_only", *ln((2, 5), weight=False), [u(3, 2, 5, lo=-2, hi=2), u(2, 5)]),
    case("layer_norm_eps", *ln((7,), eps=1e-2), [u(2, 7, lo=-0.3, hi=0.3), u(7), u(7)]),
    case("gelu", lambda ag, x: ag.gelu(x), gelu_np, [u(3, 5, lo=-4, hi=4)]),
    case("gelu_tanh", lambda ag, x: ag.gelu(x, approximate="tanh"), gelu_tanh_np,
         [u(3, 5, lo=-4, hi=4)]),
    case("cumsum", lambda ag, x: ag.cumsum(x, 1), lambda x: cumsum_np(x, 1), [u(2, 5, 3)]),
    case("cumsum_exclusive", lambda ag, x: ag.cumsum(x, -1, exclusive=True),
         lambda x: cumsum_np(x, -1, True), [u(3, 6)]),
    case("cumsum_reverse", lambda ag, x: ag.cumsum(x, 0, reverse=True),
         lambda x: cumsum_np(x, 0, reverse=True), [u(4, 3)]),
    case("cumsum_exclusive_reverse", lambda ag, x: ag.cumsum(x, 1, True, True),
         lambda x: cumsum_np(x, 1, True, True), [u(2, 5, 2)]),
    case("gather_elements_axis1", lambda ag, x, i: ag.gather_elements(x, i, 1),
         lambda x, i: gather_elements_np(x, i, 1), [u(2, 4), IDX_E], grad=[0]),
    case("gather_elements_axis0", lambda ag, x, i: ag.gather_elements(x, i, 0),
         lambda x, i: gather_elements_np(x, i, 0), [u(3, 4), IDX_E], grad=[0]),
    case("gather_nd", lambda ag, x, i: ag.gather_nd(x, i), gather_nd_np, [u(3, 4, 2), IDX_ND],
         grad=[0]),
    case("gather_nd_full_index", lambda ag, x, i: ag.gather_nd(x, i),
         gather_nd_np, [u(3, 2), np.array([[0, 1], [2, 0], [0, 1]], np.int32)], grad=[0]),
    case("gather_nd_batch_dims", lambda ag, x, i: ag.gather_nd(x, i, batch_dims=1),
         lambda x, i: gather_nd_np(x, i, 1), [u(2, 3, 4), np.array([[[2], [0]], [[1], [1]]],
                                                                 np.int32)], grad=[0]),
    case("masked_fill", lambda ag, x, m: ag.masked_fill(x, m, -2.5),
         lambda x, m: np.where(m != 0, np.float32(-2.5), x), [u(2, 3, 4), MASK], grad=[0]),
    case("masked_fill_broadcast_x", lambda ag, x, m: ag.masked_fill(x, m, 7.0),
         lambda x, m: np.where(m != 0, np.float32(7.0), np.broadcast_to(x, m.shape)),
         [u(1, 4), MASK], grad=[0]),
    case("softmax_mask", lambda ag, x, m: ag.softmax(x, axis=2, mask=m),
         lambda x, m: masked_softmax_np(x, m, 2), [u(2, 3, 4, lo=-2, hi=2), MASK], grad=[0]),
]


@pytest.mark.parametrize("c", TRANSFORMER)
def test_op(c):
    check_op(c.op, c.ref, c.inputs, c.grad, **c.tol)


@pytest.mark.parametrize("c", TRANSFORMER)
def test_op_in_graph(c):
    check_graph(c.op, c.inputs, c.grad)


def t(a):
    return tensor.from_numpy(np.asarray(a))


def test_layer_norm_on_a_large_row_matches_numpy_per_row():
    x = R.randn(5, 3000).astype(np.float32) * 10 + 100  # large mean: the two-pass variance
    y = tensor.to_numpy(autograd.layer_norm(t(x), 3000))
    np.testing.assert_allclose(y, layer_norm_np(x.astype(np.float64), (3000,)), atol=2e-4)


def test_isnan_isinf_are_predicates():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    np.testing.assert_array_equal(tensor.to_numpy(autograd.isnan(t(x))), np.isnan(x))
    np.testing.assert_array_equal(tensor.to_numpy(autograd.isinf(t(x))), np.isinf(x))
    ints = autograd.isnan(t(np.array([1, 2], np.int32)))
    assert ints.dtype == sw.kInt and tensor.to_numpy(ints).tolist() == [0, 0]
    was = autograd.training
    autograd.training = True
    try:
        v = t(x)
        v.requires_grad = True
        y = autograd.isinf(v)
        assert not y.requires_grad
        with pytest.raises(NoGradientError):
            y.creator.backward(t(np.ones(5, np.float32)).data)
    finally:
        autograd.training = was


def test_nan_propagates():
    x = u(3, 4)
    x[1, 2] = np.nan
    y = tensor.to_numpy(autograd.layer_norm(t(x), 4))
    assert np.isnan(y[1]).all() and np.isfinite(y[[0, 2]]).all()
    g = tensor.to_numpy(autograd.gelu(t(x)))
    assert np.isnan(g[1, 2]) and np.isfinite(np.delete(g.ravel(), 6)).all()
    c = tensor.to_numpy(autograd.cumsum(t(x), 1))
    assert np.isnan(c[1, 2:]).all() and np.isfinite(c[1, :2]).all()
    m = tensor.to_numpy(autograd.masked_fill(t(x), (np.arange(4) == 2)[None, :], 0.0))
    assert np.isfinite(m).all()  # the NaN was masked away
    s = tensor.to_numpy(autograd.softmax(t(x), 1, mask=np.ones((3, 4))))
    assert np.isnan(s[1]).all() and np.isfinite(s[[0, 2]]).all()


def test_gather_backward_adds_repeated_indices():
    x = t(u(2, 4))
    x.requires_grad = x.stores_grad = True
    was = autograd.training
    autograd.training = True
    try:
        y = autograd.gather_elements(x, IDX_E[:, :1].repeat(3, axis=1), 1)
        grads = autograd.gradients(autograd.reduce_sum(y), None)
    finally:
        autograd.training = was
    want = np.zeros((2, 4), np.float32)
    want[0, 1] = want[1, 2] = 3
    np.testing.assert_array_equal(tensor.to_numpy(grads[x]), want)


@pytest.mark.parametrize("call, err, words", [
    (lambda: autograd.layer_norm(t(u(2, 3)), (4,)), sw.ShapeError, "normalized_shape"),
    (lambda: autograd.layer_norm(t(u(2, 3)), 3, t(u(4))), sw.ShapeError, "weight"),
    (lambda: autograd.gelu(t(u(2)), approximate="fast"), InputError, "approximate"),
    (lambda: autograd.cumsum(t(u(2, 3)), 2), sw.AxisError, "CumSum"),
    (lambda: autograd.gather_elements(t(u(2, 3)), np.array([[3]]), 1), sw.AxisError, "range"),
    (lambda: autograd.gather_elements(t(u(2, 3)), np.array([1]), 0), sw.ShapeError, "rank"),
    (lambda: autograd.gather_elements(t(u(2, 3)), np.array([[0.5]], np.float32), 1),
     TypeError, "integer"),
    (lambda: autograd.gather_nd(t(u(2, 3)), np.array([[0, 1, 0]])), sw.ShapeError,
     "coordinates"),
    (lambda: autograd.gather_nd(t(u(2, 3)), np.array([[0], [1], [0]]), 1), sw.ShapeError,
     "batch"),
    (lambda: autograd.softmax(t(u(2, 3)), 1, mask=np.ones((4, 3))), ValueError, "softmax"),
])
def test_bad_arguments_raise_naming_the_op(call, err, words):
    with pytest.raises(err, match=words):
        call()


# ---- PyTorch: same semantics (skipped without torch) --------------------------------------
torch = pytest.importorskip("torch")


def _grads(fn, *arrays):
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    y = fn(*ts)
    y.backward(torch.tensor(np.linspace(-1, 1, y.numel(), dtype=np.float32).reshape(y.shape)))
    return y.detach().numpy(), [None if not v.requires_grad else v.grad.numpy() for v in ts]


def _singa_grads(fn, *arrays):
    was = autograd.training
    autograd.training = True
    try:
        ts = [t(a) for a in arrays]
        for v, a in zip(ts, arrays):
            v.requires_grad = v.stores_grad = a.dtype.kind == "f"
        y = fn(*ts)
        n = int(np.prod(y.shape))
        dy = t(np.linspace(-1, 1, n, dtype=np.float32).reshape(y.shape))
        grads = autograd.gradients(y, dy)
        return tensor.to_numpy(y), [tensor.to_numpy(grads[v]) if v in grads else None
                                    for v in ts]
    finally:
        autograd.training = was


@pytest.mark.parametrize("name, ours, theirs, arrays", [
    ("layer_norm", lambda x, w, b: autograd.layer_norm(x, (8, 16), w, b, 1e-5),
     lambda x, w, b: torch.nn.functional.layer_norm(x, (8, 16), w, b, 1e-5),
     [R.randn(4, 8, 16).astype(np.float32), R.rand(8, 16).astype(np.float32),
      R.randn(8, 16).astype(np.float32)]),
    ("gelu", lambda x: autograd.gelu(x), torch.nn.functional.gelu,
     [R.randn(6, 32).astype(np.float32) * 3]),
    ("gelu_tanh", lambda x: autograd.gelu(x, "tanh"),
     lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
     [R.randn(6, 32).astype(np.float32) * 3]),
    ("cumsum", lambda x: autograd.cumsum(x, 1), lambda x: torch.cumsum(x, 1),
     [R.randn(3, 9, 2).astype(np.float32)]),
    ("gather", lambda x, i: autograd.gather_elements(x, i, 1), lambda x, i: torch.gather(x, 1, i),
     [R.randn(3, 5).astype(np.float32), R.randint(0, 5, size=(3, 7)).astype(np.int64)]),
    ("masked_fill", lambda x, m: autograd.masked_fill(x, m, -1e9),
     lambda x, m: x.masked_fill(m, -1e9),
     [R.randn(2, 3, 4).astype(np.float32), R.rand(3, 4) > 0.5]),
    ("softmax_mask", lambda x, m: autograd.softmax(x, 2, mask=m),
     lambda x, m: torch.softmax(x.masked_fill(~m, -float("inf")), 2),
     [R.randn(2, 3, 4).astype(np.float32), np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 1]],
                                                    bool)]),
])
def test_matches_torch(name, ours, theirs, arrays):
    arrays = [a.astype(np.int32) if a.dtype == np.int64 else a for a in arrays]
    y, grads = _singa_grads(ours, *arrays)
    torch_arrays = [a.astype(np.int64) if a.dtype == np.int32 else a for a in arrays]
    ty, tgrads = _grads(theirs, *torch_arrays)
    np.testing.assert_allclose(y, ty, rtol=1e-5, atol=1e-5, equal_nan=True)
    for g, tg in zip(grads, tgrads):
        if tg is not None:
            np.testing.assert_allclose(g, tg, rtol=1e-4, atol=1e-5, equal_nan=True)
