"""Indexing: slice, gather, pad, scatter_elements, onehot, embedding, and the shape queries.

    y = autograd.slice(x, starts=[0, 1], ends=[2, 3], axes=[0, 1], steps=[1, 1])
    y = autograd.gather(x, 0, [2, 0, 2])        # numpy.take(x, indices, axis)
    y = autograd.pad(x, "reflect", [0, 1, 0, 1])  # ONNX pads: all begins, then all ends
    e = autograd.embedding(ids, table)          # table[ids]; ids int32 (or integral float32)

Indices given as Python lists or numpy arrays are constants of the operator (checked when it
runs); index Tensors are checked by the core. The backward of a gather adds each output slice's
gradient at its index (repeated indices accumulate), through the core's IndexSelect / IndexAdd.
Only constant_of_shape and nonzero read tensor values into Python, so only those two cannot be
buffered in a graph.
"""
import numpy as np

from .. import singa_wrap as singa
from .._args import as_axes, as_float, as_int, as_shape, type_error
from .errors import ShapeError, AxisError, InputError
from ..tensor import Tensor
from . import base
from .base import Operator, norm_axis, fill, float_dtype
from .math import _select
from .errors import NoGradientError

_INT = singa.kInt


# ---- gather along one axis --------------------------------------------------------------------
def _norm_indices(indices, n, op):
    """Integer numpy indices in [0, n); negative ones count from the end."""
    idx = np.asarray(indices)
    if idx.dtype.kind == "f" and np.all(idx == np.round(idx)):
        idx = idx.astype(np.int64)
    if idx.dtype.kind not in "iu":
        raise TypeError("%s: indices must be integers, got %r" % (op, indices))
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        raise AxisError("%s: index %d is out of range for an axis of size %d"
                        % (op, int(idx[bad].flat[0]), n))
    return np.where(idx < 0, idx + n, idx).astype(np.int32)


def take(x, axis, idx):
    """numpy.take(x, idx, axis) for integer numpy ``idx`` in range."""
    return singa.IndexSelect(x, axis, base.const(idx, x))


def take_backward(dy, axis, idx, x_shape):
    """The gradient of take: zeros of x_shape plus dy's slices added at their indices."""
    return singa.IndexAdd(dy, axis, base.const(idx, dy), list(x_shape))


class Gather(Operator):
    """numpy.take(x, indices, axis): out shape x.shape[:axis] + indices' shape +
    x.shape[axis+1:]. ``indices`` is an int, a (nested) list, a numpy array or an integer
    Tensor (whose values are checked when the gather runs)."""

    def __init__(self, axis, indices):
        super(Gather, self).__init__()
        self.axis, self.indices = axis, indices

    def forward(self, x):
        self.axis = norm_axis(self.axis, x.nDim(), "gather")
        self.x_shape = x.shape()
        if isinstance(self.indices, Tensor):
            self.idx = self.indices.data
        else:
            idx = _norm_indices(self.indices, self.x_shape[self.axis], "gather")
            self.idx = base.const(idx, x)
        return singa.IndexSelect(x, self.axis, self.idx)

    def backward(self, dy):
        return singa.IndexAdd(dy, self.axis, self.idx, list(self.x_shape))


def gather(x, axis, indices):
    """The entries of x at ``indices`` along ``axis`` (numpy.take)."""
    return Gather(axis, indices)(x)[0]


class Slice(Operator):
    """x[start:end:step] along each listed axis (ONNX Slice; numpy clamping, negative steps)."""

    def __init__(self, starts, ends, axes=None, steps=None):
        super(Slice, self).__init__()
        self.starts = as_shape(starts, "starts", "slice", allow_int=False)
        self.ends = as_shape(ends, "ends", "slice", allow_int=False)
        self.axes = as_axes(axes, "axes", "slice")
        self.steps = [1] * len(self.starts) if steps is None else \
            as_shape(steps, "steps", "slice", allow_int=False)
        if not len(self.starts) == len(self.ends) == len(self.steps) or \
                (self.axes is not None and len(self.axes) != len(self.starts)):
            raise InputError("slice: starts %r, ends %r, axes %r and steps %r differ in length"
                             % (starts, ends, axes, steps))
        if 0 in self.steps:
            raise InputError("slice: steps must not be 0, got %r" % (steps,))

    def forward(self, x):
        nd = x.nDim()
        axes = list(range(len(self.starts))) if self.axes is None else self.axes
        axes = [norm_axis(a, nd, "slice") for a in axes]
        if len(set(axes)) != len(axes):
            raise AxisError("slice: repeated axis in %r" % (self.axes,))
        self.plan = []
        for a, s, e, st in zip(axes, self.starts, self.ends, self.steps):
            n = x.shape()[a]
            s, e = (int(np.clip(v, -n - 1, n + 1)) for v in (s, e))
            idx = np.arange(n)[s:e:int(st)].astype(np.int32)
            self.plan.append((a, x.shape(), idx))
            if idx.size and (idx.size == 1 or int(st) == 1):  # a contiguous run: copy it
                x = singa.SliceOn(x, int(idx[0]), int(idx[-1]) + 1, a)
            else:
                x = take(x, a, idx)
        return x

    def backward(self, dy):
        for a, shape, idx in reversed(self.plan):
            dy = take_backward(dy, a, idx, shape)
        return dy


def slice(x, starts, ends, axes=None, steps=None):
    """x sliced along ``axes`` from ``starts`` to ``ends`` with ``steps`` (ONNX Slice)."""
    return Slice(starts, ends, axes, steps)(x)[0]


class Pad(Operator):
    """ONNX Pad: ``pads`` = [begin_0, ..., begin_r-1, end_0, ..., end_r-1] (non-negative);
    mode 'constant' (with ``constant``), 'reflect' (mirror without the edge) or 'edge'."""

    def __init__(self, mode, pads, constant=0.0):
        super(Pad, self).__init__()
        if mode not in ("constant", "reflect", "edge"):
            raise InputError("pad: mode must be 'constant', 'reflect' or 'edge', got %r" % (mode,))
        self.mode, self.pads = mode, as_shape(pads, "pads", "pad", allow_int=False)
        self.constant = as_float(constant, "constant", "pad")
        if any(p < 0 for p in self.pads):
            raise InputError("pad: pads must not be negative, got %r" % (pads,))

    def forward(self, x):
        nd = x.nDim()
        if len(self.pads) != 2 * nd:
            raise ShapeError("pad: %d pads for a tensor of rank %d (shape %s); expected %d"
                             % (len(self.pads), nd, x.shape(), 2 * nd))
        self.plan = []
        for a in range(nd):
            b, e, n = self.pads[a], self.pads[a + nd], x.shape()[a]
            if b == 0 and e == 0:
                continue
            shape = x.shape()
            if self.mode == "constant":
                parts = []
                for k in (b, e):
                    s = list(shape)
                    s[a] = k
                    parts.append(fill(s, self.constant, x) if k else None)
                x = singa.ConcatOn([p for p in (parts[0], x, parts[1]) if p is not None], a)
                self.plan.append((a, shape, (b, n)))
                continue
            if n == 0:
                raise ShapeError("pad: cannot pad the empty axis %d in mode %r"
                                 % (a, self.mode))
            idx = np.arange(-b, n + e)
            if self.mode == "edge":
                idx = np.clip(idx, 0, n - 1)
            else:
                idx = _reflect(idx, n)
            idx = idx.astype(np.int32)
            self.plan.append((a, shape, idx))
            x = take(x, a, idx)
        return x

    def backward(self, dy):
        for a, shape, how in reversed(self.plan):
            if isinstance(how, tuple):
                dy = singa.SliceOn(dy, how[0], how[0] + how[1], a)
            else:
                dy = take_backward(dy, a, how, shape)
        return dy


def _reflect(idx, n):
    """numpy.pad's 'reflect' positions for any pad size: mirrored at the edges (which are not
    repeated), again and again when a pad is as large as the axis or larger."""
    if n == 1:
        return np.zeros_like(idx)
    period = 2 * (n - 1)
    m = np.mod(idx, period)
    return np.where(m < n, m, period - m)


def pad(x, mode, pads, constant=0.0):
    """x padded by ``pads`` (ONNX layout) in ``mode`` 'constant', 'reflect' or 'edge'."""
    return Pad(mode, pads, constant)(x)[0]


class ScatterElements(Operator):
    """ONNX ScatterElements: a copy of x where, for every position of ``indices`` (same shape
    as ``updates``), the element at that index along ``axis`` is replaced by the update.
    indices and updates are constants of the operator; x gets the gradient where it survives."""

    def __init__(self, indices, updates, axis=0):
        super(ScatterElements, self).__init__()
        if isinstance(indices, Tensor):
            indices = indices.to_numpy()
        self.indices, self.updates, self.axis = np.asarray(indices), updates, axis

    def forward(self, x):
        shape = x.shape()
        axis = norm_axis(self.axis, len(shape), "scatter_elements")
        idx = _norm_indices(self.indices, shape[axis], "scatter_elements")
        upd = self.updates.data if isinstance(self.updates, Tensor) else self.updates
        if not isinstance(upd, singa.Tensor):
            upd = base.const(np.asarray(upd, dtype=np.float32), x)
        if idx.ndim != len(shape) or upd.shape() != idx.shape or \
                any(i > s for i, s in zip(idx.shape, shape)):
            raise ShapeError("scatter_elements: indices %s and updates %s must have the "
                             "same shape, of x's rank and within x's shape %s"
                             % (idx.shape, upd.shape(), shape))
        # the flat position in x written by every update; later updates win on repeats
        where = np.indices(idx.shape)
        where[axis] = idx
        target = np.ravel_multi_index(tuple(where), shape).reshape(-1)
        source = np.full(int(np.prod(shape)), idx.size, dtype=np.int32)  # idx.size: a zero
        source[target] = np.arange(idx.size, dtype=np.int32)
        self.keep = base.const((source == idx.size).astype(np.float32).reshape(shape), x)
        flat = singa.ConcatOn([singa.Reshape(upd, [idx.size]), fill([1], 0, upd)], 0)
        placed = singa.Reshape(take(flat, 0, source), list(shape))
        if placed.data_type() != x.data_type():
            placed = placed.AsType(x.data_type())
        if x.data_type() == _INT:
            return singa.Add(singa.EltwiseMult(x, self.keep.AsType(_INT)), placed)
        # selected, not multiplied by the 0/1 mask: a NaN or inf of x that an update
        # overwrites would survive as NaN (x * 0)
        return singa.Add(_select(x, self.keep), placed)

    def backward(self, dy):
        return singa.EltwiseMult(dy, self.keep)


def scatter_elements(x, indices, updates, axis=0):
    """x with ``updates`` written at ``indices`` along ``axis`` (ONNX ScatterElements)."""
    return ScatterElements(indices, updates, axis)(x)[0]


class OneHot(Operator):
    """One-hot encoding of integer ``indices`` (values in [-depth, depth)), with a new axis of
    size ``depth`` at ``axis``; ``values`` = [off_value, on_value]. Float32 output."""
    differentiable = False

    def __init__(self, axis, depth, values):
        super(OneHot, self).__init__()
        self.axis, self.depth = axis, as_int(depth, "depth", "onehot")
        vals = np.asarray(values.numpy() if hasattr(values, "numpy") else values).reshape(-1)
        if vals.size != 2:
            raise InputError("onehot: values must hold [off_value, on_value], got %d values"
                             % vals.size)
        self.off, self.on = float(vals[0]), float(vals[1])

    def forward(self, indices):
        nd = indices.nDim()
        axis = norm_axis(self.axis, nd + 1, "onehot")
        ids = indices if indices.data_type() == singa.kFloat32 else indices.AsType(singa.kFloat32)
        ids = singa.Add(ids, singa.EltwiseMult(singa.LT(ids, 0.0), float(self.depth)))
        shape = list(indices.shape())
        ids = singa.Reshape(ids, shape[:axis] + [1] + shape[axis:])
        arange = [1] * (nd + 1)
        arange[axis] = self.depth
        self.range = base.const(np.arange(self.depth, dtype=np.float32).reshape(arange), ids)
        hit = singa.EQ(ids, self.range)
        return singa.Add(singa.EltwiseMult(hit, self.on - self.off), self.off)

    def backward(self, dy):
        raise NoGradientError("OneHot has no gradient")


def onehot(axis, indices, depth, values):
    """The one-hot encoding of ``indices`` with ``depth`` classes along ``axis``."""
    return OneHot(axis, depth, values)(indices)[0]


class Embedding(Operator):
    """table[ids]: rows of w (V, D) picked by the integer ids x (any shape) -> x.shape + (D,).
    The gradient of w adds every row's gradient at its id. The ids get a gradient of their
    shape, as in SINGA (its callers unpack ``dx, dW``): zeros, since integer ids are not
    differentiable."""

    def forward(self, x, w):
        if w.nDim() != 2:
            raise ShapeError("embedding: the table must be a matrix (V, D), got shape %s"
                             % (w.shape(),))
        self.x, self.w_shape = x, w.shape()
        return singa.IndexSelect(w, 0, x)

    def backward(self, dy):
        dx = fill(self.x.shape(), 0, dy, float_dtype(dy)) if self.need(0) else None
        return dx, singa.IndexAdd(dy, 0, self.x, list(self.w_shape))


def embedding(x, w):
    """The rows of table w at the integer ids x."""
    return Embedding()(x, w)[0]


# ---- value and shape queries (no gradient) -------------------------------------------------
class _Query(Operator):
    """A query of x's values or shape: the creator of its output, which carries no gradient."""
    differentiable = False

    def backward(self, dy):
        raise NoGradientError("%s has no gradient" % type(self).__name__)


class Shape(_Query):
    """The shape of x as a 1-d int32 tensor."""

    def forward(self, x):
        self.x_shape = x.shape()
        return base.const(np.asarray(x.shape(), dtype=np.int32).reshape(-1), x)

    def backward(self, dy):
        # The shape does not depend on x's values: x's gradient is zero. (SINGA returns
        # dy's shape as a Python list here, which is no gradient at all.)
        return fill(self.x_shape, 0, dy, singa.kFloat32)


def shape(x):
    """x's shape as an int32 Tensor."""
    return Shape()(x)[0]


class ConstantOfShape(_Query):
    """A float32 tensor filled with ``value``, of the shape held by 1-d tensor x (eager only:
    reads x)."""

    def __init__(self, value=0.0):
        super(ConstantOfShape, self).__init__()
        v = np.asarray(value.numpy() if hasattr(value, "numpy") else value).reshape(-1)
        if v.size != 1:
            raise InputError("constant_of_shape: value must hold one element, got %d"
                             % v.size)
        if v.dtype.kind not in "biuf":  # None, strings: float() would name neither op nor value
            raise type_error("constant_of_shape", "value", "float", value)
        self.value = float(v[0])

    def forward(self, x):
        dims = singa.to_numpy(x).reshape(-1)
        # not finite: int() of inf below would raise OverflowError without naming the op
        if (dims < 0).any() or not np.isfinite(dims).all() or np.any(dims != np.round(dims)):
            raise InputError("constant_of_shape: the shape must hold non-negative integers, "
                             "got %s" % (dims,))
        return fill([int(d) for d in dims], self.value, x, singa.kFloat32)


def constant_of_shape(x, value=0):
    """A tensor of the shape held by x, filled with ``value``."""
    return ConstantOfShape(value)(x)[0]


class NonZero(_Query):
    """The indices of the non-zero elements, (rank, count) int32 (eager only: reads x). A 0-d x
    gives (0, 1) or (0, 0), ONNX NonZero's rule (numpy refuses 0-d input)."""

    def forward(self, x):
        a = singa.to_numpy(x)
        if a.ndim == 0:
            nz = np.zeros((0, int(a != 0)), np.int32)
        else:
            nz = np.array(np.nonzero(a), dtype=np.int32).reshape(a.ndim, -1)
        return base.const(nz, x)


def nonzero(x):
    """Indices of the non-zero elements of x, one row per axis."""
    return NonZero()(x)[0]
