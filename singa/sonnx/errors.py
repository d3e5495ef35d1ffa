"""The exceptions of singa.sonnx."""
from ..errors import CheckValueError


class SonnxError(CheckValueError):
    """A model sonnx cannot export or import: the message names the operator (and opset)."""


class UnsupportedOpError(SonnxError, NotImplementedError):
    """An ONNX op type (or attribute value) that sonnx does not implement."""
