"""Export of the fused recurrent layers (autograd.rnn._LSTMLayer, _GRULayer, _RNNLayer): a
mixin of frontend._Exporter.

    m = sonnx.to_onnx([x], [y])     # a layer.LSTM's / GRU's / RNN's layers: ONNX LSTM / GRU / RNN

These ops receive every step's input projection gx = x W_ih + b_ih (one MatMul and Add,
exported before them), so their ONNX node reads gx as its input X with a constant W that only
reorders the gates (a permutation of the identity: ONNX's i, o, f, c from our i, f, g, o; its
z, r, h from our r, z, n; the identity for the plain RNN); R is w_hh transposed and reordered,
B holds b_hh reordered after a zero input bias (a GRU's with linear_before_reset, cuDNN's and
PyTorch's form), and the states gain and lose ONNX's direction axis through Unsqueeze /
Squeeze.
"""
import numpy as np

# ONNX gate k is our gate _ONNX_GATES[op][k]
_ONNX_GATES = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2), "RNN": (0,)}


def _i64(v):
    return np.array(v, np.int64)


class RnnExports(object):
    """_op_<class> methods; needs node(), _init() and _mid() of the exporter."""

    def _recurrent(self, op, ins, outs, op_type, **attrs):
        """One ONNX LSTM / GRU / RNN node for a fused layer op whose inputs are gx, the states
        (h0, and c0 for an LSTM), w_hh, then b_hh if op.bias and the (T, N) mask if op.masked
        (ONNX's sequence_lens: the mask's column sums); outputs hs and the final states. ONNX
        zeroes Y past each sequence's end where the op carries the state: the op's hs is read
        only through the product with the mask that follows it, so both give the same."""
        gates = _ONNX_GATES[op_type]
        n_states = 2 if op_type == "LSTM" else 1
        hidden = int(op.output_meta()[0][0][2])
        width = len(gates) * hidden
        perm = _i64([g * hidden + j for g in gates for j in range(hidden)])
        gather = self._init(op, "gates", perm)
        w = np.zeros((1, width, width), np.float32)
        w[0, np.arange(width), perm] = 1.0
        axis0 = self._init(op, "axis0", _i64([0]))
        w_hh = ins[1 + n_states]
        r_t, r_perm, r = (self._mid(op, k) for k in ("w_hh_t", "r_gates", "R"))
        self.node("Transpose", [w_hh], [r_t], perm=[1, 0])
        self.node("Gather", [r_t, gather], [r_perm], axis=0)
        self.node("Unsqueeze", [r_perm, axis0], [r])
        b = lens = ""
        if op.bias:
            b_perm, b_flat, b = (self._mid(op, k) for k in ("b_gates", "b_flat", "B"))
            self.node("Gather", [ins[2 + n_states], gather], [b_perm], axis=0)
            zeros = self._init(op, "input_bias", np.zeros(width, np.float32))
            self.node("Concat", [zeros, b_perm], [b_flat], axis=0)
            self.node("Unsqueeze", [b_flat, axis0], [b])
        if op.masked:
            total, lens = self._mid(op, "valid_steps"), self._mid(op, "sequence_lens")
            self.node("ReduceSum", [ins[-1], axis0], [total], keepdims=0)
            self.node("Cast", [total], [lens], to=6)  # TensorProto.INT32
        states = []
        for i, what in zip(range(n_states), ("initial_h", "initial_c")):
            states.append(self._mid(op, what))
            self.node("Unsqueeze", [ins[1 + i], axis0], [states[-1]])
        y = [self._mid(op, k) for k in ("Y", "Y_h", "Y_c")[:1 + n_states]]
        self.node(op_type, [ins[0], self._init(op, "W", w), r, b, lens] + states, y,
                  hidden_size=hidden, direction="reverse" if op.reverse else "forward", **attrs)
        self.node("Squeeze", [y[0], self._init(op, "axis1", _i64([1]))], [outs[0]])
        for final, out in zip(y[1:], outs[1:]):
            self.node("Squeeze", [final, axis0], [out])

    def _op_LSTMLayer(self, op, ins, outs):
        self._recurrent(op, ins, outs, "LSTM")

    def _op_GRULayer(self, op, ins, outs):
        self._recurrent(op, ins, outs, "GRU", linear_before_reset=1)

    def _op_RNNLayer(self, op, ins, outs):
        self._recurrent(op, ins, outs, "RNN", activations=["Relu" if op.relu else "Tanh"])
