"""Helpers shared by the layer modules: input checks, size pairs, core handles.

Where Apache SINGA asserts on a layer's input (Linear's feature size, BatchNorm2d's momentum...)
the checks here raise singa.errors' CheckShapeError / CheckTypeError / CheckValueError, each also
an AssertionError (see singa/errors.py); the names stay importable from here.
"""
import numbers

from .. import _state, autograd
from .. import singa_wrap as singa
from .._padding import same_pad_split
from ..errors import CheckShapeError, CheckTypeError, CheckValueError  # noqa: F401
from ..tensor import Tensor, float16, float32


def shape_error(layer, msg, *args):
    """A CheckShapeError (a ValueError and an AssertionError) whose message starts with the
    layer's name."""
    return CheckShapeError("%s: %s" % (layer._display_name(), msg % args))


def check_tensor(layer, x, what="input"):
    if not isinstance(x, Tensor):
        raise CheckTypeError("%s: the %s must be a singa Tensor, got %s"
                             % (layer._display_name(), what, type(x).__name__))


def check_ndim(layer, x, ndims, layout, what="input"):
    """Raises unless x is a Tensor whose rank is in ``ndims``; ``layout`` describes it."""
    check_tensor(layer, x, what)
    if isinstance(ndims, int):
        ndims = (ndims,)
    if len(x.shape) not in ndims:
        raise shape_error(layer, "expected a %s %s %s, got shape %s",
                          " or ".join("%d-d" % n for n in ndims), what, layout, tuple(x.shape))


def check_dim(layer, x, axis, expected, what):
    """Raises unless x.shape[axis] == expected (``what`` names the dimension, e.g. features)."""
    got = x.shape[axis]
    if expected is not None and got != expected:
        raise shape_error(layer, "expected input with %d %s, got %d (input shape %s)",
                          expected, what, got, tuple(x.shape))


def pair(v, layer, what):
    """(a, b) from an int or a 2-sequence of ints."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v), int(v))
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(
            isinstance(e, numbers.Integral) and not isinstance(e, bool) for e in v):
        return (int(v[0]), int(v[1]))
    raise TypeError("%s: %s must be an int or a pair of ints, got %r" % (layer, what, v))


def padding_spec(padding, layer):
    """(symmetric (h, w) padding, odd padding (top, bottom, left, right)) from an int, a pair,
    or four values (top, bottom, left, right) whose asymmetric part goes to the odd padding."""
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        top, bottom, left, right = [int(p) for p in padding]
        if min(top, bottom, left, right) < 0:
            raise ValueError("%s: padding must not be negative, got %r" % (layer, padding))
        dh, dw = top - bottom, left - right
        odd = (max(dh, 0), max(-dh, 0), max(dw, 0), max(-dw, 0))
        return (top - odd[0], left - odd[2]), odd
    p = pair(padding, layer, "padding")
    if min(p) < 0:
        raise ValueError("%s: padding must not be negative, got %r" % (layer, padding))
    return p, (0, 0, 0, 0)


def same_padding(mode, in_hw, kernel, stride):
    """Symmetric padding and odd padding that keep ceil(in / stride) outputs (see
    same_pad_split)."""
    (t, b), (l, r) = (same_pad_split(mode, n, k, s) for n, k, s in zip(in_hw, kernel, stride))
    return padding_spec((t, b, l, r), "pad")


def handle_class(cpu_name, gpu_name, dev):
    """The core handle class (e.g. ConvHandle) for ``dev``: from singa_wrap, or from
    singa.autograd when the handles live there; None if this build has none.

    Apache SINGA had separate cuDNN handles (CudnnConvHandle...) for a GPU; our handles only
    carry the geometry and the op's front picks the device's kernel, so on a GPU the GPU name
    is used when the build defines it and the common handle otherwise."""
    names = (cpu_name,) if dev.is_host() else (gpu_name, cpu_name)
    for name in names:
        cls = getattr(singa, name, None) or getattr(autograd, name, None)
        if cls is not None:
            return cls
    return None


def make_handle(cpu_name, gpu_name, dev, *args, **kwargs):
    """A core handle for ``dev`` built from ``args`` (Apache SINGA's argument order) and our
    extra keywords (a convolution's dilation)."""
    cls = handle_class(cpu_name, gpu_name, dev)
    if cls is None:
        raise NotImplementedError("this build of singa has no %s (needed on %r)"
                                  % (cpu_name if dev.is_host() else gpu_name, dev))
    return cls(*args, **kwargs)


def positive_int(name, what, v):
    """v as an int, or a CheckValueError (a ValueError) naming the layer and the setting when it
    is not a positive integer (numpy integers count; bools and floats do not); a CheckTypeError
    (a TypeError) when v is not a number at all (a string, None, a list)."""
    if not isinstance(v, numbers.Real):
        raise CheckTypeError("%s(): argument '%s' must be a positive int, not %s"
                             % (name, what, type(v).__name__))
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
        raise CheckValueError("%s: %s must be a positive int, got %r" % (name, what, v))
    return int(v)


def is_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


# ---- parameters ------------------------------------------------------------------------------
def param_dtype(x):
    """The dtype of a layer's parameters for its first input x: float16 for a float16 input
    (SINGA 3.3's ``-p float16`` training makes every parameter ``dtype=x.dtype``), otherwise
    float32 (an int32 input, e.g. Embedding's indices, still gets float parameters). Under
    mixed precision (autograd/amp.py) always float32: master weights, also for a layer fed the
    float16 output of a convolution."""
    return float16 if x.dtype == float16 and _state.autocast is None else float32


def param(shape, x, fill):
    """A trainable parameter on x's device in param_dtype(x), its values set by ``fill(t)``.

    The fill (gaussian, set_value...) runs on a float32 tensor that is then converted: random
    fills are float32 kernels on every backend, and the values of a float16 parameter are then
    the float16 rounding of the float32 draw on the CPU and on a GPU alike."""
    t = Tensor(shape=shape, device=x.device, requires_grad=True, stores_grad=True)
    fill(t)
    dtype = param_dtype(x)
    if dtype != t.dtype:
        t.to_type(dtype)
    return t
