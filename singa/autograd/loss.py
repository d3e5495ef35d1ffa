"""Losses. Each returns a Tensor of shape (1,), the mean over the batch (axis 0), as SINGA does.

    loss = autograd.softmax_cross_entropy(logits, labels)   # labels: (N,) ints or (N, C) one-hot
    loss = autograd.cross_entropy(probs, onehot)
    loss = autograd.binary_cross_entropy(probs, targets)
    loss = autograd.mse_loss(x, t)                           # sum((x - t)^2) / (2 N)
    loss = autograd.ranking_loss(pos, neg, M=0.2)            # mean(max(0, M - pos + neg))

Shapes are checked before computing: a label count other than the batch size raises ValueError
naming both shapes. Label values are checked by the core when the loss runs.
"""
from .. import singa_wrap as singa
from .errors import ShapeError
from .base import Operator

_M = singa.EltwiseMult


def _scalar(t):
    """A (1,) tensor holding the sum of t."""
    return singa.Reshape(singa.ReduceSum(t, [], False), [1])


def _float(t):
    return t if t.data_type() == singa.kFloat32 else t.AsType(singa.kFloat32)


def _batch(x, op):
    if x.nDim() == 0 or x.shape()[0] == 0:
        raise ShapeError("%s: expected a non-empty batch along axis 0, got shape %s"
                         % (op, x.shape()))
    return x.shape()[0]


class SoftMaxCrossEntropy(Operator):
    """mean_i of -log softmax(x_i)[t_i] for logits x (N, C) and labels t: (N,) or (N, 1)
    class indices, or an (N, C) one-hot / probability matrix."""

    def __init__(self, t=None):
        super(SoftMaxCrossEntropy, self).__init__()
        self.t = None if t is None else t.data

    def forward(self, x, t=None):
        t = self.t if t is None else t
        if x.nDim() != 2:
            raise ShapeError("softmax_cross_entropy: the logits must be (N, C), got shape "
                             "%s" % (x.shape(),))
        n = x.shape()[0]
        labels = t.nDim() == 1 or (t.nDim() == 2 and t.shape()[1] == 1 and x.shape()[1] != 1)
        if (labels and t.shape()[0] != n) or (not labels and t.shape() != x.shape()):
            raise ShapeError("softmax_cross_entropy: target of shape %s does not match "
                             "logits of shape %s (expected %d labels or a %s matrix)"
                             % (t.shape(), x.shape(), n, x.shape()))
        if not labels:
            t = _float(t)  # an int32 one-hot matrix is a matrix, not labels
        self.x, self.t, self.n = x, t, n
        return singa.Div(_scalar(singa.SoftmaxCrossEntropyForward(x, t)), float(n))

    def backward(self, dy):
        dx = singa.SoftmaxCrossEntropyBackward(self.x, self.t)
        return (_M(dx, singa.Div(dy, float(self.n))),) + (None,) * (len(self.src) - 1)


def softmax_cross_entropy(x, t):
    """Mean cross entropy of softmax(x) (logits (N, C)) against labels or one-hot targets t."""
    return SoftMaxCrossEntropy()(x, t)[0]


class CrossEntropy(Operator):
    """mean_i of -sum_j t_ij log(y_ij) for probabilities y (N, C) and one-hot / probability
    targets t (N, C) or class indices (N,)."""

    def forward(self, y, t):
        n = _batch(y, "cross_entropy")
        if y.nDim() != 2 or not (t.shape() == y.shape() or t.shape() in ((n,), (n, 1))):
            raise ShapeError("cross_entropy: target of shape %s does not match predictions "
                             "of shape %s (expected %s, (%d,) or (%d, 1))"
                             % (t.shape(), y.shape(), y.shape(), n, n))
        if t.shape() == y.shape():
            t = _float(t)
        self.y, self.t, self.n = y, t, n
        return singa.Div(_scalar(singa.CrossEntropyFwd(y, t)), float(n))

    def backward(self, dy):
        # d/dy of -t log y is -t / y; for labels t is their one-hot matrix: p - (p - onehot).
        onehot = singa.Sub(self.y, singa.SoftmaxCrossEntropyBwd(self.y, self.t)) \
            if self.t.shape() != self.y.shape() else _float(self.t)
        dx = singa.Negative(singa.Div(onehot, self.y))
        return _M(dx, singa.Div(dy, float(self.n))), None


def cross_entropy(y, t):
    """Mean cross entropy of probabilities y against targets t."""
    return CrossEntropy()(y, t)[0]


class BinaryCrossEntropy(Operator):
    """mean over axis 0 of -sum(t log x + (1 - t) log(1 - x)) for probabilities x."""

    def forward(self, x, t):
        if x.shape() != t.shape():
            raise ShapeError("binary_cross_entropy: target of shape %s does not match "
                             "predictions of shape %s" % (t.shape(), x.shape()))
        self.n = _batch(x, "binary_cross_entropy")
        self.x, self.t = x, _float(t)
        pos = _M(self.t, singa.Log(x))
        neg = _M(singa.Sub(1.0, self.t), singa.Log(singa.Sub(1.0, x)))
        return singa.Div(_scalar(singa.Add(pos, neg)), -float(self.n))

    def backward(self, dy):
        # d/dx = (x - t) / (x (1 - x)) / N
        dx = singa.Div(singa.Sub(self.x, self.t), _M(self.x, singa.Sub(1.0, self.x)))
        return _M(dx, singa.Div(dy, float(self.n))), None


def binary_cross_entropy(x, t):
    """Mean binary cross entropy of probabilities x against targets t (same shape)."""
    return BinaryCrossEntropy()(x, t)[0]


class MeanSquareError(Operator):
    """sum((x - t)^2) / (2 N), N = x.shape[0] (Apache SINGA's definition)."""

    def forward(self, x, t):
        if x.shape() != t.shape():
            raise ShapeError("mse_loss: target of shape %s does not match predictions of "
                             "shape %s" % (t.shape(), x.shape()))
        self.n = _batch(x, "mse_loss")
        self.err = singa.Sub(x, t)
        return singa.Div(_scalar(singa.Square(self.err)), 2.0 * self.n)

    def backward(self, dy):
        dx = _M(self.err, singa.Div(dy, float(self.n)))
        return dx, (singa.Negative(dx) if self.needs_grad[1] else None)


def mse_loss(x, t):
    """Half the mean over the batch of the squared error between x and t."""
    return MeanSquareError()(x, t)[0]


class RankingLoss(Operator):
    """mean over the batch of max(0, M - pos + neg) (the QA-LSTM hinge loss)."""

    def __init__(self, M=0.2):
        super(RankingLoss, self).__init__()
        self.M = float(M)

    def forward(self, pos, neg):
        if pos.shape() != neg.shape():
            raise ShapeError("ranking_loss: pos of shape %s and neg of shape %s differ"
                             % (pos.shape(), neg.shape()))
        self.n = _batch(pos, "ranking_loss")
        margin = singa.Add(singa.Sub(neg, pos), self.M)
        self.active = _float(singa.GT(margin, 0.0))
        return singa.Div(_scalar(_M(margin, self.active)), float(self.n))

    def backward(self, dy):
        g = _M(self.active, singa.Div(dy, float(self.n)))
        return singa.Negative(g), g


def ranking_loss(pos, neg, M=0.2):
    """Mean hinge loss max(0, M - pos + neg)."""
    return RankingLoss(M)(pos, neg)[0]


QALSTMLoss = RankingLoss
qa_lstm_loss = ranking_loss
