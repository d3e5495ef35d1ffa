"""Initial values for parameter tensors (Apache SINGA 3.x's singa.initializer).

Example::

    from singa import initializer, tensor
    w = tensor.Tensor((784, 100))
    initializer.he_normal(w)            # in place, drawn from the device's generator
    initializer.glorot_uniform(w)       # a.k.a. xavier_uniform

Every function fills its tensor in place through the core's random operations (seed them with
``dev.SetRandSeed``). Fans follow Keras' rules: for a 2-d (in, out) matrix fan_in = shape[0],
fan_out = shape[1]; for a convolution kernel (out_channels, in_channels, kh, kw) fan_in =
in_channels * kh * kw and fan_out = out_channels * kh * kw; otherwise both are sqrt(size).
"""
import math

import numpy as np

from . import tensor as _tensor
from ._args import as_float as _as_float, as_shape as _as_shape
from .errors import CheckValueError
from .tensor import Tensor

__all__ = ["he_uniform", "he_normal", "glorot_uniform", "glorot_normal", "xavier_uniform",
           "xavier_normal", "lecun_uniform", "lecun_normal", "uniform", "gaussian", "constant",
           "zeros", "ones", "eye", "orthogonal", "xavier", "glorot", "msra", "compute_fans",
           "variance_scaling"]


def _check(t, fn):
    if not isinstance(t, Tensor):
        raise TypeError("initializer.%s: expected a singa Tensor, got %s"
                        % (fn, type(t).__name__))
    if t.dtype != _tensor.float32:
        raise TypeError("initializer.%s: expected a float32 tensor, got dtype %s"
                        % (fn, t.dtype))


def compute_fans(shape, data_format="channels_first"):
    """(fan_in, fan_out) of a weight of ``shape`` (see the module docstring)."""
    shape = tuple(_as_shape(shape, "shape", "compute_fans", allow_int=False))
    if len(shape) == 2:
        return shape[0], shape[1]
    if len(shape) in (3, 4, 5):
        if data_format == "channels_first":
            field = int(np.prod(shape[2:]))
            return shape[1] * field, shape[0] * field
        if data_format == "channels_last":
            field = int(np.prod(shape[:-2]))
            return shape[-2] * field, shape[-1] * field
        raise ValueError("compute_fans: data_format must be 'channels_first' or "
                         "'channels_last', got %r" % (data_format,))
    if any(d < 0 for d in shape):  # sqrt of a negative count below: math domain error
        raise ValueError("compute_fans: shape %s has a negative size" % (shape,))
    side = math.sqrt(int(np.prod(shape))) if shape else 1.0
    return side, side


def variance_scaling(t, scale=1.0, mode="fan_in", distribution="normal"):
    """Samples with variance scale / n, n the fan_in, fan_out, or their average (fan_avg):
    N(0, scale / n) for 'normal', U(-sqrt(3 scale / n), sqrt(3 scale / n)) for 'uniform'."""
    _check(t, "variance_scaling")
    if not _as_float(scale, "scale", "variance_scaling") > 0:
        raise ValueError("variance_scaling: scale must be positive, got %r" % (scale,))
    mode, distribution = str(mode).lower(), str(distribution).lower()
    fan_in, fan_out = compute_fans(t.shape)
    fans = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}
    if mode not in fans:
        raise ValueError("variance_scaling: mode must be fan_in, fan_out or fan_avg, got %r"
                         % (mode,))
    var = scale / max(1.0, float(fans[mode]))
    if distribution == "normal":
        t.gaussian(0.0, math.sqrt(var))
    elif distribution == "uniform":
        limit = math.sqrt(3.0 * var)
        t.uniform(-limit, limit)
    else:
        raise ValueError("variance_scaling: distribution must be 'normal' or 'uniform', got %r"
                         % (distribution,))
    return t


def he_uniform(t):
    """U(-sqrt(6 / fan_in), sqrt(6 / fan_in)) (He et al. 2015, for ReLU networks)."""
    return variance_scaling(t, 2.0, "fan_in", "uniform")


def he_normal(t):
    """N(0, 2 / fan_in) (He et al. 2015)."""
    return variance_scaling(t, 2.0, "fan_in", "normal")


def glorot_uniform(t):
    """U(-sqrt(6 / (fan_in + fan_out)), +sqrt(...)) (Glorot and Bengio 2010)."""
    return variance_scaling(t, 1.0, "fan_avg", "uniform")


def glorot_normal(t):
    """N(0, 2 / (fan_in + fan_out)) (Glorot and Bengio 2010)."""
    return variance_scaling(t, 1.0, "fan_avg", "normal")


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal


def lecun_uniform(t):
    """U(-sqrt(3 / fan_in), sqrt(3 / fan_in)) (LeCun et al. 1998)."""
    return variance_scaling(t, 1.0, "fan_in", "uniform")


def lecun_normal(t):
    """N(0, 1 / fan_in) (LeCun et al. 1998)."""
    return variance_scaling(t, 1.0, "fan_in", "normal")


def _fan_scale(fn, fan_in, fan_out):
    fan_in, fan_out = _as_float(fan_in, "fan_in", fn), _as_float(fan_out, "fan_out", fn)
    if fan_in < 0 or fan_out < 0 or fan_in + fan_out <= 0:
        raise CheckValueError("initializer.%s: give fan_in and/or fan_out (positive), got %r "
                              "and %r" % (fn, fan_in, fan_out))
    avg = 1 if fan_in * fan_out == 0 else 2
    return avg / float(fan_in + fan_out)


def uniform(t, fan_in=0, fan_out=0):
    """U(-sqrt(3 / n), sqrt(3 / n)), n = the average of the given fans (or the one given).
    Apache SINGA's older helper."""
    _check(t, "uniform")
    x = math.sqrt(3.0 * _fan_scale("uniform", fan_in, fan_out))
    t.uniform(-x, x)
    return t


def gaussian(t, fan_in=0, fan_out=0):
    """N(0, 2 / n), n = the average of the given fans (or the one given). Apache SINGA's older
    helper."""
    _check(t, "gaussian")
    t.gaussian(0.0, math.sqrt(2.0 * _fan_scale("gaussian", fan_in, fan_out)))
    return t


def constant(t, value=0.0):
    """Every element ``value``."""
    _check(t, "constant")
    t.set_value(_as_float(value, "value", "constant"))
    return t


def zeros(t):
    """Sets every element of Tensor ``t`` to 0 and returns ``t``."""
    return constant(t, 0.0)


def ones(t):
    """Sets every element of Tensor ``t`` to 1 and returns ``t``."""
    return constant(t, 1.0)


def eye(t):
    """Ones on the diagonal of a matrix, zeros elsewhere (written from the host: not for use
    while a graph is being recorded)."""
    _check(t, "eye")
    if len(t.shape) != 2:
        raise ValueError("initializer.eye: expected a matrix, got shape %s" % (tuple(t.shape),))
    t.copy_from_numpy(np.eye(t.shape[0], t.shape[1], dtype=np.float32))
    return t


def orthogonal(t, gain=1.0):
    """A random matrix with orthonormal rows or columns, times ``gain`` (Saxe et al. 2014).
    The Gaussian draw comes from the device's generator; the QR factorisation runs on the host
    (not for use while a graph is being recorded)."""
    _check(t, "orthogonal")
    gain = _as_float(gain, "gain", "orthogonal")
    if len(t.shape) != 2:
        raise ValueError("initializer.orthogonal: expected a matrix, got shape %s"
                         % (tuple(t.shape),))
    rows, cols = t.shape
    draw = Tensor((max(rows, cols), min(rows, cols)), t.device)
    a = _tensor.to_numpy(draw.gaussian(0.0, 1.0)).astype(np.float64)
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))  # a uniform distribution over orthogonal matrices
    if rows < cols:
        q = q.T
    t.copy_from_numpy((gain * q).astype(np.float32))
    return t


def _rows_cols(t, fn, axes=2):
    """The sizes of t's first ``axes`` axes, each at least 1 (an empty tensor draws nothing;
    SINGA's formulas divided by zero there)."""
    _check(t, fn)
    if len(t.shape) < axes:
        raise CheckValueError("initializer.%s: expected a tensor of %d or more axes, got shape "
                              "%s" % (fn, axes, tuple(t.shape)))
    return tuple(max(1, d) for d in t.shape[:axes])


def xavier(t):
    """U(-sqrt(6 / (rows + cols)), +sqrt(...)) for a matrix (deprecated: glorot_uniform)."""
    rows, cols = _rows_cols(t, "xavier")
    scale = math.sqrt(6.0 / (rows + cols))
    t.uniform(-scale, scale)
    return t


def glorot(t):
    """N(0, 2 / (rows + cols)) for a matrix (deprecated: glorot_normal)."""
    rows, cols = _rows_cols(t, "glorot")
    t.gaussian(0.0, math.sqrt(2.0 / (rows + cols)))
    return t


def msra(t):
    """N(0, 2 / rows) (deprecated: he_normal)."""
    rows, = _rows_cols(t, "msra", 1)
    t.gaussian(0.0, math.sqrt(2.0 / rows))
    return t
