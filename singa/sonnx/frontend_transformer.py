"""Export of the transformer operators (issue 19): a mixin of frontend._Exporter.

    m13 = sonnx.to_onnx([x], [y])                        # LayerNorm written out in primitives
    m17 = sonnx.to_onnx([x], [y], opset_version=17)      # LayerNorm as LayerNormalization

Attention is exported as its primitive ops, whichever opset: MatMul(q, k^T), the scale, the mask
(a keep mask through Where, a float mask added), Softmax over the keys, MatMul with v. A query
row whose every key is masked gives zeros in singa (as PyTorch 2.13) where ONNX's Softmax gives
NaN, so masked attention keeps such rows at 0 with a Where on the row maximum (a NaN coming
from the inputs still propagates). GELU has no ONNX op before opset 20: erf or tanh formulas.
"""
import math

import numpy as np
from onnx import TensorProto

from .. import singa_wrap as singa
from ..autograd import base as _ag_base
from .errors import SonnxError


def _f32(v):
    return np.array(v, np.float32)


class TransformerExports(object):
    """_op_<class> methods; needs node(), const(), fresh(), opset of the exporter and
    _init() / _mid() of TensorExports."""

    def _input_dtype(self, op, i):
        """The singa dtype of operator input i, from its creator's record."""
        creator, x_id, stored, _ = (getattr(op, "trace_src", None) or op.src)[i]
        if isinstance(creator, _ag_base.Dummy):
            t = stored if stored is not None else creator.tensor
            return t.data.data_type()
        return creator.output_meta()[creator.y_id2idx.get(x_id, 0)][1]

    def _op_ScaledDotProductAttention(self, op, ins, outs):
        # dropout is left out: the exported graph is for inference (as Dropout's Identity)
        q, k, v = ins[:3]
        q_shape, k_shape = op.input_shapes()[:2]
        L, S, rank = q_shape[-2], k_shape[-2], len(k_shape)
        scale = op.scale or 1.0 / math.sqrt(q_shape[-1])
        kt, prod, s = self._mid(op, "k_t"), self._mid(op, "qk"), self._mid(op, "scores")
        self.node("Transpose", [k], [kt], perm=list(range(rank - 2)) + [rank - 1, rank - 2])
        self.node("MatMul", [q, kt], [prod])
        self.node("Mul", [prod, self._init(op, "scale", _f32(scale))], [s])
        if len(ins) > 3:
            s = self._attention_mask(op, s, ins[3])
        if op.is_causal:
            s = self._keep_where(op, s, self._init(op, "causal", np.tril(np.ones((L, S), bool))))
        p = self._mid(op, "probs")
        self.node("Softmax", [s], [p], axis=-1)
        if len(ins) > 3:
            p = self._zero_dead_rows(op, s, p)
        self.node("MatMul", [p, v], outs)

    def _attention_mask(self, op, s, mask):
        if self._input_dtype(op, 3) == singa.kInt:  # keep where nonzero
            return self.keep_where(op, s, mask)
        added = self._mid(op, "masked")
        self.node("Add", [s, mask], [added])
        return added

    def keep_where(self, op, s, mask):
        """s where ``mask`` (any dtype) is nonzero, else -inf."""
        keep = self._mid(op, "keep")
        self.node("Cast", [mask], [keep], to=TensorProto.BOOL)
        return self._keep_where(op, s, keep)

    def _keep_where(self, op, s, keep):
        out = self._mid(op, "masked")
        self.node("Where", [keep, s, self._init(op, "ninf", _f32(-np.inf))], [out])
        return out

    def _zero_dead_rows(self, op, s, p):
        """p with 0 in the rows where every score is -inf."""
        top, dead, out = self._mid(op, "row_max"), self._mid(op, "dead"), self._mid(op, "probs0")
        self.node("ReduceMax", [s], [top], axes=[-1], keepdims=1)
        self.node("Equal", [top, self._init(op, "ninf", _f32(-np.inf))], [dead])
        self.node("Where", [dead, self._init(op, "zero", _f32(0.0)), p], [out])
        return out

    # ---- the other transformer operators ---------------------------------------------------
    def _op_LayerNorm(self, op, ins, outs):
        params = list(ins[1:])
        weight = params.pop(0) if op.has_weight else None
        bias = params.pop(0) if op.has_bias else None
        self.layer_norm(op, ins, outs, len(op.normalized_shape), op.eps, weight, bias)

    def _op_GELU(self, op, ins, outs):
        self.gelu(op, ins, outs, "none")

    def _op_GELUTanh(self, op, ins, outs):
        self.gelu(op, ins, outs, "tanh")

    def _predicate(self, op, ins, outs):
        """IsNaN / IsInf: 0/1 in the input's dtype (an int32 input is never NaN or inf)."""
        if self._input_dtype(op, 0) == singa.kInt:
            return self.node("Sub", [ins[0], ins[0]], outs)
        mid = self._mid(op, "bool")
        self.node(type(op).__name__, ins, [mid])
        self.node("Cast", [mid], outs, to=TensorProto.FLOAT)

    _op_IsNaN = _op_IsInf = _predicate

    def _op_CumSum(self, op, ins, outs):
        self.node("CumSum", [ins[0], self._init(op, "axis", np.array(op.axis, np.int64))], outs,
                  exclusive=int(op.exclusive), reverse=int(op.reverse))

    def _int64_indices(self, op, name):
        idx = self._mid(op, "indices")
        self.node("Cast", [name], [idx], to=TensorProto.INT64)
        return idx

    def _op_GatherElements(self, op, ins, outs):
        self.node("GatherElements", [ins[0], self._int64_indices(op, ins[1])], outs,
                  axis=int(op.axis))

    def _op_GatherND(self, op, ins, outs):
        self.node("GatherND", [ins[0], self._int64_indices(op, ins[1])], outs,
                  batch_dims=int(op.batch_dims))

    def _op_MaskedFill(self, op, ins, outs):
        fill, dtype = self._mid(op, "fill"), self._input_dtype(op, 0)
        value = np.array(op.value, np.int32 if dtype == singa.kInt else np.float32)
        self.node("Cast", [ins[1]], [fill], to=TensorProto.BOOL)
        self.node("Where", [fill, self._init(op, "value", value), ins[0]], outs)

    # ---- LayerNorm: LayerNormalization from opset 17, primitives before ---------------------
    def layer_norm(self, op, ins, outs, n_axes, eps, weight, bias):
        """y = (x - mean) / sqrt(var + eps) [* weight] [+ bias] over the last n_axes axes;
        ``weight`` / ``bias``: ONNX names or None."""
        if self.opset >= 17:
            if weight is None:
                weight = self._init(op, "ones", np.ones(op.input_shapes()[0][-n_axes:], np.float32))
            self.node("LayerNormalization", [ins[0], weight] + ([bias] if bias else []), outs,
                      axis=-n_axes, epsilon=float(eps))
            return
        axes = list(range(-n_axes, 0))
        mean, d, sq, var = (self._mid(op, w) for w in ("mean", "centred", "squared", "var"))
        self.node("ReduceMean", [ins[0]], [mean], axes=axes, keepdims=1)
        self.node("Sub", [ins[0], mean], [d])
        self.node("Mul", [d, d], [sq])
        self.node("ReduceMean", [sq], [var], axes=axes, keepdims=1)
        veps, std = self._mid(op, "var_eps"), self._mid(op, "std")
        self.node("Add", [var, self._init(op, "eps", _f32(eps))], [veps])
        self.node("Sqrt", [veps], [std])
        steps = [("Mul", weight), ("Add", bias)]
        steps = [(t, w) for t, w in steps if w is not None]
        y = outs[0] if not steps else self._mid(op, "normed")
        self.node("Div", [d, std], [y])
        for i, (op_type, w) in enumerate(steps):
            nxt = outs[0] if i == len(steps) - 1 else self._mid(op, "scaled")
            self.node(op_type, [y, w], [nxt])
            y = nxt

    def gelu(self, op, ins, outs, approximate):
        """x * Phi(x): 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation."""
        x = ins[0]
        if approximate == "tanh":
            cube, inner, arg, t = (self._mid(op, w) for w in ("cube", "inner", "arg", "tanh"))
            x2 = self._mid(op, "x2")
            self.node("Mul", [x, x], [x2])
            self.node("Mul", [x2, x], [cube])
            c = self._mid(op, "cubic")
            self.node("Mul", [cube, self._init(op, "k", _f32(0.044715))], [c])
            self.node("Add", [x, c], [inner])
            self.node("Mul", [inner, self._init(op, "sqrt_2_pi", _f32(math.sqrt(2 / math.pi)))],
                      [arg])
            self.node("Tanh", [arg], [t])
        else:
            scaled, t = self._mid(op, "scaled"), self._mid(op, "erf")
            self.node("Mul", [x, self._init(op, "inv_sqrt2", _f32(1 / math.sqrt(2)))], [scaled])
            self.node("Erf", [scaled], [t])
        one_plus, half = self._mid(op, "one_plus"), self._mid(op, "half_x")
        self.node("Add", [t, self._init(op, "one", _f32(1.0))], [one_plus])
        self.node("Mul", [x, self._init(op, "half", _f32(0.5))], [half])
        self.node("Mul", [half, one_plus], outs)


def check_opset(opset):
    """The export opset as an int: 13 to 17 (every exported op's version is the same in these)."""
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)) or \
            not 13 <= opset <= 17:
        raise SonnxError("to_onnx: opset_version must be an int from 13 to 17, got %r"
                         % (opset,))
    return int(opset)
