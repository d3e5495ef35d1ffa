"""Import: an ONNX model -> a SingaRep that runs it with SINGA's autograd operators.

    rep = sonnx.prepare(onnx_model, device.get_default_device())
    y, = rep.run([x])                       # Tensors or numpy arrays in, Tensors out

Initializers become Tensors (parameters: stores_grad and requires_grad, so an imported model
can be trained). Models of opsets 11.. the newest that onnx knows are read; a model of an older
opset is first raised to 11 with onnx.version_converter.
"""
import collections

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

from .. import device as _device
from .. import model
from .. import tensor
from .errors import SonnxError
from .ops import run_onnx_node, SUPPORTED_OPS  # noqa: F401

MIN_OPSET = 11


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


def _to_tensor(array, dev, param):
    a = np.asarray(array)
    if a.dtype == np.int64:
        a = a.astype(np.int32)
    elif a.dtype == np.float64:
        a = a.astype(np.float32)
    t = tensor.from_numpy(np.ascontiguousarray(a), dev)
    t.requires_grad = param
    t.stores_grad = param
    return t


_NON_PARAM_INPUTS = {"BatchNormalization": lambda n: n.input[3:5],
                     "Reshape": lambda n: n.input[1:], "Clip": lambda n: n.input[1:],
                     "Pad": lambda n: n.input[1:]}


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
        self.is_graph = False

    def run(self, x, **kwargs):
        """The graph's outputs on inputs ``x`` (numpy arrays or Tensors, in the order of the
        graph inputs that are not initializers), as a list. As in SINGA 3.3, numpy inputs give
        numpy outputs; Tensor inputs (or ``is_graph``, set by SONNXModel) give Tensors, which
        keep the autograd record for training. ``aux_output``: names of inner tensors to
        return too (after the graph outputs); ``all_outputs=True``: an OrderedDict of every
        node output instead."""
        inputs = list(x) if isinstance(x, (list, tuple)) else [x]
        as_numpy = not self.is_graph and not any(isinstance(v, tensor.Tensor) for v in inputs)
        if len(inputs) != len(self.input_names):
            raise SonnxError("SingaRep.run: the model takes %d inputs %s, got %d"
                             % (len(self.input_names), self.input_names, len(inputs)))
        env = dict(self.tensor_map)
        for name, x in zip(self.input_names, inputs):
            if not isinstance(x, tensor.Tensor):
                x = _to_tensor(x, self.device, False)
            env[name] = x
        produced = collections.OrderedDict()
        for node in self.singa_ops:
            attrs = _attrs(node)
            if node.op_type == "Constant":
                value = next(iter(attrs.values()))
                arr = numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) \
                    else np.asarray(value)
                env[node.output[0]] = _to_tensor(arr, self.device, False)
                continue
            try:
                ins = [env[n] if n else None for n in node.input]
            except KeyError as e:
                raise SonnxError("sonnx: node %s (%s) reads %s, which nothing produced"
                                 % (node.name, node.op_type, e)) from None
            while ins and ins[-1] is None:
                ins.pop()
            outs = run_onnx_node(node.op_type, ins, attrs, self.opset, self._cache)
            for n, y in zip(node.output, outs):
                if n:
                    env[n] = y
                    produced[n] = y
        if kwargs.get("all_outputs", False):
            return produced
        names = [o.name for o in self.model.graph.output] + list(kwargs.get("aux_output", ()))
        missing = [n for n in names if n not in env]
        if missing:
            raise SonnxError("SingaRep.run: no tensor named %s in the graph" % missing)
        return [tensor.to_numpy(env[n]) if as_numpy else env[n] for n in names]


class SingaBackend(Backend):
    """onnx.backend.base.Backend for SINGA (CPU; the device argument may be a singa Device)."""

    _opset_version = onnx.defs.onnx_opset_version()
    _known_opset_version = _opset_version

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
            if node.domain not in ("", "ai.onnx") or (node.op_type not in SUPPORTED_OPS and
                                                       node.op_type != "Constant"):
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
        return SingaRep(m, params, list(m.graph.node),
                        kwargs.get("keep_initializers_as_inputs", True), dev, opset)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        """The outputs (numpy arrays) of one node on ``inputs`` (numpy arrays); ONNX's
        Backend signature (``opset_version`` may be given as a keyword)."""
        dev = cls._device(device)
        opset = kwargs.get("opset_version", cls._opset_version)
        ins = [None if x is None else _to_tensor(x, dev, False) for x in inputs]
        outs = run_onnx_node(node.op_type, ins, _attrs(node), opset)
        return [tensor.to_numpy(y) for y in outs]

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
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
