"""The autograd machinery: Operator, Dummy, backward() and the helpers every op shares.

    from singa import autograd, tensor
    autograd.training = True                 # record operations for backward
    y = autograd.relu(autograd.matmul(x, w))
    loss = autograd.reduce_sum(y)            # any op may be the root
    for p, g in autograd.backward(loss):     # p has stores_grad=True; g is a Tensor
        p -= 0.1 * g

Note: how recording works
  * Calling an Operator instance runs its ``forward`` on core tensors (``Tensor.data``) and wraps
    the results in new Tensors. When ``training`` is on and some input has ``requires_grad``, each
    output gets the operator as its ``creator`` and the operator remembers its inputs in ``src``:
    ``(creator of x, id(x), x or None, x.stores_grad)``; x itself is kept only when its gradient
    is to be returned. A non-differentiable operator (comparisons, shape queries) is still the
    creator, as in SINGA, but records no inputs and its outputs do not require a gradient.
    Otherwise the outputs get a fresh Dummy creator and nothing is kept.
  * ``op.backward(*dys)`` called directly returns the gradient of every input, as SINGA's does
    (its tests call ``y.creator.backward(dy)``). Only ``backward`` below prunes: it runs each
    operator with ``need(i)`` false for the inputs whose gradient nobody uses.
  * What operators saved stays until their outputs are dropped, so that backward can run twice
    through one graph (SINGA's GAN example does). While the device records a graph (Model's
    graph mode) backward frees it as it passes, so that the planner can recycle the memory;
    ``retain_graph=False`` asks for that in eager mode too.
  * ``backward`` walks the creators from the root, counting how many recorded consumers each
    operator has, so that an operator runs its ``backward`` once, after every consumer of its
    outputs has contributed; contributions to the same output are summed (a tensor used twice gets
    the sum of both gradients).
  * forward and backward only call core ops. In graph mode those ops are recorded rather than run,
    so no op may read tensor values into Python while computing.
  * A Dummy refers to its tensor weakly: a tensor and its Dummy creator form no reference cycle, so
    intermediate tensors are freed as soon as Python drops them.
"""
import weakref
from collections import Counter

import numpy as np
from .._args import as_axis, as_shape

from .. import singa_wrap as singa
from .. import _state
from .._core import Tensor
from ..errors import ShapeError, AxisError

CTensor = singa.Tensor

# The one switch between training (record for backward) and inference lives in singa._state
# (layers and model read it too); users set it as ``singa.autograd.training``.


# ---- small helpers on core tensors ------------------------------------------------------------
def fill(shape, value, like, dtype=None):
    """A new core tensor of ``shape`` on ``like``'s device, every element ``value``."""
    t = CTensor(tuple(shape), like.device(), like.data_type() if dtype is None else dtype)
    t.SetValue(value)
    return t


def float_dtype(like):
    """The float dtype of helper tensors (seeds, masks) combined with ``like``: float16 or
    bfloat16 when ``like`` is (low-precision training keeps one dtype throughout), else
    float32."""
    dt = like.data_type()
    return dt if dt in (singa.kFloat16, singa.kBFloat16) else singa.kFloat32


def _as_output_dtype(dy, dtype):
    """A gradient in its output's float dtype: under mixed precision a float32 gradient can
    reach a bfloat16 or float16 output (and back), as in torch's autocast."""
    floats = (singa.kFloat32, singa.kBFloat16, singa.kFloat16)
    if dy.data_type() != dtype and dy.data_type() in floats and dtype in floats:
        return dy.AsType(dtype)
    return dy


def zeros_like(ct):
    return fill(ct.shape(), 0, ct)


def const(array, like):
    """A constant core tensor holding a numpy array (float64 -> float32), on ``like``'s device."""
    return singa.from_numpy(np.asarray(array), like.device())


def norm_axis(axis, nd, op, allow_end=False):
    """``axis`` as a non-negative int for a tensor of rank ``nd``; AxisError when out of range.
    With ``allow_end`` the axis may also be nd (a position after the last axis): the range is
    ONNX Flatten's [-nd, nd], a negative axis counting from nd (-1 is the last axis, not the
    end; taking it modulo nd + 1 made flatten(x, -1) of a (2, 3) tensor (6, 1))."""
    axis = as_axis(axis, "axis", op)
    hi = nd + 1 if allow_end else nd
    if not -nd <= axis < hi:
        raise AxisError("%s: axis %d is out of range for a tensor of rank %d"
                        % (op, axis, nd))
    return int(axis) + nd if axis < 0 else int(axis)


def axis_helper(y_shape, x_shape):
    """The axes of ``y_shape`` along which an operand of ``x_shape`` was broadcast."""
    return _broadcast_axes(as_shape(y_shape, "y_shape", "axis_helper", allow_int=False),
                           as_shape(x_shape, "x_shape", "axis_helper", allow_int=False))


def _broadcast_axes(y_shape, x_shape):
    # axis_helper without its checks, for reduce_to's core shapes on every backward
    lead = len(y_shape) - len(x_shape)
    return tuple(i for i in range(len(y_shape))
                 if i < lead or (x_shape[i - lead] == 1 and y_shape[i] != 1))


def reduce_to(dy, shape):
    """Sums the gradient ``dy`` of a broadcast result back to an operand of ``shape``."""
    shape = tuple(shape)
    if dy.shape() == shape:
        return dy
    axes = _broadcast_axes(dy.shape(), shape)
    if axes:
        dy = singa.ReduceSum(dy, list(axes), False)
    return singa.Reshape(dy, list(shape))


def expect_tensor(x, op, what="x"):
    """Raises a TypeError naming op and the argument unless x is a singa Tensor (the checks
    of functions that read x before an Operator call would check it)."""
    if not isinstance(x, Tensor):
        raise TypeError("%s: %s must be a singa Tensor, got %s" % (op, what, type(x).__name__))


def back_broadcast(y_shape, x_shape, x):
    """Apache SINGA's name for reduce_to(x, x_shape) (y_shape is x's current shape)."""
    if not isinstance(x, singa.Tensor):
        raise TypeError("back_broadcast: x must be a core tensor (Tensor.data), got %s"
                        % type(x).__name__)
    try:
        x_shape = tuple(int(d) for d in x_shape)
    except TypeError:
        raise TypeError("back_broadcast: x_shape must be a sequence of ints, got %r" % (x_shape,))
    return reduce_to(x, x_shape)


def ctensor2numpy(x):
    """The values of a core tensor as a numpy array (not for use inside ops: see the note)."""
    return singa.to_numpy(x)


# ---- operators ----------------------------------------------------------------------------
class Operator(object):
    """An operation with a forward and a backward on core tensors.

    Subclasses implement ``forward(self, *xs)`` returning a core tensor (or a tuple of them) and
    ``backward(self, *dys)`` returning one gradient per input, in order (a tuple, or a single core
    tensor for one input); None stands for "no gradient" (e.g. for labels). Calling an instance
    with Tensors returns a tuple of Tensors. ``differentiable = False`` marks operators whose
    outputs never carry a gradient (comparisons, casts to int...).
    """

    op_count = 0
    differentiable = True
    _pruning = False
    # True on a Cast of a float32 tensor to bfloat16 / float16 (autocast's master weights): it
    # takes its output's gradient in float32 too, so an operator whose kernel can write the
    # float32 gradient directly (a bf16 convolution's dW) skips the rounding and the cast back.
    takes_float32_grad = False

    def __init__(self, name=None):
        if name is None:
            name = "{}#{}".format(self.__class__.__name__, Operator.op_count)
            Operator.op_count += 1
        self.name = name
        self.src = []
        self.y_id2idx = {}
        self.requires_grad = False

    def __call__(self, *xs):
        return self._do_forward(*xs)

    def output_name(self, idx):
        """The name of output ``idx`` in a graph: ``<operator name>:<idx>``."""
        return "{}:{}".format(self.name, idx)

    def grad_name(self, idx):
        """The name of output ``idx``'s gradient: its output_name with ``_g``."""
        return "{}_g".format(self.output_name(idx))

    def input_shapes(self):
        """The shapes of the inputs of the last call (sonnx's export reads them)."""
        return self._x_shapes

    def output_meta(self):
        """(shape, dtype) of each output of the last call."""
        return self._y_meta

    def _do_forward(self, *xs):
        for i, x in enumerate(xs):
            if not isinstance(x, Tensor):
                raise TypeError("%s: input %d must be a singa Tensor, got %s"
                                % (type(self).__name__, i, type(x).__name__))
        if _state.autocast is not None:  # mixed precision (autograd/amp.py)
            xs = _state.autocast(self, xs)
        grads = _state.training and any(x.requires_grad for x in xs)
        # A non-differentiable operator (comparisons, shape queries...) is still its outputs'
        # creator, as in SINGA, but its outputs carry no gradient and it records no inputs.
        record = grads and self.differentiable
        self.requires_grad = record
        # The inputs whose gradient autograd.backward needs: returned (stores_grad) or flowing
        # on to a recorded operator. backward() computes only these; a direct call of
        # op.backward(dy) computes every input's gradient, as in SINGA.
        self._wanted = tuple(record and x.requires_grad and (x.stores_grad or _flows(x))
                             for x in xs)
        src = [(x.creator, id(x), x if x.stores_grad else None, x.stores_grad)
               for x in xs] if grads else []
        self.src = src if record else []
        # the inputs of a non-differentiable operator too (a comparison, a shape query), for
        # sonnx's export of the trace; backward reads src only. The trace holds the leaves
        # (constants made for this call: a number operand, a mask array), which their Dummy
        # creators hold only weakly and nothing else may keep alive until the export.
        self.trace_src = [(c, i, x if t is None and isinstance(c, Dummy) else t, s)
                          for (c, i, t, s), x in zip(src, xs)]
        self._x_shapes = tuple(x.data.shape() for x in xs)  # input_shapes()
        ys = self.forward(*(x.data for x in xs))
        if not isinstance(ys, tuple):
            ys = (ys,)
        self._y_meta = tuple((y.shape(), y.data_type()) for y in ys)
        creator = self if grads else None
        outs = tuple(Tensor(data=y, requires_grad=record, stores_grad=False,
                            creator=creator, name=self.output_name(i))
                     for i, y in enumerate(ys))
        self.y_id2idx = {id(y): i for i, y in enumerate(outs)} if grads else {}
        return outs

    def float32_grad(self, i):
        """Whether the gradient of input i may be returned in float32 whatever the input's
        dtype: the input is a low-precision Cast of a float32 tensor (takes_float32_grad)."""
        return i < len(self.src) and getattr(self.src[i][0], "takes_float32_grad", False)

    def need(self, i):
        """Whether backward computes the gradient of input i: always, except inside
        autograd.backward, which skips the gradients nobody uses."""
        return not self._pruning or self._wanted[i]

    @property
    def needs_grad(self):
        """need(i) for every input, as a tuple."""
        n = len(self._x_shapes) if hasattr(self, "_x_shapes") else 0
        return tuple(self.need(i) for i in range(n))

    def _do_backward(self, *dys, prune=False):
        """backward(*dys) with None dys as zeros, checked; ``prune``: skip unneeded gradients."""
        like = None
        for dy in dys:
            if dy is not None:
                like = dy
        dys = tuple(dy if dy is not None else fill(shape, 0, like, dtype)
                    for dy, (shape, dtype) in zip(dys, self._y_meta))
        if self.takes_float32_grad:
            pass  # the Cast itself returns the float32 gradient its input wants
        elif _state.autocast_dtype is not None or any(m[1] == singa.kBFloat16
                                                      for m in self._y_meta):
            dys = tuple(_as_output_dtype(dy, m[1]) for dy, m in zip(dys, self._y_meta))
        self._pruning = prune
        try:
            dxs = self.backward(*dys)
        finally:
            self._pruning = False
        if not isinstance(dxs, (tuple, list)):
            dxs = (dxs,)
        if len(dxs) != len(self.src):
            raise RuntimeError("%s.backward returned %d gradients for %d inputs"
                               % (type(self).__name__, len(dxs), len(self.src)))
        for i, (dx, shape) in enumerate(zip(dxs, self._x_shapes)):
            if dx is not None and dx.shape() != shape:
                raise RuntimeError("%s.backward: the gradient of input %d has shape %s, the "
                                   "input %s" % (type(self).__name__, i, dx.shape(), shape))
        return tuple(dxs)

    def forward(self, *xs):
        """Computes the outputs from the input core tensors (``singa_wrap.Tensor``), saving what
        backward needs; returns a core tensor or a tuple of them. Subclasses implement it; call the
        operator (``op(x)``) rather than forward, so that the result is recorded for backward."""
        raise NotImplementedError("%s.forward" % type(self).__name__)

    def backward(self, *dys):
        """Given one gradient per output (core tensors), returns the gradient of each input, in
        order: a tuple, or one core tensor for a single input; None where an input gets no gradient."""
        raise NotImplementedError("%s.backward" % type(self).__name__)

    def get_params(self):
        """The parameter Tensors the operator holds itself (none for most operators)."""
        return []


Operation = Operator


class Dummy(Operator):
    """The creator of a tensor that no recorded operator produced (inputs, parameters).
    Attribute reads fall through to the tensor (e.g. ``stores_grad``)."""

    def __init__(self, tensor, name=None):
        super(Dummy, self).__init__(name)
        self.y_id2idx = {id(tensor): 0}
        self._ref = weakref.ref(tensor)

    @property
    def tensor(self):
        """The tensor this Dummy stands for (None once it is garbage collected)."""
        return self._ref()

    def output_name(self, idx):
        """The tensor's own name (a Dummy has one output)."""
        return self.name

    def grad_name(self, idx):
        """The tensor's name with ``_g``."""
        return "{}_g".format(self.name)

    def __getattr__(self, name):
        if name.startswith("__") or name == "_ref":
            raise AttributeError(name)
        t = self._ref()
        if t is None:
            raise AttributeError("%s: its tensor is gone (no attribute %r)" % (self.name, name))
        return getattr(t, name)


def _flows(x):
    """True when x was produced by a recorded operator that wants some input's gradient (x's
    gradient propagates further). A recorded operator wanting none (autocast's Cast of the
    input batch) ends the flow: the convolution it feeds skips its dx."""
    c = x.creator
    return (c is not None and not isinstance(c, Dummy) and c.requires_grad
            and any(getattr(c, "_wanted", (True,))))


# ---- backward ------------------------------------------------------------------------------
def infer_dependency(op):
    """Counts, for every operator reachable from ``op`` through recorded inputs, how many input
    slots of reachable operators it feeds (the op_count Counter), and the same per input tensor
    id (the tensor_count Counter). ``op`` itself is not counted."""
    op_count, tensor_count = Counter(), Counter()
    seen, stack = {op}, [op]
    while stack:
        cur = stack.pop()
        for src_op, x_id, _, _ in cur.src:
            op_count[src_op] += 1
            tensor_count[x_id] += 1
            if src_op not in seen:
                seen.add(src_op)
                stack.append(src_op)
    return op_count, tensor_count


def _seed(y, dy):
    """The core tensor to start backward with: ones of y's shape (float32, or float16 for a
    float16 y) by default."""
    if dy is None:
        return fill(y.shape, 1.0, y.data, float_dtype(y.data))
    if isinstance(dy, Tensor):
        dy = dy.data
    if isinstance(dy, CTensor):
        if dy.shape() != y.shape:
            raise ShapeError("backward: dy has shape %s but y has shape %s"
                             % (dy.shape(), y.shape))
        return dy
    if isinstance(dy, (int, float, np.number)) and not isinstance(dy, bool):
        return fill(y.shape, float(dy), y.data, float_dtype(y.data))
    raise TypeError("backward: dy must be None, a number or a Tensor, got %s"
                    % type(dy).__name__)


def backward(y, dy=None, retain_graph=None):
    """Runs backpropagation from ``y`` and yields ``(tensor, gradient)`` for every tensor with
    ``stores_grad`` on the way (parameters), each once, when its gradient is complete.

    Args:
        y: a Tensor, usually the loss; any shape (the seed has y's shape).
        dy: the gradient of the objective with respect to y: None (ones), a number or a Tensor
            of y's shape.
        retain_graph: whether the operators keep what they saved, so that backward can run
            again through the same graph. None (the default) keeps it, as SINGA does (its GAN
            example runs backward twice on one loss), except while the device records a graph
            (Model's graph mode), where it is freed as backward passes so that the planner can
            recycle the memory. False frees it as backward passes (like PyTorch); a second
            backward then raises RuntimeError.
    """
    if not isinstance(y, Tensor):
        raise TypeError("backward: y must be a singa Tensor, got %s" % type(y).__name__)
    seed = _seed(y, dy)
    if y.stores_grad:
        yield y, Tensor(data=seed, requires_grad=False, name=y.name + "_g")
    root = y.creator
    if root is None or isinstance(root, Dummy) or not root.requires_grad:
        return
    if getattr(root, "_released", False):
        raise RuntimeError("backward: this graph already ran a backward pass that freed its "
                           "saved tensors (retain_graph=False, or while a graph was recorded)")
    if retain_graph is None:
        retain_graph = not y.data.device().graph_enabled()
    deps, _ = infer_dependency(root)
    grads = {root: [None] * len(root.y_id2idx)}
    grads[root][root.y_id2idx[id(y)]] = seed
    wanted = {}  # (op, output index) -> the tensor whose gradient is to be yielded
    ready = [root]
    while ready:
        op = ready.pop()
        dxs = op._do_backward(*grads.pop(op), prune=True)
        for (src_op, x_id, x, x_stores_grad), dx in zip(op.src, dxs):
            idx = src_op.y_id2idx[x_id]
            needed = x_stores_grad or (src_op.requires_grad and not isinstance(src_op, Dummy))
            if dx is not None and needed:
                slots = grads.setdefault(src_op, [None] * len(src_op.y_id2idx))
                slots[idx] = dx if slots[idx] is None else _accumulate(slots[idx], dx)
                if x_stores_grad and x is not None:
                    wanted[(src_op, idx)] = x
            deps[src_op] -= 1
            if deps[src_op] > 0:
                continue
            slots = grads.get(src_op)
            if slots is None:
                continue
            for i, g in enumerate(slots):
                if g is not None and (src_op, i) in wanted:
                    g = g if g.IsContiguous() else g.Contiguous()
                    yield wanted.pop((src_op, i)), Tensor(data=g, requires_grad=False,
                                                          name=src_op.grad_name(i))
            if src_op.requires_grad and not isinstance(src_op, Dummy):
                ready.append(src_op)
            else:
                del grads[src_op]
        if not retain_graph:
            _release(op)


def _accumulate(g, dx):
    """g + dx: two contributions to one gradient. Their dtypes differ only where one consumer
    of a Cast's low-precision output wrote a float32 gradient (Operator.float32_grad) and
    another did not: the sum is then float32."""
    if g.data_type() != dx.data_type():
        g, dx = (t if t.data_type() == singa.kFloat32 else t.AsType(singa.kFloat32)
                 for t in (g, dx))
    return singa.Add(g, dx)


def _release(op):
    """Drops what ``op`` saved for its backward, once that ran: the activations of a step are
    freed as backward passes them, not when the next step replaces the returned loss. While a
    graph is recorded this lets the planner recycle them, since a block that Python still
    references is never recycled."""
    for k, v in list(vars(op).items()):
        if isinstance(v, (CTensor, Tensor)) or (
                isinstance(v, (tuple, list)) and any(isinstance(e, (CTensor, Tensor)) for e in v)):
            setattr(op, k, None)
    op.src = []
    # and the leaves the trace held for an export (see _do_forward), as before it held them
    op.trace_src = [(c, i, t if s else None, s) for c, i, t, s in getattr(op, "trace_src", ())]
    op._released = True


def release_graph(*ys):
    """Frees what the operators behind tensors ``ys`` saved for backward (the graph that
    produced them), as backward(retain_graph=False) would have: for callers that know no
    further backward will run through it, e.g. a training loop about to start its next step
    while the previous loss is still referenced. A later backward through it raises."""
    stack = [y.creator for y in ys if isinstance(y, Tensor) and y.creator is not None]
    seen = set()
    while stack:
        op = stack.pop()
        if op in seen or isinstance(op, Dummy):
            continue
        seen.add(op)
        stack.extend(src_op for src_op, _, _, _ in op.src)
        if op.requires_grad:
            _release(op)


class Gradients(dict):
    """What gradients() returns: a dict from ``id(param)`` to the gradient, as SINGA code looks
    it up (``grads[id(p)]``). Indexing with the tensor itself works too; the dict keeps the
    tensors alive, so that their ids stay theirs."""

    def __init__(self, pairs):
        super(Gradients, self).__init__((id(p), g) for p, g in pairs)
        self.tensors = {id(p): p for p, _ in pairs}

    @staticmethod
    def _key(k):
        return id(k) if isinstance(k, Tensor) else k

    def __getitem__(self, k):
        return super(Gradients, self).__getitem__(self._key(k))

    def __contains__(self, k):
        return super(Gradients, self).__contains__(self._key(k))

    def get(self, k, default=None):
        return super(Gradients, self).get(self._key(k), default)

    def pop(self, k, *default):
        return super(Gradients, self).pop(self._key(k), *default)


def gradients(y, dy=None, retain_graph=None):
    """The gradients of y with respect to every tensor with stores_grad that backward(y, dy)
    reaches, as a dict keyed by id(tensor) (see Gradients)."""
    return Gradients(list(backward(y, dy, retain_graph)))


# tensors made outside autograd get a Dummy creator (see singa._core.Tensor.creator)
_state.leaf_creator = Dummy
