# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_nn: wrappers of singa/ops/nn.h, the neural-network kernels.
#
#   h = ConvHandle(x, (3, 3), (1, 1), (1, 1), 3, 16, True)    # x: a Tensor or its shape
#   y = Conv2dForward(x, W, b, h)                             # b may be None; relu=True fuses
#                                                             # max(0, y) (also the BN forwards)
#   dx, dW, db = Conv2dBackwardX(dy, W, h), Conv2dBackwardW(dy, x, h), Conv2dBackwardB(dy, h)
#   p = PoolingHandle(y, (2, 2), (2, 2), (0, 0), True)
#   bn = BatchNormHandle(0.9, x)                              # Apache SINGA's (momentum, input)
#   y, mean, var = BatchNormForwardTraining(x, scale, bias, running_mean, running_var, 0.1, 1e-5)
#
# Names and argument orders follow Apache SINGA's singa_wrap where it had the op (ConvHandle,
# PoolingHandle, BatchNormHandle, CrossEntropyFwd, SoftmaxCrossEntropyBwd); see nn.h for the
# semantics. SINGA's cuDNN handles (CudnnConvHandle, CudnnPoolingHandle, CudnnBatchNormHandle)
# are subclasses that take the same arguments (CudnnConvHandle also SINGA's workspace limit
# and algorithm preference, checked and ignored): our handles carry only the geometry and the
# op's front picks the device's kernel, so every name works on every device.
#
# Bad arguments raise ShapeError (the input's shape, a kernel larger than the padded input)
# or ArgumentError (a size of 0, a bad preference), TypeError for a value of the wrong type.
import numpy as np
from libcpp cimport bool
from libcpp.vector cimport vector

from csinga cimport *
from cnn cimport *
from singa._wrap_tensor cimport Tensor, wrap, as_shape, opt_tensor

from singa._wrap_errors import ArgumentError, ShapeError

register_error_classes()


_PY_BOOLS = (type(True), np.bool_)  # `bool` here is C++'s (cimported from libcpp)


cdef inline bint is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, _PY_BOOLS)


cdef vector[size_t] as_sizes(str op, str what, v) except *:
    """Non-negative ints from a sequence of them (a TypeError / ArgumentError naming op)."""
    cdef vector[size_t] out
    try:
        v = tuple(v)
    except TypeError:
        raise TypeError("%s: %s must be an int or a sequence of ints, got %r"
                        % (op, what, v)) from None
    for d in v:
        if not is_int(d):
            raise TypeError("%s: %s must hold ints, got %r" % (op, what, v))
        if d < 0:
            raise ArgumentError("%s: %s must be non-negative, got %r" % (op, what, v))
        out.push_back(<size_t>d)
    return out


cdef vector[size_t] as_pair(str op, str what, v) except *:
    """(h, w) from an int (used for both) or a pair of non-negative ints."""
    if is_int(v):
        v = (v, v)
    cdef vector[size_t] out = as_sizes(op, what, v)
    if out.size() != 2:
        raise ArgumentError("%s: %s must be an int or a pair (h, w), got %r" % (op, what, v))
    return out


cdef vector[size_t] as_input_shape(str op, x) except *:
    """The shape of x: a core Tensor, a Python Tensor (its .data) or a shape."""
    d = getattr(x, "data", None)  # a singa.tensor.Tensor
    if isinstance(d, Tensor):
        x = d
    if isinstance(x, Tensor):
        return (<Tensor>x).c.shape()
    if is_int(x):
        x = (x,)
    try:
        return as_sizes(op, "the input shape", x)
    except ArgumentError as e:
        raise ShapeError(str(e)) from None


cdef size_t as_count(str op, str what, v) except? 0:
    if not is_int(v):
        raise TypeError("%s: %s must be an int, got %r" % (op, what, v))
    if v < 0:
        raise ArgumentError("%s: %s must be >= 0, got %d" % (op, what, v))
    return <size_t>v


cdef class _Window2d:
    """What ConvHandle and PoolingHandle share (singa::Window2d): the input (batchsize,
    channels, height, width) and the window sliding over it (kernel, stride, padding)."""
    cdef CWindow2d* w  # the subclass's handle, set by its __cinit__

    property batchsize:
        def __get__(self): return self.w.batchsize
    property channels:
        def __get__(self): return self.w.channels
    property height:
        def __get__(self): return self.w.height
    property width:
        def __get__(self): return self.w.width
    property kernel_h:
        def __get__(self): return self.w.kernel_h
    property kernel_w:
        def __get__(self): return self.w.kernel_w
    property stride_h:
        def __get__(self): return self.w.stride_h
    property stride_w:
        def __get__(self): return self.w.stride_w
    property pad_h:
        def __get__(self): return self.w.pad_h
    property pad_w:
        def __get__(self): return self.w.pad_w

    def _repr(self, rest):
        return ("%s(input=(%d, %d, %d, %d), kernel=(%d, %d), stride=(%d, %d), padding=(%d, %d), "
                "%s)" % (type(self).__name__, self.w.batchsize, self.w.channels, self.w.height,
                         self.w.width, self.w.kernel_h, self.w.kernel_w, self.w.stride_h,
                         self.w.stride_w, self.w.pad_h, self.w.pad_w, rest))


cdef class ConvHandle(_Window2d):
    """The geometry of a 2-d convolution (singa::ConvHandle), for an input of x's shape.

    ConvHandle(x, kernel_size, stride, padding, in_channels, out_channels, bias, groups=1,
    dilation=(1, 1)); x is a Tensor or an (N, C, H, W) shape, the sizes ints or (h, w) pairs.
    The batch size may change between calls; C, H and W may not."""
    cdef CConvHandle c

    def __cinit__(self, *args, **kwargs):
        self.w = &self.c

    def __init__(self, x, kernel_size, stride, padding, in_channels, out_channels, bias,
                 groups=1, dilation=(1, 1)):
        op = "ConvHandle"
        self.c = CConvHandle(as_input_shape(op, x), as_pair(op, "kernel_size", kernel_size),
                             as_pair(op, "stride", stride), as_pair(op, "padding", padding),
                             as_count(op, "in_channels", in_channels),
                             as_count(op, "out_channels", out_channels), True if bias else False,
                             as_count(op, "groups", groups), as_pair(op, "dilation", dilation))

    property in_channels:
        def __get__(self): return self.c.channels
    property dilation_h:
        def __get__(self): return self.c.dilation_h
    property dilation_w:
        def __get__(self): return self.c.dilation_w
    property num_filters:
        def __get__(self): return self.c.num_filters
    property out_channels:
        def __get__(self): return self.c.num_filters
    property group:
        def __get__(self): return self.c.group
    property bias_term:
        def __get__(self): return self.c.bias_term
    property conv_height:
        def __get__(self): return self.c.conv_height
    property conv_width:
        def __get__(self): return self.c.conv_width

    def output_shape(self, n=None):
        """(N, out_channels, conv_height, conv_width); N defaults to the handle's batch size."""
        return tuple(self.c.OutputShape(self.c.batchsize if n is None else
                                        as_count("output_shape", "n", n)))

    def weight_shape(self):
        """(out_channels, in_channels / groups, kernel_h, kernel_w)."""
        return tuple(self.c.WeightShape())

    def __repr__(self):
        return self._repr("dilation=(%d, %d), out_channels=%d, groups=%d, bias=%s"
                          % (self.c.dilation_h, self.c.dilation_w, self.c.num_filters,
                             self.c.group, self.c.bias_term))


# The algorithm preferences Apache SINGA's CudnnConvHandle accepted.
CONV_PREFERENCES = ("fastest", "limited_workspace", "no_workspace")


cdef class CudnnConvHandle(ConvHandle):
    """Apache SINGA's cuDNN convolution handle: ConvHandle's geometry, built with SINGA's
    arguments (x, kernel_size, stride, padding, in_channels, out_channels, bias, groups=1,
    workspace_byte_limit=1 GiB, prefer="fastest"). The workspace limit (an int >= 0) and the
    preference (one of CONV_PREFERENCES) are checked and otherwise ignored: the op's kernel
    picks its own algorithm on every device. ``dilation`` (ours) is keyword-only here."""
    cdef readonly size_t workspace_byte_limit
    cdef readonly str prefer

    def __init__(self, x, kernel_size, stride, padding, in_channels, out_channels, bias,
                 groups=1, workspace_byte_limit=1024 * 1024 * 1024, prefer="fastest", *,
                 dilation=(1, 1)):
        op = "CudnnConvHandle"
        self.workspace_byte_limit = as_count(op, "workspace_byte_limit", workspace_byte_limit)
        if not isinstance(prefer, str):
            raise TypeError("%s: prefer must be a str, one of %s, got %r"
                            % (op, CONV_PREFERENCES, prefer))
        if prefer.lower() not in CONV_PREFERENCES:
            raise ArgumentError("%s: prefer must be one of %s, got %r"
                                % (op, CONV_PREFERENCES, prefer))
        self.prefer = prefer.lower()
        ConvHandle.__init__(self, x, kernel_size, stride, padding, in_channels, out_channels,
                            bias, groups, dilation)


cdef class PoolingHandle(_Window2d):
    """The geometry of 2-d max / average pooling (singa::PoolingHandle).

    PoolingHandle(x, kernel_size, stride, padding, is_max=True, count_include_pad=False)."""
    cdef CPoolingHandle c

    def __cinit__(self, *args, **kwargs):
        self.w = &self.c

    def __init__(self, x, kernel_size, stride, padding, is_max=True, count_include_pad=False):
        op = "PoolingHandle"
        self.c = CPoolingHandle(as_input_shape(op, x), as_pair(op, "kernel_size", kernel_size),
                                as_pair(op, "stride", stride), as_pair(op, "padding", padding),
                                True if is_max else False,
                                True if count_include_pad else False)

    property is_max_pooling:
        def __get__(self): return self.c.is_max_pooling
    property count_include_pad:
        def __get__(self): return self.c.count_include_pad
    property pooled_height:
        def __get__(self): return self.c.pooled_height
    property pooled_width:
        def __get__(self): return self.c.pooled_width

    def output_shape(self, n=None):
        """(N, C, pooled_height, pooled_width); N defaults to the handle's batch size."""
        return tuple(self.c.OutputShape(self.c.batchsize if n is None else
                                        as_count("output_shape", "n", n)))

    def __repr__(self):
        return self._repr("max" if self.c.is_max_pooling else
                          ("avg, count_include_pad" if self.c.count_include_pad else "avg"))


cdef class CudnnPoolingHandle(PoolingHandle):
    """Apache SINGA's cuDNN pooling handle: PoolingHandle, same arguments."""


class BatchNormHandle(object):
    """The settings of a batch normalisation: ``factor``, the weight of the old running
    statistics (Apache SINGA's momentum: running = factor * running + (1 - factor) * batch),
    and ``eps``; and the input's geometry (batchsize, channels, height, width).

    BatchNormHandle(momentum, x) as Apache SINGA's singa_wrap, or BatchNormHandle(x,
    momentum=0.9, eps=1e-5); x is a Tensor (core or Python) or a shape (N, C, ...)."""

    def __init__(self, x, momentum=0.9, eps=1e-5):
        op = type(self).__name__
        if isinstance(x, (float, int, np.floating, np.integer)) and \
                not isinstance(momentum, (float, int, np.floating, np.integer)):
            x, momentum = momentum, x  # SINGA's order
        self.shape = tuple(as_input_shape(op, x))
        if len(self.shape) < 2:
            raise ShapeError("%s: expected an input (N, C, ...), got shape %s"
                             % (op, self.shape))
        for what, v in (("momentum", momentum), ("eps", eps)):
            if isinstance(v, _PY_BOOLS) or not isinstance(v, (float, int, np.floating,
                                                                      np.integer)):
                raise TypeError("%s: %s must be a real number, got %r" % (op, what, v))
        self.factor, self.eps = float(momentum), float(eps)
        if not 0.0 <= self.factor <= 1.0:
            raise ArgumentError("%s: momentum must be within [0, 1], got %r" % (op, momentum))
        if not self.eps >= 0.0:
            raise ArgumentError("%s: eps must be >= 0, got %r" % (op, eps))
        self.batchsize, self.channels = self.shape[:2]
        self.height = self.shape[2] if len(self.shape) > 2 else 1
        self.width = self.shape[3] if len(self.shape) > 3 else 1
        self.is_2d = len(self.shape) == 2

    def __repr__(self):
        return "%s(momentum=%g, input=%s, eps=%g)" % (type(self).__name__, self.factor,
                                                      self.shape, self.eps)


class CudnnBatchNormHandle(BatchNormHandle):
    """Apache SINGA's cuDNN batch-norm handle: BatchNormHandle, same arguments."""


# ---- losses --------------------------------------------------------------------------------
def SoftmaxCrossEntropyForward(Tensor logits not None, Tensor target not None):
    """Per-sample loss (N,) of softmax(logits) against labels (N,) / (N, 1) or a (N, C) matrix."""
    return wrap(c_SoftmaxCrossEntropyForward(logits.c, target.c))

def SoftmaxCrossEntropyBackward(Tensor logits not None, Tensor target not None):
    """softmax(logits) - onehot(target), not divided by N."""
    return wrap(c_SoftmaxCrossEntropyBackward(logits.c, target.c))

def CrossEntropyFwd(Tensor p not None, Tensor t not None):
    """Per-sample -log(p[label]) (or -sum t log p), p clamped away from 0."""
    return wrap(c_CrossEntropyFwd(p.c, t.c))

def SoftmaxCrossEntropyBwd(Tensor p not None, Tensor t not None):
    """p - onehot(t) (or p - t)."""
    return wrap(c_SoftmaxCrossEntropyBwd(p.c, t.c))


# ---- index ops -----------------------------------------------------------------------------
def IndexSelect(Tensor x not None, int axis, Tensor indices not None):
    """numpy.take(x, indices, axis): indices int32 (or float32 whole numbers), negatives wrap."""
    return wrap(c_IndexSelect(x.c, axis, indices.c))

def IndexAdd(Tensor dy not None, int axis, Tensor indices not None, x_shape):
    """The backward of IndexSelect: zeros of x_shape with dy's slices added at the indices."""
    return wrap(c_IndexAdd(dy.c, axis, indices.c, as_shape("IndexAdd", x_shape)))

# The op schema's NN rows (schema/nn.py, generated): the wrappers of convolution, pooling,
# batch norm and softmax, and NN_OPS; after the handles above, which they use.
include "nn_ops.pxi"
