"""SAME padding arithmetic, shared by the layers, singa.utils and sonnx.

    >>> from singa._padding import same_pad_split
    >>> same_pad_split("SAME_UPPER", 5, 2, 2)   # 5 pixels, kernel 2, stride 2: 3 outputs
    (0, 1)

Plain integers, no tensors: the lowest layer of the package (tests/python/test_imports.py).
"""
import numbers


def same_pad_split(mode, size, kernel, stride, dilation=1):
    """(before, after) padding of one axis that keeps ceil(size / stride) outputs: ONNX's
    SAME_UPPER puts the odd pixel after the data, SAME_LOWER before it. The one definition of
    SAME padding."""
    for what, v, low in (("size", size, 0), ("kernel", kernel, 1), ("stride", stride, 1),
                         ("dilation", dilation, 1)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < low:
            raise ValueError("same_pad_split: %s must be an int >= %d, got %r" % (what, low, v))
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    small, big = total // 2, total - total // 2
    return (big, small) if mode == "SAME_LOWER" else (small, big)
