"""Layers with a weight matrix: Linear, Gemm, Embedding."""
import math
import warnings

from .. import autograd
from ..tensor import Tensor
from .base import Layer, settings
from ._util import check_dim, check_ndim, check_tensor, param, positive_int, shape_error

__all__ = ["Linear", "Gemm", "Embedding"]


class Linear(Layer):
    """y = x W + b, for x of shape (batch, in_features).

    ``Linear(out_features)`` takes in_features from the first input; ``Linear(in_features,
    out_features)`` (the older form) also checks it. W is drawn from N(0, 2 / (in + out)), b is 0.
    """

    def __init__(self, out_features, *args, bias=True, **kwargs):
        super(Linear, self).__init__()
        if kwargs:  # SINGA accepts and ignores them; we say so
            warnings.warn("Linear: ignoring unknown keyword arguments %s" % ", ".join(kwargs),
                          RuntimeWarning, stacklevel=2)
        self.in_features = None
        self.out_features = out_features
        if len(args) > 0:
            self.in_features, self.out_features = out_features, args[0]
        if len(args) > 1:
            bias = args[1]
        if len(args) > 2:
            raise TypeError("Linear: at most (in_features, out_features, bias) positionally")
        for what in ("in_features", "out_features"):
            if getattr(self, what) is not None:
                setattr(self, what, positive_int("Linear", what, getattr(self, what)))
        self.bias = bool(bias)

    def extra_repr(self):
        return settings(self.in_features, self.out_features, bias=self.bias)

    def initialize(self, x):
        check_ndim(self, x, 2, "(batch, features)")
        check_dim(self, x, 1, self.in_features, "features")
        self.in_features = x.shape[1]
        std = math.sqrt(2.0 / (self.in_features + self.out_features))
        self.W = param((self.in_features, self.out_features), x, lambda t: t.gaussian(0.0, std))
        if self.bias:
            self.b = param((self.out_features,), x, lambda t: t.set_value(0.0))
        else:
            self.b = None

    def forward(self, x):
        check_ndim(self, x, 2, "(batch, features)")
        check_dim(self, x, 1, self.W.shape[0], "features")
        self.device_check(x, self.W, self.b)
        self.dtype_check(x, self.W, self.b)  # SINGA 3.3: parameters follow the input's dtype
        y = autograd.matmul(x, self.W)
        if self.b is not None:
            y = autograd.add_bias(y, self.b, axis=0)
        return y


class Gemm(Layer):
    """y = alpha * op(x) op(W) + beta * b, op transposing when transA / transB (ONNX Gemm).
    W has shape (nb_kernels, in) when transB (the default), else (in, nb_kernels)."""

    def __init__(self, nb_kernels, alpha=1.0, beta=1.0, transA=False, transB=True, bias=True,
                 bias_shape=None):
        super(Gemm, self).__init__()
        self.nb_kernels = positive_int("Gemm", "nb_kernels", nb_kernels)
        self.alpha = alpha
        self.beta = beta
        self.transA = 1 if transA else 0
        self.transB = 1 if transB else 0
        self.bias = bias
        self.bias_shape = bias_shape

    def extra_repr(self):
        return settings(self.nb_kernels, alpha=self.alpha, beta=self.beta, transA=self.transA,
                        transB=self.transB, bias=self.bias)

    def _in_features(self, x):
        return x.shape[0] if self.transA else x.shape[1]

    def initialize(self, x):
        check_ndim(self, x, 2, "matrix")
        self.in_features = self._in_features(x)
        if self.transB:
            w_shape = (self.nb_kernels, self.in_features)
        else:
            w_shape = (self.in_features, self.nb_kernels)
        std = math.sqrt(2.0 / (self.in_features + self.nb_kernels))
        self.W = param(w_shape, x, lambda t: t.gaussian(0.0, std))
        if self.bias:
            self.b = param(tuple(self.bias_shape or (1, self.nb_kernels)), x,
                           lambda t: t.set_value(0.0))
        else:
            self.b = None

    def forward(self, x):
        check_ndim(self, x, 2, "matrix")
        expected = self.W.shape[1] if self.transB else self.W.shape[0]
        if self._in_features(x) != expected:
            raise shape_error(self, "expected input with %d features, got %d (input shape %s, "
                              "transA=%d)", expected, self._in_features(x), tuple(x.shape),
                              self.transA)
        self.device_check(x, self.W, self.b)
        self.dtype_check(x, self.W, self.b)
        return autograd.gemm(x, self.W, self.b, self.alpha, self.beta, self.transA,
                             self.transB)


class Embedding(Layer):
    """Looks up rows of a (input_dim, output_dim) table W for integer indices x: the output has
    shape x.shape + (output_dim,). W is N(0, 1) ('gaussian') or U(-1, 1) ('uniform')."""

    def __init__(self, input_dim, output_dim, initializer="gaussian"):
        super(Embedding, self).__init__()
        if initializer not in ("gaussian", "uniform"):
            raise ValueError("Embedding: initializer must be 'gaussian' or 'uniform', got %r"
                             % (initializer,))
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.initializer = initializer

    def extra_repr(self):
        return settings(self.input_dim, self.output_dim, initializer=self.initializer)

    def initialize(self, x):
        check_tensor(self, x)
        if self.initializer == "uniform":
            fill = lambda t: t.uniform(-1.0, 1.0)  # noqa: E731
        else:
            fill = lambda t: t.gaussian(0.0, 1.0)  # noqa: E731
        self.W = param((self.input_dim, self.output_dim), x, fill)  # float32: x holds indices

    def from_pretrained(self, W, freeze=True):
        """Sets the table (a Tensor or numpy array); ``freeze`` stops its training."""
        if not self._initialized:
            raise RuntimeError("Embedding.from_pretrained: call the layer once first so that "
                               "its table exists")
        self.set_attribute(self.W, W)
        self.W.requires_grad = not freeze
        self.W.stores_grad = not freeze

    def forward(self, x):
        check_tensor(self, x)
        self.device_check(x, self.W)
        return autograd.embedding(x, self.W)

