"""Recurrent networks composed of autograd operators: the cells and the sequence driver shared by
layer.RNN / LSTM / GRU / CudnnRNN, and Apache SINGA's ``_RNN`` operator (cuDNN's fused RNN), which
here runs on any device.

    from singa import autograd, tensor
    x = tensor.Tensor((5, 2, 3)); x.gaussian(0, 1)            # (seq, batch, feature)
    h = autograd.RNNHandle(x, 4, mode=2, num_layers=2, bidirectional=1)   # a 2-layer BiLSTM
    w = tensor.Tensor((h.weights_size,)); w.gaussian(0, 0.1)  # cuDNN's flat weight vector
    hx = tensor.Tensor((4, 2, 4)); hx.set_value(0)   # (layers * directions, batch, hidden)
    y = autograd._RNN(h, return_sequences=True)(x, hx, hx, w)[0]   # (5, 2, 8)

Note: cuDNN's conventions, which RNNHandle, _RNN and layer.CudnnRNN follow
  * Modes: 0 relu, 1 tanh, 2 lstm, 3 gru. A pseudo-layer is one direction of one layer, ordered
    layer 0 forward, layer 0 backward, layer 1 forward... Layer l > 0 reads the concatenated
    outputs (forward, backward) of layer l - 1.
  * Gate order: LSTM i, f, g, o; GRU r, z, n. Linear-layer ids 0..G-1 act on the input, G..2G-1
    on the recurrent state.
  * The flat weight vector packs pseudo-layers in order; within one: the G input matrices, each
    (hidden, input) row-major (so the G of them form one (G * hidden, input) matrix, as in
    PyTorch's weight_ih), the G recurrent matrices (hidden, hidden), then G input biases and G
    recurrent biases (hidden,). ``RNNHandle.offsets`` lists where each piece lies.
  * LSTM: c' = f * c + i * g, h' = o * tanh(c'). GRU: n = tanh(W_n x + b_Wn + r * (R_n h + b_Rn)),
    h' = (1 - z) * n + z * h (the recurrent bias of n sits inside r's product).
  * seq_lengths: sequence b has seq_lengths[b] valid steps; outputs after them are zero, the
    forward direction's final state is the one at its last valid step, and the backward direction
    starts there. The masks are computed with core ops, so this also holds inside a graph; the
    layer ops take them as one (T, N) mask (singa/ops/rnn.h).
"""
from collections import namedtuple

from .. import _state
from .. import errors
from .. import singa_wrap as singa
from .._args import as_float, as_int
from ..tensor import Tensor
from . import base
from .linalg import matmul
from .math import add, mul, relu, sigmoid, sub, tanh
from .nn import dropout as _dropout
from .shape import cat, reshape, split, transpose

MODES = {"relu": 0, "tanh": 1, "vanilla": 1, "lstm": 2, "gru": 3}
NUM_GATES = {0: 1, 1: 1, 2: 4, 3: 3}

# The weights of one pseudo-layer in matmul form: w_ih (input, G * hidden), w_hh (hidden,
# G * hidden), biases (G * hidden,) or None; gates in cuDNN's order.
CellWeights = namedtuple("CellWeights", "w_ih w_hh b_ih b_hh")


# ---- one step ------------------------------------------------------------------------------
def _project(x, w, b):
    y = matmul(x, w)
    return add(y, b) if b is not None else y


def cell_step(mode, x, h, c, weights, gx=None):
    """One step of a cell of ``mode`` (0 relu, 1 tanh, 2 lstm, 3 gru): returns (h', c'), with c'
    None except for an LSTM. x (batch, input), h and c (batch, hidden); ``gx``, when given, is
    x's projection x w_ih + b_ih, computed beforehand for the whole sequence."""
    if gx is None:
        gx = _project(x, weights.w_ih, weights.b_ih)
    gh = _project(h, weights.w_hh, weights.b_hh)
    hidden = h.shape[1]
    if mode in (0, 1):
        y = add(gx, gh)
        return (relu(y) if mode == 0 else tanh(y)), None
    if mode == 2:
        i, f, g, o = split(add(gx, gh), 1, [hidden] * 4)
        c = add(mul(sigmoid(f), c), mul(sigmoid(i), tanh(g)))
        return mul(sigmoid(o), tanh(c)), c
    if mode == 3:
        xr, xz, xn = split(gx, 1, [hidden] * 3)
        hr, hz, hn = split(gh, 1, [hidden] * 3)
        r = sigmoid(add(xr, hr))
        z = sigmoid(add(xz, hz))
        n = tanh(add(xn, mul(r, hn)))
        return add(n, mul(z, sub(h, n))), None  # (1 - z) * n + z * h
    raise ValueError("rnn: mode must be 0 (relu), 1 (tanh), 2 (lstm) or 3 (gru), got %r" % mode)


# ---- one layer as one op each way -----------------------------------------------------------
class _LayerOp(base.Operator):
    """The shared form of the layer ops below: one layer in one direction over a whole sequence,
    as one op each way (singa/ops/rnn.h). Inputs: gx (T, N, G * H), every step's x_t w_ih + b_ih;
    the initial states (N, H); w_hh (H, G * H); then b_hh (G * H,) when ``bias`` and the (T, N)
    float mask of seq_lengths (0 past a sequence's end: the states carried unchanged; no
    gradient) when ``masked``. Outputs: hs (T, N, H), the carried states after every step, and
    the final states. ``reverse``: the steps run T-1 .. 0. run_sequence uses them unless the
    class's ``enabled`` is False (the composed cells, the reference)."""

    enabled = True

    def __init__(self, reverse=False, bias=True, masked=False):
        super(_LayerOp, self).__init__()
        self.reverse, self.bias, self.masked = bool(reverse), bool(bias), bool(masked)

    def _split(self, rest):
        """(b_hh or None, mask or None) from the inputs after w_hh."""
        rest = list(rest)
        b = rest.pop(0) if self.bias else None
        return b, (rest.pop(0) if self.masked else None)

    def _final(self, t, like):
        """Step ``last``'s (N, H) slice of core tensor t (T, N, H)."""
        last = 0 if self.reverse else t.shape()[0] - 1
        return singa.Reshape(singa.SliceOn(t, last, last + 1, 0), list(like.shape()))

    def _grads(self, dgx, d_states, dw, db):
        return (dgx,) + tuple(d_states) + (dw,) + ((db,) if self.bias else ()) + \
            ((None,) if self.masked else ())


class _LSTMLayer(_LayerOp):
    """One LSTM layer (gates i, f, g, o): inputs gx, h0, c0, w_hh[, b_hh][, mask]; outputs hs,
    the final h and c."""

    def forward(self, gx, h0, c0, w_hh, *rest):
        b_hh, mask = self._split(rest)
        hs, cs, gates = singa.LSTMForward(gx, h0, c0, w_hh, b_hh, self.reverse, mask)
        self.saved = (gates, hs, cs, h0, c0, w_hh, mask)
        return hs, self._final(hs, h0), self._final(cs, c0)

    def backward(self, dhs, dh_t, dc_t):
        gates, hs, cs, h0, c0, w_hh, mask = self.saved
        dgx, dh0, dc0, dw, db = singa.LSTMBackward(dhs, dh_t, dc_t, gates, hs, cs, h0, c0, w_hh,
                                                   self.bias, self.reverse, mask)
        return self._grads(dgx, (dh0, dc0), dw, db)


class _GRULayer(_LayerOp):
    """One GRU layer (gates r, z, n; the recurrent bias inside r's product): inputs gx, h0,
    w_hh[, b_hh][, mask]; outputs hs and the final h."""

    def forward(self, gx, h0, w_hh, *rest):
        b_hh, mask = self._split(rest)
        hs, gates, ghn = singa.GRUForward(gx, h0, w_hh, b_hh, self.reverse, mask)
        self.saved = (gates, ghn, hs, h0, w_hh, mask)
        return hs, self._final(hs, h0)

    def backward(self, dhs, dh_t):
        gates, ghn, hs, h0, w_hh, mask = self.saved
        dgx, dh0, dw, db = singa.GRUBackward(dhs, dh_t, gates, ghn, hs, h0, w_hh, self.bias,
                                             self.reverse, mask)
        return self._grads(dgx, (dh0,), dw, db)


class _RNNLayer(_LayerOp):
    """One plain RNN layer (tanh, or ``relu``): inputs gx, h0, w_hh[, b_hh][, mask]; outputs hs
    and the final h."""

    def __init__(self, relu=False, reverse=False, bias=True, masked=False):
        super(_RNNLayer, self).__init__(reverse, bias, masked)
        self.relu = bool(relu)

    def forward(self, gx, h0, w_hh, *rest):
        b_hh, mask = self._split(rest)
        hs = singa.RNNForward(gx, h0, w_hh, b_hh, self.relu, self.reverse, mask)
        self.saved = (hs, h0, w_hh, mask)
        return hs, self._final(hs, h0)

    def backward(self, dhs, dh_t):
        hs, h0, w_hh, mask = self.saved
        dgx, dh0, dw, db = singa.RNNBackward(dhs, dh_t, hs, h0, w_hh, self.bias, self.relu,
                                             self.reverse, mask)
        return self._grads(dgx, (dh0,), dw, db)


_LAYER_OPS = {0: _RNNLayer, 1: _RNNLayer, 2: _LSTMLayer, 3: _GRULayer}


def _fused(mode, x):
    """Whether run_sequence runs a layer of ``mode`` as one op: the class enabled, float32."""
    op = _LAYER_OPS.get(mode)  # (another mode: cell_step raises)
    return op is not None and op.enabled and x.data.data_type() == singa.kFloat32


def _fused_layer(mode, joined, steps, batch, h, c, w, reverse, mask):
    """(hs (T, N, H), h_T, c_T or None) of one direction, from the (T * N, input) layer input;
    ``mask`` (T, N) or None (seq_lengths)."""
    gx = reshape(_project(joined, w.w_ih, w.b_ih), [steps, batch, -1])
    extra = ((w.b_hh,) if w.b_hh is not None else ()) + ((mask,) if mask is not None else ())
    flags = dict(reverse=reverse, bias=w.b_hh is not None, masked=mask is not None)
    if mode == 2:
        return _LSTMLayer(**flags)(gx, h, c, w.w_hh, *extra)
    op = _GRULayer(**flags) if mode == 3 else _RNNLayer(relu=mode == 0, **flags)
    hs, h_t = op(gx, h, w.w_hh, *extra)
    return hs, h_t, None


# ---- a whole sequence ----------------------------------------------------------------------
def _joined(seq):
    """(T * N, F) from a list of T (N, F) Tensors or a (T, N, F) Tensor."""
    if isinstance(seq, Tensor):
        return reshape(seq, [seq.shape[0] * seq.shape[1], seq.shape[2]])
    return cat(list(seq), 0) if len(seq) > 1 else seq[0]


def _step_list(seq):
    """The per-step (N, F) Tensors of a list or of a (T, N, F) Tensor."""
    return unstack(seq, 0) if isinstance(seq, Tensor) else list(seq)


def run_sequence(mode, xs, h0s, c0s, weights, num_layers, num_directions, dropout=0.0,
                 masks=None, as_tensor=False):
    """Runs a stacked, optionally bidirectional RNN over a sequence.

    Args:
        xs: a list of (batch, input) Tensors, one per step, or one (seq, batch, input) Tensor.
        h0s, c0s: lists of (batch, hidden) Tensors, one per pseudo-layer (c0s None unless
            mode is 2, LSTM).
        weights: a list of CellWeights, one per pseudo-layer.
        dropout: drop probability on the inputs of layers 1.. (active only while training).
        masks: None, or a list of (batch, 1) 0/1 Tensors, one per step (1 while the step is
            within that sequence's length).
        as_tensor: return the outputs as one (seq, batch, directions * hidden) Tensor.
    Returns:
        (ys, hs, cs): ys a list of (batch, directions * hidden) Tensors per step (or one Tensor,
        as_tensor); hs and cs the final states per pseudo-layer (cs None unless LSTM).

    A float32 layer runs as one op per direction (_RNNLayer, _LSTMLayer, _GRULayer; masks
    become their (T, N) mask); else, or with the op's class disabled, or a batch-1 input meeting
    wider states, the steps are cell_step's operators.
    """
    steps = len(xs) if not isinstance(xs, Tensor) else xs.shape[0]
    hs, cs = [], [] if mode == 2 else None
    inputs = xs
    mask = None  # masks as one (T, N) Tensor, made when a layer op first needs it
    for layer in range(num_layers):
        # the input projections of all steps at once: one (steps * batch, input) product
        joined = _joined(inputs)
        batch = joined.shape[0] // steps
        if layer > 0 and dropout and _state.training:
            joined = _dropout(joined, ratio=dropout)
        outs = []
        for d in range(num_directions):
            p = layer * num_directions + d
            h, c = h0s[p], (c0s[p] if mode == 2 else None)
            if _fused(mode, joined) and h.shape[0] == batch:  # (not broadcasting)
                if masks is not None and mask is None:
                    mask = cat([reshape(m, [1, -1]) for m in masks], 0) if steps > 1 else \
                        reshape(masks[0], [1, -1])
                ys, h, c = _fused_layer(mode, joined, steps, batch, h, c, weights[p], d == 1,
                                        mask)
                if mask is not None:  # outputs past the ends are 0 (hs carries the states)
                    ys = mul(ys, reshape(mask, [steps, batch, 1]))
                hs.append(h)
                if cs is not None:
                    cs.append(c)
                outs.append(ys)
                continue
            gxs = _project(joined, weights[p].w_ih, weights[p].b_ih)
            gxs = split(gxs, 0, [batch] * steps) if steps > 1 else (gxs,)
            ys = [None] * steps
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                hn, cn = cell_step(mode, None, h, c, weights[p], gxs[t])
                if masks is None:
                    ys[t], h, c = hn, hn, cn
                else:  # past a sequence's end: output 0, state carried unchanged
                    m = masks[t]
                    ys[t] = mul(hn, m)
                    h = add(h, mul(sub(hn, h), m))
                    c = add(c, mul(sub(cn, c), m)) if cn is not None else None
            hs.append(h)
            if cs is not None:
                cs.append(c)
            outs.append(ys)
        if num_directions == 1:
            inputs = outs[0]
        elif all(isinstance(o, Tensor) for o in outs):
            inputs = cat(outs, 2)
        else:
            inputs = [cat(list(y), 1) for y in zip(*(_step_list(o) for o in outs))]
    if as_tensor:
        return (inputs if isinstance(inputs, Tensor) else stack(inputs, 0)), hs, cs
    return _step_list(inputs), hs, cs


def unstack(x, axis=0):
    """The slices of Tensor x along ``axis``, each without that axis."""
    n = x.shape[axis]
    rest = [d for i, d in enumerate(x.shape) if i != axis]
    parts = split(x, axis, [1] * n) if n > 1 else (x,)
    return [reshape(p, rest) for p in parts]


def stack(xs, axis=0):
    """Tensors of one shape joined along a new ``axis``."""
    shape = list(xs[0].shape)
    shape.insert(axis, 1)
    return cat([reshape(x, shape) for x in xs], axis)


def step_masks(seq_lengths, steps, batch):
    """(batch, 1) 0/1 constants m_t = (t < seq_lengths), from core ops (no value is read)."""
    lens = seq_lengths.data if isinstance(seq_lengths, Tensor) else seq_lengths
    if tuple(lens.shape()) != (batch,):
        raise singa.ShapeError("rnn: seq_lengths must have shape (%d,) (one length per sequence "
                               "of the batch), got %s" % (batch, tuple(lens.shape())))
    if lens.data_type() != singa.kFloat32:
        lens = lens.AsType(singa.kFloat32)
    lens = singa.Reshape(lens, [batch, 1])
    return [Tensor(data=singa.GT(lens, float(t)), requires_grad=False) for t in range(steps)]


# ---- cuDNN's fused RNN -----------------------------------------------------------------------
class RNNHandle(object):
    """The configuration of a fused RNN and the layout of its flat weight vector (the role of
    SINGA's CudnnRNNHandle; same constructor arguments). x is the first input,
    (seq, batch, feature)."""

    def __init__(self, x, hidden_size, mode=0, num_layers=1, bias=1, dropout=0.0,
                 bidirectional=0):
        shape = tuple(x.shape() if isinstance(x, singa.Tensor) else x.shape)
        if len(shape) != 3:
            raise singa.ShapeError("RNNHandle: x must be 3-d (seq, batch, feature), got shape %s"
                                   % (shape,))
        if mode not in NUM_GATES:
            raise ValueError("RNNHandle: mode must be 0 (relu), 1 (tanh), 2 (lstm) or 3 (gru), "
                             "got %r" % (mode,))
        if as_int(hidden_size, "hidden_size", "RNNHandle") <= 0 or \
                as_int(num_layers, "num_layers", "RNNHandle") <= 0:
            raise ValueError("RNNHandle: hidden_size and num_layers must be positive, got %r, %r"
                             % (hidden_size, num_layers))
        if not 0 <= as_float(dropout, "dropout", "RNNHandle") < 1:
            raise ValueError("RNNHandle: dropout must be in [0, 1), got %r" % (dropout,))
        self.seq_length, self.batch_size, self.feature_size = shape
        self.hidden_size = int(hidden_size)
        self.mode = int(mode)
        self.num_layers = int(num_layers)
        self.bias = int(bool(bias))
        self.dropout = float(dropout)
        self.bidirectional = int(bool(bidirectional))
        self.batch_first = 0
        self.num_directions = 2 if self.bidirectional else 1
        self.offsets = self._layout()
        last = self.offsets[-1]["b_hh"]
        self.weights_size = last[0] + last[1]

    def _layout(self):
        """Per pseudo-layer: {piece: (offset, size, shape)} for w_ih, w_hh, b_ih, b_hh."""
        gh = NUM_GATES[self.mode] * self.hidden_size
        out, offset = [], 0
        for p in range(self.num_layers * self.num_directions):
            inp = self.feature_size if p < self.num_directions else \
                self.hidden_size * self.num_directions
            pieces = {}
            for name, shape in (("w_ih", (gh, inp)), ("w_hh", (gh, self.hidden_size)),
                                ("b_ih", (gh,)), ("b_hh", (gh,))):
                size = shape[0] * (shape[1] if len(shape) > 1 else 1)
                pieces[name] = (offset, size, shape)
                offset += size
            out.append(pieces)
        return out

    def cell_weights(self, w):
        """CellWeights per pseudo-layer, cut out of the flat weight Tensor w (differentiably)."""
        sizes = [piece[1] for pieces in self.offsets
                 for piece in (pieces[k] for k in ("w_ih", "w_hh", "b_ih", "b_hh"))]
        parts = iter(split(w, 0, sizes))
        out = []
        for pieces in self.offsets:
            w_ih = transpose(reshape(next(parts), pieces["w_ih"][2]), (1, 0))
            w_hh = transpose(reshape(next(parts), pieces["w_hh"][2]), (1, 0))
            b_ih, b_hh = next(parts), next(parts)
            if not self.bias:
                b_ih = b_hh = None
            out.append(CellWeights(w_ih, w_hh, b_ih, b_hh))
        return out


def fused_rnn(handle, x, hx, cx, w, seq_lengths=None):
    """cuDNN's RNN from autograd operators: x (seq, batch, feature), hx and cx (layers *
    directions, batch, hidden), w the flat weights. Returns (y (seq, batch, directions *
    hidden), hy, cy); cy is None unless LSTM. With seq_lengths, see the module note."""
    steps, batch = x.shape[0], x.shape[1]
    masks = step_masks(seq_lengths, steps, batch) if seq_lengths is not None else None
    h0s = unstack(hx, 0)
    c0s = unstack(cx, 0) if handle.mode == 2 else None
    ys, hs, cs = run_sequence(handle.mode, x, h0s, c0s, handle.cell_weights(w),
                              handle.num_layers, handle.num_directions, handle.dropout, masks,
                              as_tensor=True)
    return ys, stack(hs, 0), (stack(cs, 0) if cs is not None else None), masks


def _last_output(ys, masks):
    """y at the last step (all lengths equal), or at each sequence's last valid step."""
    if masks is None:
        return unstack(ys, 0)[-1]
    steps = unstack(ys, 0)
    out = None
    for t, y in enumerate(steps):  # the step where m_t - m_{t+1} is 1 is the last valid one
        last = masks[t] if t + 1 == len(steps) else sub(masks[t], masks[t + 1])
        term = mul(y, last)
        out = term if out is None else add(out, term)
    return out


# A misuse of _RNN that SINGA reported with an assertion (an AssertionError and a ValueError).
RNNUsageError = errors.RNNUsageError


class _RNN(base.Operator):
    """Apache SINGA's fused RNN operator (cuDNN there), built here from autograd operators so it
    runs on every device: ``_RNN(handle, return_sequences)(x, hx, cx, w)[0]`` is y, of shape
    (seq, batch, directions * hidden), or its last step (batch, directions * hidden).
    ``backward(dy)`` returns (dx, dhx, dcx, dW), as SINGA's does."""

    def __init__(self, handle, return_sequences=False, use_mask=False, seq_lengths=None):
        super(_RNN, self).__init__()
        if use_mask and seq_lengths is None:
            raise RNNUsageError("_RNN: use_mask=True needs seq_lengths (a Tensor of shape "
                                "(batch,))")
        self.handle = handle
        self.return_sequences = return_sequences
        self.use_mask = use_mask
        self.seq_lengths = seq_lengths

    def _check(self, x, hx, cx, w):
        h = self.handle
        if x.nDim() != 3 or x.shape()[2] != h.feature_size:
            raise singa.ShapeError("_RNN: x must be (seq, batch, %d), got shape %s"
                                   % (h.feature_size, tuple(x.shape())))
        states = (h.num_layers * h.num_directions, x.shape()[1], h.hidden_size)
        for name, s in (("hx", hx), ("cx", cx)):
            if tuple(s.shape()) != states and (name == "hx" or h.mode == 2):
                raise singa.ShapeError("_RNN: %s must have shape %s, got %s"
                                       % (name, states, tuple(s.shape())))
        if tuple(w.shape()) != (h.weights_size,):
            raise singa.ShapeError("_RNN: w must have shape (%d,), got %s"
                                   % (h.weights_size, tuple(w.shape())))

    def forward(self, x, hx, cx, w):
        self._check(x, hx, cx, w)
        grad = bool(self.requires_grad)
        ins = [Tensor(data=t, requires_grad=grad, stores_grad=grad) for t in (x, hx, cx, w)]
        y, _, _, masks = fused_rnn(self.handle, *ins,
                                   seq_lengths=self.seq_lengths if self.use_mask else None)
        if not self.return_sequences:
            y = _last_output(y, masks)
        if grad:
            self._inner = (y, ins)  # the sub-graph that backward runs through
        return y.data

    def inner_graph(self):
        """(y, inputs) of the autograd sub-graph forward recorded (backward runs through it;
        sonnx exports it), or None: not recorded, or released by backward."""
        return getattr(self, "_inner", None)

    def backward(self, grad):
        if getattr(self, "_inner", None) is None:
            raise RNNUsageError("_RNN.backward: forward did not record (set "
                                "autograd.training = True and give an input requires_grad) "
                                "or backward already released it")
        y, ins = self._inner
        found = {}
        seed = Tensor(data=grad, requires_grad=False)
        for t, g in base.backward(y, seed, retain_graph=True):
            found[id(t)] = g.data
        return tuple(found[id(t)] if id(t) in found else base.zeros_like(t.data) for t in ins)
