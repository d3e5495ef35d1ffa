"""The exceptions singa's Python modules raise for bad input, as one family.

    from singa.errors import CheckShapeError
    raise CheckShapeError("Linear: expected input with 4 features, got 3 (input shape (2, 3))")
    # caught by `except CheckError`, `except AssertionError`, `except ValueError` and
    # `except singa_wrap.ShapeError`

Apache SINGA checks much user input with ``assert``, so SINGA code may catch AssertionError.
Where SINGA asserts we raise a ``CheckError`` subclass: an AssertionError and also the precise
error (a ValueError, TypeError, IndexError or one of the core's errors from singa_wrap). Our own
checks beyond SINGA's stay ordinary exceptions (unlike ``assert``, they also run under
``python -O``). The modules that raised these before keep their names as aliases
(tensor.CheckShapeError, autograd.ShapeError, layers.rnn.StepShapeError, utils.
PaddingMismatchError, device.DeviceUnavailableError, model.CheckpointError...).
"""
from . import singa_wrap as singa


class CheckError(AssertionError):
    """The base of every error raised where Apache SINGA asserts."""


class CheckShapeError(singa.ShapeError, CheckError):
    """A tensor of the wrong shape (a ValueError and the core's ShapeError)."""


class CheckAxisError(singa.AxisError, CheckError):
    """An axis or index out of range (an IndexError and the core's AxisError)."""


class CheckTypeError(TypeError, CheckError):
    """An argument of the wrong type."""


class CheckValueError(ValueError, CheckError):
    """A bad argument value that is not about shapes (a ratio outside [0, 1), a bad mode...)."""


class NoGradientError(RuntimeError, CheckError):
    """backward was called on an operator that has no gradient (comparisons, casts to int...)."""


class DeviceUnavailableError(singa.SingaNotImplementedError, CheckError):
    """The requested kind of device is not part of this build (e.g. CUDA without USE_CUDA)."""


class CheckpointNotFound(FileNotFoundError, CheckError):
    """load_states was given a path with no file."""


class CheckpointError(singa.SingaError, ValueError):
    """A checkpoint file is unreadable (truncated, corrupt, not a checkpoint) or does not fit
    the model (names or shapes). Not a CheckError: SINGA had no such check."""


# The names the autograd and layer modules used for the same errors (aliases, not new types:
# one `except` clause catches an error whichever module raised it).
ShapeError = CheckShapeError
AxisError = CheckAxisError
InputError = CheckValueError
StepShapeError = CheckShapeError
RNNUsageError = CheckValueError
PaddingMismatchError = CheckValueError
