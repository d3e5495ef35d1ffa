"""Convolution, pooling and batch normalisation layers (NCHW)."""
import math

from .. import autograd
from .._args import as_float
from ..tensor import Tensor
from .base import Layer, graph_paused, settings
from ._util import (CheckValueError, check_dim, check_ndim, handle_class, make_handle,
                    padding_spec, pair, param, param_dtype, positive_int, same_padding,
                    shape_error)

__all__ = ["Conv2d", "SeparableConv2d", "BatchNorm2d", "Pooling2d", "MaxPool2d", "AvgPool2d",
           "MaxPool1d", "AvgPool1d"]

_PAD_MODES = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _out_size(size, k, s, p, what, layer):
    out = (size + 2 * p - k) // s + 1
    if out <= 0:
        raise shape_error(layer, "the %s kernel %d (stride %d, padding %d) does not fit an "
                          "input of size %d", what, k, s, p, size)
    return out


def _shown_padding(layer):
    """The padding repr shows: (h, w), or (top, bottom, left, right) when asymmetric."""
    (ph, pw), odd = layer.padding, layer.odd_padding
    if not any(odd):
        return (ph, pw)
    return (ph + odd[0], ph + odd[1], pw + odd[2], pw + odd[3])


class _Windowed(Layer):
    """Shared by convolution and pooling: kernel, stride, padding, pad_mode, and a core handle
    rebuilt whenever the input shape changes (the handle fixes N, C, H, W)."""

    def _set_geometry(self, kernel_size, stride, padding, pad_mode):
        name = type(self).__name__
        self.kernel_size = pair(kernel_size, name, "kernel_size")
        self.stride = self.kernel_size if stride is None else pair(stride, name, "stride")
        if min(self.kernel_size) <= 0 or min(self.stride) <= 0:
            raise CheckValueError("%s: kernel_size and stride must be positive, got %r and %r"
                             % (name, kernel_size, stride))
        if pad_mode not in _PAD_MODES:
            raise ValueError("%s: pad_mode must be one of %s, got %r"
                             % (name, ", ".join(_PAD_MODES), pad_mode))
        self.pad_mode = pad_mode
        if pad_mode == "VALID":
            padding = 0
        self.padding, self.odd_padding = padding_spec(0 if padding is None else padding, name)
        self._handle_shape = None

    def _geometry_for(self, x):
        if self.pad_mode in ("SAME_UPPER", "SAME_LOWER"):
            self.padding, self.odd_padding = same_padding(self.pad_mode, x.shape[2:],
                                                          self.kernel_size, self.stride)
        o = self.odd_padding
        h, w = x.shape[2] + o[0] + o[1], x.shape[3] + o[2] + o[3]
        _out_size(h, self.kernel_size[0], self.stride[0], self.padding[0], "height", self)
        _out_size(w, self.kernel_size[1], self.stride[1], self.padding[1], "width", self)
        return (x.shape[0], x.shape[1], h, w)

    def _padded_like(self, x, shape):
        """A tensor of the padded input's shape, for building a handle."""
        if tuple(shape) == tuple(x.shape):
            return x
        return Tensor(shape=shape, device=x.device)

    def _ensure_handle(self, x, build):
        """(Re)builds the handle when x's shape differs from the one it was built for."""
        if self._handle_shape == tuple(x.shape):
            return
        with graph_paused(x.device):
            shape = self._geometry_for(x)
            self.handle = build(self._padded_like(x, shape))
        self._handle_shape = tuple(x.shape)


class Conv2d(_Windowed):
    """2-d convolution over (N, C, H, W) inputs, optionally followed by ReLU.

    ``Conv2d(nb_kernels, kernel_size, stride=1, padding=0, ...)`` takes the input channels from
    the first input; the older ``Conv2d(in_channels, out_channels, kernel_size[, stride[,
    padding]])`` also checks them. padding is an int, (h, w), or (top, bottom, left, right);
    pad_mode SAME_UPPER / SAME_LOWER computes it from the input size. activation: "NOTSET" or
    "RELU". W is drawn from N(0, 2 / (C/group * kh * kw + nb_kernels)), b is 0.
    """

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, dilation=1,
                 group=1, bias=True, pad_mode="NOTSET", activation="NOTSET", **kwargs):
        super(Conv2d, self).__init__()
        self.in_channels = None
        if args:
            self.in_channels, nb_kernels, kernel_size = nb_kernels, kernel_size, args[0]
            positional = ("stride", "padding", "dilation", "group", "bias")
            if len(args) - 1 > len(positional):
                raise TypeError("Conv2d: too many positional arguments")
            extra = dict(zip(positional, args[1:]))
            stride = extra.get("stride", stride)
            padding = extra.get("padding", padding)
            dilation = extra.get("dilation", dilation)
            group = extra.get("group", group)
            bias = extra.get("bias", bias)
            self.in_channels = positive_int("Conv2d", "in_channels", self.in_channels)
        group = kwargs.pop("groups", group)
        self.inner_params = {"cudnn_prefer": "fastest", "workspace_MB_limit": 1024}
        for k, v in kwargs.items():
            if k not in self.inner_params:
                raise TypeError("Conv2d: unexpected keyword argument %r" % k)
            self.inner_params[k] = v
        nb_kernels = positive_int("Conv2d", "nb_kernels", nb_kernels)
        if not isinstance(group, int) or group < 1 or nb_kernels % group:
            raise CheckValueError("Conv2d: group must be a positive divisor of nb_kernels "
                                  "(%d), got %r" % (nb_kernels, group))
        if activation not in ("NOTSET", "RELU"):
            raise ValueError("Conv2d: activation must be 'NOTSET' or 'RELU', got %r"
                             % (activation,))
        self.dilation = pair(dilation, "Conv2d", "dilation")
        self.nb_kernels = nb_kernels
        self.group = group
        self.bias = bool(bias)
        self.activation = activation
        self._set_geometry(kernel_size, stride, padding, pad_mode)

    def extra_repr(self):
        extra = {k: v for k, v, default in (
            ("dilation", self.dilation, (1, 1)), ("group", self.group, 1),
            ("bias", self.bias, True), ("pad_mode", self.pad_mode, "NOTSET"),
            ("activation", self.activation, "NOTSET")) if v != default}
        return settings(self.in_channels, self.nb_kernels, kernel_size=self.kernel_size,
                        stride=self.stride, padding=_shown_padding(self), **extra)

    def _check(self, x):
        check_ndim(self, x, 4, "(N, C, H, W)")
        check_dim(self, x, 1, self.in_channels, "channels")
        if x.shape[1] % self.group:
            raise shape_error(self, "the input channels (%d) must be divisible by group (%d)",
                              x.shape[1], self.group)

    def initialize(self, x):
        self._check(x)
        self.in_channels = x.shape[1]
        kh, kw = self.kernel_size
        w_shape = (self.nb_kernels, self.in_channels // self.group, kh, kw)
        std = math.sqrt(2.0 / (w_shape[1] * kh * kw + self.nb_kernels))
        self.W = param(w_shape, x, lambda t: t.gaussian(0.0, std))
        if self.bias:
            self.b = param((self.nb_kernels,), x, lambda t: t.set_value(0.0))
        else:
            self.b = None

    def _build(self, xp):
        # dilation by keyword: SINGA's CudnnConvHandle takes its workspace limit there
        return make_handle("ConvHandle", "CudnnConvHandle", xp.device, xp.data,
                           self.kernel_size, self.stride, self.padding, self.in_channels,
                           self.nb_kernels, self.bias, self.group, dilation=self.dilation)

    def forward(self, x):
        self._check(x)
        self.device_check(x, self.W, self.b)
        self.dtype_check(x, self.W, self.b)  # SINGA 3.3: parameters follow the input's dtype
        self._ensure_handle(x, self._build)
        # activation="RELU" fuses the ReLU into the convolution's kernel (same numbers).
        return autograd.conv2d(self.handle, x, self.W, self.b, self.odd_padding,
                               relu=self.activation == "RELU")


class SeparableConv2d(Layer):
    """A depthwise convolution (one kernel per input channel) followed by a 1x1 convolution to
    nb_kernels channels. Sub-layers: depthwise_conv, point_conv."""

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, bias=False):
        super(SeparableConv2d, self).__init__()
        self.in_channels = None
        if args:
            self.in_channels, nb_kernels, kernel_size = nb_kernels, kernel_size, args[0]
            if len(args) > 1:
                stride = args[1]
            if len(args) > 2:
                padding = args[2]
            self.in_channels = positive_int("SeparableConv2d", "in_channels", self.in_channels)
        self.nb_kernels = positive_int("SeparableConv2d", "nb_kernels", nb_kernels)
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.bias = bias

    def extra_repr(self):
        return settings(self.in_channels, self.nb_kernels, kernel_size=self.kernel_size,
                        stride=self.stride, padding=self.padding, bias=self.bias)

    def initialize(self, x):
        check_ndim(self, x, 4, "(N, C, H, W)")
        check_dim(self, x, 1, self.in_channels, "channels")
        self.in_channels = x.shape[1]
        self.depthwise_conv = Conv2d(self.in_channels, self.kernel_size, stride=self.stride,
                                     padding=self.padding, group=self.in_channels,
                                     bias=self.bias)
        self.point_conv = Conv2d(self.nb_kernels, 1, bias=self.bias)

    def forward(self, x):
        return self.point_conv(self.depthwise_conv(x))


class _BatchNormSettings(object):
    """What autograd.batchnorm_2d reads from a batch-norm handle, for builds whose core needs no
    handle: ``factor`` (Apache SINGA's momentum: the weight of the running value) and eps."""

    def __init__(self, factor, eps=1e-5):
        self.factor = factor
        self.eps = eps


class BatchNorm2d(Layer):
    """Batch normalisation over the channels (axis 1) of (N, C, H, W) inputs.

    Parameters: scale (1) and bias (0); states: running_mean (0) and running_var (1), which
    training updates as running = momentum * running + (1 - momentum) * batch statistic
    (Apache SINGA's momentum).
    ``BatchNorm2d(channels)`` also checks the channels of the first input.
    """

    def __init__(self, *args, momentum=0.9):
        super(BatchNorm2d, self).__init__()
        if len(args) > 2:
            raise TypeError("BatchNorm2d: expected at most (channels, momentum) positionally")
        self.channels = positive_int("BatchNorm2d", "channels", args[0]) \
            if args and args[0] is not None else None
        if len(args) > 1:
            momentum = args[1]
        momentum = as_float(momentum, "momentum", "BatchNorm2d")
        if not 0.0 <= momentum <= 1.0:
            raise CheckValueError("BatchNorm2d: momentum must be within [0, 1], got %r"
                                  % (momentum,))
        self.momentum = momentum
        self._handle_shape = None

    def extra_repr(self):
        return settings(self.channels, momentum=self.momentum)

    def initialize(self, x):
        check_ndim(self, x, (2, 4), "(N, C, H, W)")
        check_dim(self, x, 1, self.channels, "channels")
        self.channels = x.shape[1]
        shape = (self.channels,)
        self.scale = param(shape, x, lambda t: t.set_value(1.0))
        self.bias = param(shape, x, lambda t: t.set_value(0.0))
        for name, value in (("running_mean", 0.0), ("running_var", 1.0)):
            state = Tensor(shape, x.device, requires_grad=False)
            state.set_value(value)
            self._set_state(name, state.to_type(param_dtype(x)))

    def forward(self, x):
        check_ndim(self, x, (2, 4), "(N, C, H, W)")
        check_dim(self, x, 1, self.channels, "channels")
        self.device_check(x, self.scale, self.bias, self.running_mean, self.running_var)
        self.dtype_check(x, self.scale, self.bias, self.running_mean, self.running_var)
        if self._handle_shape != tuple(x.shape):
            cls = handle_class("BatchNormHandle", "CudnnBatchNormHandle", x.device)
            with graph_paused(x.device):
                self.handle = _BatchNormSettings(self.momentum) if cls is None else cls(
                    self.momentum, x.data)
            self._handle_shape = tuple(x.shape)
        return autograd.batchnorm_2d(self.handle, x, self.scale, self.bias, self.running_mean,
                                     self.running_var)


class Pooling2d(_Windowed):
    """Max (is_max) or average pooling over (N, C, H, W) inputs; stride defaults to the kernel.
    Average pooling divides by the number of non-padding elements in each window."""

    def __init__(self, kernel_size, stride=None, padding=0, is_max=True, pad_mode="NOTSET"):
        super(Pooling2d, self).__init__()
        self.is_max = bool(is_max)
        self._set_geometry(kernel_size, stride, padding, pad_mode)
        if self.padding[0] >= self.kernel_size[0] or self.padding[1] >= self.kernel_size[1]:
            raise ValueError("%s: padding %r must be smaller than the kernel %r"
                             % (type(self).__name__, self.padding, self.kernel_size))

    def extra_repr(self):
        last = type(self) in (MaxPool1d, AvgPool1d)  # along the last axis only
        geometry = {k: v[-1] if last else v for k, v in (
            ("kernel_size", self.kernel_size), ("stride", self.stride),
            ("padding", _shown_padding(self)))}
        if self.pad_mode != "NOTSET":
            geometry["pad_mode"] = self.pad_mode
        if type(self) is Pooling2d:
            geometry["is_max"] = self.is_max
        return settings(**geometry)

    def _build(self, xp):
        return make_handle("PoolingHandle", "CudnnPoolingHandle", xp.device, xp.data,
                           self.kernel_size, self.stride, self.padding, self.is_max)

    def initialize(self, x):
        check_ndim(self, x, 4, "(N, C, H, W)")
        self._ensure_handle(x, self._build)

    def forward(self, x):
        check_ndim(self, x, 4, "(N, C, H, W)")
        self._ensure_handle(x, self._build)
        return autograd.pooling_2d(self.handle, x, self.odd_padding)


class MaxPool2d(Pooling2d):
    """Max pooling over (N, C, H, W) inputs: the largest value of each kernel_size window,
    moving by stride (the kernel by default); padding is int, (h, w) or (top, bottom, left,
    right); pad_mode SAME_UPPER / SAME_LOWER computes it. NaN in a window gives NaN."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super(MaxPool2d, self).__init__(kernel_size, stride, padding, True, pad_mode)


class AvgPool2d(Pooling2d):
    """Average pooling over (N, C, H, W) inputs: the mean of each kernel_size window, moving by
    stride (the kernel by default), dividing by the number of non-padding elements."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super(AvgPool2d, self).__init__(kernel_size, stride, padding, False, pad_mode)


class MaxPool1d(Pooling2d):
    """Max pooling along the last axis of (N, C, 1, L) inputs."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        stride = kernel_size if stride is None else stride
        super(MaxPool1d, self).__init__((1, kernel_size), (1, stride), (0, padding), True,
                                        pad_mode)


class AvgPool1d(Pooling2d):
    """Average pooling along the last axis of (N, C, 1, L) inputs."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        stride = kernel_size if stride is None else stride
        super(AvgPool1d, self).__init__((1, kernel_size), (1, stride), (0, padding), False,
                                        pad_mode)

