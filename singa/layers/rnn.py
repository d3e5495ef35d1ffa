"""Recurrent layers written with autograd functions: RNN (vanilla) and LSTM.

Both take a sequence as a list of (batch, input_size) tensors and step through it in Python.
"""
from .. import singa_wrap as singa
from ..tensor import Tensor
from .base import Layer
from ._util import check_dim, check_ndim, shape_error

__all__ = ["RNN_Base", "RNN", "LSTM", "CudnnRNN"]


def _param(shape, x, fill):
    t = Tensor(shape=shape, device=x.device, requires_grad=True, stores_grad=True)
    fill(t)
    return t


class RNN_Base(Layer):

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super(RNN_Base, self).__init__()
        if num_layers != 1 or bidirectional or dropout:
            raise NotImplementedError("%s: only one unidirectional layer without dropout is "
                                      "supported" % type(self).__name__)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError("%s: nonlinearity must be 'tanh' or 'relu', got %r"
                             % (type(self).__name__, nonlinearity))
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.nonlinearity = nonlinearity
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = dropout
        self.bidirectional = bidirectional

    def _check_step(self, xs, h):
        if not xs:
            raise shape_error(self, "the input sequence is empty")
        batch = xs[0].shape[0] if len(xs[0].shape) == 2 else None
        for x in xs:
            check_ndim(self, x, 2, "(batch, input_size) per step")
            check_dim(self, x, 1, self.input_size, "features")
            if x.shape[0] != batch:
                raise shape_error(self, "every step needs a batch of %d, got shape %s", batch,
                                  tuple(x.shape))
        for state in h:
            if tuple(state.shape) != (batch, self.hidden_size):
                raise shape_error(self, "the initial state must have shape %s, got %s",
                                  (batch, self.hidden_size), tuple(state.shape))

    def step_forward(self, *args, **kwargs):
        raise NotImplementedError


class RNN(RNN_Base):
    """h_t = act(x_t Wx + h_{t-1} Wh + b). forward(xs, h0) returns (outputs list, last h)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super(RNN, self).__init__(input_size, hidden_size, num_layers, nonlinearity, bias,
                                  batch_first, dropout, bidirectional)

    def initialize(self, xs, h0):
        x = xs[0]
        self.Wx = _param((self.input_size, self.hidden_size), x, lambda t: t.gaussian(0, 1))
        self.Wh = _param((self.hidden_size, self.hidden_size), x, lambda t: t.gaussian(0, 1))
        self.b = _param((self.hidden_size,), x, lambda t: t.set_value(0.0))

    def forward(self, xs, h0):
        xs = list(xs)
        self._check_step(xs, (h0,))
        self.device_check(xs[0], self.Wx, self.Wh, self.b)
        out, h = [], h0
        for x in xs:
            h = self.step_forward(x, h, self.Wx, self.Wh, self.b)
            out.append(h)
        return out, h

    def step_forward(self, x, h, Wx, Wh, b):
        y = autograd.add(autograd.matmul(h, Wh), autograd.matmul(x, Wx))
        y = autograd.add_bias(y, b, axis=0)
        return autograd.tanh(y) if self.nonlinearity == "tanh" else autograd.relu(y)


_GATES = ("i", "f", "o", "g")


class LSTM(RNN_Base):
    """Long short-term memory. forward(xs, (h0, c0)) returns (outputs list, last h, last c)."""

    def __init__(self, input_size, hidden_size, nonlinearity="tanh", num_layers=1, bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super(LSTM, self).__init__(input_size, hidden_size, num_layers, nonlinearity, bias,
                                   batch_first, dropout, bidirectional)

    def initialize(self, xs, h0_c0):
        x = xs[0]
        n, h = self.input_size, self.hidden_size
        for g in _GATES:
            setattr(self, "Wx_" + g, _param((n, h), x, lambda t: t.gaussian(0.0, 0.01)))
            setattr(self, "Wh_" + g, _param((h, h), x, lambda t: t.gaussian(0.0, 0.01)))
        for g in _GATES:
            setattr(self, "Bx_" + g, _param((h,), x, lambda t: t.set_value(0.0)))
            setattr(self, "Bh_" + g, _param((h,), x, lambda t: t.set_value(0.0)))

    def forward(self, xs, h0_c0):
        h, c = h0_c0
        xs = list(xs)
        self._check_step(xs, (h, c))
        self.device_check(xs[0], *self.get_params().values())
        out = []
        for x in xs:
            h, c = self.step_forward(x, h, c)
            out.append(h)
        return out, h, c

    def _gate(self, g, x, h):
        y1 = autograd.add_bias(autograd.matmul(x, getattr(self, "Wx_" + g)),
                               getattr(self, "Bx_" + g), axis=0)
        y2 = autograd.add_bias(autograd.matmul(h, getattr(self, "Wh_" + g)),
                               getattr(self, "Bh_" + g), axis=0)
        return autograd.add(y1, y2)

    def step_forward(self, x, h, c):
        i = autograd.sigmoid(self._gate("i", x, h))
        f = autograd.sigmoid(self._gate("f", x, h))
        o = autograd.sigmoid(self._gate("o", x, h))
        g = autograd.tanh(self._gate("g", x, h))
        c = autograd.add(autograd.mul(f, c), autograd.mul(i, g))
        h = autograd.mul(o, autograd.tanh(c))
        return h, c


class CudnnRNN(Layer):
    """cuDNN's fused RNN; it needs a CUDA build."""

    def __init__(self, hidden_size, *args, **kwargs):
        super(CudnnRNN, self).__init__()
        if not singa.USE_CUDA:
            raise NotImplementedError("CudnnRNN needs singa built with CUDA (singa_wrap.USE_CUDA "
                                      "is False); use layer.LSTM or layer.RNN")
        raise NotImplementedError("CudnnRNN is not implemented in this build")


from .. import autograd  # noqa: E402  (autograd may import this module)
