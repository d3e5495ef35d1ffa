"""The operators transformers need beyond the CNN set: layer norm, the running sum, ONNX's
element / n-d gathers and masked_fill (gelu, isnan and isinf come from the op table, math.py;
softmax's mask is in activation.py).

    y = autograd.layer_norm(x, (512,), w, b, eps=1e-5)        # torch.nn.functional.layer_norm
    c = autograd.cumsum(ids, axis=1, exclusive=False, reverse=False)   # ONNX CumSum
    e = autograd.gather_elements(x, idx, axis=1)              # ONNX GatherElements
    n = autograd.gather_nd(x, idx, batch_dims=0)              # ONNX GatherND
    s = autograd.masked_fill(scores, pad_mask, -1e9)          # value where the mask is nonzero

Each is one core op per direction (kernels per backend: cpp/src/ops/{cpu,cuda}/); the gathers'
backward scatter-adds into zeros, and indices (Tensors, or integer numpy arrays / lists) get no
gradient.
"""
import numbers

import numpy as np

from .. import singa_wrap as singa
from .._args import as_axis, as_bool, as_float, as_int, as_shape
from .._core import Tensor
from ..errors import InputError, ShapeError
from . import base
from .base import Operator, reduce_to


def _shape_tuple(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral) and not isinstance(normalized_shape, bool):
        return (int(normalized_shape),)
    shape = tuple(as_shape(normalized_shape, "normalized_shape", "layer_norm"))
    if not shape:
        raise ShapeError("layer_norm: normalized_shape is empty")
    return shape


class LayerNorm(Operator):
    """Layer normalisation over the trailing ``normalized_shape`` axes; called with x, then the
    weight and / or bias that are given (``has_weight``, ``has_bias`` say which)."""

    def __init__(self, normalized_shape, eps=1e-5, has_weight=True, has_bias=True):
        super(LayerNorm, self).__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = as_float(eps, "eps", "layer_norm")
        self.has_weight, self.has_bias = bool(has_weight), bool(has_bias)

    def forward(self, x, *params):
        params = list(params)
        w = params.pop(0) if self.has_weight else None
        b = params.pop(0) if self.has_bias else None
        y, self.mean, self.rstd = singa.LayerNormForward(x, w, b, self.normalized_shape,
                                                         self.eps)
        self.x, self.w = x, w
        self.b_shape = b.shape() if b is not None else None
        return y

    def backward(self, dy):
        dx, dw, db = singa.LayerNormBackward(dy, self.x, self.w, self.mean, self.rstd,
                                             self.normalized_shape)
        grads = [dx, dw] if self.has_weight else [dx]
        if self.has_bias:
            if db is None:  # no weight: dbias is dy summed over the rows
                lead = list(range(dy.nDim() - len(self.normalized_shape)))
                db = singa.ReduceSum(dy, lead, False)
            grads.append(singa.Reshape(db, list(self.b_shape)))
        return tuple(g if self.need(i) else None for i, g in enumerate(grads))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing ``normalized_shape`` axes
    of x, with the biased variance (torch.nn.functional.layer_norm). weight and bias are
    Tensors of normalized_shape, or None."""
    op = LayerNorm(normalized_shape, eps, weight is not None, bias is not None)
    params = [p for p in (weight, bias) if p is not None]
    return op(x, *params)[0]


class CumSum(Operator):
    """The running sum along ``axis`` (ONNX CumSum); its backward is the running sum of dy in
    the other direction."""

    def __init__(self, axis, exclusive=False, reverse=False):
        super(CumSum, self).__init__()
        self.axis = as_axis(axis, "axis", "cumsum")
        self.exclusive = as_bool(exclusive, "exclusive", "cumsum")
        self.reverse = as_bool(reverse, "reverse", "cumsum")

    def forward(self, x):
        return singa.CumSum(x, self.axis, self.exclusive, self.reverse)

    def backward(self, dy):
        return singa.CumSum(dy, self.axis, self.exclusive, not self.reverse)


def cumsum(x, axis, exclusive=False, reverse=False):
    """Running sum of x along ``axis``: ``exclusive`` leaves each element out of its own sum,
    ``reverse`` sums from the end (ONNX CumSum's attributes)."""
    return CumSum(axis, exclusive, reverse)(x)[0]


def _indices(indices, like, op):
    """indices as a Tensor on like's device: Tensors pass, integer arrays become int32."""
    base.expect_tensor(like, op)
    if isinstance(indices, Tensor):
        return indices
    arr = np.asarray(indices)
    if arr.dtype.kind not in "iub":
        raise TypeError("%s: indices must be a Tensor or integer data, got %s"
                        % (op, arr.dtype))
    return Tensor(data=base.const(arr.astype(np.int32), like.data), requires_grad=False)


class GatherElements(Operator):
    """ONNX GatherElements along ``axis``; called with (x, indices)."""

    def __init__(self, axis=0):
        super(GatherElements, self).__init__()
        self.axis = as_axis(axis, "axis", "gather_elements")

    def forward(self, x, indices):
        self.indices, self.x_shape = indices, x.shape()
        return singa.GatherElements(x, indices, self.axis)

    def backward(self, dy):
        dx = singa.GatherElementsBackward(dy, self.indices, self.axis, self.x_shape)
        return dx, None


def gather_elements(x, indices, axis=0):
    """out[i][j][k] = x[i][indices[i][j][k]][k] for axis 1 (ONNX GatherElements, torch.gather):
    indices have x's rank; negative ones count from the end."""
    return GatherElements(axis)(x, _indices(indices, x, "gather_elements"))[0]


class GatherND(Operator):
    """ONNX GatherND with ``batch_dims``; called with (x, indices)."""

    def __init__(self, batch_dims=0):
        super(GatherND, self).__init__()
        self.batch_dims = as_int(batch_dims, "batch_dims", "gather_nd")

    def forward(self, x, indices):
        self.indices, self.x_shape = indices, x.shape()
        return singa.GatherND(x, indices, self.batch_dims)

    def backward(self, dy):
        return singa.GatherNDBackward(dy, self.indices, self.batch_dims, self.x_shape), None


def gather_nd(x, indices, batch_dims=0):
    """ONNX GatherND: the last axis of indices holds coordinates into x's axes after the
    ``batch_dims`` leading ones (which x and indices share); out shape is indices.shape[:-1] +
    the remaining axes of x."""
    return GatherND(batch_dims)(x, _indices(indices, x, "gather_nd"))[0]


class MaskedFill(Operator):
    """``value`` where the mask is nonzero, else x; called with (x, mask), broadcast."""

    def __init__(self, value):
        super(MaskedFill, self).__init__()
        self.value = as_float(value, "value", "masked_fill")

    def forward(self, x, mask):
        self.mask, self.x_shape = mask, x.shape()
        return singa.MaskedFill(x, mask, self.value)

    def backward(self, dy):
        return reduce_to(singa.MaskedFill(dy, self.mask, 0.0), self.x_shape), None


def as_mask(mask, like, op):
    """mask as a Tensor on like's device: Tensors pass, numpy arrays / lists (bool or numbers)
    become float32 constants."""
    base.expect_tensor(like, op)
    if isinstance(mask, Tensor):
        return mask
    arr = np.asarray(mask)
    if arr.dtype.kind not in "biuf":
        raise TypeError("%s: mask must be a Tensor or numeric data, got %s" % (op, arr.dtype))
    return Tensor(data=base.const(arr.astype(np.float32), like.data), requires_grad=False)


def masked_fill(x, mask, value):
    """x with ``value`` wherever ``mask`` (broadcast against x) is nonzero
    (torch.Tensor.masked_fill); the gradient flows to x where the mask is zero."""
    if not isinstance(value, numbers.Real):
        raise InputError("masked_fill: value must be a number, got %r" % (value,))
    return MaskedFill(value)(x, as_mask(mask, x, "masked_fill"))[0]


__all__ = ["LayerNorm", "layer_norm", "CumSum", "cumsum", "GatherElements", "gather_elements",
           "GatherND", "gather_nd", "MaskedFill", "masked_fill"]
