"""Neural-network operators on NCHW tensors: conv2d, batchnorm_2d and dropout (pooling_2d is
schema/nn.py's row: schema_ops.py defines it on this file's odd-padding helpers).

    h = singa_wrap.ConvHandle(x.data, (3, 3), (1, 1), (1, 1), 3, 16, True)   # see cython/singa/_wrap_nn.pyx
    y = autograd.conv2d(h, x, W, b)
    p = autograd.pooling_2d(singa_wrap.PoolingHandle(y.data, (2, 2), (2, 2), (0, 0), True), y)
    bn = autograd.BatchNormHandle(x, momentum=0.9)
    z = autograd.batchnorm_2d(bn, x, scale, bias, running_mean, running_var)
    d = autograd.dropout(x, ratio=0.5)         # identity when autograd.training is False
    d = autograd.dropout(x, 7, 0.5)            # SINGA's order: seed, then ratio

The handles carry the geometry and are built by the layers (singa/layer.py). ``odd_padding``
= (top, bottom, left, right) adds zero rows/columns before the op, for paddings that the
symmetric (pad_h, pad_w) of a handle cannot express.
"""
import numbers
import warnings

import numpy as np

from .. import _state
from .._args import as_float, as_shape, type_error
from .._core import Tensor
from .. import singa_wrap as singa
from .errors import ShapeError, InputError
from . import base
from .base import Operator, fill

_M = singa.EltwiseMult


def _check_4d(x, op):
    if x.nDim() != 4:
        raise ShapeError("%s: expected a 4-d input (N, C, H, W), got shape %s"
                         % (op, x.shape()))


def _odd_pad(x, odd_padding):
    """x with odd_padding = (top, bottom, left, right) zeros added on axes 2 and 3."""
    for (axis, before), k in zip(((2, True), (2, False), (3, True), (3, False)), odd_padding):
        if k:
            shape = list(x.shape())
            shape[axis] = int(k)
            z = fill(shape, 0, x)
            x = singa.ConcatOn([z, x] if before else [x, z], axis)
    return x


def _odd_unpad(dx, odd_padding):
    top, bottom, left, right = _norm_odd(odd_padding)
    if top or bottom:
        dx = singa.SliceOn(dx, top, dx.shape()[2] - bottom, 2)
    if left or right:
        dx = singa.SliceOn(dx, left, dx.shape()[3] - right, 3)
    return dx


def _norm_odd(odd_padding, op="conv2d"):
    odd = tuple(as_shape(odd_padding, "odd_padding", op, allow_int=False))
    if len(odd) != 4 or any(k < 0 for k in odd):
        raise InputError("odd_padding must be four non-negative ints (top, bottom, left, "
                         "right), got %r" % (odd_padding,))
    return odd


class _Conv2d(Operator):
    """2-d convolution y = conv(x, W) + b with the geometry of ``handle``; with relu, y =
    max(0, conv(x, W) + b) from one kernel (oneDNN's ReLU post-op), dy masked by y > 0 first."""

    def __init__(self, handle, odd_padding=(0, 0, 0, 0), relu=False):
        super(_Conv2d, self).__init__()
        self.handle = handle
        self.odd_padding = _norm_odd(odd_padding)
        self.relu = bool(relu)

    def forward(self, x, W, b=None):
        _check_4d(x, "conv2d")  # first: the input's shape error, as before the handle's type
        if not isinstance(self.handle, singa.ConvHandle):  # CudnnConvHandle subclasses it
            raise type_error("conv2d", "handle", "ConvHandle", self.handle)
        if any(self.odd_padding):
            x = _odd_pad(x, self.odd_padding)
        self.x, self.W, self.has_bias = x, W, b is not None
        y = singa.Conv2dForward(x, W, b if b is not None else singa.Tensor(), self.handle,
                                self.relu)
        self.y = y if self.relu else None
        return y

    def backward(self, dy):
        if self.relu:
            dy = singa.ReLUBackward(dy, self.y)
        dx = dW = None
        if self.need(0):
            dx = singa.Conv2dBackwardX(dy, self.W, self.handle)
            if any(self.odd_padding):
                dx = _odd_unpad(dx, self.odd_padding)
        # a weight (bias) that autocast cast from float32 gets its gradient in float32 from
        # the kernel, not rounded to bf16 and cast back (Operator.float32_grad)
        if self.need(1):
            dW = singa.Conv2dBackwardW(dy, self.x, self.handle, self.float32_grad(1))
        if not self.has_bias:
            return dx, dW
        db = (singa.Conv2dBackwardB(dy, self.handle, self.float32_grad(2)) if self.need(2)
              else None)
        return dx, dW, db


def conv2d(handle, x, W, b=None, odd_padding=(0, 0, 0, 0), relu=False):
    """2-d convolution of x (N, C, H, W) with W and optional bias b (then max(0, .) if relu)."""
    op = _Conv2d(handle, odd_padding, relu)
    return op(x, W)[0] if b is None else op(x, W, b)[0]



# The settings of a batch normalisation (cython/singa/_wrap_nn.pyx): BatchNormHandle(x, momentum) or, as
# Apache SINGA's singa_wrap, BatchNormHandle(momentum, x); one class under both names.
BatchNormHandle = singa.BatchNormHandle


class _BatchNorm2d(Operator):
    """Batch normalisation over axis 1. In training, normalises with the batch statistics and
    updates running_mean / running_var in place; otherwise uses the running statistics."""

    def __init__(self, handle, running_mean, running_var, name=None, relu=False):
        super(_BatchNorm2d, self).__init__(name)
        self.handle = handle
        self.relu = bool(relu)  # y = max(0, bn(x)) from one kernel; dy masked by y > 0
        for what, t in (("running_mean", running_mean), ("running_var", running_var)):
            if not isinstance(t, (Tensor, singa.Tensor)):
                raise type_error("batchnorm_2d", what, "Tensor", t)
        self.running_mean = getattr(running_mean, "data", running_mean)
        self.running_var = getattr(running_var, "data", running_var)

    def forward(self, x, scale, bias):
        if x.nDim() < 2:
            raise ShapeError("batchnorm_2d: expected an input (N, C, ...), got shape %s"
                             % (x.shape(),))
        self.eps = float(getattr(self.handle, "eps", 1e-5))
        momentum = 1.0 - float(getattr(self.handle, "factor", 0.9))  # the core's convention
        if not _state.training:
            return singa.BatchNormForwardInference(x, scale, bias, self.running_mean,
                                                   self.running_var, self.eps, self.relu)
        y, self.mean, self.var = singa.BatchNormForwardTraining(
            x, scale, bias, self.running_mean, self.running_var, momentum, self.eps, self.relu)
        self.x, self.scale, self.bias_shape = x, scale, bias.shape()
        self.y = y if self.relu else None
        return y

    def backward(self, dy):
        if self.relu:
            dy = singa.ReLUBackward(dy, self.y)
        dx, dscale, dbias = singa.BatchNormBackward(dy, self.x, self.scale, self.mean, self.var,
                                                    self.eps)
        # The core takes any shape holding C values ((C,), (1, C, 1, 1)...) and returns (C,):
        # the gradients take their parameters' shapes back.
        return dx, singa.Reshape(dscale, list(self.scale.shape())), \
            singa.Reshape(dbias, list(self.bias_shape))


def batchnorm_2d(handle, x, scale, bias, running_mean, running_var, relu=False):
    """Batch normalisation of x (N, C, ...) with per-channel scale and bias (then max(0, .) if
    relu: the same numbers as relu(batchnorm_2d(...)), from one kernel)."""
    return _BatchNorm2d(handle, running_mean, running_var, relu=relu)(x, scale, bias)[0]


class Dropout(Operator):
    """In training, zeroes each element with probability ``ratio`` and scales the rest by
    1 / (1 - ratio); otherwise the identity.

    A non-zero ``seed`` seeds the device's random generator at the operator's first forward,
    as SINGA does. Seed 0, the default, leaves the generator alone: SINGA reseeds with 0 there
    too, which gives every call of autograd.dropout the same mask (and resets every other
    random draw on the device), so we do not copy that. SINGA also scales by 1 - ratio instead
    of 1 / (1 - ratio) (``1 / 1 - ratio``); ours keeps the expectation, as documented by both.

    A float in [0, 1) in the seed position (``dropout(x, 0.5)``, the older call, which SINGA's
    own tests make) is what SINGA makes of it: seed int(0.5) = 0, the ratio unchanged (0.5 by
    default), with a one-time UserWarning saying to pass ``ratio=``."""

    def __init__(self, seed=0, ratio=0.5):
        super(Dropout, self).__init__()
        ratio = as_float(ratio, "ratio", "dropout")
        if not 0.0 <= ratio < 1.0:
            raise InputError("dropout: ratio must be in [0, 1), got %r" % (ratio,))
        if _looks_like_a_ratio(seed):
            seed = _seed_from_a_ratio(seed, ratio)
        if not isinstance(seed, numbers.Real):  # a number that is no int stays InputError below
            raise type_error("dropout", "seed", "int", seed)
        if isinstance(seed, bool) or not float(seed).is_integer() or seed < 0:
            raise InputError("dropout: seed must be a non-negative int, got %r (SINGA 3.x "
                             "takes dropout(x, seed=0, ratio=0.5): give a drop ratio as "
                             "ratio=)" % (seed,))
        self.seed, self.ratio = int(seed), ratio
        self.init_seed = self.seed == 0

    def forward(self, x):
        if not _state.training or self.ratio == 0.0:
            self.mask = None
            return x
        if not self.init_seed:
            x.device().SetRandSeed(self.seed)
            self.init_seed = True
        mask = singa.Tensor(x.shape(), x.device(), singa.kFloat32)
        singa.Bernoulli(1.0 - self.ratio, mask)
        self.mask = _M(mask, 1.0 / (1.0 - self.ratio))
        if self.mask.data_type() != x.data_type() and x.data_type() == singa.kFloat16:
            self.mask = self.mask.AsType(singa.kFloat16)  # drawn in float32, applied in float16
        return _M(x, self.mask)

    def backward(self, dy):
        return dy if self.mask is None else _M(dy, self.mask)


_warned_ratio_as_seed = False


def _looks_like_a_ratio(seed):
    """A float in [0, 1) where SINGA 3.x's signature has the seed: dropout(x, 0.5), the call of
    older SINGA versions (and of SINGA's own test_dropout_cpu and 5.1's LoRA example)."""
    return isinstance(seed, (float, np.floating)) and 0.0 <= seed < 1.0


def _seed_from_a_ratio(seed, ratio):
    """SINGA's treatment of dropout(x, 0.5): int(seed), i.e. seed 0, with the drop ratio left at
    its keyword value (0.5 by default). Warns once per process that the value is not a ratio."""
    global _warned_ratio_as_seed
    if not _warned_ratio_as_seed:
        _warned_ratio_as_seed = True
        warnings.warn("autograd.dropout: %r was passed in the seed position (SINGA 3.x's "
                      "signature is dropout(x, seed=0, ratio=0.5)); as in SINGA it is truncated "
                      "to seed 0 and the drop ratio stays %r. To set the drop ratio, pass "
                      "ratio=%r." % (float(seed), ratio, float(seed)), UserWarning, stacklevel=4)
    return 0


def dropout(x, seed=0, ratio=0.5):
    """Dropout of x with drop probability ``ratio`` (active only while training); see
    Dropout for ``seed``."""
    return Dropout(seed, ratio)(x)[0]
