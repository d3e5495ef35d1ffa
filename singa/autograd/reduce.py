"""Reductions over axes (ONNX ReduceSum / ReduceMean) and global average pooling.

    s = autograd.reduce_sum(x)                          # all axes, keepdims=1 -> shape (1, 1, ...)
    m = autograd.reduce_mean(x, axes=[1], keepdims=0)
    g = autograd.globalaveragepool(x)                   # (N, C, H, W) -> (N, C, 1, 1)
"""
from .. import singa_wrap as singa
from .._args import as_axes, as_bool
from .errors import ShapeError, AxisError
from .base import Operator, norm_axis


def _axes(axes, nd, op):
    """Sorted non-negative axes; None means every axis."""
    if axes is None:
        return list(range(nd))
    axes = as_axes(axes, "axes", op)
    out = sorted(norm_axis(a, nd, op) for a in axes)
    if len(set(out)) != len(out):
        raise AxisError("%s: repeated axis in %r" % (op, list(axes)))
    return out


class _Reduce(Operator):
    mean = False

    def __init__(self, axes=None, keepdims=1):
        super(_Reduce, self).__init__()
        self.axes = axes
        # a str or list is true and would keep the axes silently
        self.keepdims = as_bool(keepdims, "keepdims", "reduce_mean" if self.mean else "reduce_sum")

    def forward(self, x):
        op = "reduce_mean" if self.mean else "reduce_sum"
        nd = x.nDim()
        self.axes = _axes(self.axes, nd, op)
        self.x_shape = x.shape()
        self.kept = tuple(1 if i in self.axes else d for i, d in enumerate(self.x_shape))
        self.count = 1
        for a in self.axes:
            self.count *= self.x_shape[a]
        if not self.axes:  # nothing to reduce: a copy (an output never aliases the input)
            return x.Clone()
        fn = singa.ReduceMean if self.mean else singa.ReduceSum
        return fn(x, self.axes, self.keepdims)

    def backward(self, dy):
        dy = singa.Reshape(dy, list(self.kept))
        if self.mean and self.count:
            dy = singa.Div(dy, float(self.count))
        return singa.Broadcast(dy, list(self.x_shape))


class ReduceSum(_Reduce):
    """The sum over ``axes`` (all when None), keeping them as size 1 when keepdims."""


class ReduceMean(_Reduce):
    """The mean over ``axes`` (all when None), keeping them as size 1 when keepdims."""
    mean = True


def reduce_sum(x, axes=None, keepdims=1):
    """Sum of x over ``axes`` (None: all); keepdims=1 keeps reduced axes with size 1."""
    return ReduceSum(axes, keepdims)(x)[0]


def reduce_mean(x, axes=None, keepdims=1):
    """Mean of x over ``axes`` (None: all); keepdims=1 keeps reduced axes with size 1."""
    return ReduceMean(axes, keepdims)(x)[0]


class GlobalAveragePool(ReduceMean):
    """The mean over the spatial axes: (N, C, H, W...) -> (N, C, 1, 1...) for channels_first,
    (N, H, W..., C) -> (N, 1, 1..., C) otherwise: as in SINGA, every data_format other than
    'channels_first' means channels last. A rank-2 input has no spatial axes (the identity)."""

    def __init__(self, data_format="channels_first"):
        super(GlobalAveragePool, self).__init__(None, 1)
        self.data_format = data_format

    def forward(self, x):
        nd = x.nDim()
        if nd < 2:
            raise ShapeError("globalaveragepool: expected an input of rank >= 2 "
                             "(N, C, spatial...), got shape %s" % (x.shape(),))
        first = self.data_format == "channels_first"
        self.axes = list(range(2, nd)) if first else list(range(1, nd - 1))
        return super(GlobalAveragePool, self).forward(x)


def globalaveragepool(x, data_format="channels_first"):
    """Mean over the spatial axes, kept with size 1."""
    return GlobalAveragePool(data_format)(x)[0]
