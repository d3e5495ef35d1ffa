"""Losses, with Apache SINGA 3.3's conventions: the loss operators take the target in the
constructor, ``forward(x)`` and ``backward(dy=1.0)``; each loss is a Tensor of shape (1,).

    loss = autograd.softmax_cross_entropy(logits, labels)   # labels: (N,) ints or (N, C) one-hot
    loss = autograd.cross_entropy(probs, onehot)             # -sum(t log x) / N
    loss = autograd.binary_cross_entropy(probs, targets)     # with SINGA's epsilon 1e-4
    loss = autograd.mse_loss(x, t)                           # mean((x - t)^2) over all elements
    loss = autograd.ranking_loss(pos, neg, M=0.2)            # mean(max(0, M - pos + neg))

    op = autograd.MeanSquareError(t)                         # as SINGA's tests call them
    loss = op(x)[0]
    dx = op.backward()                                       # dy defaults to 1.0

The target is a constant: it gets no gradient. Shapes are checked before computing: a label
count other than the batch size raises ShapeError naming both shapes. Label values are checked
by the core when the loss runs.
"""
import numbers

import numpy as np

from .. import singa_wrap as singa
from .._args import as_float
from .errors import ShapeError
from .base import Operator, expect_tensor

_M = singa.EltwiseMult

# Added to the probabilities inside the logarithms of binary_cross_entropy (SINGA's value), so
# that predictions of exactly 0 or 1 give a finite loss and gradient.
BCE_EPSILON = 1e-4


def _scalar(t):
    """A (1,) tensor holding the sum of t."""
    return singa.Reshape(singa.ReduceSum(t, [], False), [1])


def _float(t):
    return t if t.data_type() == singa.kFloat32 else t.AsType(singa.kFloat32)


def _scale(dy):
    """dy as a float, or as a core tensor (a (1,) seed from autograd.backward, or a Tensor);
    a one-element dy becomes 0-d, so that it scales a 0-d x's gradient without growing it to
    (1,)."""
    if isinstance(dy, numbers.Real):
        return float(dy)
    dy = getattr(dy, "data", dy)
    return singa.Reshape(dy, []) if dy.Size() == 1 and dy.nDim() > 0 else dy


def _batch(x, op):
    if x.nDim() == 0 or x.shape()[0] == 0:
        raise ShapeError("%s: expected a non-empty batch along axis 0, got shape %s"
                         % (op, x.shape()))
    return x.shape()[0]


class _TargetLoss(Operator):
    """A loss of predictions x against a constant target t given to the constructor (a Tensor
    or core tensor). ``forward(x, t)`` with an explicit target works too (t then is an input
    that gets no gradient). ``backward(dy=1.0)`` scales the gradient by dy, a number or a (1,)
    tensor, and returns dx (and None for an explicit target)."""

    def __init__(self, t=None):
        super(_TargetLoss, self).__init__()
        self.t = None if t is None else getattr(t, "data", t)

    def forward(self, x, t=None):
        self.explicit = t is not None
        t = t if t is not None else self.t
        if t is None:
            raise ShapeError("%s: no target: give it to the constructor or to forward"
                             % type(self).__name__)
        t = getattr(t, "data", t)
        if not isinstance(t, singa.Tensor):
            raise TypeError("%s: the target must be a singa Tensor, got %s"
                            % (type(self).__name__, type(t).__name__))
        return self.loss(x, t)

    def backward(self, dy=1.0):
        dx = _M(self.grad(), _scale(dy))
        return (dx, None) if self.explicit else dx


class SoftMaxCrossEntropy(_TargetLoss):
    """sum_i of -log softmax(x_i)[t_i] / N for logits x (N, C) and labels t: (N,) or (N, 1)
    class indices, or an (N, C) one-hot / probability matrix."""

    def loss(self, x, t):
        """The softmax cross entropy of x against target t, a (1,) core tensor; checks the shapes
        and saves what grad() needs."""
        if x.nDim() != 2:
            raise ShapeError("softmax_cross_entropy: the logits must be (N, C), got shape %s"
                             % (x.shape(),))
        n = x.shape()[0]
        labels = t.nDim() == 1 or (t.nDim() == 2 and t.shape()[1] == 1 and x.shape()[1] != 1)
        if (labels and t.shape()[0] != n) or (not labels and t.shape() != x.shape()):
            raise ShapeError("softmax_cross_entropy: target of shape %s does not match logits "
                             "of shape %s (expected %d labels or a %s matrix)"
                             % (t.shape(), x.shape(), n, x.shape()))
        if not labels:
            t = _float(t)  # an int32 one-hot matrix is a matrix, not labels
        self.x, self.tt, self.n = x, t, n
        return singa.Div(_scalar(singa.SoftmaxCrossEntropyForward(x, t)), float(n))

    def grad(self):
        """d loss / d x for the last loss() (backward scales it by dy)."""
        return singa.Div(singa.SoftmaxCrossEntropyBackward(self.x, self.tt), float(self.n))


def softmax_cross_entropy(x, t):
    """Mean cross entropy of softmax(x) (logits (N, C)) against labels or one-hot targets t."""
    return SoftMaxCrossEntropy(t)(x)[0]


class CrossEntropy(_TargetLoss):
    """sum_ij of -t_ij log(x_ij) / N for probabilities x (N, C) and one-hot / probability
    targets t (N, C), or class indices t (N,) or (N, 1)."""

    def loss(self, x, t):
        """The cross entropy of x against target t, a (1,) core tensor; checks the shapes
        and saves what grad() needs."""
        n = _batch(x, "cross_entropy")
        if x.nDim() != 2 or not (t.shape() == x.shape() or t.shape() in ((n,), (n, 1))):
            raise ShapeError("cross_entropy: target of shape %s does not match predictions of "
                             "shape %s (expected %s, (%d,) or (%d, 1))"
                             % (t.shape(), x.shape(), x.shape(), n, n))
        if t.shape() == x.shape():
            t = _float(t)
        self.x, self.tt, self.n = x, t, n
        return singa.Div(_scalar(singa.CrossEntropyFwd(x, t)), float(n))

    def grad(self):
        """d loss / d x for the last loss() (backward scales it by dy)."""
        # d/dx of -t log x is -t / x; for labels t is their one-hot matrix: p - (p - onehot).
        onehot = singa.Sub(self.x, singa.SoftmaxCrossEntropyBwd(self.x, self.tt)) \
            if self.tt.shape() != self.x.shape() else self.tt
        return singa.Div(singa.Negative(singa.Div(onehot, self.x)), float(self.n))


def cross_entropy(x, t):
    """Mean cross entropy of probabilities x against targets t."""
    return CrossEntropy(t)(x)[0]


class BinaryCrossEntropy(_TargetLoss):
    """-sum(t log(x + eps) + (1 - t) log(1 + eps - x)) / N, eps = BCE_EPSILON (SINGA's
    definition), for probabilities x and targets t of the same shape."""

    def loss(self, x, t):
        """The binary cross entropy of x against target t, a (1,) core tensor; checks the shapes
        and saves what grad() needs."""
        if x.shape() != t.shape():
            raise ShapeError("binary_cross_entropy: target of shape %s does not match "
                             "predictions of shape %s" % (t.shape(), x.shape()))
        self.n = _batch(x, "binary_cross_entropy")
        self.tt = _float(t)
        self.pos = singa.Add(x, BCE_EPSILON)                   # x + eps
        self.neg = singa.Sub(1.0 + BCE_EPSILON, x)             # 1 + eps - x
        self.negt = singa.Sub(1.0, self.tt)                    # 1 - t
        total = singa.Add(_M(self.tt, singa.Log(self.pos)), _M(self.negt, singa.Log(self.neg)))
        return singa.Div(_scalar(total), -float(self.n))

    def grad(self):
        """d loss / d x for the last loss() (backward scales it by dy)."""
        # d/dx = -(t / (x + eps) - (1 - t) / (1 + eps - x)) / N
        dx = singa.Sub(singa.Div(self.tt, self.pos), singa.Div(self.negt, self.neg))
        return singa.Div(dx, -float(self.n))


def binary_cross_entropy(x, t):
    """Mean binary cross entropy of probabilities x against targets t (same shape)."""
    return BinaryCrossEntropy(t)(x)[0]


class MeanSquareError(_TargetLoss):
    """sum((x - t)^2) / numel(x): the mean over all elements (SINGA 3.3's definition).

    As in SINGA, the target broadcasts against the predictions (numpy's rule): t of shape
    (N, 1) or (C,) against x (N, C) compares every column or row with it. The error keeps x's
    shape: a target that would enlarge it (t (2, 4) against x (2, 1)) raises ShapeError.
    mse_loss(x, t) asks for equal shapes, as SINGA's does."""

    def loss(self, x, t):
        """The mean squared error of x against target t, a (1,) core tensor; checks the shapes
        and saves what grad() needs."""
        try:
            shape = tuple(np.broadcast_shapes(tuple(x.shape()), tuple(t.shape())))
        except ValueError:
            shape = None
        if shape != tuple(x.shape()):
            raise ShapeError("MeanSquareError: target of shape %s does not broadcast to the "
                             "predictions' shape %s" % (tuple(t.shape()), tuple(x.shape())))
        self.numel = x.Size()
        if self.numel == 0:
            raise ShapeError("mse_loss: the predictions are empty (shape %s)" % (x.shape(),))
        self.err = singa.Sub(x, t)
        return singa.Div(_scalar(singa.Square(self.err)), float(self.numel))

    def grad(self):
        """d loss / d x for the last loss() (backward scales it by dy)."""
        return _M(self.err, 2.0 / self.numel)


def mse_loss(x, t):
    """The mean over all elements of the squared error between x and t (same shapes)."""
    expect_tensor(x, "mse_loss", "the predictions")
    expect_tensor(t, "mse_loss", "the target")
    if tuple(x.shape) != tuple(t.shape):
        raise ShapeError("mse_loss: target of shape %s does not match predictions of shape %s"
                         % (tuple(t.shape), tuple(x.shape)))
    return MeanSquareError(t)(x)[0]


class RankingLoss(Operator):
    """mean over the batch of max(0, M - pos + neg) (the QA-LSTM hinge loss)."""

    def __init__(self, M=0.2):
        super(RankingLoss, self).__init__()
        self.M = as_float(M, "M", "ranking_loss")

    def forward(self, pos, neg):
        if pos.shape() != neg.shape():
            raise ShapeError("ranking_loss: pos of shape %s and neg of shape %s differ"
                             % (pos.shape(), neg.shape()))
        self.n = _batch(pos, "ranking_loss")
        margin = singa.Add(singa.Sub(neg, pos), self.M)
        self.active = _float(singa.GT(margin, 0.0))
        return singa.Div(_scalar(_M(margin, self.active)), float(self.n))

    def backward(self, dy=1.0):
        # SINGA's QALSTMLoss returns -active and active here, without the 1/N of its forward
        # nor dy: not the gradient of its loss. Ours is.
        dy = _scale(dy)
        g = _M(self.active, dy / self.n if isinstance(dy, float) else singa.Div(dy, float(self.n)))
        return singa.Negative(g), g


def ranking_loss(pos, neg, M=0.2):
    """Mean hinge loss max(0, M - pos + neg)."""
    return RankingLoss(M)(pos, neg)[0]


QALSTMLoss = RankingLoss
qa_lstm_loss = ranking_loss
