"""The autograd operators of the op schema: one Operator class and one function per row, with
SINGA's names and keywords. Activations (schema/activations.py, singa_wrap.ACTIVATION_OPS):
forward is the row's kernel, backward its fused backward op. NN ops (schema/nn.py,
singa_wrap.NN_OPS): the Operator takes the handle (and SINGA's odd_padding where the row says),
forward runs the row's kernel, backward its backward op on what forward saved.

    y = autograd.leakyrelu(x, a=0.2)          # operator LeakyRelu(a=0.2)
    y = autograd.hardswish(x)                 # operator HardSwish
    p = autograd.pooling_2d(handle, x)        # operator _Pooling2d(handle, odd_padding)
    OPS["HardSwish"]                          # (class, function) by the row's C++ name
"""
import inspect

from .. import singa_wrap as singa
from .base import Operator
from .nn import _check_4d, _norm_odd, _odd_pad, _odd_unpad
from .._args import as_float, type_error

OPS = {}  # C++ name -> (Operator class, function), in the schema's order
SCHEMA_ROWS = {}  # Operator class -> the schema row (sonnx maps both ONNX directions from it)
NN_ROWS = {}  # Operator class -> its schema/nn.py row (ONNX by hand: sonnx/frontend.py, ops.py)


class _Activation(Operator):
    """y = <Op>(x, *attrs); dx = <Op>Backward(dy, x, *attrs). Subclasses set the two kernels
    and ``keys``, the attributes' Python keywords (also the instance attributes that hold them)."""
    keys = ()
    kernel = backward_kernel = None

    def _attrs(self):
        return [getattr(self, k) for k in self.keys]

    def forward(self, x):
        self.x = x
        return type(self).kernel(x, *self._attrs())

    def backward(self, dy):
        return type(self).backward_kernel(dy, self.x, *self._attrs())


def _signature(first, attrs):
    params = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in first]
    params += [inspect.Parameter(a[1], inspect.Parameter.POSITIONAL_OR_KEYWORD, default=a[2])
               for a in attrs]
    return inspect.Signature(params)


def _define(row):
    name, cls_name, fn_name, doc, attrs = row[:5]
    init_sig = _signature(["self"], attrs)
    keys = tuple(a[1] for a in attrs)

    def __init__(self, *args, **kwargs):
        bound = init_sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        Operator.__init__(self)
        for k in keys:
            setattr(self, k, as_float(bound.arguments[k], k, fn_name))

    __init__.__signature__ = init_sig
    cls = type(cls_name, (_Activation,), {
        "__init__": __init__, "keys": keys, "__module__": __name__,
        "__doc__": "%s, elementwise (schema op %s; backward: %sBackward)." % (doc, name, name),
        "kernel": staticmethod(getattr(singa, name)),
        "backward_kernel": staticmethod(getattr(singa, name + "Backward"))})

    def function(x, *args, **kwargs):
        return cls(*args, **kwargs)(x)[0]

    _export(function, _signature(["x"], attrs), fn_name,
            "%s, elementwise (autograd operator %s)." % (doc, cls_name))
    OPS[name] = (cls, function)
    SCHEMA_ROWS[cls] = row
    return cls, function


def _export(function, sig, fn_name, doc):
    function.__signature__ = sig
    function.__name__ = function.__qualname__ = fn_name
    function.__module__ = __name__
    function.__doc__ = doc


class _NnOperator(Operator):
    """y = <Op>(*inputs, handle); dx = <Op's backward>(its inputs by name: dy, and what forward
    saved). Subclasses set the kernels, ``inputs`` (forward's), ``backward_inputs``, ``fn``
    (the function's name, for errors) and ``pads`` (whether odd_padding applies)."""
    kernel = backward_kernel = None
    inputs = backward_inputs = ()
    fn, pads = "", False

    def forward(self, *xs):
        if self.pads:
            _check_4d(xs[0], self.fn)  # odd_padding's axes 2 and 3
            if any(self.odd_padding):
                xs = (_odd_pad(xs[0], self.odd_padding),) + xs[1:]
        for name, x in zip(self.inputs, xs):
            setattr(self, name, x)
        self.y = type(self).kernel(*(xs + (self.handle,)))
        return self.y

    def backward(self, dy):
        args = [dy if n == "dy" else getattr(self, n.rstrip("?")) for n in self.backward_inputs]
        dx = type(self).backward_kernel(*(args + [self.handle]))
        if self.pads and any(self.odd_padding):
            dx = _odd_unpad(dx, self.odd_padding)
        return dx


# The core handle class an NN row's kernel takes (its Cython parameter `h`), checked when the
# operator is made so that a wrong handle names the function and its `handle` argument.
_HANDLE_OF = {"Pool2dForward": "PoolingHandle", "Conv2dForward": "ConvHandle"}


def _define_nn(row, rows):
    name, cls_name, fn_name, doc, inputs, backward, pads = row[:7]
    odd = [(None, "odd_padding", (0, 0, 0, 0))] if pads else []  # _signature's (_, key, default)
    init_sig = _signature(["self", "handle"], odd)

    def __init__(self, *args, **kwargs):
        bound = init_sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        Operator.__init__(self)
        self.handle = bound.arguments["handle"]
        want = getattr(singa, _HANDLE_OF.get(name, ""), None)
        if want is not None and not isinstance(self.handle, want):  # the cuDNN ones subclass it
            raise type_error(fn_name, "handle", want.__name__, self.handle)
        if pads:
            self.odd_padding = _norm_odd(bound.arguments["odd_padding"], fn_name)

    __init__.__signature__ = init_sig
    cls = type(cls_name, (_NnOperator,), {
        "__init__": __init__, "__module__": __name__, "inputs": inputs,
        "backward_inputs": rows[backward][4], "fn": fn_name, "pads": pads,
        "__doc__": "%s (schema op %s; backward: %s)." % (doc, name, backward),
        "kernel": staticmethod(getattr(singa, name)),
        "backward_kernel": staticmethod(getattr(singa, backward))})

    def function(handle, *args, **kwargs):
        bound = fn_sig.bind(handle, *args, **kwargs)
        xs = [bound.arguments[i] for i in inputs]
        return cls(handle, *[bound.arguments.get(k, d) for _, k, d in odd])(*xs)[0]

    fn_sig = _signature(("handle",) + tuple(inputs), odd)
    _export(function, fn_sig, fn_name, "%s (autograd operator %s)." % (doc, cls_name))
    OPS[name] = (cls, function)
    NN_ROWS[cls] = row
    return cls, function


__all__ = []
_nn_rows = {r[0]: r for r in singa.NN_OPS}
for _cls, _fn in [_define(r) for r in singa.ACTIVATION_OPS] + \
        [_define_nn(r, _nn_rows) for r in singa.NN_OPS if r[1]]:
    globals()[_cls.__name__], globals()[_fn.__name__] = _cls, _fn
    __all__ += [_cls.__name__, _fn.__name__]
del _cls, _fn, _nn_rows
