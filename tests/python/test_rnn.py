"""Recurrent layers and operators against float64 numpy re-implementations written here: every
cell (relu, tanh, LSTM, GRU) forward and by finite differences, the layer stack (layers,
directions, batch_first, dropout, initial states), cuDNN's flat weight packing with seq_lengths,
the _RNN operator called directly, and graph mode against eager mode.

The references compute each gate from its own named parameters (Wx_i, Bh_f...) and the weights are
drawn with a different scale and bias per gate, so that swapping two gates (the LSTM's input and
forget gates, say) changes the numbers far beyond the tolerances; test_lstm_gate_swap_is_visible
checks that margin.
"""
import numpy as np
import pytest

from gradcheck import check_op, numeric_grads
from singa import autograd, device, layer, model, opt, tensor
from singa.autograd import rnn as ag_rnn

N = tensor.to_numpy
F32 = np.float32
GATES = {0: ("",), 1: ("",), 2: ("i", "f", "g", "o"), 3: ("r", "z", "n")}  # cuDNN's order
LAYERS = {0: lambda **k: layer.RNN(nonlinearity="relu", **k),
          1: lambda **k: layer.RNN(**k), 2: lambda **k: layer.LSTM(**k),
          3: lambda **k: layer.GRU(**k)}


def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


# ---- numpy references --------------------------------------------------------------------------
def np_named_step(mode, x, h, c, p, s):
    """One step from SINGA-named parameters p (suffix s): RNN Wx, Wh, b; gated Wx_g, Wh_g, Bx_g,
    Bh_g per gate."""
    if mode in (0, 1):
        a = x @ p["Wx" + s] + h @ p["Wh" + s] + p.get("b" + s, 0)
        return (np.maximum(a, 0) if mode == 0 else np.tanh(a)), None

    def lin(kind, g, v):
        return v @ p["W%s_%s%s" % (kind, g, s)] + p.get("B%s_%s%s" % (kind, g, s), 0)

    if mode == 2:
        i = sig(lin("x", "i", x) + lin("h", "i", h))
        f = sig(lin("x", "f", x) + lin("h", "f", h))
        o = sig(lin("x", "o", x) + lin("h", "o", h))
        g = np.tanh(lin("x", "g", x) + lin("h", "g", h))
        c = f * c + i * g
        return o * np.tanh(c), c
    r = sig(lin("x", "r", x) + lin("h", "r", h))
    z = sig(lin("x", "z", x) + lin("h", "z", h))
    n = np.tanh(lin("x", "n", x) + r * lin("h", "n", h))
    return (1 - z) * n + z * h, None


def np_stack(step, xs, h0s, c0s, layers, dirs, lengths=None, drop=None):
    """The stacked, bidirectional recurrence: step(p, x, h, c) -> (h, c); xs (T, B, I); h0s,
    c0s (P, B, H). Past a sequence's length outputs are 0 and states are carried."""
    steps, batch = xs.shape[:2]
    lengths = np.full(batch, steps) if lengths is None else np.asarray(lengths)
    inp, hs, cs = xs, [], []
    for layer_ in range(layers):
        outs = []
        for d in range(dirs):
            p = layer_ * dirs + d
            h, c = h0s[p], (c0s[p] if c0s is not None else None)
            ys = np.zeros(inp.shape[:2] + (h.shape[1],))
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                m = (t < lengths)[:, None].astype(np.float64)
                hn, cn = step(p, inp[t], h, c)
                ys[t] = hn * m
                h = m * hn + (1 - m) * h
                c = m * cn + (1 - m) * c if cn is not None else None
            hs.append(h)
            cs.append(c)
            outs.append(ys)
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(hs), (np.stack(cs) if c0s is not None else None)


def cudnn_layout(mode, inp, hidden, layers, dirs):
    """cuDNN's packing, spelled out: per pseudo-layer G input matrices (H, in), G recurrent
    matrices (H, H), G input biases, G recurrent biases."""
    g, out, off = len(GATES[mode]), [], 0
    for p in range(layers * dirs):
        n = inp if p < dirs else hidden * dirs
        piece = {}
        for key, shape in (("W", (g * hidden, n)), ("R", (g * hidden, hidden)),
                           ("bW", (g * hidden,)), ("bR", (g * hidden,))):
            size = int(np.prod(shape))
            piece[key] = (off, shape)
            off += size
        out.append(piece)
    return out, off


def np_cudnn_step(mode, hidden, x, h, c, W, R, bW, bR):
    """One step from cuDNN matrices (gate chunks of rows, in cuDNN's gate order)."""
    def chunks(v):
        return [v[:, k * hidden:(k + 1) * hidden] for k in range(len(GATES[mode]))]

    gx, gh = x @ W.T + bW, h @ R.T + bR
    if mode in (0, 1):
        return (np.maximum(gx + gh, 0) if mode == 0 else np.tanh(gx + gh)), None
    if mode == 2:
        i, f, g, o = chunks(gx + gh)
        c = sig(f) * c + sig(i) * np.tanh(g)
        return sig(o) * np.tanh(c), c
    (xr, xz, xn), (hr, hz, hn) = chunks(gx), chunks(gh)
    r, z = sig(xr + hr), sig(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1 - z) * n + z * h, None


def np_fused(mode, hidden, layers, dirs, x, hx, cx, w, lengths=None):
    layout, size = cudnn_layout(mode, x.shape[2], hidden, layers, dirs)
    assert w.size == size
    mats = [{k: w[o:o + int(np.prod(s))].reshape(s) for k, (o, s) in piece.items()}
            for piece in layout]

    def step(p, xt, h, c):
        m = mats[p]
        return np_cudnn_step(mode, hidden, xt, h, c, m["W"], m["R"], m["bW"], m["bR"])

    return np_stack(step, x, hx, cx if mode == 2 else None, layers, dirs, lengths)


# ---- helpers ------------------------------------------------------------------------------------
def gate_weights(net, rng, scale=0.6):
    """Sets every parameter of a recurrent layer to random values with a distinct mean per gate
    (and per kind), so that no two gates are interchangeable; returns them as float64."""
    values = {}
    for k, v in net.get_params().items():
        short = k.split(".")[-1]
        gate = short.split("_")[1] if "_" in short else ""
        shift = {"i": 0.3, "f": -0.5, "o": 0.1, "g": -0.2, "r": 0.4, "z": -0.3, "n": 0.2}.get(
            gate, 0.0)
        values[k] = (rng.normal(shift, scale, v.shape)).astype(F32)
    net.set_params(values)
    return {k.split(".")[-1]: v.astype(np.float64) for k, v in values.items()}


def run_layer(net, xs, h0, c0=None):
    """Calls a layer with SINGA's conventions: LSTM takes (h0, c0), the others h0."""
    if isinstance(net, layer.LSTM):
        return net(xs, (h0, c0))
    out, h = net(xs, h0)
    return out, h, None


def layer_reference(mode, net, p, x, h0, c0):
    dirs = net.num_directions
    suffixes = [("_l%d" % k if k else "") + ("_reverse" if d else "")
                for k in range(net.num_layers) for d in range(dirs)]
    return np_stack(lambda q, xt, h, c: np_named_step(mode, xt, h, c, p, suffixes[q]),
                    x, h0, c0, net.num_layers, dirs)


# ---- cells --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [0, 1, 2, 3], ids=["relu", "tanh", "lstm", "gru"])
def test_cell_forward_and_gradients_against_numpy(mode, rng):
    """cell_step against np_cudnn_step, gradients for x, h, c and every weight by finite
    differences (each gate has its own rows, so each gate path is differenced)."""
    H, I, B = 3, 2, 2
    G = len(GATES[mode])
    arrays = [rng.normal(0, 1, (B, I)), rng.normal(0, 1, (B, H)), rng.normal(0, 1, (B, H)),
              rng.normal(0.2, 0.7, (I, G * H)), rng.normal(-0.1, 0.7, (H, G * H)),
              rng.normal(0.3, 0.5, (G * H,)), rng.normal(-0.3, 0.5, (G * H,))]
    arrays = [a.astype(F32) for a in arrays]

    def op(ag, x, h, c, w_ih, w_hh, b_ih, b_hh):
        hn, cn = ag_rnn.cell_step(mode, x, h, c, ag_rnn.CellWeights(w_ih, w_hh, b_ih, b_hh))
        return (hn, cn) if mode == 2 else hn

    def ref(x, h, c, w_ih, w_hh, b_ih, b_hh):
        hn, cn = np_cudnn_step(mode, H, x, h, c, w_ih.T, w_hh.T, b_ih, b_hh)
        return (hn, cn) if mode == 2 else hn

    grad = [0, 1, 3, 4, 5, 6] + ([2] if mode == 2 else [])
    check_op(op, ref, arrays, grad=grad)


# ---- the layers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [0, 1, 2, 3], ids=["relu", "tanh", "lstm", "gru"])
@pytest.mark.parametrize("layers,bidir", [(1, False), (2, True)], ids=["1", "2bi"])
def test_layer_forward_against_numpy(mode, layers, bidir, rng):
    T, B, I, H = 4, 2, 3, 5
    net = LAYERS[mode](input_size=I, hidden_size=H, num_layers=layers, bidirectional=bidir)
    P = layers * (2 if bidir else 1)
    x = rng.normal(0, 1, (T, B, I)).astype(F32)
    h0 = rng.normal(0, 0.5, (P, B, H)).astype(F32)
    c0 = rng.normal(0, 0.5, (P, B, H)).astype(F32)
    state = (lambda a: tensor.from_numpy(a[0])) if P == 1 else tensor.from_numpy
    run_layer(net, [tensor.from_numpy(s) for s in x], state(h0), state(c0))
    p = gate_weights(net, rng)
    out, h, c = run_layer(net, [tensor.from_numpy(s) for s in x], state(h0), state(c0))
    ys, hs, cs = layer_reference(mode, net, p, x, h0, c0 if mode == 2 else None)
    assert isinstance(out, list) and len(out) == T
    np.testing.assert_allclose(np.stack([N(o) for o in out]), ys, rtol=1e-4, atol=1e-5)
    want_h = hs[0] if P == 1 else hs
    np.testing.assert_allclose(N(h), want_h, rtol=1e-4, atol=1e-5)
    if mode == 2:
        np.testing.assert_allclose(N(c), cs[0] if P == 1 else cs, rtol=1e-4, atol=1e-5)
    names = {k.split(".")[-1] for k in net.get_params()}
    first = {0: {"Wx", "Wh", "b"}, 1: {"Wx", "Wh", "b"}}.get(
        mode, {"%s_%s" % (k, g) for k in ("Wx", "Wh", "Bx", "Bh") for g in GATES[mode]})
    assert first <= names  # SINGA's names for the first forward layer
    assert len(names) == len(first) * P


def test_lstm_gate_swap_is_visible(rng):
    """The references and weights above tell the LSTM's input and forget gates apart by a wide
    margin: with those two gates swapped the outputs move far beyond the tolerance."""
    net = layer.LSTM(3, 4)
    x = rng.normal(0, 1, (5, 2, 3))
    h0, c0 = rng.normal(0, 0.5, (1, 2, 4)), rng.normal(0, 0.5, (1, 2, 4))
    run_layer(net, [tensor.from_numpy(s.astype(F32)) for s in x], *(
        tensor.from_numpy(a[0].astype(F32)) for a in (h0, c0)))
    p = gate_weights(net, rng)
    swapped = dict(p)
    for k in ("Wx", "Wh", "Bx", "Bh"):
        swapped[k + "_i"], swapped[k + "_f"] = p[k + "_f"], p[k + "_i"]
    good = layer_reference(2, net, p, x, h0, c0)[0]
    bad = layer_reference(2, net, swapped, x, h0, c0)[0]
    assert np.max(np.abs(good - bad)) > 100 * 1e-4


@pytest.mark.parametrize("mode", [2, 3, 1], ids=["lstm", "gru", "tanh"])
def test_layer_gradients_by_finite_differences(mode, rng):
    """Every parameter (each gate, each layer and direction), the inputs and the initial states
    against central differences of the float64 reference."""
    T, B, I, H = 3, 2, 2, 3
    net = LAYERS[mode](input_size=I, hidden_size=H, num_layers=2, bidirectional=True)
    x = rng.normal(0, 1, (T, B, I)).astype(F32)
    h0 = rng.normal(0, 0.5, (4, B, H)).astype(F32)
    c0 = rng.normal(0, 0.5, (4, B, H)).astype(F32)
    tx, th, tc = (tensor.from_numpy(a) for a in (x, h0, c0))
    run_layer(net, tx, th, tc)
    p = gate_weights(net, rng, scale=0.5)
    names = sorted(p)
    dy = rng.uniform(-1, 1, (T, B, 2 * H))
    for t in (tx, th, tc):
        t.requires_grad = t.stores_grad = True
    autograd.training = True
    out = run_layer(net, tx, th, tc)[0]
    loss = autograd.reduce_sum(autograd.mul(out, tensor.from_numpy(dy.astype(F32))))
    got = {id(t): N(g) for t, g in autograd.backward(loss)}
    params = {k.split(".")[-1]: v for k, v in net.get_params().items()}

    def ref(xa, ha, ca, *ws):
        q = dict(zip(names, ws))
        return layer_reference(mode, net, q, xa, ha, ca if mode == 2 else None)[0]

    arrays = [x.astype(np.float64), h0.astype(np.float64), c0.astype(np.float64)] + \
        [p[k] for k in names]
    wanted = [0, 1] + ([2] if mode == 2 else []) + list(range(3, 3 + len(names)))
    want = numeric_grads(ref, arrays, wanted, [dy])
    tensors = [tx, th, tc] + [params[k] for k in names]
    labels = ["x", "h0", "c0"] + names
    for i in wanted:
        np.testing.assert_allclose(got[id(tensors[i])], want[i], rtol=2e-3, atol=2e-3,
                                   err_msg=labels[i])


def test_batch_first_and_list_inputs_agree(rng):
    T, B, I, H = 4, 3, 2, 3
    net = layer.GRU(I, H, num_layers=2, bidirectional=True, batch_first=True)
    x = rng.normal(0, 1, (B, T, I)).astype(F32)
    y3, h3 = net(tensor.from_numpy(x), None)
    assert y3.shape == (B, T, 2 * H) and h3.shape == (4, B, H)
    ylist, hlist = net([tensor.from_numpy(x[:, t]) for t in range(T)], None)
    np.testing.assert_allclose(N(y3), np.stack([N(y) for y in ylist], 1), rtol=1e-6)
    np.testing.assert_allclose(N(h3), N(hlist), rtol=1e-6)
    tm = layer.GRU(I, H, num_layers=2, bidirectional=True)  # time-major, same weights
    tm([tensor.from_numpy(x[:, 0])], None)
    tm.set_params({tk: net.get_params()[nk] for tk, nk in zip(tm.get_params(),
                                                              net.get_params())})
    y_tm, _ = tm(tensor.from_numpy(np.ascontiguousarray(x.transpose(1, 0, 2))), None)
    np.testing.assert_allclose(N(y_tm), N(y3).transpose(1, 0, 2), rtol=1e-6)


def test_initial_states_broadcast_and_validate(rng):
    """(batch, 1) states broadcast as SINGA's LSTM accepts; a wrong shape names the state."""
    net = layer.LSTM(2, 4)
    xs = [tensor.from_numpy(rng.normal(0, 1, (3, 2)).astype(F32)) for _ in range(3)]
    h1 = rng.normal(0, 1, (3, 1)).astype(F32)
    c1 = rng.normal(0, 1, (3, 1)).astype(F32)
    out_b, h_b, c_b = net(xs, (tensor.from_numpy(h1), tensor.from_numpy(c1)))
    full = [tensor.from_numpy(np.repeat(a, 4, axis=1)) for a in (h1, c1)]
    out_f, h_f, c_f = net(xs, tuple(full))
    np.testing.assert_allclose(N(c_b), N(c_f), rtol=1e-6)
    np.testing.assert_allclose(N(out_b[-1]), N(out_f[-1]), rtol=1e-6)
    assert h_b.shape == (3, 4)
    out_z, _, _ = net(xs, None)  # None: zeros
    zeros = tensor.from_numpy(np.zeros((3, 4), F32))
    np.testing.assert_allclose(N(out_z[-1]), N(net(xs, (zeros, zeros))[0][-1]))
    with pytest.raises(ValueError, match="initial state h0"):
        net(xs, (tensor.from_numpy(np.zeros((3, 3), F32)), zeros))
    with pytest.raises(ValueError, match="expected input with 2 features, got 5"):
        net([tensor.from_numpy(np.zeros((3, 5), F32))], (zeros, zeros))
    with pytest.raises(AssertionError, match="every step needs a batch of 3"):  # as SINGA
        net(xs + [tensor.from_numpy(np.zeros((2, 2), F32))], (zeros, zeros))
    with pytest.raises(ValueError, match="every step"):
        net(xs + [tensor.from_numpy(np.zeros((2, 2), F32))], (zeros, zeros))
    deep = layer.LSTM(2, 4, num_layers=2)
    with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
        deep(xs, (zeros, zeros))  # two layers need (2, batch, hidden)
    with pytest.raises(ValueError, match="dropout"):
        layer.GRU(2, 4, dropout=1.5)


def test_dropout_acts_between_layers_in_training_only(rng):
    xs = [tensor.from_numpy(rng.normal(0, 1, (4, 3)).astype(F32)) for _ in range(3)]
    net = layer.LSTM(3, 6, num_layers=2, dropout=0.5)
    ref = layer.LSTM(3, 6, num_layers=2)
    net(xs, None)
    ref(xs, None)
    gate_weights(net, np.random.default_rng(0))  # weights large enough to see dropout
    ref.set_params({rk: net.get_params()[nk] for rk, nk in zip(ref.get_params(),
                                                               net.get_params())})
    np.testing.assert_allclose(N(net(xs, None)[0][-1]), N(ref(xs, None)[0][-1]))  # eval
    autograd.training = True
    diff = np.abs(N(net(xs, None)[0][-1]) - N(ref(xs, None)[0][-1])).max()
    assert diff > 1e-3
    one = layer.LSTM(3, 6, dropout=0.5)  # a single layer: nothing between layers to drop
    one(xs, None)
    a, b = N(one(xs, None)[0][-1]), N(one(xs, None)[0][-1])
    np.testing.assert_allclose(a, b)


def test_singa_step_forward_methods(rng):
    rnn = layer.RNN(2, 3)
    x = tensor.from_numpy(rng.normal(0, 1, (2, 2)).astype(F32))
    h = tensor.from_numpy(rng.normal(0, 1, (2, 3)).astype(F32))
    rnn([x], h)
    got = rnn.step_forward(x, h, rnn.Wx, rnn.Wh, rnn.b)
    np.testing.assert_allclose(N(got), np.tanh(N(x) @ N(rnn.Wx) + N(h) @ N(rnn.Wh) + N(rnn.b)),
                               rtol=1e-5)
    lstm = layer.LSTM(2, 3)
    lstm([x], (h, h))
    p = gate_weights(lstm, rng)
    hn, cn = lstm.step_forward(x, h, h)
    rh, rc = np_named_step(2, N(x), N(h), N(h), p, "")
    np.testing.assert_allclose(N(hn), rh, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(N(cn), rc, rtol=1e-4, atol=1e-5)


# ---- cuDNN's fused RNN: RNNHandle, _RNN, CudnnRNN ---------------------------------------------
def fused_arrays(rng, mode, T, B, I, H, layers, dirs):
    size = cudnn_layout(mode, I, H, layers, dirs)[1]
    return [rng.normal(0, 1, (T, B, I)).astype(F32),
            rng.normal(0, 0.5, (layers * dirs, B, H)).astype(F32),
            rng.normal(0, 0.5, (layers * dirs, B, H)).astype(F32),
            rng.normal(0, 0.5, size).astype(F32)]


@pytest.mark.parametrize("mode", [0, 1, 2, 3], ids=["relu", "tanh", "lstm", "gru"])
def test_fused_rnn_packing_and_gradients(mode, rng):
    """Two bidirectional layers with variable lengths: y, and the gradients of x, hx, cx and every
    weight of the flat vector, against the numpy version of cuDNN's packing."""
    T, B, I, H = 3, 3, 2, 2
    arrays = fused_arrays(rng, mode, T, B, I, H, 2, 2)
    lengths = np.array([3, 1, 2], np.int32)
    handle = autograd.RNNHandle(tensor.from_numpy(arrays[0]), H, mode=mode, num_layers=2,
                                bidirectional=1)
    assert handle.weights_size == arrays[3].size
    layout = cudnn_layout(mode, I, H, 2, 2)[0]
    assert [{k: v[0] for k, v in pieces.items()} for pieces in handle.offsets] == \
        [{"w_ih": q["W"][0], "w_hh": q["R"][0], "b_ih": q["bW"][0], "b_hh": q["bR"][0]}
         for q in layout]
    seq = tensor.from_numpy(lengths)

    def op(ag, x, hx, cx, w):
        return ag_rnn.fused_rnn(handle, x, hx, cx, w, seq)[0]

    def ref(x, hx, cx, w):
        return np_fused(mode, H, 2, 2, x, hx, cx, w, lengths)[0]

    check_op(op, ref, arrays, grad=[0, 1, 3] + ([2] if mode == 2 else []))


def test_rnn_operator_called_directly_returns_every_gradient(rng):
    """SINGA's convention: y = _RNN(handle)(x, hx, cx, w)[0]; y.creator.backward(dy) gives
    (dx, dhx, dcx, dW); without return_sequences y is the last step."""
    T, B, I, H = 4, 2, 3, 2
    arrays = fused_arrays(rng, 2, T, B, I, H, 1, 2)
    ts = [tensor.from_numpy(a) for a in arrays]
    handle = autograd.RNNHandle(ts[0], H, mode=2, bidirectional=1)
    autograd.training = True
    y = autograd._RNN(handle, return_sequences=False)(*ts)[0]
    ys = np_fused(2, H, 1, 2, *[a.astype(np.float64) for a in arrays])[0]
    np.testing.assert_allclose(N(y), ys[-1], rtol=1e-4, atol=1e-5)
    assert isinstance(y.creator, autograd._RNN)
    dy = rng.uniform(-1, 1, (B, 2 * H))
    grads = y.creator.backward(tensor.from_numpy(dy.astype(F32)).data)
    assert len(grads) == 4
    want = numeric_grads(lambda *a: np_fused(2, H, 1, 2, *a)[0][-1],
                         [a.astype(np.float64) for a in arrays], [0, 1, 2, 3], [dy])
    with pytest.raises(AssertionError, match="use_mask"):  # SINGA asserted; still catchable
        autograd._RNN(handle, use_mask=True)
    autograd.training = False
    y_eval = autograd._RNN(handle)(*ts)[0]
    np.testing.assert_allclose(N(y_eval), ys[-1], rtol=1e-4, atol=1e-5)
    with pytest.raises(AssertionError, match="did not record"):  # forward ran without training
        autograd._RNN(handle).backward(tensor.from_numpy(dy.astype(F32)).data)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(tensor.to_numpy(tensor.from_raw_tensor(g))
                                   if not isinstance(g, tensor.Tensor) else N(g), want[i],
                                   rtol=2e-3, atol=2e-3, err_msg="input %d" % i)


def test_seq_lengths_mask_outputs_and_states(rng):
    """A padded batch gives what each sequence gives alone: zeros past its end, its own final
    state, and (return_sequences=False) its output at its last valid step."""
    T, B, I, H = 4, 3, 2, 3
    x, hx, cx, w = fused_arrays(rng, 2, T, B, I, H, 1, 2)
    lengths = np.array([2, 4, 1], np.int32)
    handle = autograd.RNNHandle(tensor.from_numpy(x), H, mode=2, bidirectional=1)
    ts = [tensor.from_numpy(a) for a in (x, hx, cx, w)]
    y, hy, cy, _ = ag_rnn.fused_rnn(handle, *ts, seq_lengths=tensor.from_numpy(lengths))
    last = autograd._RNN(handle, False, use_mask=True,
                         seq_lengths=tensor.from_numpy(lengths))(*ts)[0]
    for b, n in enumerate(lengths):
        alone = np_fused(2, H, 1, 2, x[:n, b:b + 1], hx[:, b:b + 1], cx[:, b:b + 1], w)
        np.testing.assert_allclose(N(y)[:n, b], alone[0][:, 0], rtol=1e-4, atol=1e-5)
        assert not N(y)[n:, b].any()
        np.testing.assert_allclose(N(hy)[:, b], alone[1][:, 0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(N(cy)[:, b], alone[2][:, 0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(N(last)[b], alone[0][-1, 0], rtol=1e-4, atol=1e-5)


def test_cudnn_rnn_layer_shapes_and_conventions(rng):
    x = tensor.from_numpy(rng.normal(0, 1, (2, 5, 3)).astype(F32))  # batch_first by default
    for mode, g in (("lstm", 4), ("gru", 3), ("relu", 1), ("vanilla", 1)):
        rnn = layer.CudnnRNN(4, rnn_mode=mode, num_layers=2, bidirectional=True)
        y = rnn(x)
        assert y.shape == (2, 5, 8)
        size = cudnn_layout({"lstm": 2, "gru": 3, "relu": 0, "vanilla": 1}[mode], 3, 4, 2, 2)[1]
        assert rnn.W.shape == (size,) and size == g * 4 * (3 + 4 + 2) * 2 + g * 4 * (8 + 4 + 2) * 2
        assert list(rnn.get_params()) == ["W"]  # a standalone layer names it as SINGA does
    last = layer.CudnnRNN(4, return_sequences=False, batch_first=False)
    tm = tensor.from_numpy(np.ascontiguousarray(N(x).transpose(1, 0, 2)))
    y = last(tm)
    assert y.shape == (2, 4)
    H = 4
    hx = np.zeros((1, 2, H))
    ref = np_fused(2, H, 1, 1, N(tm).astype(np.float64), hx, hx, N(last.W).astype(np.float64))
    np.testing.assert_allclose(N(y), ref[0][-1], rtol=1e-4, atol=1e-5)
    masked = layer.CudnnRNN(4, use_mask=True)
    with pytest.raises(ValueError, match="seq_lengths"):
        masked(x)
    with pytest.raises(ValueError, match="rnn_mode"):
        layer.CudnnRNN(4, rnn_mode="LSTM")


class _MaskedLSTM(model.Model):
    """SINGA 3.3's test_model LSTMModel3 (CudnnRNN with use_mask), on the CPU."""

    def __init__(self, hidden_size):
        super(_MaskedLSTM, self).__init__()
        self.lstm = layer.CudnnRNN(hidden_size=hidden_size, batch_first=True, use_mask=True)
        self.l1 = layer.Linear(2)
        self.optimizer = opt.SGD(0.1)

    def forward(self, x, seq_lengths):
        y = self.lstm(x, seq_lengths=seq_lengths)
        y = autograd.reshape(y, (y.shape[0], -1))
        return self.l1(y)


def test_singa_masked_lstm_model_trains():
    x = tensor.from_numpy(np.array([[[0.1, 0.1], [0.2, 0.2], [0.3, 0.3]],
                                    [[0.3, 0.3], [0.4, 0.4], [0.0, 0.0]]], F32))
    y = tensor.from_numpy(np.array([[0.4, 0.4], [0.5, 0.5]], F32))
    lengths = tensor.from_numpy(np.array([3, 2], np.int32))
    m = _MaskedLSTM(2)
    m.compile([x, lengths], is_train=True, use_graph=False, sequential=False)
    m.train()
    losses = []
    for _ in range(10):
        loss = autograd.mse_loss(m.forward(x, lengths), y)
        losses.append(float(N(loss).reshape(-1)[0]))
        m.optimizer(loss)
    assert losses[-1] < losses[0]


# ---- graph mode ---------------------------------------------------------------------------------
class _CharLSTM(model.Model):
    """SINGA's char-RNN shape: self.rnn(inputs, (hx, cx)) on a list of per-step tensors."""

    def __init__(self, vocab, hidden, **kw):
        super(_CharLSTM, self).__init__()
        self.rnn = layer.LSTM(vocab, hidden, **kw)
        self.dense = layer.Linear(vocab)
        self.loss = layer.MeanSquareError()
        self.hidden = hidden

    def forward(self, x):
        steps = [autograd.reshape(s, (s.shape[0], -1))
                 for s in autograd.split(x, 1, [1] * x.shape[1])]
        out, _, _ = self.rnn(steps, (self.hx, self.cx))
        return self.dense(autograd.cat(out, 0))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


class _FusedNet(model.Model):
    """CudnnRNN (a 2-layer bidirectional GRU over padded sequences) and a linear head."""

    def __init__(self, hidden):
        super(_FusedNet, self).__init__()
        self.rnn = layer.CudnnRNN(hidden, rnn_mode="gru", num_layers=2, bidirectional=True,
                                  use_mask=True, return_sequences=False)
        self.dense = layer.Linear(2)
        self.loss = layer.MeanSquareError()

    def forward(self, x, lengths):
        return self.dense(self.rnn(x, seq_lengths=lengths))

    def train_one_batch(self, x, lengths, y):
        out = self.forward(x, lengths)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


def test_cudnn_rnn_model_with_seq_lengths_graph_matches_eager():
    rng = np.random.default_rng(6)
    B, T, V, H = 3, 4, 2, 3
    lengths = np.array([4, 1, 3], np.int32)
    batches = [(rng.normal(0, 1, (B, T, V)).astype(F32), rng.normal(0, 1, (B, 2)).astype(F32))
               for _ in range(4)]
    results, init = [], None
    for use_graph in (False, True):
        dev = device.create_cpu_device(150 + use_graph)
        net = _FusedNet(H)
        net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
        tx, ty = tensor.Tensor((B, T, V), dev), tensor.Tensor((B, 2), dev)
        tl = tensor.from_numpy(lengths, dev)
        net.compile([tx, tl], is_train=True, use_graph=use_graph, sequential=False)
        if init is None:
            init = {k: N(v).copy() for k, v in net.get_params().items()}
        else:
            net.set_params({k: tensor.from_numpy(v, dev) for k, v in init.items()})
        losses = []
        for x, y in batches:
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            _, loss = net(tx, tl, ty)
            losses.append(float(N(loss).reshape(-1)[0]))
        results.append((losses, {k: N(v) for k, v in net.get_params().items()}))
        dev.ResetGraph()
    (e_losses, e_params), (g_losses, g_params) = results
    assert len(set(np.round(e_losses, 6))) > 1
    np.testing.assert_allclose(g_losses, e_losses, rtol=1e-5, atol=1e-6)
    for k in e_params:
        np.testing.assert_allclose(g_params[k], e_params[k], rtol=1e-4, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True}], ids=["1", "2bi"])
def test_lstm_model_graph_matches_eager(kw):
    rng = np.random.default_rng(5)
    B, T, V, H = 3, 4, 5, 6
    P = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    batches = [(rng.normal(0, 1, (B, T, V)).astype(F32), rng.normal(0, 1, (T * B, V)).astype(F32))
               for _ in range(4)]
    results, init = [], None
    for use_graph in (False, True):
        dev = device.create_cpu_device(140 + use_graph)
        net = _CharLSTM(V, H, **kw)
        net.hx = tensor.Tensor((B, H) if P == 1 else (P, B, H), dev, requires_grad=False)
        net.hx.set_value(0.1)
        net.cx = tensor.Tensor(net.hx.shape, dev, requires_grad=False)
        net.cx.set_value(-0.2)
        net.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
        tx = tensor.Tensor((B, T, V), dev)
        ty = tensor.Tensor((T * B, V), dev)
        net.compile([tx], is_train=True, use_graph=use_graph, sequential=False)
        if init is None:
            init = {k: N(v).copy() for k, v in net.get_params().items()}
        else:
            net.set_params({k: tensor.from_numpy(v, dev) for k, v in init.items()})
        losses = []
        for x, y in batches:
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            _, loss = net(tx, ty)
            losses.append(float(N(loss).reshape(-1)[0]))
        results.append((losses, {k: N(v) for k, v in net.get_params().items()}))
        dev.ResetGraph()
    (e_losses, e_params), (g_losses, g_params) = results
    assert len(set(np.round(e_losses, 6))) > 1  # it trained
    np.testing.assert_allclose(g_losses, e_losses, rtol=1e-5, atol=1e-6)
    for k in e_params:
        np.testing.assert_allclose(g_params[k], e_params[k], rtol=1e-4, atol=1e-6, err_msg=k)
