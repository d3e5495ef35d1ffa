"""The LSTM layer as one op each way (singa/ops/rnn.h, autograd.rnn._LSTMLayer): the op against a
float64 numpy LSTM and its gradients against finite differences, both directions; layer.LSTM
through it against the composed cells (the reference: _LSTMLayer.enabled = False) for every
layout; the reference backend against oneDNN's; graph mode against eager mode; NaN."""
import numpy as np
import pytest

from singa import autograd, device, layer, model, opt, tensor
from singa import singa_wrap as sw
from singa.autograd import rnn as ag_rnn

F32 = np.float32


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_ref(gx, h0, c0, w, b, reverse):
    """hs, cs (float64) of one LSTM layer run over gx (T, N, 4H)."""
    T, H = gx.shape[0], h0.shape[1]
    hs, cs = np.zeros((T,) + h0.shape), np.zeros((T,) + h0.shape)
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    for t in (reversed(range(T)) if reverse else range(T)):
        a = gx[t] + h @ w + (0 if b is None else b)
        i, f = sigmoid(a[:, :H]), sigmoid(a[:, H:2 * H])
        g, o = np.tanh(a[:, 2 * H:3 * H]), sigmoid(a[:, 3 * H:])
        c = f * c + i * g
        h = o * np.tanh(c)
        hs[t], cs[t] = h, c
    return hs, cs


def operands(rng, T=4, N=3, H=3, bias=True):
    gx = rng.standard_normal((T, N, 4 * H))
    h0, c0 = rng.standard_normal((N, H)), rng.standard_normal((N, H))
    w = 0.5 * rng.standard_normal((H, 4 * H))
    b = 0.5 * rng.standard_normal(4 * H) if bias else None
    return gx, h0, c0, w, b


def core(a):
    return None if a is None else sw.from_numpy(np.ascontiguousarray(a, F32))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_forward_matches_numpy(reverse, bias, rng):
    gx, h0, c0, w, b = operands(rng, T=5, N=4, H=6, bias=bias)
    hs, cs, gates = sw.LSTMForward(*map(core, (gx, h0, c0, w, b)), reverse)
    want_h, want_c = lstm_ref(gx, h0, c0, w, b, reverse)
    np.testing.assert_allclose(sw.to_numpy(hs), want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sw.to_numpy(cs), want_c, rtol=1e-5, atol=1e-6)
    assert sw.to_numpy(gates).shape == gx.shape


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_backward_matches_finite_differences(reverse, bias, rng):
    gx, h0, c0, w, b = operands(rng, bias=bias)
    T, N, H = gx.shape[0], h0.shape[0], h0.shape[1]
    r_hs, r_h, r_c = (rng.standard_normal(s) for s in ((T, N, H), (N, H), (N, H)))
    last = 0 if reverse else T - 1

    def loss(*args):
        hs, cs = lstm_ref(*args, reverse)
        return (hs * r_hs).sum() + (hs[last] * r_h).sum() + (cs[last] * r_c).sum()

    hs, cs, gates = sw.LSTMForward(*map(core, (gx, h0, c0, w, b)), reverse)
    got = sw.LSTMBackward(core(r_hs), core(r_h), core(r_c), gates, hs, cs, core(h0), core(c0),
                          core(w), bias, reverse)
    args = [gx, h0, c0, w, b]
    for k in range(5 if bias else 4):
        num = np.zeros_like(args[k])
        for idx in np.ndindex(*args[k].shape):
            up = [a.copy() if a is not None else None for a in args]
            down = [a.copy() if a is not None else None for a in args]
            up[k][idx] += 1e-6
            down[k][idx] -= 1e-6
            num[idx] = (loss(*up) - loss(*down)) / 2e-6
        np.testing.assert_allclose(sw.to_numpy(got[k]), num, rtol=1e-4, atol=1e-5,
                                   err_msg="gradient %d" % k)
    if not bias:
        assert got[4] is None


def _layer_run(xs_np, h0_np, c0_np, kind, fused, params=None, **kw):
    """(outputs, h, c, parameter gradients) of a layer.LSTM on the given data; checks that the
    op ran once per layer and direction (fused) or never."""
    saved, op = ag_rnn._LSTMLayer.enabled, sw.LSTMForward
    calls = []
    ag_rnn._LSTMLayer.enabled = fused
    sw.LSTMForward = lambda *a: calls.append(1) or op(*a)
    try:
        autograd.training = True
        net = layer.LSTM(xs_np.shape[-1], 4, **kw)
        x = tensor.from_numpy(xs_np)
        x.requires_grad = True
        h0, c0 = tensor.from_numpy(h0_np), tensor.from_numpy(c0_np)
        xs = [tensor.from_numpy(s) for s in xs_np] if kind == "list" else x
        net(xs, (h0, c0))  # creates the parameters
        if params is not None:
            net.set_params(params)
        out, h, c = net(xs, (h0, c0))
        y = autograd.cat(out, 1) if kind == "list" else out
        loss = autograd.reduce_sum(autograd.mul(y, y))
        loss = autograd.add(loss, autograd.reduce_sum(autograd.add(h, c)))
        grads = {p.name: tensor.to_numpy(g) for p, g in autograd.backward(loss)}
        runs = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        assert len(calls) == (2 * runs if fused else 0)  # the parameters' call and this one
        return [tensor.to_numpy(t) for t in (y, h, c)], grads, net.get_params()
    finally:
        ag_rnn._LSTMLayer.enabled = saved
        sw.LSTMForward = op
        autograd.training = False


@pytest.mark.parametrize("kind,kw", [
    ("3d", {}), ("list", {}), ("3d", {"num_layers": 2}),
    ("3d", {"num_layers": 2, "bidirectional": True}), ("3d", {"batch_first": True}),
    ("3d", {"bias": False, "bidirectional": True}),
])
def test_layer_through_the_op_matches_the_composed_cells(kind, kw, rng):
    dirs = 2 if kw.get("bidirectional") else 1
    xs = rng.standard_normal((5, 3, 6)).astype(F32)
    states = (kw.get("num_layers", 1) * dirs, xs.shape[0 if kw.get("batch_first") else 1], 4)
    h0 = (0.5 * rng.standard_normal(states)).astype(F32)
    c0 = (0.5 * rng.standard_normal(states)).astype(F32)
    fused, g_fused, params = _layer_run(xs, h0, c0, kind, True, **kw)
    composed, g_composed, _ = _layer_run(xs, h0, c0, kind, False, params=params, **kw)
    for a, b in zip(fused, composed):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert sorted(g_fused) == sorted(g_composed) and g_fused
    for name in g_fused:
        np.testing.assert_allclose(g_fused[name], g_composed[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_reference_backend_matches_onednns(rng):
    if not sw.USE_DNNL:
        pytest.skip("libsinga was built without oneDNN")
    gx, h0, c0, w, b = operands(rng, T=6, N=5, H=20)
    dev = device.get_default_device()
    default = dev.backend()
    results = {}
    for backend in ("cpu", default):
        dev.set_backend(backend)
        try:
            hs, cs, gates = sw.LSTMForward(*map(core, (gx, h0, c0, w, b)), True)
            d = sw.LSTMBackward(core(np.ones((6, 5, 20))), None, None, gates, hs, cs, core(h0),
                                core(c0), core(w), True, True)
            results[backend] = [sw.to_numpy(t) for t in (hs, cs) + tuple(d)]
        finally:
            dev.set_backend(default)
    assert default != "cpu"
    ref, ours = results.values()
    for a, b in zip(ref, ours):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


class CharLSTM(model.Model):
    def __init__(self):
        super().__init__()
        self.rnn = layer.LSTM(6, 8, num_layers=2)
        self.head = layer.Linear(5)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.head(autograd.reshape(self.rnn(x)[0], (-1, 8)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


@pytest.mark.parametrize("graph", [False, True])
def test_graph_mode_trains_as_eager_mode(graph, rng):
    x = rng.standard_normal((7, 4, 6)).astype(F32)
    y = rng.integers(0, 5, 28).astype(np.int32)

    def train(use_graph):
        dev = device.get_default_device()
        dev.SetRandSeed(3)
        net = CharLSTM()
        net.set_optimizer(opt.Adam(lr=0.05))
        tx, ty = tensor.from_numpy(x), tensor.from_numpy(y)
        net.compile([tx], is_train=True, use_graph=use_graph)
        losses = [float(tensor.to_numpy(net(tx, ty)[1]).reshape(-1)[0]) for _ in range(4)]
        return losses, {k: tensor.to_numpy(v) for k, v in net.get_params().items()}

    eager_losses, eager_params = train(False)
    losses, params = train(graph)
    assert eager_losses[-1] < eager_losses[0]  # it learns
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    for k in eager_params:
        np.testing.assert_allclose(params[k], eager_params[k], rtol=1e-4, atol=1e-6, err_msg=k)


def test_nan_in_one_step_reaches_the_later_steps_only(rng):
    x = rng.standard_normal((4, 2, 3)).astype(F32)
    x[2, 0, 1] = np.nan
    net = layer.LSTM(3, 4)
    out = tensor.to_numpy(net(tensor.from_numpy(x))[0])
    assert not np.isnan(out[:2]).any()
    assert np.isnan(out[2, 0]).all() and np.isnan(out[3, 0]).all()
    assert not np.isnan(out[:, 1]).any()  # the other sequence of the batch
