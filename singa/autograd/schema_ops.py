"""The autograd operators of the op schema's activations (schema/activations.py, carried by
singa_wrap.ACTIVATION_OPS): one Operator class and one function per row, with SINGA's names
and keywords; forward is the row's kernel, backward its fused backward op.

    y = autograd.leakyrelu(x, a=0.2)          # operator LeakyRelu(a=0.2)
    y = autograd.hardswish(x)                 # operator HardSwish
    OPS["HardSwish"]                          # (class, function) by the row's C++ name
"""
import inspect

from .. import singa_wrap as singa
from .base import Operator

OPS = {}  # C++ name -> (Operator class, function), in the schema's order
SCHEMA_ROWS = {}  # Operator class -> the schema row (sonnx maps both ONNX directions from it)


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
            setattr(self, k, float(bound.arguments[k]))

    __init__.__signature__ = init_sig
    cls = type(cls_name, (_Activation,), {
        "__init__": __init__, "keys": keys, "__module__": __name__,
        "__doc__": "%s, elementwise (schema op %s; backward: %sBackward)." % (doc, name, name),
        "kernel": staticmethod(getattr(singa, name)),
        "backward_kernel": staticmethod(getattr(singa, name + "Backward"))})

    def function(x, *args, **kwargs):
        return cls(*args, **kwargs)(x)[0]

    function.__signature__ = _signature(["x"], attrs)
    function.__name__ = function.__qualname__ = fn_name
    function.__module__ = __name__
    function.__doc__ = "%s, elementwise (autograd operator %s)." % (doc, cls_name)
    OPS[name] = (cls, function)
    SCHEMA_ROWS[cls] = row
    return cls, function


__all__ = []
for _row in singa.ACTIVATION_OPS:
    _cls, _fn = _define(_row)
    globals()[_cls.__name__], globals()[_fn.__name__] = _cls, _fn
    __all__ += [_cls.__name__, _fn.__name__]
del _row, _cls, _fn
