"""Import of ONNX RNN, LSTM and GRU: one recurrent layer (forward, reverse or bidirectional)
run step by step with autograd's cells (singa.autograd.rnn.cell_step), so that an imported
recurrent network trains like a native one.

    y, y_h, y_c = HANDLERS["LSTM"]([x, W, R, B], {"hidden_size": 8}, 14, {})

ONNX packs the gates as LSTM i, o, f, c and GRU z, r, h, one (G * hidden, input) matrix per
direction; the cells take cuDNN's i, f, g, o and r, z, n as (input, G * hidden): the blocks are
reordered and transposed with autograd ops (the gradient reaches W, R and B). Supported: the
default activations (RNN: Tanh or Relu), GRU with linear_before_reset=1 (cuDNN's and torch's
GRU, the cell's own math) or 0 (ONNX's default: the reset gate applies to h before the
recurrent product, a step written here), sequence_lens, initial states, layout 0 and 1.
Refused with UnsupportedOpError: peepholes (P), clip, input_forget, other activations.
"""
import numpy as np

from .. import autograd, tensor
from ..autograd.rnn import CellWeights, cell_step, stack, unstack
from .errors import SonnxError, UnsupportedOpError

_MODES = {"RNN": (1, 1), "LSTM": (2, 4), "GRU": (3, 3)}  # op -> (cell mode, gates)
_ORDER = {"LSTM": [0, 2, 3, 1], "GRU": [1, 0, 2], "RNN": [0]}  # cuDNN gate k = ONNX gate _ORDER[k]
_DEFAULT_ACTS = {"RNN": [["Tanh"], ["Relu"]], "LSTM": [["Sigmoid", "Tanh", "Tanh"]],
                 "GRU": [["Sigmoid", "Tanh"]]}


def _given(ins, i):
    return len(ins) > i and ins[i] is not None


def _str(v):
    return v.decode() if isinstance(v, bytes) else v


def _per_direction(t, n):
    """t (n, ...) -> n tensors without the first axis (autograd ops: gradients flow back)."""
    return unstack(t, 0) if n > 1 else [autograd.reshape(t, list(t.shape[1:]))]


def _gates(m, gates, op):
    """(G * hidden, k) in ONNX's gate order -> (k, G * hidden) in the cell's order."""
    hidden = m.shape[0] // gates
    parts = autograd.split(m, 0, [hidden] * gates) if gates > 1 else (m,)
    m = autograd.cat([parts[g] for g in _ORDER[op]], 0) if gates > 1 else m
    return autograd.transpose(m, (1, 0))


def _bias(b, gates, op):
    hidden = b.shape[0] // gates
    parts = autograd.split(b, 0, [hidden] * gates) if gates > 1 else (b,)
    return autograd.cat([parts[g] for g in _ORDER[op]], 0) if gates > 1 else b


def _check(op, attrs, ins, opset):
    def refuse(what):
        raise UnsupportedOpError("%s: %s is not supported (opset %d)" % (op, what, opset))
    acts = [_str(a) for a in attrs.get("activations", [])]
    n_dir = 2 if _str(attrs.get("direction", "forward")) == "bidirectional" else 1
    if acts and not any(acts == d * n_dir for d in _DEFAULT_ACTS[op]):
        refuse("activations %s" % acts)
    if "clip" in attrs:
        refuse("clip")
    if attrs.get("input_forget", 0):
        refuse("input_forget=1")
    if op == "LSTM" and _given(ins, 7):
        refuse("the peephole input P")
    return 0 if op == "RNN" and acts and acts[0] == "Relu" else _MODES[op][0]


def _gru_step_reset_first(x, h, w, hidden):
    """GRU with linear_before_reset=0: n = tanh(W_n x + b_Wn + R_n (r * h) + b_Rn)."""
    def project(v, m, b):
        y = autograd.matmul(v, m)
        return autograd.add(y, b) if b is not None else y
    b_rz = b_n = None
    if w.b_hh is not None:
        b_rz, b_n = autograd.split(w.b_hh, 0, [2 * hidden, hidden])
    r_rz, r_n = autograd.split(w.w_hh, 1, [2 * hidden, hidden])
    xr, xz, xn = autograd.split(project(x, w.w_ih, w.b_ih), 1, [hidden] * 3)
    hr, hz = autograd.split(project(h, r_rz, b_rz), 1, [hidden] * 2)
    r = autograd.sigmoid(autograd.add(xr, hr))
    z = autograd.sigmoid(autograd.add(xz, hz))
    n = autograd.tanh(autograd.add(xn, project(autograd.mul(r, h), r_n, b_n)))
    return autograd.add(n, autograd.mul(z, autograd.sub(h, n))), None  # (1 - z) n + z h


def _rnn(op):
    def run(ins, attrs, opset, cache):
        mode = _check(op, attrs, ins, opset)
        gates = _MODES[op][1]
        reset_first = op == "GRU" and not attrs.get("linear_before_reset", 0)
        x, W, R = ins[:3]
        for what, t in (("X", x), ("W", W), ("R", R)):
            if len(t.shape) != 3:
                raise SonnxError("%s: input %s must be 3-d, got shape %s"
                                 % (op, what, tuple(t.shape)))
        direction = _str(attrs.get("direction", "forward"))
        if direction not in ("forward", "reverse", "bidirectional"):
            raise SonnxError("%s: direction must be forward, reverse or bidirectional, got %r"
                             % (op, direction))
        n_dir = 2 if direction == "bidirectional" else 1
        batch_first = int(attrs.get("layout", 0)) == 1
        if batch_first:
            x = autograd.transpose(x, (1, 0, 2))
        steps, batch = x.shape[0], x.shape[1]
        hidden = int(attrs.get("hidden_size", R.shape[-1]))
        dev = x.device

        def zeros(shape):
            t = tensor.from_numpy(np.zeros(shape, np.float32), dev)
            t.requires_grad = False
            cache.setdefault("_keep", []).append(t)
            return t
        Ws, Rs = _per_direction(W, n_dir), _per_direction(R, n_dir)
        Bs = _per_direction(ins[3], n_dir) if _given(ins, 3) else [None] * n_dir
        h0s = _per_direction(ins[5], n_dir) if _given(ins, 5) else \
            [zeros((batch, hidden))] * n_dir
        c0s = _per_direction(ins[6], n_dir) if op == "LSTM" and _given(ins, 6) else \
            [zeros((batch, hidden))] * n_dir
        masks = None
        if _given(ins, 4):  # sequence_lens: 0/1 per step and sequence
            lens = tensor.to_numpy(ins[4]).reshape(-1)
            masks = [zeros((batch, 1)) for _ in range(steps)]
            for t, m in enumerate(masks):
                m.copy_from_numpy((lens > t).astype(np.float32).reshape(batch, 1))
        xs = unstack(x, 0) if steps > 1 else [autograd.reshape(x, list(x.shape[1:]))]
        ys, hs, cs = [], [], []
        for d in range(n_dir):
            b_ih = b_hh = None
            if Bs[d] is not None:
                b_ih, b_hh = autograd.split(Bs[d], 0, [gates * hidden] * 2)
                b_ih, b_hh = _bias(b_ih, gates, op), _bias(b_hh, gates, op)
            w = CellWeights(_gates(Ws[d], gates, op), _gates(Rs[d], gates, op), b_ih, b_hh)
            reverse = direction == "reverse" or d == 1
            h, c, out = h0s[d], c0s[d] if op == "LSTM" else None, [None] * steps
            for t in (reversed(range(steps)) if reverse else range(steps)):
                if reset_first:
                    hn, cn = _gru_step_reset_first(xs[t], h, w, hidden)
                else:
                    hn, cn = cell_step(mode, xs[t], h, c, w)
                if masks is None:
                    out[t], h, c = hn, hn, cn
                else:  # past a sequence's end: output 0, state carried unchanged
                    m = masks[t]
                    out[t] = autograd.mul(hn, m)
                    h = autograd.add(h, autograd.mul(autograd.sub(hn, h), m))
                    if cn is not None:
                        c = autograd.add(c, autograd.mul(autograd.sub(cn, c), m))
            ys.append(out)
            hs.append(h)
            cs.append(c)
        # Y (seq, dirs, batch, hidden); Y_h, Y_c (dirs, batch, hidden)
        y = stack([stack([ys[d][t] for d in range(n_dir)], 0) for t in range(steps)], 0)
        y_h = stack(hs, 0)
        y_c = stack(cs, 0) if op == "LSTM" else None
        if batch_first:  # (batch, seq, dirs, hidden); states (batch, dirs, hidden)
            y = autograd.transpose(y, (2, 0, 1, 3))
            y_h = autograd.transpose(y_h, (1, 0, 2))
            y_c = autograd.transpose(y_c, (1, 0, 2)) if y_c is not None else None
        return [y, y_h] + ([y_c] if y_c is not None else [])
    return run


HANDLERS = {op: _rnn(op) for op in _MODES}
