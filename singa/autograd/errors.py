"""The exceptions autograd raises for bad input: each is also an AssertionError, because Apache
SINGA checks these inputs with ``assert`` and SINGA code may catch AssertionError.

    from singa.autograd.errors import ShapeError
    raise ShapeError("concat: shapes (2, 3) and (4, 5) differ outside axis 0")
    # caught by `except ValueError`, `except singa_wrap.ShapeError` and `except AssertionError`
"""
from .. import singa_wrap as singa


class ShapeError(singa.ShapeError, AssertionError):
    """A tensor of the wrong shape (also a ValueError and the core's ShapeError)."""


class AxisError(singa.AxisError, AssertionError):
    """An axis or index out of range (also an IndexError and the core's AxisError)."""


class InputError(ValueError, AssertionError):
    """A bad argument value that is not about shapes (a ratio outside [0, 1), a bad mode...)."""


class NoGradientError(RuntimeError, AssertionError):
    """backward was called on an operator that has no gradient (comparisons, casts to int...);
    SINGA raises AssertionError there."""
