"""The Python classes of libsinga's errors, which every extension module raises.

    from singa import singa_wrap
    try:
        singa_wrap.Mult(a, b)
    except singa_wrap.ShapeError as e:     # also a ValueError
        print(e)                           # names the op, the shapes and what was expected

Plain Python, so that each extension module (singa/_wrap_*.so, cython/singa/) registers the same
classes in its C++ -> Python translation table at import (csinga.pxd, register_error_classes).
The classes say they live in singa.singa_wrap, where users find them (and pickle finds them).
"""


class SingaError(RuntimeError):
    """Base class of the errors raised by libsinga."""


class ShapeError(SingaError, ValueError):
    """Shapes do not fit the operation."""


class AxisError(ShapeError, IndexError):
    """An axis or index is out of range, or repeated."""


class DTypeError(SingaError, TypeError):
    """The dtype is not supported by the operation."""


class ArgumentError(SingaError, ValueError):
    """An argument has a bad value."""


class DeviceError(SingaError, RuntimeError):
    """Operands on different devices, or a device that cannot do this."""


class OutOfMemoryError(SingaError, MemoryError):
    """A device ran out of memory."""


class SingaNotImplementedError(SingaError, NotImplementedError):
    """Not available for this device, dtype or build."""


class NonFiniteError(SingaError, FloatingPointError):
    """An operation produced NaN or Inf while its device checked outputs
    (Device.SetCheckFinite(True), Model.compile(..., check_finite=True)); the message names it."""


__all__ = ["SingaError", "ShapeError", "AxisError", "DTypeError", "ArgumentError", "DeviceError",
           "OutOfMemoryError", "SingaNotImplementedError", "NonFiniteError"]

# In the order of SingaPyErrorKind (cython/error_translate.h): the index is the C++ kind.
BY_KIND = (SingaError, ShapeError, AxisError, DTypeError, ArgumentError, DeviceError,
           OutOfMemoryError, SingaNotImplementedError, NonFiniteError)

for _cls in BY_KIND:
    _cls.__module__ = "singa.singa_wrap"
del _cls
