"""Export: a traced SINGA forward (autograd operators) -> an ONNX model.

    autograd.training = True           # operators record their inputs only while training
    y = net.forward(x)
    onnx_model = sonnx.to_onnx([x], [y])

Each operator of the trace becomes ONNX nodes; parameters (stores_grad tensors), batch-norm
running statistics and other constant tensors become initializers, bit-exact. The geometry of
convolution and pooling is read from the operator's handle (kernel, stride, padding, dilation,
group, count_include_pad) and its odd_padding (asymmetric pads). Fused ReLUs (conv/BN with
relu=True) become a separate Relu node.
"""
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

from .. import singa_wrap as singa
from .. import tensor
from ..autograd import base as _ag_base
from . import names, schema_map
from .errors import SonnxError
from .frontend_rnn import RnnExports
from .frontend_tensor import TensorExports
from .frontend_transformer import TransformerExports, check_opset

EXPORT_OPSET = 13

# operator class name -> ONNX op type, for the operators without attributes (the reverse of
# names.py's tables; Identity's import has a handler of its own)
_PLAIN = dict(names.export_types(names.UNARY, names.BINARY, names.VARIADIC),
              Identity="Identity")


def _onnx_dtype(x):
    return TensorProto.INT32 if x.dtype == tensor.int32 else TensorProto.FLOAT


def _dims(t):
    return ["N"] + list(t.shape[1:]) if len(t.shape) else []


def _np(ct):
    return singa.to_numpy(ct)


class _Exporter(TensorExports, TransformerExports, RnnExports):
    """One export: names, nodes and initializers gathered while walking the trace."""

    def __init__(self, inputs, outputs, opset=EXPORT_OPSET):
        self.opset = opset
        self.nodes, self.inits, self.done = [], {}, set()
        # SINGA's input list may hold constants the operators recorded (a Reshape's shape,
        # Clip's bounds): only Tensors can be graph inputs, and only those the trace reads
        self.input_ids = {id(x): i for i, x in enumerate(inputs) if isinstance(x, tensor.Tensor)}
        self.used_inputs = set()
        self.inputs, self.outputs = inputs, outputs
        self.count = 0
        self.const_names = {}  # id(tensor) -> initializer name (a shared tensor is one)
        self.alias = {}  # id(tensor) -> ONNX name: the inputs of an operator's inner graph

    def fresh(self, base):
        self.count += 1
        return "%s/%d" % (base, self.count)

    def const(self, name, array):
        self.inits[name] = numpy_helper.from_array(np.asarray(array), name)
        return name

    def tensor_name(self, creator, x_id, stored):
        """The ONNX name of one input of an operator, adding graph inputs and initializers."""
        if isinstance(creator, _ag_base.Dummy):
            t = stored if stored is not None else creator.tensor
            if t is not None and id(t) in self.alias:
                return self.alias[id(t)]
            if t is not None and id(t) in self.input_ids:
                self.used_inputs.add(id(t))
                return "input:%d" % self.input_ids[id(t)]
            if t is None:
                raise SonnxError("to_onnx: the tensor of %s is gone; keep the inputs and "
                                 "parameters alive until the export" % creator.name)
            if id(t) not in self.const_names:  # a parameter keeps its name ("conv1.W")
                name = t.name if isinstance(t.name, str) and t.name else creator.name
                if name in self.inits:
                    name = self.fresh(name)
                self.const_names[id(t)] = self.const(name, t.to_numpy())
            return self.const_names[id(t)]
        self.visit(creator)
        return creator.output_name(creator.y_id2idx.get(x_id, 0))

    def visit(self, op):
        if id(op) in self.done:
            return
        self.done.add(id(op))
        src = getattr(op, "trace_src", None) or op.src
        if not src:
            raise SonnxError("to_onnx: operator %s recorded no inputs; run the forward with "
                             "autograd.training = True and inputs with requires_grad" % op.name)
        ins = [self.tensor_name(c, xid, t) for c, xid, t, _ in src]
        outs = [op.output_name(i) for i in range(len(op.output_meta()))]
        self.emit(op, ins, outs)

    def node(self, op_type, ins, outs, **attrs):
        self.nodes.append(helper.make_node(op_type, ins, outs, name=self.fresh(op_type),
                                           **attrs))

    def emit(self, op, ins, outs):
        if schema_map.export(self, op, ins, outs):  # the op schema's rows
            return None
        kind = type(op).__name__
        fn = getattr(self, "_op_" + kind.lstrip("_"), None)
        if fn is not None:
            return fn(op, ins, outs)
        if kind in _PLAIN:
            return self.node(_PLAIN[kind], ins, outs)
        raise SonnxError("to_onnx: operator %s (%s) has no ONNX export" % (op.name, kind))

    def _relu_after(self, op, ins, outs, op_type, **attrs):
        """op_type node, then a Relu when the operator fused one."""
        if not getattr(op, "relu", False):
            return self.node(op_type, ins, outs, **attrs)
        mid = self.fresh(op.name + ":pre_relu")
        self.node(op_type, ins, [mid], **attrs)
        self.node("Relu", [mid], outs)

    @staticmethod
    def _pads(h, odd):
        top, bottom, left, right = odd
        return [h.pad_h + top, h.pad_w + left, h.pad_h + bottom, h.pad_w + right]

    def _op_Conv2d(self, op, ins, outs):
        h = op.handle
        self._relu_after(op, ins, outs, "Conv", kernel_shape=[h.kernel_h, h.kernel_w],
                         strides=[h.stride_h, h.stride_w], pads=self._pads(h, op.odd_padding),
                         dilations=[h.dilation_h, h.dilation_w], group=h.group)

    def _op_Pooling2d(self, op, ins, outs):
        h = op.handle
        x = ins[0]
        if any(op.odd_padding):
            # our pooling pads odd rows/columns with zeros that count as input cells; an
            # explicit Pad keeps those numbers (ONNX pool pads are -inf / uncounted)
            t, b, l, r = op.odd_padding
            pads = self.const(self.fresh(op.name + ":odd_pads"),
                              np.array([0, 0, t, l, 0, 0, b, r], np.int64))
            x = self.fresh(op.name + ":padded")
            self.node("Pad", [ins[0], pads], [x], mode="constant")
        attrs = dict(kernel_shape=[h.kernel_h, h.kernel_w], strides=[h.stride_h, h.stride_w],
                     pads=[h.pad_h, h.pad_w, h.pad_h, h.pad_w])
        if h.is_max_pooling:
            self.node("MaxPool", [x], outs, **attrs)
        else:
            self.node("AveragePool", [x], outs,
                      count_include_pad=int(h.count_include_pad), **attrs)

    def _op_BatchNorm2d(self, op, ins, outs):
        # named after the layer's scale ("bn1.scale" -> "bn1.running_mean"), as its states
        prefix = ins[1].rsplit(".", 1)[0] if ins[1].endswith(".scale") else op.name + ":"
        sep = "" if prefix.endswith(":") else "."
        mean = self.const(prefix + sep + "running_mean", _np(op.running_mean))
        var = self.const(prefix + sep + "running_var", _np(op.running_var))
        self._relu_after(op, ins + [mean, var], outs, "BatchNormalization",
                         epsilon=float(op.handle.eps), momentum=float(op.handle.factor))

    def _op_AddBias(self, op, ins, outs):
        if op.axis == 0:  # b (n,) added to every row: numpy broadcasting
            return self.node("Add", ins, outs)
        shape = self.const(self.fresh(op.name + ":col"), np.array([-1, 1], np.int64))
        col = self.fresh(op.name + ":bcol")
        self.node("Reshape", [ins[1], shape], [col])
        self.node("Add", [ins[0], col], outs)

    def _op_Gemm(self, op, ins, outs):
        self.node("Gemm", ins, outs, alpha=float(op.alpha), beta=float(op.beta),
                  transA=int(op.transA), transB=int(op.transB))

    def _op_Reshape(self, op, ins, outs):
        shape = self.const(op.name + ":shape", np.array(op.shape, np.int64))
        self.node("Reshape", ins + [shape], outs)

    def _op_Flatten(self, op, ins, outs):
        self.node("Flatten", ins, outs, axis=int(op.axis))

    def _op_SoftMax(self, op, ins, outs):
        # ours normalises over the axes from op.axis on (SINGA's, ONNX's before opset 13);
        # ONNX 13's Softmax normalises along one axis: the same when it is the last one,
        # else flatten to (rows, cols), normalise the rows, and reshape back
        nd = len(op.shape)
        if len(ins) > 1:  # a mask: the entries not taking part are -inf first
            ins = [self.keep_where(op, ins[0], ins[1])]
        if op.axis == nd - 1:
            return self.node("Softmax", ins, outs, axis=nd - 1)
        flat, rows = self.fresh(outs[0] + ":flat"), self.fresh(outs[0] + ":rows")
        self.node("Flatten", ins, [flat], axis=int(op.axis))
        self.node("Softmax", [flat], [rows], axis=1)
        shape = self.const(op.name + ":shape", np.array(op.shape, np.int64))
        self.node("Reshape", [rows, shape], outs)

    def _op_LogSoftMax(self, op, ins, outs):
        self.node("LogSoftmax", ins, outs, axis=int(op.axis))

    def _op_Concat(self, op, ins, outs):
        self.node("Concat", ins, outs, axis=int(op.axis))

    def _op_Transpose(self, op, ins, outs):
        if op.perm is None:
            return self.node("Transpose", ins, outs)
        self.node("Transpose", ins, outs, perm=[int(p) for p in op.perm])

    def _op_Dropout(self, op, ins, outs):
        self.node("Identity", ins, outs)  # the exported graph is for inference

    def _name_outputs(self, outs):
        """Graph output i is named "output:i": the node that makes it is renamed to write
        that name (an Identity only for a tensor that is already another output)."""
        names = ["output:%d" % i for i in range(len(outs))]
        renamed = {}
        for src, dst in zip(outs, names):
            if src in renamed:
                self.node("Identity", [renamed[src]], [dst])
            else:
                renamed[src] = dst
        for node in self.nodes:
            for field in (node.input, node.output):
                for j, n in enumerate(field):
                    if n in renamed:
                        field[j] = renamed[n]
        return names

    def model(self, model_name):
        outs = []
        for i, y in enumerate(self.outputs):
            if y.creator is None or isinstance(y.creator, _ag_base.Dummy):
                raise SonnxError("to_onnx: output %d was not produced by a recorded operator; "
                                 "run the forward with autograd.training = True" % i)
            self.visit(y.creator)
            outs.append(y.creator.output_name(y.creator.y_id2idx[id(y)]))
        out_names = self._name_outputs(outs)
        # the batch axis is symbolic ("N"), so the exported model runs any batch size
        X = [helper.make_tensor_value_info("input:%d" % i, _onnx_dtype(x), _dims(x))
             for i, x in enumerate(self.inputs) if id(x) in self.used_inputs]
        Y = [helper.make_tensor_value_info(n, _onnx_dtype(y), _dims(y))
             for n, y in zip(out_names, self.outputs)]
        graph = helper.make_graph(self.nodes, model_name, X, Y,
                                  initializer=list(self.inits.values()))
        m = helper.make_model(graph, producer_name="singa",
                              opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = min(m.ir_version, 8)  # readable by older onnxruntime builds too
        onnx.checker.check_model(m)
        return m


class SingaFrontend(object):
    """Converts a traced SINGA computation into ONNX (SINGA 3.3's class; see to_onnx)."""

    _target_opset_version = EXPORT_OPSET

    @classmethod
    def singa_to_onnx_graph(cls, inputs, y, model_name="sonnx", opset_version=EXPORT_OPSET):
        """The onnx GraphProto of the computation from ``inputs`` to ``y`` (lists of Tensors)."""
        return cls.singa_to_onnx_model(inputs, y, model_name, opset_version).graph

    @classmethod
    def singa_to_onnx_model(cls, inputs, y, model_name="sonnx", opset_version=EXPORT_OPSET):
        """The onnx ModelProto of the computation from ``inputs`` to ``y`` (lists of Tensors,
        y computed with autograd.training = True so that the operators recorded it).

        The graph inputs are the Tensors of ``inputs`` that the computation reads, in their
        order, named "input:i" (i: the position in ``inputs``). As in SINGA, ``inputs`` may
        also list what the operators already recorded as constants (a Reshape's shape, Clip's
        bounds, batch norm's running statistics): those become initializers, not inputs.
        The outputs are named "output:0", "output:1"...

        ``opset_version``: 13 (the default) to 17; from 17 a LayerNorm is one
        LayerNormalization node, before it is written out in primitive ops."""
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        y = list(y) if isinstance(y, (list, tuple)) else [y]
        return _Exporter(inputs, y, check_opset(opset_version)).model(model_name)
