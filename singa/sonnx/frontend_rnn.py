"""Export of the fused LSTM layer (autograd.rnn._LSTMLayer): a mixin of frontend._Exporter.

    m = sonnx.to_onnx([x], [y])     # a layer.LSTM's layers become ONNX LSTM nodes

_LSTMLayer receives every step's input projection gx = x W_ih + b_ih (one MatMul and Add,
exported before it), so its ONNX LSTM node reads gx as its input X with a constant W that only
reorders the gates (a permutation of the identity: ONNX's i, o, f, c from our i, f, g, o); R is
w_hh transposed and reordered, B holds b_hh reordered after a zero input bias, and the states
gain and lose ONNX's direction axis through Unsqueeze / Squeeze.
"""
import numpy as np

# ONNX gate k (i, o, f, c) is our gate _ONNX_GATES[k] (cuDNN's i, f, g, o)
_ONNX_GATES = (0, 3, 1, 2)


def _i64(v):
    return np.array(v, np.int64)


class RnnExports(object):
    """_op_<class> methods; needs node(), _init() and _mid() of the exporter."""

    def _op_LSTMLayer(self, op, ins, outs):
        hidden = int(op.output_meta()[0][0][2])
        perm = _i64([g * hidden + j for g in _ONNX_GATES for j in range(hidden)])
        gather = self._init(op, "gates", perm)
        w = np.zeros((1, 4 * hidden, 4 * hidden), np.float32)
        w[0, np.arange(4 * hidden), perm] = 1.0
        axis0 = self._init(op, "axis0", _i64([0]))
        r_t, r_perm, r = (self._mid(op, k) for k in ("w_hh_t", "r_gates", "R"))
        self.node("Transpose", [ins[3]], [r_t], perm=[1, 0])
        self.node("Gather", [r_t, gather], [r_perm], axis=0)
        self.node("Unsqueeze", [r_perm, axis0], [r])
        b = ""
        if len(ins) > 4:
            b_perm, b_flat, b = (self._mid(op, k) for k in ("b_gates", "b_flat", "B"))
            self.node("Gather", [ins[4], gather], [b_perm], axis=0)
            zeros = self._init(op, "input_bias", np.zeros(4 * hidden, np.float32))
            self.node("Concat", [zeros, b_perm], [b_flat], axis=0)
            self.node("Unsqueeze", [b_flat, axis0], [b])
        h0, c0 = self._mid(op, "initial_h"), self._mid(op, "initial_c")
        self.node("Unsqueeze", [ins[1], axis0], [h0])
        self.node("Unsqueeze", [ins[2], axis0], [c0])
        y, y_h, y_c = (self._mid(op, k) for k in ("Y", "Y_h", "Y_c"))
        self.node("LSTM", [ins[0], self._init(op, "W", w), r, b, "", h0, c0], [y, y_h, y_c],
                  hidden_size=hidden, direction="reverse" if op.reverse else "forward")
        self.node("Squeeze", [y, self._init(op, "axis1", _i64([1]))], [outs[0]])
        self.node("Squeeze", [y_h, axis0], [outs[1]])
        self.node("Squeeze", [y_c, axis0], [outs[2]])
