"""The recurrent layers as one op each way (singa/ops/rnn.h, autograd.rnn._LSTMLayer, _GRULayer,
_RNNLayer): the ops against float64 numpy cells and their gradients against finite differences,
both directions; layer.LSTM / GRU / RNN through them against the composed cells (the reference:
enabled = False) for every layout; the reference backend against oneDNN's; graph mode against
eager mode; ONNX export through onnxruntime; NaN."""
import numpy as np
import pytest

from singa import autograd, device, layer, model, opt, sonnx, tensor
from singa import singa_wrap as sw
from singa.autograd import rnn as ag_rnn

from isa_copies import digest

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


def gru_ref(gx, h0, w, b, reverse):
    """hs (float64) of one GRU layer (gates r, z, n; the recurrent bias inside r's product)."""
    T, H = gx.shape[0], h0.shape[1]
    hs = np.zeros((T,) + h0.shape)
    h = h0.astype(np.float64)
    for t in (reversed(range(T)) if reverse else range(T)):
        gh = h @ w + (0 if b is None else b)
        r = sigmoid(gx[t, :, :H] + gh[:, :H])
        z = sigmoid(gx[t, :, H:2 * H] + gh[:, H:2 * H])
        n = np.tanh(gx[t, :, 2 * H:] + r * gh[:, 2 * H:])
        h = n + z * (h - n)
        hs[t] = h
    return hs


def operands(rng, T=4, N=3, H=3, bias=True, gates=4):
    gx = rng.standard_normal((T, N, gates * H))
    h0, c0 = rng.standard_normal((N, H)), rng.standard_normal((N, H))
    w = 0.5 * rng.standard_normal((H, gates * H))
    b = 0.5 * rng.standard_normal(gates * H) if bias else None
    return gx, h0, c0, w, b


def expect_finite_differences(loss, args, got):
    """got[k] (core tensors) equals the central differences of loss(*args) in args[k], for
    every args[k] that is not None."""
    for k, arg in enumerate(args):
        if arg is None:
            continue
        num = np.zeros_like(arg)
        for idx in np.ndindex(*arg.shape):
            up = [a.copy() if a is not None else None for a in args]
            down = [a.copy() if a is not None else None for a in args]
            up[k][idx] += 1e-6
            down[k][idx] -= 1e-6
            num[idx] = (loss(*up) - loss(*down)) / 2e-6
        np.testing.assert_allclose(sw.to_numpy(got[k]), num, rtol=1e-4, atol=1e-5,
                                   err_msg="gradient %d" % k)


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
    expect_finite_differences(loss, [gx, h0, c0, w, b], got)
    if not bias:
        assert got[4] is None


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_gru_forward_matches_numpy(reverse, bias, rng):
    gx, h0, _, w, b = operands(rng, T=5, N=4, H=6, bias=bias, gates=3)
    hs, gates, ghn = sw.GRUForward(*map(core, (gx, h0, w, b)), reverse)
    np.testing.assert_allclose(sw.to_numpy(hs), gru_ref(gx, h0, w, b, reverse), rtol=1e-5,
                               atol=1e-6)
    assert sw.to_numpy(gates).shape == gx.shape and sw.to_numpy(ghn).shape == (5, 4, 6)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_gru_backward_matches_finite_differences(reverse, bias, rng):
    gx, h0, _, w, b = operands(rng, bias=bias, gates=3)
    T, N, H = gx.shape[0], h0.shape[0], h0.shape[1]
    r_hs, r_h = rng.standard_normal((T, N, H)), rng.standard_normal((N, H))
    last = 0 if reverse else T - 1

    def loss(*args):
        hs = gru_ref(*args, reverse)
        return (hs * r_hs).sum() + (hs[last] * r_h).sum()

    hs, gates, ghn = sw.GRUForward(*map(core, (gx, h0, w, b)), reverse)
    got = sw.GRUBackward(core(r_hs), core(r_h), gates, ghn, hs, core(h0), core(w), bias, reverse)
    expect_finite_differences(loss, [gx, h0, w, b], got)
    if not bias:
        assert got[3] is None


def plain_ref(gx, h0, w, b, reverse, relu):
    """hs (float64) of one plain RNN layer: tanh, or max(x, 0)."""
    hs = np.zeros((gx.shape[0],) + h0.shape)
    h = h0.astype(np.float64)
    for t in (reversed(range(gx.shape[0])) if reverse else range(gx.shape[0])):
        a = gx[t] + h @ w + (0 if b is None else b)
        h = np.maximum(a, 0) if relu else np.tanh(a)
        hs[t] = h
    return hs


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("reverse,bias", [(False, True), (True, True), (True, False)])
def test_plain_rnn_op_matches_numpy_and_finite_differences(relu, reverse, bias, rng):
    gx, h0, _, w, b = operands(rng, bias=bias, gates=1)
    T, N, H = gx.shape[0], h0.shape[0], h0.shape[1]
    hs = sw.RNNForward(*map(core, (gx, h0, w, b)), relu, reverse)
    np.testing.assert_allclose(sw.to_numpy(hs), plain_ref(gx, h0, w, b, reverse, relu),
                               rtol=1e-5, atol=1e-6)
    r_hs, r_h = rng.standard_normal((T, N, H)), rng.standard_normal((N, H))
    last = 0 if reverse else T - 1

    def loss(*args):
        out = plain_ref(*args, reverse, relu)
        return (out * r_hs).sum() + (out[last] * r_h).sum()

    got = sw.RNNBackward(core(r_hs), core(r_h), hs, core(h0), core(w), bias, relu, reverse)
    expect_finite_differences(loss, [gx, h0, w, b], got)
    assert (got[3] is None) == (not bias)


def make_layer(cell, *args, **kw):
    """layer.LSTM / GRU, or layer.RNN for "tanh" / "relu"."""
    if cell in ("tanh", "relu"):
        return layer.RNN(*args, nonlinearity=cell, **kw)
    return (layer.LSTM if cell == "lstm" else layer.GRU)(*args, **kw)


def masked_ref(cell, gx, h0, c0, w, b, reverse, mask):
    """(hs, h_T, c_T) of one layer with a (T, N) mask: past a sequence's end the states are
    carried (hs holds them) -- the float64 rule the ops implement."""
    T, H = gx.shape[0], h0.shape[1]
    hs, h = np.zeros((T,) + h0.shape), h0.astype(np.float64)
    c = np.zeros_like(h) if c0 is None else c0.astype(np.float64)
    for t in (reversed(range(T)) if reverse else range(T)):
        one = gx[t:t + 1]
        if cell == "lstm":
            hn, cn = lstm_ref(one, h, c, w, b, False)
            hn, cn = hn[0], cn[0]
        elif cell == "gru":
            hn, cn = gru_ref(one, h, w, b, False)[0], c
        else:
            hn, cn = plain_ref(one, h, w, b, False, cell == "relu")[0], c
        m = mask[t][:, None]
        h, c = m * hn + (1 - m) * h, m * cn + (1 - m) * c
        hs[t] = h
    return hs, h, c


@pytest.mark.parametrize("cell", ["lstm", "gru", "tanh", "relu"])
@pytest.mark.parametrize("reverse", [False, True])
def test_masked_ops_carry_states_past_the_ends(cell, reverse, rng):
    G = {"lstm": 4, "gru": 3}.get(cell, 1)
    gx, h0, c0, w, b = operands(rng, T=5, N=3, H=3, gates=G)
    lengths = np.array([5, 2, 1])
    mask = (np.arange(5)[:, None] < lengths[None, :]).astype(np.float64)  # (T, N)
    T, N, H = 5, 3, 3
    r_hs, r_h, r_c = (rng.standard_normal(sh) for sh in ((T, N, H), (N, H), (N, H)))

    def run(gx_, h0_, c0_, w_, b_):
        return masked_ref(cell, gx_, h0_, c0_, w_, b_, reverse, mask)

    def loss(*args):
        hs, h, c = run(*args)
        return (hs * r_hs).sum() + (h * r_h).sum() + ((c * r_c).sum() if cell == "lstm" else 0)

    want_hs, _, _ = run(gx, h0, c0, w, b)
    m = core(mask)
    if cell == "lstm":
        hs, cs, gates = sw.LSTMForward(*map(core, (gx, h0, c0, w, b)), reverse, m)
        got = sw.LSTMBackward(core(r_hs), core(r_h), core(r_c), gates, hs, cs, core(h0),
                              core(c0), core(w), True, reverse, m)
        args = [gx, h0, c0, w, b]
    elif cell == "gru":
        hs, gates, ghn = sw.GRUForward(*map(core, (gx, h0, w, b)), reverse, m)
        got = sw.GRUBackward(core(r_hs), core(r_h), gates, ghn, hs, core(h0), core(w), True,
                             reverse, m)
        args = [gx, h0, None, w, b]
        got = (got[0], got[1], None) + tuple(got[2:])
    else:
        relu = cell == "relu"
        hs = sw.RNNForward(*map(core, (gx, h0, w, b)), relu, reverse, m)
        got = sw.RNNBackward(core(r_hs), core(r_h), hs, core(h0), core(w), True, relu, reverse,
                             m)
        args = [gx, h0, None, w, b]
        got = (got[0], got[1], None) + tuple(got[2:])
    np.testing.assert_allclose(sw.to_numpy(hs), want_hs, rtol=1e-5, atol=1e-6)
    # sequence 2 has one step: forward, its state stays step 0's; reverse, h0 until step 0
    carried = h0[2] if reverse else want_hs[0, 2]
    np.testing.assert_allclose(sw.to_numpy(hs)[T - 1, 2], carried, rtol=1e-5, atol=1e-6)
    expect_finite_differences(loss, args, got)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("steps,lengths,sequences", [
    (6, [6, 3, 1], True), (6, [6, 3, 1], False), (1, [1, 0, 1], True)])
def test_rnn_op_with_seq_lengths_matches_the_composed_cells(mode, steps, lengths, sequences,
                                                            rng):
    x = tensor.from_numpy(rng.standard_normal((steps, 3, 4)).astype(F32))
    x.requires_grad = True
    lens = tensor.from_numpy(np.array(lengths, np.int32))
    handle = autograd.RNNHandle(x, 5, mode=mode, num_layers=2, bidirectional=1)
    states = (4, 3, 5)
    w0 = (0.3 * rng.standard_normal(handle.weights_size)).astype(F32)
    hx0 = (0.2 * rng.standard_normal(states)).astype(F32)
    ops = (ag_rnn._LSTMLayer, ag_rnn._GRULayer, ag_rnn._RNNLayer)
    results = []
    for fused in (True, False):
        saved = [c.enabled for c in ops]
        for c in ops:
            c.enabled = fused
        autograd.training = True
        try:
            w = tensor.from_numpy(w0)
            hx, cx = tensor.from_numpy(hx0), tensor.from_numpy(hx0)
            for t in (w, hx):
                t.requires_grad = t.stores_grad = True
            y = autograd._RNN(handle, return_sequences=sequences, use_mask=True,
                              seq_lengths=lens)(x, hx, cx, w)[0]
            loss = autograd.reduce_sum(autograd.mul(y, y))
            grads = {id(p): tensor.to_numpy(g) for p, g in autograd.backward(loss)}
            results.append((tensor.to_numpy(y), [grads[id(t)] for t in (w, hx)]))
        finally:
            for c, e in zip(ops, saved):
                c.enabled = e
            autograd.training = False
    (y1, g1), (y2, g2) = results
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-6)
    if sequences and steps == 6:
        assert np.all(y1[3:, 1] == 0) and np.all(y1[1:, 2] == 0)  # past the ends
    if not sequences:  # each sequence's last valid step: the forward half is not zero
        assert y1.shape == (3, 10) and np.all(np.abs(y1[:, :5]).sum(axis=1) > 0)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_the_fused_rnn_operators_refuse_bad_shapes_naming_themselves():
    x = tensor.from_numpy(np.zeros((4, 2, 3), F32))
    with pytest.raises(sw.ShapeError, match=r"RNNHandle: x must be 3-d .* got shape \(4, 2\)"):
        autograd.RNNHandle(tensor.from_numpy(np.zeros((4, 2), F32)), 5)
    handle = autograd.RNNHandle(x, 5, mode=2)
    hx = tensor.from_numpy(np.zeros((1, 2, 5), F32))
    w = tensor.from_numpy(np.zeros(handle.weights_size + 1, F32))
    with pytest.raises(sw.ShapeError, match=r"_RNN: w must have shape \(%d,\), got \(%d,\)"
                       % (handle.weights_size, handle.weights_size + 1)):
        autograd._RNN(handle)(x, hx, hx, w)
    wider = tensor.from_numpy(np.zeros((4, 2, 7), F32))
    with pytest.raises(sw.ShapeError, match=r"_RNN: x must be \(seq, batch, 3\), got shape "
                       r"\(4, 2, 7\)"):
        autograd._RNN(handle)(wider, hx, hx, tensor.from_numpy(np.zeros(handle.weights_size,
                                                                        F32)))


def _layer_run(xs_np, h0_np, c0_np, kind, fused, params=None, cell="lstm", **kw):
    """(outputs, h, c, parameter gradients) of a layer.LSTM (layer.GRU: c is h) on the given
    data; checks that the op ran once per layer and direction (fused) or never."""
    cls, name = {"lstm": (ag_rnn._LSTMLayer, "LSTMForward"),
                 "gru": (ag_rnn._GRULayer, "GRUForward"), "tanh": (ag_rnn._RNNLayer, "RNNForward"),
                 "relu": (ag_rnn._RNNLayer, "RNNForward")}[cell]
    saved, op = cls.enabled, getattr(sw, name)
    calls = []
    cls.enabled = fused
    setattr(sw, name, lambda *a: calls.append(1) or op(*a))
    try:
        autograd.training = True
        net = make_layer(cell, xs_np.shape[-1], 4, **kw)
        x = tensor.from_numpy(xs_np)
        x.requires_grad = True
        h0, c0 = tensor.from_numpy(h0_np), tensor.from_numpy(c0_np)
        xs = [tensor.from_numpy(s) for s in xs_np] if kind == "list" else x
        state = (h0, c0) if cell == "lstm" else h0
        net(xs, state)  # creates the parameters
        if params is not None:
            net.set_params(params)
        out, h, c = net(xs, state) if cell == "lstm" else net(xs, state) + (h0,)
        y = autograd.cat(out, 1) if kind == "list" else out
        loss = autograd.reduce_sum(autograd.mul(y, y))
        loss = autograd.add(loss, autograd.reduce_sum(autograd.add(h, c)))
        grads = {p.name: tensor.to_numpy(g) for p, g in autograd.backward(loss)}
        runs = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        assert len(calls) == (2 * runs if fused else 0)  # the parameters' call and this one
        return [tensor.to_numpy(t) for t in (y, h, c)], grads, net.get_params()
    finally:
        cls.enabled = saved
        setattr(sw, name, op)
        autograd.training = False


@pytest.mark.parametrize("cell", ["lstm", "gru", "tanh", "relu"])
@pytest.mark.parametrize("kind,kw", [
    ("3d", {}), ("list", {}), ("3d", {"num_layers": 2}),
    ("3d", {"num_layers": 2, "bidirectional": True}), ("3d", {"batch_first": True}),
    ("3d", {"bias": False, "bidirectional": True}),
])
def test_layer_through_the_op_matches_the_composed_cells(cell, kind, kw, rng):
    dirs = 2 if kw.get("bidirectional") else 1
    xs = rng.standard_normal((5, 3, 6)).astype(F32)
    states = (kw.get("num_layers", 1) * dirs, xs.shape[0 if kw.get("batch_first") else 1], 4)
    h0 = (0.5 * rng.standard_normal(states)).astype(F32)
    c0 = (0.5 * rng.standard_normal(states)).astype(F32)
    fused, g_fused, params = _layer_run(xs, h0, c0, kind, True, cell=cell, **kw)
    composed, g_composed, _ = _layer_run(xs, h0, c0, kind, False, params=params, cell=cell,
                                         **kw)
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
    gx3, _, _, w3, b3 = operands(rng, T=6, N=5, H=20, gates=3)
    dhs = core(np.ones((6, 5, 20)))
    dev = device.get_default_device()
    default = dev.backend()
    results = {}
    for backend in ("cpu", default):
        dev.set_backend(backend)
        try:
            hs, cs, gates = sw.LSTMForward(*map(core, (gx, h0, c0, w, b)), True)
            d = sw.LSTMBackward(dhs, None, None, gates, hs, cs, core(h0), core(c0), core(w),
                                True, True)
            ghs, ggates, ghn = sw.GRUForward(*map(core, (gx3, h0, w3, b3)), False)
            gd = sw.GRUBackward(dhs, None, ggates, ghn, ghs, core(h0), core(w3), True, False)
            results[backend] = [sw.to_numpy(t) for t in (hs, cs) + tuple(d) + (ghs,) + gd]
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


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_dropout_acts_between_layers_in_training_only(cell, rng):
    x = tensor.from_numpy(rng.standard_normal((4, 3, 5)).astype(F32))
    cls = layer.LSTM if cell == "lstm" else layer.GRU
    net, plain = cls(5, 6, num_layers=2, dropout=0.5), cls(5, 6, num_layers=2)
    net(x)
    plain(x)
    params = {k: 20 * tensor.to_numpy(v) for k, v in net.get_params().items()}  # SINGA's 0.01
    net.set_params(params)
    plain.set_params(params)
    autograd.training = True
    try:
        dropped, kept = tensor.to_numpy(net(x)[0]), tensor.to_numpy(plain(x)[0])
    finally:
        autograd.training = False
    assert np.abs(dropped - kept).max() > 1e-3  # the second layer saw dropped inputs
    np.testing.assert_allclose(tensor.to_numpy(net(x)[0]), kept, rtol=1e-6, atol=1e-7)  # eval


@pytest.mark.parametrize("cell,node", [("lstm", "LSTM"), ("gru", "GRU"), ("tanh", "RNN"),
                                       ("relu", "RNN")])
@pytest.mark.parametrize("bidirectional,bias", [(False, True), (True, True), (True, False)])
def test_layer_exports_to_onnx_and_onnxruntime_agrees(cell, node, bidirectional, bias, rng):
    ort = pytest.importorskip("onnxruntime")
    x = rng.standard_normal((5, 2, 3)).astype(F32)
    net = make_layer(cell, 3, 4, num_layers=2, bidirectional=bidirectional, bias=bias)
    autograd.training = True
    try:
        tx = tensor.from_numpy(x)
        tx.requires_grad = True
        y = net(tx)[0]
        m = sonnx.to_onnx([tx], [y])
    finally:
        autograd.training = False
    ops = [n.op_type for n in m.graph.node]
    assert ops.count(node) == 2 * (2 if bidirectional else 1), ops
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(got, tensor.to_numpy(y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_masked_layer_exports_with_sequence_lens(mode, rng):
    ort = pytest.importorskip("onnxruntime")
    xn = rng.standard_normal((6, 3, 4)).astype(F32)
    x = tensor.from_numpy(xn)
    x.requires_grad = True
    lengths = tensor.from_numpy(np.array([6, 3, 1], np.int32))
    handle = autograd.RNNHandle(x, 5, mode=mode, num_layers=1, bidirectional=1)
    w = tensor.from_numpy((0.3 * rng.standard_normal(handle.weights_size)).astype(F32))
    w.requires_grad = w.stores_grad = True
    hx = tensor.from_numpy((0.2 * rng.standard_normal((2, 3, 5))).astype(F32))
    autograd.training = True
    try:
        y = autograd._RNN(handle, return_sequences=True, use_mask=True,
                          seq_lengths=lengths)(x, hx, hx, w)[0]
        m = sonnx.to_onnx([x], [y])
    finally:
        autograd.training = False
    rnn_nodes = [n for n in m.graph.node if n.op_type in ("RNN", "LSTM", "GRU")]
    assert len(rnn_nodes) == 2 and all(n.input[4] for n in rnn_nodes)  # sequence_lens given
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: xn})[0]
    np.testing.assert_allclose(got, tensor.to_numpy(y), rtol=1e-5, atol=1e-5)


ISA_SCRIPT = r"""
import hashlib
import numpy as np
from singa import singa_wrap as sw
h = hashlib.sha256()
rng = np.random.default_rng(0)
T, N, H = 7, 5, 37  # H not a multiple of any vector width: every loop's tail runs
f = lambda a: sw.from_numpy(np.ascontiguousarray(a, np.float32))
mask = f(np.arange(T)[:, None] < np.array([7, 3, 1, 7, 5])[None, :])
count = 0
for G, kind in ((4, "lstm"), (3, "gru"), (1, "tanh"), (1, "relu")):
    gx = rng.standard_normal((T, N, G * H)) * 3
    gx[0, 0, :4] = [np.nan, np.inf, -np.inf, 1e30]
    gx, h0, c0 = f(gx), f(rng.standard_normal((N, H))), f(rng.standard_normal((N, H)))
    w, b = f(rng.standard_normal((H, G * H)) * 0.3), f(rng.standard_normal(G * H))
    dhs = f(rng.standard_normal((T, N, H)))
    for reverse in (False, True):
        for m in (None, mask):
            if kind == "lstm":
                fw = sw.LSTMForward(gx, h0, c0, w, b, reverse, m)
                bw = sw.LSTMBackward(dhs, h0, c0, fw[2], fw[0], fw[1], h0, c0, w, True, reverse,
                                     m)
            elif kind == "gru":
                fw = sw.GRUForward(gx, h0, w, b, reverse, m)
                bw = sw.GRUBackward(dhs, h0, fw[1], fw[2], fw[0], h0, w, True, reverse, m)
            else:
                fw = (sw.RNNForward(gx, h0, w, b, kind == "relu", reverse, m),)
                bw = sw.RNNBackward(dhs, h0, fw[0], h0, w, True, kind == "relu", reverse, m)
            for t in tuple(fw) + tuple(bw):
                v = sw.to_numpy(t)
                v[np.isnan(v)] = np.nan
                h.update(v.tobytes())
                count += 1
print("DIGEST", count, h.hexdigest())
"""


@pytest.mark.skipif(not {"avx512f", "avx512bw", "avx512dq", "avx512vl"}
                    <= set(device.cpu_features()), reason="needs a CPU with AVX-512")
def test_the_avx512_copy_gives_the_baseline_bits():
    # cpu/rnn_avx512.cc runs the walks' row loops 16 floats wide; the baseline 4 wide
    wide = digest(ISA_SCRIPT)
    assert int(wide.split()[1]) == 100  # every op, direction and mask ran
    assert wide == digest(ISA_SCRIPT, "avx512f")


def test_nan_in_one_step_reaches_the_later_steps_only(rng):
    x = rng.standard_normal((4, 2, 3)).astype(F32)
    x[2, 0, 1] = np.nan
    net = layer.LSTM(3, 4)
    out = tensor.to_numpy(net(tensor.from_numpy(x))[0])
    assert not np.isnan(out[:2]).any()
    assert np.isnan(out[2, 0]).all() and np.isnan(out[3, 0]).all()
    assert not np.isnan(out[:, 1]).any()  # the other sequence of the batch
