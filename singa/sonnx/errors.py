"""The exceptions of singa.sonnx."""
import contextlib

from ..errors import CheckValueError


class SonnxError(CheckValueError):
    """A model sonnx cannot export or import: the message names the operator (and opset)."""


class UnsupportedOpError(SonnxError, NotImplementedError):
    """An ONNX op type (or attribute value) that sonnx does not implement."""


@contextlib.contextmanager
def reference_errors(op):
    """Inside: onnx's reference implementation (onnx.reference) evaluating an `op` node for us.
    It raises plain errors (RuntimeError, KeyError...) for attribute values it does not
    support; they leave as SonnxError naming the op (MemoryError stays itself)."""
    try:
        yield
    except (SonnxError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001  (whatever the reference raised)
        raise SonnxError("%s: onnx's reference implementation rejected the node: %s: %s"
                         % (op, type(e).__name__, e)) from e
