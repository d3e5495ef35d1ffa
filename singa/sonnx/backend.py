"""Import: an ONNX model -> a SingaRep that runs it with SINGA's autograd operators.

    rep = sonnx.prepare(onnx_model, device.get_default_device())
    y, = rep.run([x])                       # Tensors or numpy arrays in, Tensors out

Initializers become Tensors (parameters: stores_grad and requires_grad, so an imported model
can be trained). Models of opsets 11.. the newest that onnx knows are read; a model of an older
opset is first raised to 11 with onnx.version_converter.
"""
import collections
import types

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

from .. import device as _device
from .. import model
from .. import tensor
from .errors import SonnxError
from .ops import run_onnx_node, HANDLERS, SUPPORTED_OPS  # noqa: F401
from .ops_tensor import BOOL_OUTPUTS as _TENSOR_BOOLS, holdable
from .ops_transformer import BOOL_OUTPUTS as _TRANSFORMER_BOOLS, HOST_KERNELS

MIN_OPSET = 11
BOOL_OUTPUTS = _TENSOR_BOOLS | _TRANSFORMER_BOOLS  # ONNX types them bool: run_node gives bool


def _load(model):
    """A checked ModelProto from a ModelProto, bytes or a file path."""
    if isinstance(model, onnx.ModelProto):
        m = model
    else:
        try:
            m = onnx.load_model_from_string(model) if isinstance(model, bytes) \
                else onnx.load(model)
        except (OSError, ValueError) as e:  # protobuf's DecodeError is a ValueError... mostly
            raise SonnxError("sonnx: cannot read an ONNX model from %r: %s"
                             % (model if not isinstance(model, bytes) else "bytes", e)) from e
        except Exception as e:  # noqa: BLE001  (protobuf raises its own family)
            raise SonnxError("sonnx: the ONNX file is truncated or corrupt: %s" % e) from e
    try:
        onnx.checker.check_model(m)
    except onnx.checker.ValidationError as e:
        raise SonnxError("sonnx: invalid ONNX model: %s" % e) from e
    return m


def _opset(m):
    for imp in m.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    raise SonnxError("sonnx: the model imports no default-domain opset")


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


_INT32 = np.iinfo(np.int32)


def _as_tensor(x, dev):
    """x as a Tensor when it is a numpy value singa can hold; otherwise x as it is."""
    return _to_tensor(x, dev, False) if isinstance(x, np.ndarray) and holdable(x) else x


def _to_tensor(array, dev, param):
    """A Tensor of numpy ``array``: singa holds float32 and int32, so wider integers are
    clamped to int32 (ONNX writes 'to the end' as INT64_MAX), other floats become float32 and
    booleans float 0/1."""
    a = np.asarray(array)
    if a.dtype.kind in "iu" and a.dtype != np.int32:
        a = np.clip(a, _INT32.min, _INT32.max).astype(np.int32)
    elif a.dtype.kind in "fb" and a.dtype != np.float32:
        a = a.astype(np.float32)
    # ascontiguousarray would raise a 0-d value (a scalar Gather index) to shape (1,)
    t = tensor.from_numpy(np.ascontiguousarray(a).reshape(a.shape), dev)
    t.requires_grad = param
    t.stores_grad = param
    return t


_NON_PARAM_INPUTS = {"BatchNormalization": lambda n: n.input[3:5],
                     "Reshape": lambda n: n.input[1:], "Clip": lambda n: n.input[1:],
                     "Pad": lambda n: n.input[1:], "Slice": lambda n: n.input[1:],
                     "Squeeze": lambda n: n.input[1:], "Unsqueeze": lambda n: n.input[1:],
                     "Split": lambda n: n.input[1:], "Tile": lambda n: n.input[1:],
                     "Expand": lambda n: n.input[1:], "ReduceSum": lambda n: n.input[1:],
                     "ReduceMean": lambda n: n.input[1:], "Resize": lambda n: n.input[1:],
                     "ReduceMax": lambda n: n.input[1:], "ReduceMin": lambda n: n.input[1:],
                     "OneHot": lambda n: n.input[1:], "Gather": lambda n: n.input[1:],
                     "Where": lambda n: n.input[:1],
                     "ScatterElements": lambda n: n.input[1:],
                     "CumSum": lambda n: n.input[1:], "Trilu": lambda n: n.input[1:],
                     "Range": lambda n: n.input}
# the inputs that import handlers read as Python values (shapes, axes, indices...): a host
# (numpy) value there is passed as it is, not made a Tensor to be read back (which a graph
# being recorded cannot do)
_HOST_READ = {op: f for op, f in _NON_PARAM_INPUTS.items() if op != "BatchNormalization"}


SingaOp = collections.namedtuple("SingaOp", ["node", "operator"])


class _NodeView(object):
    """One ONNX node as Apache SINGA's OnnxNode showed it: ``name`` (the node's name with '.'
    made '_', or op_type_index when it has none), ``op_type``, ``inputs``, ``outputs``,
    ``attrs``; ``proto`` is the NodeProto."""

    def __init__(self, node, index):
        self.proto = node
        self.name = (node.name or "%s_%d" % (node.op_type, index)).replace(".", "_")
        self.op_type = node.op_type
        self.inputs, self.outputs = list(node.input), list(node.output)
        self.attrs = _attrs(node)

    def __repr__(self):
        return "<ONNX node %s: %s %s -> %s>" % (self.name, self.op_type, self.inputs,
                                                self.outputs)


class _NodeRunner(object):
    """Runs one node of a prepared model on Tensors: ``op(*inputs)`` gives its outputs, a list.
    The inputs the model holds (initializers, Constant nodes' values) are filled in; the
    others are taken from ``inputs`` in order."""

    def __init__(self, node, rep):
        self.node, self.rep = node, rep

    def __call__(self, *inputs):
        given, held = list(inputs), self.rep.held_values()
        ins = [None if not n else held[n] if n in held else given.pop(0) if given else None
               for n in self.node.input]
        if given:
            raise SonnxError("%s (%s): %d inputs too many" % (self.node.name, self.node.op_type,
                                                              len(given)))
        ins = [_as_tensor(x, self.rep.device) for x in ins]
        attrs = _attrs(self.node)
        attrs["__outputs__"] = len(self.node.output)
        return run_onnx_node(self.node.op_type, ins, attrs, self.rep.opset, self.rep._cache)


class SingaRep(BackendRep):
    """A prepared ONNX model: ``run(inputs)`` gives the graph outputs as a list of Tensors."""

    def __init__(self, model, tensor_map, singa_ops=None, keep_initializers_as_inputs=True,
                 device=None, opset=None):
        super(SingaRep, self).__init__()
        self.model = model
        self.tensor_map = tensor_map  # initializer name -> Tensor (the parameters)
        self.singa_ops = singa_ops if singa_ops is not None else list(model.graph.node)
        self.keep_initializers_as_inputs = keep_initializers_as_inputs
        self.device = device
        self.opset = opset if opset is not None else _opset(model)
        self.input_names = [i.name for i in model.graph.input if i.name not in tensor_map]
        self._cache = {}
        # initializers that handlers read as Python values, as numpy (see prepare)
        self.host_initializers = {}
        self.is_graph = False
        # Apache SINGA's layers: (node, operator) per node that is not a Constant (those are
        # values); run(x, last_layers=k) counts these
        self.layers = [SingaOp(_NodeView(node, i), _NodeRunner(node, self))
                       for i, node in enumerate(n for n in self.singa_ops
                                                if n.op_type != "Constant")]
        # numpy outputs take the element type the graph declares (ONNX's bool, int64...)
        self._out_types = {o.name: o.type.tensor_type.elem_type for o in model.graph.output
                           if o.type.HasField("tensor_type")}

    def run(self, x, **kwargs):
        """The graph's outputs on inputs ``x`` (numpy arrays or Tensors, in the order of the
        graph inputs that are not initializers), as a list. As in SINGA 3.3, numpy inputs give
        numpy outputs; Tensor inputs (or ``is_graph``, set by SONNXModel) give Tensors, which
        keep the autograd record for training. ``aux_output``: names of inner tensors to
        return too (after the graph outputs); ``all_outputs=True``: an OrderedDict of every
        node output instead.

        ``last_layers=k`` (SINGA's transfer-learning cut) runs the graph only up to
        ``self.layers[k]`` and returns that layer's outputs instead of the graph's (then the
        ``aux_output``). A negative k counts as SINGA 3.3 counts it, (k + 1) mod len(layers):
        -1 is the first layer, -2 the last (the whole graph), -3 all but the last."""
        inputs = list(x) if isinstance(x, (list, tuple)) else [x]
        as_numpy = not self.is_graph and not any(isinstance(v, tensor.Tensor) for v in inputs)
        if len(inputs) != len(self.input_names):
            raise SonnxError("SingaRep.run: the model takes %d inputs %s, got %d"
                             % (len(self.input_names), self.input_names, len(inputs)))
        env = dict(self.tensor_map)
        env.update(self.host_initializers)
        for name, x in zip(self.input_names, inputs):
            if not isinstance(x, tensor.Tensor):
                x = _as_tensor(np.asarray(x), self.device)
            env[name] = x
        produced = collections.OrderedDict()
        last = self._last_layer(kwargs.get("last_layers"))
        for node in self.singa_ops:
            try:
                ins = [env[n] if n else None for n in node.input]
            except KeyError as e:
                raise SonnxError("sonnx: node %s (%s) reads %s, which nothing produced"
                                 % (node.name, node.op_type, e)) from None
            outs = self._host_values(node, ins)
            if outs is None:
                host = set(_HOST_READ.get(node.op_type, lambda n: ())(node))
                ins = [x if n in host else _as_tensor(x, self.device)
                       for n, x in zip(node.input, ins)]
                while ins and ins[-1] is None:
                    ins.pop()
                attrs = _attrs(node)
                attrs["__outputs__"] = len(node.output)
                outs = run_onnx_node(node.op_type, ins, attrs, self.opset, self._cache)
            for n, y in zip(node.output, outs):
                if n:
                    env[n] = y
                    produced[n] = y
            if last is not None and node is last:
                break
        if kwargs.get("all_outputs", False):
            return produced
        names = [o.name for o in self.model.graph.output] if last is None else \
            [n for n in last.output if n]
        names += list(kwargs.get("aux_output", ()))
        missing = [n for n in names if n not in env]
        if missing:
            raise SonnxError("SingaRep.run: no tensor named %s in the graph" % missing)
        if not as_numpy:
            return [_as_tensor(env[n], self.device) for n in names]
        return [_as_declared(env[n], self._out_types.get(n)) for n in names]

    def held_values(self):
        """What the model itself holds, by name: its initializers (Tensors) and the values of
        its Constant nodes (numpy)."""
        held = dict(self.tensor_map)
        for node in self.singa_ops:
            if node.op_type == "Constant":
                held.update(zip(node.output, self._host_values(node, [])))
        return held

    def _last_layer(self, k):
        """The node where run(..., last_layers=k) stops, or None for the whole graph."""
        if k is None:
            return None
        n = len(self.layers)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError("SingaRep.run: last_layers must be an int, got %r" % (k,))
        if n == 0 or not -n <= k < n:
            raise SonnxError("SingaRep.run: last_layers=%d is outside the model's %d layers "
                             "(non-Constant nodes)" % (k, n))
        k = int(k) if k >= 0 else (int(k) + 1) % n
        return None if k == n - 1 else self.layers[k].node.proto

    def _host_values(self, node, ins):
        """The outputs of ``node`` computed on the host (numpy), or None when it runs with
        singa's operators. Constants, shapes and what is computed from them alone (the
        Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains of exported graphs) are host
        values: they depend on the input's shape, not on its values, and carry no gradient,
        so ONNX's reference implementation evaluates them (cached per node and value)."""
        if node.op_type == "Constant":
            return run_onnx_node("Constant", [], _attrs(node), self.opset)
        if node.op_type == "Shape" and ins and ins[0] is not None:
            a = _attrs(node)
            dims = list(ins[0].shape)
            return [np.array(dims[a.get("start", 0):a.get("end", len(dims))], np.int64)]
        given = [x for x in ins if x is not None]
        if not given or not all(isinstance(x, np.ndarray) for x in given):
            return None
        if node.op_type in HOST_KERNELS:  # where onnx's reference is wrong
            return HOST_KERNELS[node.op_type](ins, _attrs(node))
        from onnx.reference import ReferenceEvaluator
        key = ("fold", id(node))
        if key not in self._cache:
            self._cache[key] = ReferenceEvaluator(node, opsets={"": self.opset})
        feeds = {n: x for n, x in zip(node.input, ins) if n}
        try:
            return [np.asarray(y) for y in self._cache[key].run(None, feeds)]
        except Exception as e:  # noqa: BLE001  (the reference raises what numpy raises)
            raise SonnxError("sonnx: node %s (%s, opset %d) failed on constant inputs: %s"
                             % (node.name, node.op_type, self.opset, e)) from e


def _as_declared(value, elem_type):
    """A graph output as numpy, in the ONNX element type declared for it (when numpy has it)."""
    a = value if isinstance(value, np.ndarray) else tensor.to_numpy(value)
    if elem_type:
        try:
            want = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
        except (KeyError, ValueError, TypeError):
            return a
        if want == np.bool_:
            return a != 0
        if want.kind in "iufb" and a.dtype != want:
            return a.astype(want)
    return a


class SingaBackend(Backend):
    """onnx.backend.base.Backend for SINGA (CPU; the device argument may be a singa Device)."""

    _opset_version = onnx.defs.onnx_opset_version()
    _known_opset_version = _opset_version
    # Apache SINGA's table of the ONNX op types it imports (SINGA mapped them to its operator
    # names; SINGA's test_onnx_backend.py reads the keys to pick ONNX's node tests). Here: ONNX
    # op type -> the import handler, read-only, from what sonnx.ops supports.
    _rename_operators = types.MappingProxyType(HANDLERS)

    @classmethod
    def supports_device(cls, device):
        return device is None or not isinstance(device, str) or device.upper() == "CPU"

    @classmethod
    def _device(cls, device):
        if device is None or isinstance(device, str):
            return _device.get_default_device()
        return device

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        """A SingaRep of ``model`` (ModelProto, bytes or path) on ``device``."""
        m = _load(model)
        opset = _opset(m)
        if opset < MIN_OPSET:
            try:
                m = onnx.version_converter.convert_version(m, MIN_OPSET)
            except Exception as e:  # noqa: BLE001  (the converter raises plain errors)
                raise SonnxError("sonnx: cannot convert opset %d to %d: %s"
                                 % (opset, MIN_OPSET, e)) from e
            opset = MIN_OPSET
        if opset > cls._known_opset_version:
            raise SonnxError("sonnx: opset %d is newer than onnx's %d"
                             % (opset, cls._known_opset_version))
        for node in m.graph.node:
            if node.domain not in ("", "ai.onnx") or node.op_type not in SUPPORTED_OPS:
                raise SonnxError("sonnx: ONNX op %s (domain %r, opset %d) is not supported"
                                 % (node.op_type, node.domain, opset))
        dev = cls._device(device)
        # initializers read as statistics or shapes are states, not trainable parameters
        fixed = set()
        for node in m.graph.node:
            fixed.update(_NON_PARAM_INPUTS.get(node.op_type, lambda n: [])(node))
        params = {}
        for t in m.graph.initializer:
            a = numpy_helper.to_array(t)
            params[t.name] = _to_tensor(a, dev, a.dtype.kind == "f" and t.name not in fixed)
        rep = SingaRep(m, params, list(m.graph.node),
                       kwargs.get("keep_initializers_as_inputs", True), dev, opset)
        # shapes, axes and indices stay on the host, where the handlers read them: a recorded
        # graph cannot read a Tensor back (the dynamo exporter stores them as initializers)
        read = set()
        for node in m.graph.node:
            read.update(_HOST_READ.get(node.op_type, lambda n: ())(node))
        rep.host_initializers = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer
                                 if t.name in read}
        return rep

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        """The outputs (numpy arrays) of one node on ``inputs`` (numpy arrays); ONNX's
        Backend signature (``opset_version`` may be given as a keyword)."""
        dev = cls._device(device)
        opset = kwargs.get("opset_version", cls._opset_version)
        ins = [None if x is None else _as_tensor(np.asarray(x), dev) for x in inputs]
        attrs = _attrs(node)
        attrs["__outputs__"] = len(node.output)
        outs = run_onnx_node(node.op_type, ins, attrs, opset)
        outs = [y if isinstance(y, np.ndarray) else tensor.to_numpy(y) for y in outs]
        return [a != 0 for a in outs] if node.op_type in BOOL_OUTPUTS else outs

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        """Prepares ONNX ``model`` (prepare) and runs it on ``inputs``; returns the outputs as numpy
        arrays (the onnx backend API)."""
        rep = cls.prepare(model, device, **kwargs)
        return [tensor.to_numpy(y) for y in rep.run(inputs)]



class SONNXModel(model.Model):
    """A model.Model running an ONNX graph: compile it (graph on or off), give it an optimizer
    and a train_one_batch in a subclass, and fine-tune the imported network.

        class MyModel(sonnx.SONNXModel):
            def train_one_batch(self, x, y):
                out = self.forward(x)[0]
                loss = autograd.softmax_cross_entropy(out, y)
                self.optimizer(loss)
                return out, loss
    """

    def __init__(self, onnx_model):
        super(SONNXModel, self).__init__()
        self.__dict__["sg_ir"] = prepare(onnx_model)
        self.sg_ir.is_graph = True

    def forward(self, *input, aux_output=(), **kwargs):
        """The graph outputs (then the ``aux_output`` tensors) on Tensors ``input``: a list."""
        return self.sg_ir.run(list(input), aux_output=aux_output, **kwargs)

    def get_params(self):
        return collections.OrderedDict((k, t) for k, t in self.sg_ir.tensor_map.items()
                                       if t.stores_grad)

    def get_states(self):
        return collections.OrderedDict(self.sg_ir.tensor_map)


prepare = SingaBackend.prepare
