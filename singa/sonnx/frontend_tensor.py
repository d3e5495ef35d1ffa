"""Export of the autograd operators that rearrange, index, reduce, compare or cast tensors, and
of Clip: a mixin of frontend._Exporter.

    class _Exporter(TensorExports): ...      # _op_<Operator class name>(op, ins, outs)

The exported graph computes what singa computed, in singa's types: singa has no bool tensor,
so a comparison exports as the ONNX comparison (bool) followed by a Cast to float 0/1, and a
logical op casts its float operands to bool first. Constant operands of an operator (axes,
indices, repeats, a Where condition...) become int64 / bool initializers. Export is at opset
13 to 17, where Squeeze / Unsqueeze / ReduceSum / Split take their axes or sizes as inputs and
ReduceMean / ReduceMax as an attribute.
"""
import numpy as np
from onnx import helper, TensorProto

from .. import singa_wrap as singa
from . import names
from .errors import SonnxError

_COMPARE = names.export_types(names.COMPARE)  # Operator class -> ONNX type
_LOGICAL = names.export_types(names.LOGICAL)


def _i64(values):
    return np.asarray(values, dtype=np.int64)


def _onnx_type(dtype):
    if dtype == singa.kInt:
        return TensorProto.INT32
    if dtype == singa.kFloat16:
        return TensorProto.FLOAT16
    return TensorProto.FLOAT


class TensorExports(object):
    """_op_<class> methods; needs node(), const(), fresh() of the exporter."""

    def _init(self, op, what, array):
        return self.const(self.fresh("%s:%s" % (op.name, what)), array)

    def _mid(self, op, what):
        return self.fresh("%s:%s" % (op.name, what))

    # ---- clip and square --------------------------------------------------------------------
    def _op_Clip(self, op, ins, outs):
        bounds = ["" if v is None else self._init(op, what, np.array(v, np.float32))
                  for what, v in (("min", op.min), ("max", op.max))]
        while bounds and not bounds[-1]:
            bounds.pop()
        self.node("Clip", ins + bounds, outs)

    def _op_Square(self, op, ins, outs):
        self.node("Mul", [ins[0], ins[0]], outs)

    def _op_Rounde(self, op, ins, outs):
        self.node("Round", ins, outs)  # ONNX Round: halves to even

    def _op_Round(self, op, ins, outs):
        # halves away from zero: sign(x) * floor(|x| + 0.5)
        a, f, s = self._mid(op, "abs"), self._mid(op, "floor"), self._mid(op, "sign")
        half = self._mid(op, "half_up")
        self.node("Abs", ins, [a])
        self.node("Add", [a, self._init(op, "half", np.array(0.5, np.float32))], [half])
        self.node("Floor", [half], [f])
        self.node("Sign", ins, [s])
        self.node("Mul", [s, f], outs)

    # ---- comparisons, logic, cast, where ------------------------------------------------------
    def _to_float(self, op, op_type, ins, outs):
        mid = self._mid(op, "bool")
        self.node(op_type, ins, [mid])
        self.node("Cast", [mid], outs, to=TensorProto.FLOAT)

    def _compare(self, op, ins, outs):
        self._to_float(op, _COMPARE[type(op).__name__], ins, outs)

    _op_Less = _op_Greater = _op_Equal = _op_LessEqual = _op_GreaterEqual = _compare

    def _logical(self, op, ins, outs):
        bools = []
        for x in ins:
            bools.append(self._mid(op, "as_bool"))
            self.node("Cast", [x], [bools[-1]], to=TensorProto.BOOL)
        self._to_float(op, _LOGICAL[type(op).__name__], bools, outs)

    _op_And = _op_Or = _op_Xor = _op_Not = _logical

    def _op_Cast(self, op, ins, outs):
        self.node("Cast", ins, outs, to=_onnx_type(op.to))

    def _op_Where(self, op, ins, outs):
        cond = op.condition
        cond = cond.to_numpy() if hasattr(cond, "to_numpy") else np.asarray(cond)
        self.node("Where", [self._init(op, "condition", cond != 0)] + ins, outs)

    # ---- shapes -----------------------------------------------------------------------------
    def _op_Squeeze(self, op, ins, outs):
        shape = list(op.x_shape)
        axes = [a % len(shape) for a in op.axis] if op.axis else \
            [i for i, d in enumerate(shape) if d == 1]
        if not axes:
            return self.node("Identity", ins, outs)
        self.node("Squeeze", ins + [self._init(op, "axes", _i64(axes))], outs)

    def _op_Unsqueeze(self, op, ins, outs):
        self.node("Unsqueeze", ins + [self._init(op, "axes", _i64(op.axis))], outs)

    def _op_Split(self, op, ins, outs):
        self.node("Split", ins + [self._init(op, "split", _i64(op.parts))], outs,
                  axis=int(op.axis))

    def _op_Tile(self, op, ins, outs):
        shape, reps = list(op.x_shape), list(op.repeats)
        x = ins[0]
        if len(reps) > len(shape):  # numpy.tile first raises x to the rank of repeats
            x = self._mid(op, "raised")
            self.node("Reshape", [ins[0], self._init(
                op, "shape", _i64([1] * (len(reps) - len(shape)) + shape))], [x])
        reps = reps + [1] * (len(shape) - len(reps))  # autograd.tile: SINGA's rule, from axis 0
        self.node("Tile", [x, self._init(op, "repeats", _i64(reps))], outs)

    def _op_Expand(self, op, ins, outs):
        self.node("Expand", ins + [self._init(op, "shape", _i64(op.shape))], outs)

    def _op_UpSample(self, op, ins, outs):
        scales = self._init(op, "scales", np.asarray(op.scales, np.float32))
        self.node("Resize", [ins[0], "", scales], outs, mode="nearest",
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    def _op_DepthToSpace(self, op, ins, outs):
        self.node("DepthToSpace", ins, outs, blocksize=int(op.b), mode=op.mode)

    def _op_SpaceToDepth(self, op, ins, outs):
        if op.mode != "DCR":
            raise SonnxError("to_onnx: space_to_depth mode %r has no ONNX op (ONNX "
                             "SpaceToDepth is 'DCR')" % op.mode)
        self.node("SpaceToDepth", ins, outs, blocksize=int(op.b))

    # ---- reductions ---------------------------------------------------------------------------
    def _op_ReduceSum(self, op, ins, outs):
        if not op.axes:
            return self.node("Identity", ins, outs)
        self.node("ReduceSum", ins + [self._init(op, "axes", _i64(op.axes))], outs,
                  keepdims=int(op.keepdims))

    def _op_ReduceMean(self, op, ins, outs):
        if not op.axes:
            return self.node("Identity", ins, outs)
        self.node("ReduceMean", ins, outs, axes=[int(a) for a in op.axes],
                  keepdims=int(op.keepdims))

    def _op_GlobalAveragePool(self, op, ins, outs):
        if op.data_format == "channels_first":
            return self.node("GlobalAveragePool", ins, outs)
        self._op_ReduceMean(op, ins, outs)

    def _op_CosSim(self, op, ins, outs):
        """sum(a * b) / (|a| |b|) over the rows."""
        axes = self._init(op, "axes", _i64([1]))

        def row_sum(x, y, what, root):
            prod, s = self._mid(op, what + "_prod"), self._mid(op, what)
            self.node("Mul", [x, y], [prod])
            self.node("ReduceSum", [prod, axes], [s], keepdims=0)
            if not root:
                return s
            r = self._mid(op, what + "_sqrt")
            self.node("Sqrt", [s], [r])
            return r
        a, b = ins
        dot, na, nb = row_sum(a, b, "dot", False), row_sum(a, a, "na", True), \
            row_sum(b, b, "nb", True)
        den = self._mid(op, "den")
        self.node("Mul", [na, nb], [den])
        self.node("Div", [dot, den], outs)

    # ---- indexing -----------------------------------------------------------------------------
    def _op_Slice(self, op, ins, outs):
        extra = [self._init(op, "starts", _i64(op.starts)),
                 self._init(op, "ends", _i64(op.ends)),
                 self._init(op, "axes", _i64(op.axes)) if op.axes is not None else "",
                 self._init(op, "steps", _i64(op.steps))]
        self.node("Slice", ins + extra, outs)

    def _op_Gather(self, op, ins, outs):
        idx = singa.to_numpy(op.idx).astype(np.int64)
        self.node("Gather", ins + [self._init(op, "indices", idx)], outs, axis=int(op.axis))

    def _op_Embedding(self, op, ins, outs):
        ids = self._mid(op, "ids")  # the ids may be integral float32 in singa
        self.node("Cast", [ins[0]], [ids], to=TensorProto.INT64)
        self.node("Gather", [ins[1], ids], outs, axis=0)

    def _op_Pad(self, op, ins, outs):
        extra = [self._init(op, "pads", _i64(op.pads))]
        if op.mode == "constant":
            extra.append(self._init(op, "value", np.array(op.constant, np.float32)))
        self.node("Pad", ins + extra, outs, mode=op.mode)

    def _op_ScatterElements(self, op, ins, outs):
        upd = op.updates
        upd = upd.to_numpy() if hasattr(upd, "to_numpy") else np.asarray(upd, np.float32)
        self.node("ScatterElements", ins + [self._init(op, "indices", _i64(op.indices)),
                                            self._init(op, "updates", upd)],
                  outs, axis=int(op.axis))

    def _op_OneHot(self, op, ins, outs):
        ids = self._mid(op, "ids")
        self.node("Cast", ins, [ids], to=TensorProto.INT64)
        self.node("OneHot", [ids, self._init(op, "depth", _i64([op.depth])),
                             self._init(op, "values", np.array([op.off, op.on], np.float32))],
                  outs, axis=int(op.axis))

    # ---- operators that run an inner graph of autograd operators ---------------------------
    def _op_RNN(self, op, ins, outs):
        """autograd._RNN (cuDNN's fused RNN) runs its cells as autograd operators: that inner
        graph is exported node by node, its inputs (x, hx, cx, the flat weights) bound to the
        operator's. The flat weight vector stays one initializer, split inside the graph."""
        inner = op.inner_graph()
        if inner is None:
            raise SonnxError("to_onnx: %s has no recorded inner graph; export before "
                             "backward releases it" % op.name)
        y, inner_ins = inner
        for t, name in zip(inner_ins, ins):
            self.alias[id(t)] = name
        self.visit(y.creator)
        self.node("Identity", [y.creator.output_name(y.creator.y_id2idx[id(y)])], outs)

    # ---- shape and value queries (int64 in ONNX, int32 in singa) ------------------------------
    def _op_Shape(self, op, ins, outs):
        mid = self._mid(op, "int64")
        self.node("Shape", ins, [mid])
        self.node("Cast", [mid], outs, to=TensorProto.INT32)

    def _op_NonZero(self, op, ins, outs):
        mid = self._mid(op, "int64")
        self.node("NonZero", ins, [mid])
        self.node("Cast", [mid], outs, to=TensorProto.INT32)

    def _op_ConstantOfShape(self, op, ins, outs):
        dims = self._mid(op, "dims")
        self.node("Cast", ins, [dims], to=TensorProto.INT64)
        self.node("ConstantOfShape", [dims], outs,
                  value=helper.make_tensor("value", TensorProto.FLOAT, [1], [op.value]))
