"""Recurrent layers: RNN (vanilla), LSTM, GRU (Apache SINGA's per-gate parameters, call
conventions and return values) and CudnnRNN (cuDNN's fused RNN and flat weights), all built from
autograd operators (singa/autograd/rnn.py), so they run on every device.

    lstm = layer.LSTM(10, 20, num_layers=2, bidirectional=True, dropout=0.2)
    xs = [tensor.Tensor((4, 10)) for _ in range(7)]            # one (batch, input) per step
    h0 = tensor.Tensor((4, 4, 20)); h0.set_value(0)  # (layers * directions, batch, hidden)
    out, h, c = lstm(xs, (h0, h0))                             # out: 7 x (4, 40)

    rnn = layer.CudnnRNN(20, rnn_mode="gru", batch_first=True)
    y = rnn(tensor.Tensor((4, 7, 10)))                         # (4, 7, 20)

Note: what SINGA 3.3 does and what we do
  * SINGA's RNN/LSTM store num_layers, bidirectional, dropout and batch_first and ignore them; ours
    implement them. A single forward layer (the default) keeps SINGA's parameter names (Wx, Wh, b;
    Wx_i, Wh_i, Bx_i, Bh_i...); layer l > 0 appends ``_l<l>`` and the backward direction
    ``_reverse`` (``Wx_i_l1_reverse``). Layer l > 0 reads directions * hidden features per step.
  * Inputs: a list of per-step (batch, input) tensors gives a list of per-step outputs (batch_first
    cannot apply to it); a 3-d tensor, (seq, batch, input) or (batch, seq, input) with
    batch_first, gives a 3-d output in the same layout.
  * Initial states: (batch, hidden) for one forward layer, (layers * directions, batch, hidden) in
    general, or None for zeros; any shape that broadcasts to those (e.g. (batch, 1), which SINGA's
    LSTM accepts for c0) is broadcast, and a batch-1 input broadcasts to the states' batch (as
    SINGA's sums do). The final states come back in the rank they were given.
  * bias=False leaves the biases out (SINGA ignores it); dropout acts between layers, in training.
"""
import math

from .. import autograd
from .._args import as_float, type_error
from .. import errors
from ..autograd import rnn as _rnn
from ..tensor import Tensor
from .base import Layer, settings
from ._util import check_dim, check_ndim, check_tensor, param, positive_int, shape_error

__all__ = ["RNN_Base", "RNN", "LSTM", "GRU", "CudnnRNN"]


# Steps of different batch sizes; SINGA asserted there (an AssertionError and a ShapeError).
StepShapeError = errors.StepShapeError




def _gaussian(std):
    return lambda t: t.gaussian(0.0, std)


def _zero(t):
    t.set_value(0.0)


class RNN_Base(Layer):
    """The shared machinery of RNN, LSTM and GRU: arguments, inputs, states, the layer stack.

    A subclass sets ``mode`` (autograd.rnn.MODES) and ``gates`` (parameter suffixes in SINGA's
    creation order) and defines ``_cell_weights(suffix)`` giving CellWeights in cuDNN's gate
    order."""

    mode = None
    gates = ()

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super(RNN_Base, self).__init__()
        name = type(self).__name__
        input_size = positive_int(name, "input_size", input_size)
        hidden_size = positive_int(name, "hidden_size", hidden_size)
        num_layers = positive_int(name, "num_layers", num_layers)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError("%s: nonlinearity must be 'tanh' or 'relu', got %r"
                             % (name, nonlinearity))
        if not 0 <= as_float(dropout, "dropout", name) < 1:
            raise ValueError("%s: dropout must be in [0, 1), got %r" % (name, dropout))
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.nonlinearity = nonlinearity
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = dropout
        self.bidirectional = bidirectional

    @property
    def num_directions(self):
        """2 for a bidirectional network, else 1."""
        return 2 if self.bidirectional else 1

    def extra_repr(self):
        shown = {k: v for k, v, default in (
            ("num_layers", self.num_layers, 1), ("nonlinearity", self.nonlinearity, "tanh"),
            ("bias", self.bias, True), ("batch_first", self.batch_first, False),
            ("dropout", self.dropout, 0), ("bidirectional", self.bidirectional, False))
            if v != default}
        return settings(self.input_size, self.hidden_size, **shown)

    def step_forward(self, x=None, h=None, c=None, Wx=None, Wh=None, Bx=None, Bh=None, b=None):
        """One time step of a cell; the RNN and LSTM classes implement it."""
        raise NotImplementedError("%s.step_forward" % type(self).__name__)

    # ---- parameters --------------------------------------------------------------------------
    def _suffixes(self):
        """The parameter-name suffix of every pseudo-layer (layer-major, forward first)."""
        return [("_l%d" % layer if layer else "") + ("_reverse" if d else "")
                for layer in range(self.num_layers) for d in range(self.num_directions)]

    def _layer_input(self, p):
        return self.input_size if p < self.num_directions else \
            self.hidden_size * self.num_directions

    def _make(self, like, shapes, inits):
        """Creates, per pseudo-layer, the parameters ``<key><suffix>`` of ``shapes`` (a list of
        (key, shape function of the layer input size, bias?)) in SINGA's order."""
        for p, suffix in enumerate(self._suffixes()):
            n = self._layer_input(p)
            for key, shape_of, is_bias in shapes:
                if is_bias and not self.bias:
                    continue
                setattr(self, key + suffix, param(shape_of(n), like, inits[is_bias]))

    # ---- inputs and states -------------------------------------------------------------------
    def _steps(self, xs):
        """(the sequence: a list of per-step (batch, input) Tensors or a (seq, batch, input)
        Tensor; 3-d layout or None; batch) from the input."""
        if isinstance(xs, Tensor):
            check_ndim(self, xs, 3, "(batch, seq, input)" if self.batch_first
                       else "(seq, batch, input)")
            check_dim(self, xs, 2, self.input_size, "features")
            seq = autograd.transpose(xs, (1, 0, 2)) if self.batch_first else xs
            if seq.shape[0] == 0:
                raise shape_error(self, "the input sequence is empty")
            return seq, "3d", seq.shape[1]
        steps = list(xs)
        if not steps:
            raise shape_error(self, "the input sequence is empty")
        batch = None
        for x in steps:
            check_ndim(self, x, 2, "(batch, input_size) per step")
            check_dim(self, x, 1, self.input_size, "features")
            batch = x.shape[0] if batch is None else batch
            if x.shape[0] != batch:
                raise StepShapeError("%s: every step needs a batch of %d, got shape %s"
                                     % (self._display_name(), batch, tuple(x.shape)))
        return steps, None, batch

    def _states(self, state, batch, like, what):
        """(list of (batch, hidden) Tensors per pseudo-layer, rank given) from an initial state."""
        n = self.num_layers * self.num_directions
        full = (n, batch, self.hidden_size)
        if state is None:
            zero = Tensor(full, like.device, requires_grad=False)
            zero.set_value(0.0)
            return _rnn.unstack(zero, 0), (2 if n == 1 else 3)
        check_tensor(self, state, what)
        rank = len(state.shape)
        target = full[1:] if rank == 2 and n == 1 else full
        if rank not in (2, 3) or len(target) != rank or not all(
                s in (1, t) for s, t in zip(state.shape, target)):
            raise shape_error(self, "the initial state %s must have shape %s (or one that "
                              "broadcasts to it), got %s", what, target, tuple(state.shape))
        if tuple(state.shape) != target:
            state = autograd.expand(state, list(target))
        return (_rnn.unstack(state, 0) if rank == 3 else [state]), rank

    def _run(self, xs, h0, c0=None):
        seq, layout, batch = self._steps(xs)
        states = [s for s in (h0, c0) if isinstance(s, Tensor)]
        first = seq if isinstance(seq, Tensor) else seq[0]
        self.device_check(*([first] + (seq if isinstance(seq, list) else []) + states
                            + list(self.get_params().values())))
        wider = [s.shape[-2] for s in states if len(s.shape) in (2, 3) and s.shape[-2] > 1]
        if batch == 1 and wider:
            # SINGA adds x Wx and h Wh with broadcasting, so a batch-1 input meets states of a
            # larger batch (its char-rnn samples one character with the training batch's state);
            # the cells' sums broadcast too: only the states' batch is taken
            batch = wider[0]
        h0s, rank = self._states(h0, batch, first, "h0")
        c0s = self._states(c0, batch, first, "c0")[0] if self.mode == 2 else None
        weights = [self._cell_weights(s) for s in self._suffixes()]
        ys, hs, cs = _rnn.run_sequence(self.mode, seq, h0s, c0s, weights, self.num_layers,
                                       self.num_directions, self.dropout,
                                       as_tensor=layout is not None)
        if layout is not None and self.batch_first:
            ys = autograd.transpose(ys, (1, 0, 2))

        def final(states):
            return states[0] if rank == 2 else _rnn.stack(states, 0)

        return ys, final(hs), (final(cs) if cs is not None else None)


class RNN(RNN_Base):
    """h_t = act(x_t Wx + h_{t-1} Wh + b). forward(xs, h0) returns (outputs, last h)."""

    mode = None  # from nonlinearity

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super(RNN, self).__init__(input_size, hidden_size, num_layers, nonlinearity, bias,
                                  batch_first, dropout, bidirectional)
        self.mode = _rnn.MODES[nonlinearity]

    def initialize(self, xs, h0=None):
        x = xs if isinstance(xs, Tensor) else list(xs)[0]
        h = self.hidden_size
        # SINGA draws Wx and Wh from N(0, 1) and zeroes b
        self._make(x, [("Wx", lambda n: (n, h), False), ("Wh", lambda n: (h, h), False),
                       ("b", lambda n: (h,), True)], {False: _gaussian(1.0), True: _zero})

    def _cell_weights(self, s):
        return _rnn.CellWeights(getattr(self, "Wx" + s), getattr(self, "Wh" + s),
                                getattr(self, "b" + s) if self.bias else None, None)

    def forward(self, xs, h0=None):
        ys, h, _ = self._run(xs, h0)
        return ys, h

    def step_forward(self, x, h, Wx, Wh, b):
        """One step of the vanilla RNN cell: the new hidden state from input x, state h and the
        weights given (SINGA's method)."""
        return _rnn.cell_step(self.mode, x, h, None, _rnn.CellWeights(Wx, Wh, b, None))[0]


# LSTM gates: SINGA's parameter order (i, f, o, g) and cuDNN's computing order (i, f, g, o).
_LSTM_GATES = ("i", "f", "o", "g")
_LSTM_CUDNN = ("i", "f", "g", "o")
_GRU_GATES = ("r", "z", "n")


class _Gated(RNN_Base):
    """LSTM and GRU: per gate g the parameters Wx_g (input, hidden), Wh_g (hidden, hidden) and
    Bx_g, Bh_g (hidden,), as SINGA's LSTM names them."""

    gates = ()
    cudnn_order = ()

    def initialize(self, xs, state=None):
        x = xs if isinstance(xs, Tensor) else list(xs)[0]
        h = self.hidden_size
        shapes = [("Wx_" + g, lambda n: (n, h), False) for g in self.gates] + \
                 [("Wh_" + g, lambda n: (h, h), False) for g in self.gates] + \
                 [("Bx_" + g, lambda n: (h,), True) for g in self.gates] + \
                 [("Bh_" + g, lambda n: (h,), True) for g in self.gates]
        # SINGA's LSTM: weights from N(0, 0.01), biases 0 (our GRU follows it)
        self._make(x, shapes, {False: _gaussian(0.01), True: _zero})

    def _cell_weights(self, s):
        def joined(prefix):
            parts = [getattr(self, "%s_%s%s" % (prefix, g, s)) for g in self.cudnn_order]
            return autograd.cat(parts, 1 if prefix.startswith("W") else 0)

        if not self.bias:
            return _rnn.CellWeights(joined("Wx"), joined("Wh"), None, None)
        return _rnn.CellWeights(joined("Wx"), joined("Wh"), joined("Bx"), joined("Bh"))


class LSTM(_Gated):
    """Long short-term memory. forward(xs, (h0, c0)) returns (outputs, last h, last c)."""

    mode = 2
    gates = _LSTM_GATES
    cudnn_order = _LSTM_CUDNN

    def __init__(self, input_size, hidden_size, nonlinearity="tanh", num_layers=1, bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super(LSTM, self).__init__(input_size, hidden_size, num_layers, nonlinearity, bias,
                                   batch_first, dropout, bidirectional)

    def _split_state(self, h0_c0):
        if h0_c0 is None:
            return None, None
        if not isinstance(h0_c0, (tuple, list)) or len(h0_c0) != 2:
            raise TypeError("%s: the initial state must be a pair (h0, c0), got %r"
                            % (self._display_name(), type(h0_c0).__name__))
        return h0_c0

    def initialize(self, xs, h0_c0=None):
        super(LSTM, self).initialize(xs, h0_c0)

    def forward(self, xs, h0_c0=None):
        h0, c0 = self._split_state(h0_c0)
        return self._run(xs, h0, c0)

    def step_forward(self, x, h, c):
        """One step of the first forward layer (SINGA's method)."""
        return _rnn.cell_step(2, x, h, c, self._cell_weights(""))


class GRU(_Gated):
    """Gated recurrent unit (cuDNN's and PyTorch's equations; gates r, z, n). forward(xs, h0)
    returns (outputs, last h). Not in SINGA 3.3; its arguments mirror RNN's."""

    mode = 3
    gates = _GRU_GATES
    cudnn_order = _GRU_GATES

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0, bidirectional=False):
        super(GRU, self).__init__(input_size, hidden_size, num_layers, "tanh", bias,
                                  batch_first, dropout, bidirectional)

    def initialize(self, xs, h0=None):
        super(GRU, self).initialize(xs, h0)

    def forward(self, xs, h0=None):
        ys, h, _ = self._run(xs, h0)
        return ys, h

    def step_forward(self, x, h):
        """One step of the first forward layer."""
        return _rnn.cell_step(3, x, h, None, self._cell_weights(""))[0]


class CudnnRNN(Layer):
    """cuDNN's fused RNN (Apache SINGA's CudnnRNN), on every device: one flat weight vector W in
    cuDNN's packing (see singa/autograd/rnn.py), x (batch, seq, feature) with batch_first, else
    (seq, batch, feature). Returns y: every step (return_sequences) or the last one."""

    def __init__(self, hidden_size, activation="tanh", num_layers=1, bias=True, batch_first=True,
                 dropout=0, bidirectional=False, rnn_mode="lstm", use_mask=False,
                 return_sequences=True):
        super(CudnnRNN, self).__init__()
        if not isinstance(rnn_mode, str):  # a list would meet the dict lookup unhashable
            raise type_error("CudnnRNN", "rnn_mode", "str", rnn_mode)
        if rnn_mode not in _rnn.MODES:
            raise ValueError("CudnnRNN: rnn_mode must be one of %s, got %r"
                             % (", ".join(sorted(_rnn.MODES)), rnn_mode))
        self.rnn_mode = rnn_mode
        self.cudnn_rnn_mode = _rnn.MODES[rnn_mode]
        self.activation = activation
        # checked now, not at the first call's handle (whose int() named neither)
        self.hidden_size = positive_int("CudnnRNN", "hidden_size", hidden_size)
        self.num_layers = positive_int("CudnnRNN", "num_layers", num_layers)
        self.bias = bias
        self.dropout = dropout
        if not 0 <= as_float(dropout, "dropout", "CudnnRNN") < 1:
            raise ValueError("CudnnRNN: dropout must be in [0, 1), got %r" % (dropout,))
        self.bidirectional = 1 if bidirectional else 0
        self.use_mask = use_mask
        self.return_sequences = return_sequences
        self.batch_first = batch_first

    def extra_repr(self):
        return settings(self.hidden_size, rnn_mode=self.rnn_mode, num_layers=self.num_layers,
                        bidirectional=bool(self.bidirectional),
                        return_sequences=self.return_sequences)

    def _time_major(self, x):
        check_ndim(self, x, 3, "(batch, seq, feature)" if self.batch_first
                   else "(seq, batch, feature)")
        return autograd.transpose(x, (1, 0, 2)) if self.batch_first else x

    def initialize(self, x, hx=None, cx=None, seq_lengths=None):
        x = self._time_major(x)
        self.input_size = x.shape[2]
        self.handle = _rnn.RNNHandle(x, self.hidden_size, mode=self.cudnn_rnn_mode,
                                     num_layers=self.num_layers, bias=int(bool(self.bias)),
                                     dropout=self.dropout, bidirectional=self.bidirectional)
        # SINGA 3.3 and 5.1: U(-1/sqrt(hidden), 1/sqrt(hidden)), cuDNN's and PyTorch's default
        bound = 1.0 / math.sqrt(self.hidden_size)
        self.W = param((self.handle.weights_size,), x, lambda t: t.uniform(-bound, bound))

    def forward(self, x, hx=None, cx=None, seq_lengths=None):
        self.device_check(x, self.W)
        x = self._time_major(x)
        check_dim(self, x, 2, self.input_size, "features")
        states = (self.num_layers * (2 if self.bidirectional else 1), x.shape[1],
                  self.hidden_size)
        zeros = None
        if hx is None or cx is None:
            zeros = Tensor(states, x.device, requires_grad=False)
            zeros.set_value(0.0)
        hx = zeros if hx is None else hx
        cx = zeros if cx is None else cx
        if self.use_mask and seq_lengths is None:
            raise ValueError("%s: use_mask=True needs seq_lengths (one length per sequence)"
                             % self._display_name())
        y = autograd._RNN(self.handle, return_sequences=self.return_sequences,
                          use_mask=self.use_mask,
                          seq_lengths=seq_lengths if self.use_mask else None)(x, hx, cx,
                                                                             self.W)[0]
        if self.return_sequences and self.batch_first:
            y = autograd.transpose(y, (1, 0, 2))
        return y
