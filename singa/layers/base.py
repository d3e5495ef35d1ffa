"""The Layer base class: lazy parameter creation, hierarchical names, parameter/state access.

    class MLP(layer.Layer):
        def __init__(self):
            super().__init__()
            self.fc1 = layer.Linear(100)       # sub-layers are registered by attribute name
            self.fc2 = layer.Linear(10)

        def forward(self, x):
            return self.fc2(autograd.relu(self.fc1(x)))

    net = MLP()
    y = net(x)                                 # the first call creates fc1.W, fc1.b, fc2.W, fc2.b
    net.get_params()                # {'fc1.W': ..., 'fc1.b': ..., 'fc2.W': ..., 'fc2.b': ...}

Note: the life of a layer
  * A subclass defines ``initialize(*inputs)`` (create parameters from the first input's shape)
    and ``forward(*inputs)``. The metaclass wraps both: the first ``forward`` call runs
    ``initialize`` first, with the input's device taken out of graph buffering, so that parameter
    values are really computed even when the call happens while a graph is being recorded.
  * Names are paths of attribute names. A layer set as an attribute of another is registered under
    that name (a list or tuple of layers as ``<name>.0``, ``<name>.1``...; register_layers()
    registers others); a Tensor with ``stores_grad=True`` set as an attribute becomes a
    parameter, named ``<layer path>.<attribute>`` unless the caller gave it a name of its own.
    A root (a Model, or a layer used on its own) has the empty path, so a Model's parameters
    are named like ``conv1.W`` and a standalone Linear's ``W`` and ``b``, as in Apache SINGA
    (``layer.get_params()['W']``). Registering a layer in a parent renames its parameters.
  * Parameter names must be unique: two different tensors under one name would share optimizer
    state (Apache SINGA's ResNet example wrote past a buffer that way), so collecting them raises.
    (Separate standalone layers all have "W": the optimizers keep their states apart by tensor,
    see singa/opt.py.)
"""
import inspect
import warnings
from collections import OrderedDict
from functools import wraps

import numpy as np

from .. import _state
from .. import singa_wrap as singa
from ..tensor import Tensor
from . import _util

__all__ = ["Layer", "LayerMeta"]


def _first_tensor(args, kwargs=None):
    """The first Tensor among args (looking into lists/tuples) and kwargs values, or None."""
    items = list(args) + (list(kwargs.values()) if kwargs else [])
    for a in items:
        if isinstance(a, Tensor):
            return a
        if isinstance(a, (list, tuple)):
            t = _first_tensor(a)
            if t is not None:
                return t
    return None


class _GraphPaused(object):
    """Context manager: takes ``dev`` out of graph buffering, restoring it afterwards.

    Parameters and optimizer state must hold real values before a recorded graph first runs,
    so their creation and initial filling happen outside buffering (as Apache SINGA does)."""

    def __init__(self, dev):
        self.dev = dev
        self.prev = False

    def __enter__(self):
        if self.dev is not None:
            self.prev = self.dev.graph_enabled()
            if self.prev:
                self.dev.EnableGraph(False)
        return self

    def __exit__(self, *exc):
        if self.dev is not None and self.prev:
            self.dev.EnableGraph(True)
        return False


def graph_paused(dev):
    return _GraphPaused(dev)


# The model whose forward/train_one_batch is running (set by singa.model), for a warning about
# layers that hold parameters but were never registered in it.
_active_models = []


def _check_arity(layer, func, method, args, kwargs):
    """A TypeError naming the layer when ``func`` (its forward or initialize) cannot take these
    arguments: Python's own says "forward() takes 2 positional arguments", not whose, and for
    initialize not that the count given to the layer call is what is wrong."""
    try:
        inspect.signature(func).bind(layer, *args, **kwargs)
    except TypeError as e:
        raise TypeError("%s.%s(): %s (called with %d inputs%s)" % (
            layer._display_name(), method, e, len(args),
            " and keywords %s" % ", ".join(kwargs) if kwargs else "")) from None


def _wrap_initialize(func):
    """Wraps a Layer's ``initialize``: it runs once, on the first input, and a subclass may
    call ``super().initialize()`` (Apache SINGA's ``LayerMeta.init_wrapper``)."""
    @wraps(func)
    def initialize(self, *args, **kwargs):
        if self.__dict__.get("_in_init"):  # a subclass calling super().initialize()
            return func(self, *args, **kwargs)
        if not args and not kwargs:  # as in SINGA: nothing to derive the parameters from
            return None
        if args:
            first = args[0][0] if isinstance(args[0], (list, tuple)) and args[0] else args[0]
            if not isinstance(first, Tensor):
                # SINGA asserts: 'initialize function expects PlaceHolders or Tensors'
                raise _util.CheckTypeError(
                    "%s.initialize expects Tensors (placeholders) or a list of them first, got "
                    "%s" % (self._display_name(), type(first).__name__))
        _check_arity(self, func, "initialize", args, kwargs)
        x = _first_tensor(args, kwargs)
        object.__setattr__(self, "_in_init", True)
        try:
            with graph_paused(x.device if x is not None else None):
                func(self, *args, **kwargs)
            object.__setattr__(self, "_initialized", True)
        finally:
            object.__setattr__(self, "_in_init", False)
        self._warn_if_unregistered()

    return initialize


def _wrap_forward(func):
    """Wraps a Layer's ``forward``: the first call runs ``initialize`` with the same arguments
    (the parameters' shapes come from the first input), later calls go straight to forward
    (Apache SINGA's ``LayerMeta.forward_wrapper``)."""
    @wraps(func)
    def forward(self, *args, **kwargs):
        if not self.__dict__.get("_initialized", False):
            _check_arity(self, func, "forward", args, kwargs)
            self.initialize(*args, **kwargs)
            object.__setattr__(self, "_initialized", True)
        return func(self, *args, **kwargs)

    return forward


class LayerMeta(type):
    """Wraps ``initialize`` and ``forward`` of every Layer class (see the module note). The
    wrappers are Apache SINGA's hooks ``LayerMeta.init_wrapper(func)`` and
    ``LayerMeta.forward_wrapper(func)``, usable on functions of one's own."""

    init_wrapper = staticmethod(_wrap_initialize)
    forward_wrapper = staticmethod(_wrap_forward)

    def __new__(cls, name, bases, attr):
        if "initialize" in attr:
            attr["initialize"] = LayerMeta.init_wrapper(attr["initialize"])
        if "forward" in attr:
            attr["forward"] = LayerMeta.forward_wrapper(attr["forward"])
        return super(LayerMeta, cls).__new__(cls, name, bases, attr)


def _init_internals(layer):
    d = layer.__dict__
    d.setdefault("_initialized", False)
    d.setdefault("_in_init", False)
    d.setdefault("_parent", None)
    d.setdefault("_local_name", None)
    d.setdefault("_layers", OrderedDict())
    d.setdefault("_layer_lists", {})
    d.setdefault("_param_attrs", OrderedDict())  # attribute -> True when we named the tensor
    d.setdefault("_state_attrs", OrderedDict())


def _shape_of(v):
    if isinstance(v, Tensor):
        return tuple(v.shape)
    return tuple(np.shape(v))


class Layer(object, metaclass=LayerMeta):
    """Base class of layers and models (Apache SINGA 3.x's singa.layer.Layer)."""

    sep = "."

    def __init__(self):
        _init_internals(self)

    # ---- to be defined by subclasses ---------------------------------------------------------
    def initialize(self, *input):
        """Creates the parameters from the first inputs (called once, before forward)."""

    def forward(self, *input):
        """Computes the layer's output from its inputs (Tensors). Subclasses implement it; call
        the layer (``layer(x)``) rather than forward: the first call creates the parameters
        (``initialize``) from the inputs."""
        raise NotImplementedError("%s must define forward()" % type(self).__name__)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- names -------------------------------------------------------------------------------
    def _is_model(self):
        return False

    @property
    def name(self):
        """The path of this layer: attribute names from the root joined by '.'."""
        d = self.__dict__
        if "_layers" not in d:
            _init_internals(self)
        parent = d["_parent"]
        local = d["_local_name"]
        if parent is None:
            if local is None:
                local = ""
            return local
        prefix = parent.name
        return prefix + Layer.sep + local if prefix else local

    @name.setter
    def name(self, value):
        if "_layers" not in self.__dict__:
            _init_internals(self)
        self.__dict__["_local_name"] = None if value is None else str(value)

    def _get_unique_name(self):
        """Apache SINGA's helper; returns the layer's path."""
        return self.name

    def _display_name(self):
        return self.name or type(self).__name__

    def _qualify(self, attr):
        prefix = self.name
        return prefix + Layer.sep + attr if prefix else attr

    # ---- attributes: sub-layers, parameters, states ------------------------------------------
    def __getattr__(self, name):
        d = self.__dict__
        if "_layers" in d and name in d["_layers"]:
            return d["_layers"][name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def __setattr__(self, name, value):
        d = self.__dict__
        if "_layers" not in d:
            _init_internals(self)
        self._forget(name)
        if isinstance(value, Layer):
            if value is self:
                raise ValueError("%s: a layer cannot be its own sub-layer" % type(self).__name__)
            self._register(name, value)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Layer)
                                                                 for v in value):
            for i, v in enumerate(value):
                self._register("%s%s%d" % (name, Layer.sep, i), v)
            d["_layer_lists"][name] = len(value)
        elif isinstance(value, Tensor) and value.stores_grad:
            auto = value.is_dummy() or value.name == name
            d["_param_attrs"][name] = auto
            if auto:
                value.name = self._qualify(name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        d = self.__dict__
        if "_layers" in d:
            registered = name in d["_layers"]
            self._forget(name)
            if registered and name not in d:
                return
        object.__delattr__(self, name)

    def _register(self, key, layer):
        if "_layers" not in layer.__dict__:
            _init_internals(layer)
        layer.__dict__["_parent"] = self
        layer.__dict__["_local_name"] = key
        self.__dict__["_layers"][key] = layer

    def _forget(self, name):
        """Drops what attribute ``name`` registered (a sub-layer, a list of them, a parameter)."""
        d = self.__dict__
        old = d["_layers"].pop(name, None)
        if old is not None and old.__dict__.get("_parent") is self and \
                old.__dict__.get("_local_name") == name:
            others = [k for k, v in d["_layers"].items() if v is old]
            if others:  # still registered here under another name
                old.__dict__["_local_name"] = others[-1]
            else:
                old.__dict__["_parent"] = None
        n = d["_layer_lists"].pop(name, 0)
        for i in range(n):
            self._forget("%s%s%d" % (name, Layer.sep, i))
        d["_param_attrs"].pop(name, None)
        d["_state_attrs"].pop(name, None)

    def _set_state(self, attr, value):
        """Sets a non-trainable state tensor (e.g. BatchNorm's running mean), named like a
        parameter and returned by get_states()."""
        object.__setattr__(self, attr, value)
        self.__dict__["_state_attrs"][attr] = True
        value.name = self._qualify(attr)

    def register_layers(self, *args):
        """Registers layers not set as attributes: one OrderedDict name -> layer, or layers that
        are then named ``<ClassName>_<index>`` (Apache SINGA's convention)."""
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)):
            items = list(args[0].items())
        else:
            items = [("%s_%d" % (type(v).__name__, i), v) for i, v in enumerate(args)]
        for key, value in items:
            if not isinstance(value, Layer):
                raise TypeError("register_layers: %r is a %s, not a Layer"
                                % (key, type(value).__name__))
            self._register(key, value)

    def _warn_if_unregistered(self):
        if self.__dict__["_parent"] is not None or not _active_models:
            return
        model = _active_models[-1]
        if model is self or not (self.__dict__["_param_attrs"] or self.__dict__["_state_attrs"]):
            return
        warnings.warn("%s holds parameters but is not registered in model %s (set it as an "
                      "attribute or call register_layers); its parameters are missing from "
                      "get_params() and save_states()" % (self._display_name(),
                                                          type(model).__name__),
                      RuntimeWarning, stacklevel=4)

    # ---- parameters and states ---------------------------------------------------------------
    def _own(self, states):
        d = self.__dict__
        out = []
        for attr, auto in d["_param_attrs"].items():
            t = d.get(attr)
            if isinstance(t, Tensor):
                if auto:
                    t.name = self._qualify(attr)
                out.append((t.name, t))
        if states:
            for attr in d["_state_attrs"]:
                t = d.get(attr)
                if isinstance(t, Tensor):
                    t.name = self._qualify(attr)
                    out.append((t.name, t))
        return out

    def _collect(self, states):
        if "_layers" not in self.__dict__:
            _init_internals(self)
        out, owner, seen = OrderedDict(), {}, set()

        def add(name, t, who):
            if id(t) in seen:
                return
            if name in out:
                raise ValueError(
                    "duplicate parameter name %r: %s (shape %s) and %s (shape %s); parameter "
                    "names must be unique (register sub-layers as attributes or with "
                    "register_layers)" % (name, owner[name], tuple(out[name].shape), who,
                                          tuple(t.shape)))
            seen.add(id(t))
            out[name] = t
            owner[name] = who

        for name, t in self._own(states):
            add(name, t, self._display_name())
        for child in self.__dict__["_layers"].values():
            if not child.__dict__.get("_initialized", False):
                continue
            sub = child.get_states() if states else child.get_params()
            for name, t in sub.items():
                add(name, t, child._display_name())
        return out

    def get_params(self):
        """The trainable parameters of this layer and its sub-layers: {name: Tensor}."""
        return self._collect(states=False)

    def get_states(self):
        """Parameters plus non-trainable states (e.g. running means): {name: Tensor}."""
        return self._collect(states=True)

    def _assign(self, current, values, op):
        """Checks every value against ``current`` (names and shapes), then copies them all, so
        that a bad entry leaves the layer unchanged."""
        unknown = [k for k in values if k not in current]
        if unknown:
            raise KeyError("%s: %s has no parameter or state named %s (known: %s)"
                           % (op, self._display_name(), ", ".join(map(repr, unknown)),
                              ", ".join(current) or "none; call the layer once first"))
        for k, v in values.items():
            if not isinstance(v, (Tensor, np.ndarray)):
                raise TypeError("%s: the value of %r must be a Tensor or a numpy array, got %s"
                                % (op, k, type(v).__name__))
            if _shape_of(v) != tuple(current[k].shape):
                raise singa.ShapeError("%s: %r has shape %s, got a value of shape %s"
                                       % (op, k, tuple(current[k].shape), _shape_of(v)))
        for k, v in values.items():
            current[k].copy_from(v)

    def set_params(self, parameters=None, **kwargs):
        """Copies values (Tensors or numpy arrays) into parameters, by name."""
        values = dict(parameters or {}, **kwargs)
        self._assign(self.get_params(), values, "set_params")

    def set_states(self, states=None, **kwargs):
        """Copies values into parameters and states, by name."""
        values = dict(states or {}, **kwargs)
        self._assign(self.get_states(), values, "set_states")

    def has_layer_param(self, layer, names):
        """True if some name in ``names`` belongs to ``layer`` (Apache SINGA's helper)."""
        prefix = layer.name
        return any(n.startswith(prefix) for n in names)

    def set_attribute(self, attribute, attribute_value):
        """Copies ``attribute_value`` into the tensor ``attribute`` after checking shapes."""
        if _shape_of(attribute_value) != tuple(attribute.shape):
            raise _util.CheckShapeError("%s: %s has shape %s, got a value of shape %s"
                                        % (self._display_name(), attribute.name,
                                           tuple(attribute.shape), _shape_of(attribute_value)))
        attribute.copy_from(attribute_value)

    # ---- devices and dtypes ------------------------------------------------------------------
    def device_check(self, *inputs):
        """Moves every tensor in ``inputs`` onto the device of the first one."""
        dev = inputs[0].device
        with graph_paused(dev):
            for t in inputs[1:]:
                if t is not None and not t.device == dev:
                    t.to_device(dev)

    def dtype_check(self, *inputs):
        """Converts every tensor in ``inputs`` to the dtype of the first one (not under mixed
        precision, autograd/amp.py: the parameters stay float32 master weights there)."""
        dtype = inputs[0].dtype
        if _state.autocast is not None:
            return
        with graph_paused(inputs[0].device):
            for t in inputs[1:]:
                if t is not None and t.dtype != dtype:
                    t.to_type(dtype)

    # ---- PyTorch habits ------------------------------------------------------------------------
    def named_parameters(self):
        """(name, Tensor) for every trainable parameter, in get_params() order: a layer's own,
        then its sub-layers' in the order they were set (PyTorch's order); names as in
        get_params ("fc1.W")."""
        return iter(self.get_params().items())

    def parameters(self):
        """The trainable parameters, in named_parameters() order."""
        return iter(self.get_params().values())

    def extra_repr(self):
        """The settings repr shows inside the parentheses, e.g. "1, 20, kernel_size=5" for a
        Conv2d (PyTorch's hook); "" here. Layers with settings override it."""
        return ""

    def __repr__(self):
        """``Conv2d(1, 20, kernel_size=5, stride=1, padding=0)``; a layer with sub-layers lists
        them one per line under its settings, as PyTorch prints modules."""
        extra = self.extra_repr()
        kids = ["(%s): %s" % (k, repr(v).replace("\n", "\n  "))
                for k, v in self.__dict__.get("_layers", {}).items()]
        if not kids:
            return "%s(%s)" % (type(self).__name__, extra)
        return "%s(\n  %s\n)" % (type(self).__name__, "\n  ".join(([extra] if extra else [])
                                                                  + kids))


def settings(*positional, **keywords):
    """"a, b, k=v, ..." for extra_repr: positional values that are not None, then the
    keywords (pairs of equal values shown once: kernel_size=(5, 5) as 5)."""
    out = [repr(v) for v in positional if v is not None]
    for k, v in keywords.items():
        if isinstance(v, tuple) and v and all(x == v[0] for x in v):
            v = v[0]
        out.append("%s=%r" % (k, v))
    return ", ".join(out)
