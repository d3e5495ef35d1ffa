"""NaN and Inf propagate through every op as in numpy and PyTorch, on every CPU backend (the
reference kernels "cpu" and oneDNN "dnnl"), eager and in a graph, forward and backward; and the
opt-in check (Device.SetCheckFinite / Model.compile(check_finite=True)) names the first
operation producing a non-finite value.

Each row of CASES is an op, its inputs (holding NaN, Inf and -Inf where they matter) and numpy's
forward and gradient. test_gpu.py runs the same rows on the GPU (run_case takes the device).
Gradient rules where NaN is involved follow PyTorch: ReLU passes dy where x is NaN
(threshold_backward zeroes only x <= 0), LeakyReLU scales it by the slope, clip zeroes it, max
pooling and elementwise max/min route it to the (first) NaN.
"""
import numpy as np
import pytest

import singa
from singa import autograd, device, layer, model, opt, tensor
from singa import singa_wrap as sw
from backend_switch import backend
from gradcheck import analytic_grads

nan, inf = np.nan, np.inf
BACKENDS = ["cpu"] + (["dnnl"] if sw.USE_DNNL else [])


def f32(a):
    return np.asarray(a, dtype=np.float32)


def same(got, ref, what):
    """Equal values, NaN exactly where ref has NaN, infinities with their signs."""
    got, ref = np.asarray(got), np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, "%s: shape %s, expected %s" % (what, got.shape, ref.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=what + ": NaN positions")
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=what)


# ---- numpy references ----------------------------------------------------------------------
def np_relu(x):
    return np.where(x <= 0, 0, x)  # NaN fails x <= 0 and stays


def np_pool(x, k, s, p, is_max):
    """Max (first NaN, else first maximum: np.argmax's rule) or average (over the cells inside
    the input) pooling with windows clipped to the input; also the routing of the gradient."""
    n_, c_, h_, w_ = x.shape
    ph, pw = (h_ + 2 * p - k) // s + 1, (w_ + 2 * p - k) // s + 1
    y = np.zeros((n_, c_, ph, pw))
    route = []  # (output index, [input indices], weights)
    for n in range(n_):
        for c in range(c_):
            for i in range(ph):
                for j in range(pw):
                    h0, w0 = max(i * s - p, 0), max(j * s - p, 0)
                    h1, w1 = min(i * s - p + k, h_), min(j * s - p + k, w_)
                    cells = [(n, c, r, q) for r in range(h0, h1) for q in range(w0, w1)]
                    vals = np.array([x[cell] for cell in cells], dtype=np.float64)
                    if is_max:
                        at = int(np.argmax(vals))  # the first NaN if any, else the first max
                        y[n, c, i, j] = vals[at]
                        route.append(((n, c, i, j), [cells[at]], [1.0]))
                    else:
                        y[n, c, i, j] = vals.mean()
                        route.append(((n, c, i, j), cells, [1.0 / len(cells)] * len(cells)))
    return y, route


def pool_grad(x, route, dy):
    dx = np.zeros(x.shape)
    for out, cells, weights in route:
        for cell, wt in zip(cells, weights):
            dx[cell] += dy[out] * wt
    return dx


def first_hit(xs, y):
    """Elementwise max/min's gradient masks: the first input equal to y, or holding NaN."""
    left = np.ones(y.shape, bool)
    masks = []
    for x in xs:
        hit = ((np.broadcast_to(x, y.shape) == y) | np.isnan(np.broadcast_to(x, y.shape))) & left
        left &= ~hit
        masks.append(hit)
    return masks


# ---- the op table ----------------------------------------------------------------------------
X = f32([[nan, inf, -inf, -1.5, 0.5, 2.0], [-0.25, nan, 3.0, -inf, 0.75, -2.0]])
A = f32([[nan, 1.0, -2.0, inf], [0.5, nan, -inf, 2.0]])
B = f32([[0.0, nan, -3.0, 1.0], [nan, nan, 4.0, -inf]])
POOL_X = f32([[[[nan, 1, -1, 2, 0.5],
                [2, 3, 4, -5, 1],
                [nan, nan, -inf, 1, nan],
                [nan, nan, 3, inf, 2],
                [0, 1, nan, 2, -1]]]])
CONV_X = f32([[[[nan, 1, -1], [2, -3, 0.5], [1, 2, 3]],
               [[1, -2, 0.25], [nan, 1, -1], [2, 1, -4]]]])
CONV_W = f32([[[[1.0]], [[-0.5]]], [[[-1.0]], [[2.0]]], [[[0.5]], [[0.5]]]])


def _pool_op(k, s, p, is_max):
    def op(ag, x):
        h = sw.PoolingHandle(tuple(x.shape), k, s, p, is_max)
        return ag.pooling_2d(h, x)
    return op


def _pool_case(name, k, s, p, is_max):
    def ref(x):
        return np_pool(x, k, s, p, is_max)[0]

    def grad(x, y, dy):
        return [pool_grad(x, np_pool(x, k, s, p, is_max)[1], dy)]
    return (name, _pool_op(k, s, p, is_max), ref, [POOL_X], grad)


def _conv_relu(ag, x, W):
    h = sw.ConvHandle(tuple(x.shape), 1, 1, 0, 2, 3, False)
    return ag.conv2d(h, x, W, None, relu=True)


def _conv_ref(x, W):
    return np_relu(np.einsum("oc,nchw->nohw", W[:, :, 0, 0].astype(np.float64), x))


def _conv_grad(x, W, y, dy):
    m = np.where(y <= 0, 0, dy)  # dy kept where y > 0 or NaN
    dx = np.einsum("nohw,oc->nchw", m, W[:, :, 0, 0].astype(np.float64))
    dW = np.einsum("nohw,nchw->oc", m, x.astype(np.float64))[:, :, None, None]
    return [dx, dW]


LABELS, FLT_MIN = np.array([1, 1]), np.finfo(np.float32).tiny


def _labels(like):
    return tensor.from_numpy(LABELS.astype(np.int32), like.device)


def _ext_grad(x, y, dy, b=None):
    xs = [x] if b is None else [x, b]
    return [np.where(m, dy, 0) for m in first_hit(xs, y)]


WHERE_COND = np.arange(A.size).reshape(A.shape) % 2 == 0


# (name, op(ag, *tensors), numpy forward, inputs, numpy gradients(*inputs, y, dy) or None)
CASES = [
    ("relu", lambda ag, x: ag.relu(x), np_relu, [X],
     lambda x, y, dy: [np.where(x <= 0, 0, dy)]),
    ("leakyrelu", lambda ag, x: ag.leakyrelu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x), [X],
     lambda x, y, dy: [np.where(x > 0, dy, 0.1 * dy)]),
    ("clip", lambda ag, x: ag.clip(x, -1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0), [X],
     lambda x, y, dy: [np.where((x >= -1) & (x <= 1), dy, 0)]),
    ("sign", lambda ag, x: ag.sign(x), np.sign, [X], None),
    # the side not taken contributes nothing, not even its infinities (an attention mask)
    ("where", lambda ag, a, b: ag.where(a, b, WHERE_COND), lambda a, b: np.where(WHERE_COND, a, b),
     [A, B], lambda a, b, y, dy: [np.where(WHERE_COND, dy, 0), np.where(WHERE_COND, 0, dy)]),
    ("maximum", lambda ag, a, b: ag.max(a, b), np.maximum, [A, B],
     lambda a, b, y, dy: _ext_grad(a, y, dy, b)),
    ("minimum", lambda ag, a, b: ag.min(a, b), np.minimum, [A, B],
     lambda a, b, y, dy: _ext_grad(a, y, dy, b)),
    ("softmax", lambda ag, x: ag.softmax(x, 1),
     lambda x: np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(
         1, keepdims=True), [f32([[1, nan, 2], [1, 2, 3], [inf, 0, 1]])], None),
    _pool_case("max_pool_2x2", 2, 2, 0, True),
    _pool_case("max_pool_3x3_pad", 3, 1, 1, True),
    _pool_case("avg_pool_2x2", 2, 2, 0, False),
    ("conv2d_relu", _conv_relu, _conv_ref, [CONV_X, CONV_W], _conv_grad),
    ("cross_entropy", lambda ag, p: ag.cross_entropy(p, _labels(p)),
     lambda p: np.array([np.mean(-np.log(np.maximum(p[[0, 1], LABELS], FLT_MIN)))]),
     [f32([[0.2, nan, 0.3], [0.1, 0.8, 0.1]])], None),
    ("softmax_cross_entropy", lambda ag, z: ag.softmax_cross_entropy(z, _labels(z)),
     lambda z: np.array([np.mean(np.log(np.exp(z).sum(1)) - z[[0, 1], LABELS])]),
     [f32([[0.5, 1.0, nan], [0.1, 0.8, 0.1]])], None),
]
CASE_IDS = [c[0] for c in CASES]


def run_case(case, dev=None, graph=False):
    """Forward and backward of one row on dev (eager) or in a graph on dev, against numpy."""
    name, op, ref, arrays, grad = case
    y_ref = np.asarray(ref(*[a.astype(np.float64) for a in arrays]), dtype=np.float64)
    dy = np.random.RandomState(0).uniform(0.5, 1.5, size=y_ref.shape)
    want = [i for i in range(len(arrays))] if grad else []
    got_grads, outs = analytic_grads(op, arrays, want, [dy], graph=graph, dev=dev)
    same(outs[0], y_ref, name + " forward")
    if grad:
        for i, g in enumerate(grad(*arrays, y_ref, dy)):
            same(got_grads[i], g, "%s gradient of input %d" % (name, i))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("name", BACKENDS)
def test_op_propagates_nan_eagerly(case, name):
    with backend(device.get_default_device(), name):
        run_case(case)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("name", BACKENDS)
def test_op_propagates_nan_in_a_graph(case, name):
    dev = sw.create_cpu_device()
    dev.set_backend(name)
    run_case(case, dev=dev, graph=True)


def _conv_then_relu(dev):
    """relu(conv(x)) buffered into a graph (fused into one kernel there) on NaN input; the
    result goes through a copy (AsType) so that Python holds no handle on the fused pair."""
    x = tensor.from_numpy(CONV_X, dev).data
    W = tensor.from_numpy(CONV_W, dev).data
    h = sw.ConvHandle(CONV_X.shape, 1, 1, 0, 2, 3, False)
    dev.EnableGraph(True)
    try:  # core ops: no Python handle keeps conv's output (which would block the fusion)
        z = sw.ReLU(sw.Conv2dForward(x, W, None, h, False)).AsType(sw.kFloat32)
    finally:
        dev.EnableGraph(False)
    dev.RunGraph()
    return sw.to_numpy(z)


@pytest.mark.parametrize("name", BACKENDS)
def test_relu_fused_into_conv_by_the_graph_keeps_nan(name):
    dev = sw.create_cpu_device()
    dev.set_backend(name)
    got = _conv_then_relu(dev)
    assert dev.graph_num_fused() == 1
    same(got, _conv_ref(CONV_X, CONV_W), "graph-fused conv + relu")


def bn_relu_case(dev, training):
    """Batch norm with its fused ReLU on an input with one NaN in channel 0: in training the
    channel's statistics are NaN, so the whole channel is; in inference only that element."""
    x = np.random.RandomState(1).randn(2, 2, 3, 3).astype(np.float32)
    x[0, 0, 1, 1] = nan
    x[1, 1, 0, 0] = -inf if not training else x[1, 1, 0, 0]
    scale, bias = f32([1.5, 0.5]), f32([0.1, -0.2])
    rm, rv = f32([0.2, -0.1]), f32([1.5, 0.8])
    T = lambda a: tensor.from_numpy(a, dev).data  # noqa: E731
    if training:
        y = sw.BatchNormForwardTraining(T(x), T(scale), T(bias), None, None, 0.1, 1e-5, True)[0]
        m, v = x.mean((0, 2, 3), keepdims=True), x.var((0, 2, 3), keepdims=True)
    else:
        y = sw.BatchNormForwardInference(T(x), T(scale), T(bias), T(rm), T(rv), 1e-5, True)
        m, v = rm.reshape(1, 2, 1, 1), rv.reshape(1, 2, 1, 1)
    ref = np_relu((x - m) / np.sqrt(v + 1e-5) * scale.reshape(1, 2, 1, 1)
                  + bias.reshape(1, 2, 1, 1))
    return sw.to_numpy(y), ref


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name", BACKENDS)
def test_batchnorm_fused_relu_keeps_nan(name, training):
    with backend(device.get_default_device(), name) as dev:
        got, ref = bn_relu_case(dev, training)
    assert np.isnan(ref).any()
    same(got, ref, "batch norm + relu")


REDUCE_X = f32([[1.0, nan, 3.0, nan], [2.0, -inf, inf, 0.5], [nan, 1.0, 1.0, -1.0]])


def reductions(dev):
    """(singa's result, numpy's) of max/min reductions and argmax/argmin along each axis."""
    xs = [REDUCE_X, REDUCE_X.T.copy()]
    out = []
    for x in xs:
        t = tensor.from_numpy(x, dev).data
        for axis in (0, 1):
            out.append((sw.ReduceMax(t, [axis]), np.max(x, axis)))
            out.append((sw.ReduceMin(t, [axis]), np.min(x, axis)))
            out.append((sw.Argmax(t, axis), np.argmax(x, axis)))
            out.append((sw.Argmin(t, axis), np.argmin(x, axis)))
        out.append((sw.ReduceMax(t, None), np.max(x)))
    return [(sw.to_numpy(a).reshape(np.shape(b)), b) for a, b in out]


@pytest.mark.parametrize("name", BACKENDS)
def test_reductions_and_arg_reductions_follow_numpy(name):
    with backend(device.get_default_device(), name) as dev:
        for got, ref in reductions(dev):
            same(got, ref, "reduction")


@pytest.mark.parametrize("name", BACKENDS)
def test_inf_alone_stays_inf_through_relu_and_pooling(name):
    x = f32([[[[inf, -inf], [1.0, 2.0]]]])
    with backend(device.get_default_device(), name):
        t = tensor.from_numpy(x)
        np.testing.assert_array_equal(tensor.to_numpy(autograd.relu(t)).ravel(),
                                      [inf, 0.0, 1.0, 2.0])
        h = sw.PoolingHandle(x.shape, 2, 2, 0, True)
        np.testing.assert_array_equal(tensor.to_numpy(autograd.pooling_2d(h, t)).ravel(), [inf])


# ---- the opt-in check ----------------------------------------------------------------------
def test_non_finite_error_is_a_floating_point_error_and_a_singa_error():
    assert singa.NonFiniteError is sw.NonFiniteError is device.NonFiniteError
    assert issubclass(sw.NonFiniteError, FloatingPointError)
    assert issubclass(sw.NonFiniteError, sw.SingaError)


def test_check_is_off_by_default_and_nan_flows():
    dev = sw.create_cpu_device()
    assert not dev.check_finite()
    y = autograd.log(tensor.from_numpy(f32([-1.0, 1.0]), dev))
    assert np.isnan(tensor.to_numpy(y)[0])


def test_eager_check_names_the_op_shape_and_counts():
    dev = sw.create_cpu_device()
    dev.SetCheckFinite(True)
    assert dev.check_finite()
    x = tensor.from_numpy(f32([[-1.0, 1.0, 0.0], [2.0, -3.0, 4.0]]), dev)
    y = autograd.exp(x)  # finite: no error
    assert np.isfinite(tensor.to_numpy(y)).all()
    with pytest.raises(sw.NonFiniteError) as e:
        autograd.log(x)
    msg = str(e.value)
    assert "'Log'" in msg and "(2, 3)" in msg, msg
    assert "2 NaN" in msg and "1 Inf" in msg, msg
    dev.SetCheckFinite(False)
    autograd.log(x)  # off again: no error


def test_eager_check_names_the_first_op_reading_a_nan_input():
    dev = sw.create_cpu_device()
    dev.SetCheckFinite(True)
    x = tensor.from_numpy(f32([[nan, 1.0]]), dev)  # the user's input: not checked itself
    with pytest.raises(FloatingPointError, match="'ReLU'"):
        autograd.relu(x)


def test_integer_outputs_are_not_checked():
    dev = sw.create_cpu_device()
    dev.SetCheckFinite(True)
    # -1 as an int32 has the bit pattern of a float NaN: the block's dtype says int
    t = tensor.from_numpy(np.array([-1, 5], np.int32), dev)
    assert list(tensor.to_numpy(autograd.relu(t))) == [0, 5]


def test_graph_replay_check_names_the_op():
    dev = sw.create_cpu_device()
    x = tensor.from_numpy(f32([[1.0, -2.0]]), dev)
    dev.SetCheckFinite(True)
    dev.EnableGraph(True)
    try:
        y = autograd.sqrt(autograd.mul(x, x))   # finite
        z = autograd.log(autograd.sub(y, y))    # log(0): -Inf
    finally:
        dev.EnableGraph(False)
    with pytest.raises(sw.NonFiniteError, match=r"'Log'.*0 NaN and 2 Inf.*\(1, 2\)"):
        dev.RunGraph()
    dev.SetCheckFinite(False)
    dev.RunGraph()
    assert np.isneginf(tensor.to_numpy(z)).all()


def test_graph_check_names_a_fused_conv_relu():
    dev = sw.create_cpu_device()
    dev.SetCheckFinite(True)
    with pytest.raises(sw.NonFiniteError, match="'Conv2dForward \\(with its fused ReLU\\)'"):
        _conv_then_relu(dev)


class _Net(model.Model):
    def __init__(self, bad):
        super(_Net, self).__init__()
        self.conv = layer.Conv2d(1, 4, 3, padding=1, activation="RELU")
        self.pool = layer.MaxPool2d(2, 2)
        self.flat = layer.Flatten()
        self.fc = layer.Linear(3)
        self.bad = bad
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.fc(self.flat(self.pool(self.conv(x))))
        return autograd.log(y) if self.bad else y

    def train_one_batch(self, x, t):
        out = self.forward(x)
        loss = self.loss(out, t)
        self.optimizer(loss)
        return out, loss


@pytest.mark.parametrize("use_graph", [False, True], ids=["eager", "graph"])
def test_model_compile_check_finite(use_graph):
    dev = sw.create_cpu_device()
    rng = np.random.RandomState(0)
    x = tensor.from_numpy(rng.randn(4, 1, 6, 6).astype(np.float32), dev)
    t = tensor.from_numpy(np.array([0, 1, 2, 1], np.int32), dev)
    for bad in (False, True):
        m = _Net(bad)
        m.set_optimizer(opt.SGD(lr=0.1))
        m.compile([x], is_train=True, use_graph=use_graph, check_finite=True)
        assert dev.check_finite()
        if not bad:  # a whole training step of finite values raises nothing
            for _ in range(3):
                m(x, t)
            continue
        with pytest.raises(singa.NonFiniteError, match="'Log'"):
            for _ in range(3):
                m(x, t)
    m.compile([x], is_train=True, use_graph=use_graph, check_finite=False)
    assert not dev.check_finite()
