"""Layers without parameters: activations, shape operations, dropout and losses.

Each is a thin shell over one autograd function; the loss layers first check that the targets
fit the predictions, so a bad batch raises a ShapeError naming the layer and both shapes.
"""
from .. import autograd
from .._args import as_float
from .base import Layer, settings
from ._util import check_ndim, check_tensor, shape_error

__all__ = ["ReLU", "Sigmoid", "Tanh", "Add", "Flatten", "Cat", "Reshape", "Dropout", "SoftMax",
           "SoftMaxCrossEntropy", "MeanSquareError", "CrossEntropy", "BinaryCrossEntropy",
           "ScatterElements"]


class ReLU(Layer):
    """max(x, 0) element-wise (NaN stays NaN). No parameters."""

    def forward(self, x):
        return autograd.relu(x)


class Sigmoid(Layer):
    """1 / (1 + exp(-x)) element-wise. No parameters."""

    def forward(self, x):
        return autograd.sigmoid(x)


class Tanh(Layer):
    """tanh(x) element-wise. No parameters."""

    def forward(self, x):
        return autograd.tanh(x)


class Add(Layer):
    """a + b (numpy broadcasting); called with two tensors. No parameters."""

    def forward(self, a, b):
        return autograd.add(a, b)


class Flatten(Layer):
    """Reshapes to 2-d: the axes before ``axis`` form the rows, the rest the columns."""

    def __init__(self, axis=1):
        super(Flatten, self).__init__()
        self.axis = axis

    def extra_repr(self):
        return settings(axis=self.axis)

    def forward(self, x):
        return autograd.flatten(x, self.axis)


class Cat(Layer):
    """Concatenates a list of tensors along ``axis``."""

    def __init__(self, axis=0):
        super(Cat, self).__init__()
        self.axis = axis

    def extra_repr(self):
        return settings(axis=self.axis)

    def forward(self, xs):
        return autograd.cat(xs, self.axis)


class Reshape(Layer):
    """x reshaped to ``shape`` (given at each call: layer(x, shape); -1 infers one axis)."""

    def forward(self, x, shape):
        return autograd.reshape(x, shape)


class Dropout(Layer):
    """Zeroes each element with probability ``ratio`` in training (scaling the rest by
    1 / (1 - ratio)); the identity in evaluation."""

    def __init__(self, ratio=0.5, seed=0):
        super(Dropout, self).__init__()
        ratio = as_float(ratio, "ratio", "Dropout")
        if not 0.0 <= ratio < 1.0:
            raise ValueError("Dropout: ratio must be within [0, 1), got %r" % (ratio,))
        self.ratio = ratio
        self.seed = seed  # accepted by keyword, as autograd.Dropout(seed, ratio) has one

    def extra_repr(self):
        return settings(ratio=self.ratio)

    def forward(self, x):
        # A non-zero seed seeds the device once, at the first forward; reseeding at every call
        # would draw the same mask each step. By keyword: autograd.dropout(x, seed, ratio).
        seed, self._pending_seed = getattr(self, "_pending_seed", self.seed), 0
        return autograd.dropout(x, seed=seed, ratio=self.ratio)


class SoftMax(Layer):
    """exp(x) / sum(exp(x)) over ``axis`` and the axes after it (Apache SINGA's softmax)."""

    def __init__(self, axis=1):
        super(SoftMax, self).__init__()
        self.axis = axis

    def extra_repr(self):
        return settings(axis=self.axis)

    def forward(self, x):
        return autograd.softmax(x, self.axis)


def _check_class_targets(layer, x, t):
    """x: (N, C) scores; t: N class labels ((N,) or (N, 1)) or an (N, C) distribution."""
    check_ndim(layer, x, 2, "(batch, classes)", "prediction")
    check_tensor(layer, t, "target")
    n, c = x.shape
    if tuple(t.shape) not in ((n,), (n, 1), (n, c)):
        raise shape_error(layer, "the targets of %d predictions of shape %s must have shape "
                          "(%d,), (%d, 1) or (%d, %d), got %s", n, tuple(x.shape), n, n, n, c,
                          tuple(t.shape))


def _check_same_shape(layer, x, t):
    check_tensor(layer, x, "prediction")
    check_tensor(layer, t, "target")
    if tuple(x.shape) != tuple(t.shape):
        raise shape_error(layer, "predictions of shape %s need targets of the same shape, got "
                          "%s", tuple(x.shape), tuple(t.shape))


class SoftMaxCrossEntropy(Layer):
    """The mean over the batch of cross entropy(softmax(x), t); t holds class labels or a
    distribution per row."""

    def forward(self, x, t):
        _check_class_targets(self, x, t)
        return autograd.softmax_cross_entropy(x, t)


class CrossEntropy(Layer):
    """Cross entropy of probabilities x (e.g. a softmax output) against labels or
    distributions t."""

    def forward(self, x, t):
        _check_class_targets(self, x, t)
        return autograd.cross_entropy(x, t)


class MeanSquareError(Layer):
    """The mean over all elements of (x - t)^2; t of x's shape."""

    def forward(self, x, t):
        _check_same_shape(self, x, t)
        return autograd.mse_loss(x, t)


class BinaryCrossEntropy(Layer):
    """Binary cross entropy of probabilities x against targets t in [0, 1], of x's shape."""

    def forward(self, x, t):
        _check_same_shape(self, x, t)
        return autograd.binary_cross_entropy(x, t)


class ScatterElements(Layer):
    """ONNX ScatterElements: a copy of x with ``updates`` written at ``indices`` along axis."""

    def __init__(self, axis=0):
        super(ScatterElements, self).__init__()
        self.axis = axis

    def extra_repr(self):
        return settings(axis=self.axis)

    def forward(self, x, indices, updates):
        return autograd.scatter_elements(x, indices, updates, self.axis)

