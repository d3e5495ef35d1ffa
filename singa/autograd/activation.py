"""PReLU and softmax (relu, sigmoid, tanh... are in math.py's table; leakyrelu, elu, selu,
hardsigmoid and hardswish come from the op schema, schema_ops.py).

    p = autograd.softmax(logits, axis=1)
    y = autograd.prelu(x, slope)      # slope is a Tensor, broadcast against x
"""
import numpy as np

from .. import singa_wrap as singa
from ..errors import ShapeError
from .base import Operator, float_dtype, reduce_to, norm_axis
from .math import _select
from .transformer import as_mask

_M = singa.EltwiseMult


def _float_mask(m, like):
    dt = float_dtype(like)
    return m if m.data_type() == dt else m.AsType(dt)


class PRelu(Operator):
    """x if x > 0 else slope * x, with slope (a Tensor) broadcast against x. Each side is
    selected, not multiplied by a 0/1 mask: relu(x) + min(x, 0) * slope made every x > 0 NaN
    where the slope was inf or NaN (0 * inf), though that slope is not used there."""

    def forward(self, x, slope):
        self.x, self.slope = x, slope
        self.pos = _float_mask(singa.GT(x, 0.0), x)
        self.rest = singa.Sub(1.0, self.pos)
        self.neg = _select(x, self.rest)
        return singa.Add(_select(x, self.pos), _select(_M(x, slope), self.rest))

    def backward(self, dy):
        dx = dslope = None
        if self.need(0):
            local = singa.Add(self.pos, _select(self.slope, self.rest))
            dx = reduce_to(_M(dy, local), self.x.shape())
        if self.need(1):
            dslope = reduce_to(_M(dy, self.neg), self.slope.shape())
        return dx, dslope


def prelu(x, slope):
    """x if x > 0 else slope * x, elementwise (slope broadcast)."""
    return PRelu()(x, slope)[0]


class SoftMax(Operator):
    """Softmax as Apache SINGA computes it: x is read as a matrix of prod(shape[:axis]) rows
    and prod(shape[axis:]) columns and each row is normalised (ONNX's Softmax before opset
    13). On a matrix with axis=1, or with the last axis, this is the softmax along that axis;
    on (N, C, H, W) with the default axis=1 it normalises each sample over C*H*W. For one
    inner axis alone (PyTorch's dim, ONNX 13's axis), transpose it to the end first.

    Called with (x, mask), the mask (broadcast to x; nonzero = takes part, PyTorch's attention
    convention) sets the other entries to -inf before normalising: they get probability 0 and
    no gradient, and a row with no entry taking part is NaN, as torch.softmax of
    x.masked_fill(~mask, -inf) gives."""

    def __init__(self, axis=1):
        super(SoftMax, self).__init__()
        self.axis = axis

    def forward(self, x, mask=None):
        self.axis = norm_axis(self.axis, x.nDim(), "softmax")
        self.shape = list(x.shape())
        self.fill = None
        if mask is not None:
            try:
                fits = np.broadcast_shapes(mask.shape(), x.shape()) == tuple(x.shape())
            except ValueError:
                fits = False
            if not fits:
                raise ShapeError("softmax: the mask %s does not broadcast to the input %s"
                                 % (mask.shape(), tuple(self.shape)))
            self.fill = singa.EQ(mask, 0.0)
            x = singa.MaskedFill(x, self.fill, -np.inf)
        rows = int(np.prod(self.shape[:self.axis], dtype=np.int64))
        cols = int(np.prod(self.shape[self.axis:], dtype=np.int64))
        self.y = singa.SoftMax(singa.Reshape(x, [rows, cols]), 1)  # (rows, cols)
        return singa.Reshape(self.y, self.shape)

    def backward(self, dy):
        dy2 = singa.Reshape(dy, list(self.y.shape()))
        dx = singa.Reshape(singa.SoftMaxBackward(dy2, self.y, 1), self.shape)
        if self.fill is None:
            return dx
        # masked entries get no gradient, even in a fully masked (NaN) row: masked_fill's rule
        return singa.MaskedFill(dx, self.fill, 0.0), None


def softmax(x, axis=1, mask=None):
    """Softmax of x over the axes from ``axis`` on, flattened (SINGA's; see SoftMax). ``mask``
    (a Tensor or array broadcast to x, nonzero = takes part) gives the other entries
    probability 0."""
    if mask is None:
        return SoftMax(axis)(x)[0]
    return SoftMax(axis)(x, as_mask(mask, x, "softmax"))[0]


class LogSoftMax(Operator):
    """x - log(sum(exp(x))) along ``axis``, computed stably."""

    def __init__(self, axis=1):
        super(LogSoftMax, self).__init__()
        self.axis = axis

    def forward(self, x):
        self.axis = norm_axis(self.axis, x.nDim(), "log_softmax")
        self.y = singa.LogSoftMax(x, self.axis)
        return self.y

    def backward(self, dy):
        total = singa.ReduceSum(dy, [self.axis], True)
        return singa.Sub(dy, _M(singa.Exp(self.y), total))


def log_softmax(x, axis=1):
    """Log of the softmax of x along ``axis``."""
    return LogSoftMax(axis)(x)[0]
