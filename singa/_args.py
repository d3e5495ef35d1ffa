"""Checks of the public API's plain arguments (ints, floats, axes, shapes, flags).

    from singa._args import as_int, as_axes
    depth = as_int(depth, "depth", "onehot")   # onehot(): argument 'depth' must be int, not str
    axes = as_axes(axis, "axis", "sum")        # None, [a], or a list of ints

Each takes the value, the parameter's name and the op's name, and returns the value converted
(a Python int, float, bool or list of ints). A value of the wrong type raises TypeError in
PyTorch's form, "<op>(): argument '<param>' must be <what>, not <type>", so the message names
the op and the parameter rather than the int()/float() call deep inside that met it. Values of
the right type but a bad value (a negative size, an axis out of range) stay the callers' (or
as_axis's) ValueError / AxisError.

What counts as an int is what numpy accepts as one: Python ints, numpy integer scalars and 0-d
integer arrays (operator.index); never a float, not even 2.0 (numpy and torch refuse it too, and
SINGA handed these straight to SWIG, whose int conversion refuses floats). A float is any real
number or anything with __float__ (a one-element Tensor or numpy array, as float() takes).
"""
import numbers
import operator

import numpy as np

from . import singa_wrap as singa


def type_error(op, param, want, v):
    """The TypeError saying argument ``param`` of ``op`` must be ``want`` (PyTorch's wording)."""
    return TypeError("%s(): argument '%s' must be %s, not %s" % (op, param, want, type(v).__name__))


def _index(v, allow_bool):
    """v as a Python int, or None when it is not an integer (bool only if allow_bool)."""
    if isinstance(v, (bool, np.bool_)):
        return int(v) if allow_bool else None
    if isinstance(v, (str, bytes)):  # str has no __index__, but say so before trying
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


def as_int(v, param, op, allow_bool=True):
    """v as a Python int (bools count unless allow_bool is False: numpy takes True as 1 for a
    size but not for an axis)."""
    i = _index(v, allow_bool)
    if i is None:
        raise type_error(op, param, "int", v)
    return i


def as_float(v, param, op):
    """v as a Python float: a real number, or an object float() converts (a one-element Tensor
    or numpy array), never a string (float('1') parsing text is not a number argument)."""
    if isinstance(v, numbers.Real):
        return float(v)
    if isinstance(v, (str, bytes)) or not hasattr(type(v), "__float__"):
        raise type_error(op, param, "float", v)
    try:
        return float(v)
    except (TypeError, ValueError) as e:  # a Tensor or array of several elements
        raise TypeError("%s(): argument '%s' must be float, not %s (%s)"
                        % (op, param, type(v).__name__, e)) from None


def as_bool(v, param, op):
    """v as a bool: a bool, a numpy bool or an int (SINGA tests flags by truth, and 0/1 were
    always passed for them); not None, a string or a sequence, whose truth says nothing."""
    if isinstance(v, (bool, np.bool_, numbers.Integral)):
        return bool(v)
    raise type_error(op, param, "bool", v)


def as_axis(v, param, op, ndim=None):
    """v as one axis (an int, not a bool, as numpy); with ndim, checked to lie in [-ndim, ndim)
    (singa_wrap.AxisError, an IndexError, otherwise) and made non-negative. Without ndim the
    range is the core's to check (its messages name the kernel), except past the C int its
    binding converts to: no tensor has 2^31 axes, and the conversion's OverflowError would name
    neither the op nor the axis."""
    a = _index(v, False)
    if a is None:
        raise type_error(op, param, "int", v)
    if ndim is None:
        if not -2 ** 31 <= a < 2 ** 31:
            raise singa.AxisError("%s(): axis %d is out of range" % (op, a))
        return a
    if not -ndim <= a < ndim:
        raise singa.AxisError("%s(): axis %d is out of range for a tensor of rank %d"
                              % (op, a, ndim))
    return a + ndim if a < 0 else a


def _int_list(v, param, op, want, allow_bool):
    """The list of ints in sequence v (a list, tuple, range or 1-d integer array)."""
    if isinstance(v, np.ndarray) and v.ndim == 1:
        v = v.tolist()
    if not isinstance(v, (list, tuple, range)):
        raise type_error(op, param, want, v)
    out = []
    for i, e in enumerate(v):
        x = _index(e, allow_bool)
        if x is None:
            raise TypeError("%s(): argument '%s' must be %s, but found element of type %s at "
                            "pos %d" % (op, param, want, type(e).__name__, i))
        out.append(x)
    return out


def as_axes(v, param, op, ndim=None):
    """None (every axis) stays None; an int becomes [axis]; a sequence of ints a list. With
    ndim each axis is range-checked and made non-negative (as as_axis)."""
    if v is None:
        return None
    if _index(v, False) is not None or isinstance(v, (bool, np.bool_)):
        return [as_axis(v, param, op, ndim)]
    axes = _int_list(v, param, op, "int or tuple of ints", False)
    return axes if ndim is None else [as_axis(a, param, op, ndim) for a in axes]


def as_shape(v, param, op, allow_int=True):
    """A shape as a list of ints: a sequence of ints, or (allow_int) one int for a 1-d shape.
    Negative entries are the caller's to judge (reshape takes one -1)."""
    if allow_int and not isinstance(v, (list, tuple)):  # the usual case first: no exception
        i = _index(v, True)
        if i is not None:
            return [i]
    return _int_list(v, param, op, "tuple of ints", True)
