"""The exceptions autograd raises for bad input, under the names autograd has always used; they
are singa.errors' family (each also an AssertionError, as Apache SINGA asserts on these inputs).

    from singa.autograd.errors import ShapeError
    raise ShapeError("concat: shapes (2, 3) and (4, 5) differ outside axis 0")
    # caught by `except ValueError`, `except singa_wrap.ShapeError` and `except AssertionError`
"""
from ..errors import (ShapeError, AxisError, InputError, NoGradientError,  # noqa: F401
                      CheckError)
