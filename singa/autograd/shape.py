"""Operations that rearrange elements: reshape, flatten, transpose, squeeze, unsqueeze, cat,
split, tile, expand, upsample, depth_to_space and space_to_depth.

    y = autograd.reshape(x, (0, -1))          # 0 copies the input's dimension, -1 is inferred
    y = autograd.flatten(x, axis=1)           # (N, C, H, W) -> (N, C*H*W)
    a, b = autograd.split(x, 1, [2, 3])
    y = autograd.tile(x, [2, 1])              # numpy.tile (repeats from the first axis: SINGA)
    y = autograd.expand(x, (4, 3))            # ONNX Expand (broadcast)

Gradients of the copying ops are the inverse rearrangement; of broadcasting ops (tile, expand,
upsample) the sum over the copies.
"""
import numpy as np

from .. import singa_wrap as singa
from .._args import as_float, as_int, as_shape, type_error
from .errors import ShapeError, AxisError, InputError
from .base import Operator, norm_axis, reduce_to


def _ints(values, op, param):
    # bools are refused as numpy refuses them for axes (and reshape((True, 2)) is a slip)
    if isinstance(values, (bool, np.bool_)) or (isinstance(values, (list, tuple)) and any(
            isinstance(v, (bool, np.bool_)) for v in values)):
        raise type_error(op, param, "int or tuple of ints", values)
    return as_shape(values, param, op)


class _Rearrange(Operator):
    """Forward is a reshape/transpose of x; backward reshapes dy back to x's shape."""

    def backward(self, dy):
        return singa.Reshape(dy, list(self.x_shape))


class Reshape(_Rearrange):
    """numpy.reshape, where a 0 entry copies the input's dimension at that position."""

    def __init__(self, shape):
        super(Reshape, self).__init__()
        self.shape = _ints(shape, "reshape", "shape")

    def forward(self, x):
        self.x_shape = x.shape()
        shape = [self.x_shape[i] if s == 0 and i < len(self.x_shape) else s
                 for i, s in enumerate(self.shape)]
        return singa.Reshape(x, shape)


def reshape(x, shape):
    """x with a new shape (one entry may be -1; 0 keeps the input's dimension)."""
    return Reshape(shape)(x)[0]


class Flatten(_Rearrange):
    """(d0, ..., dn) -> (d0 * ... * d(axis-1), d(axis) * ... * dn); axis in [-r, r]."""

    def __init__(self, axis=1):
        super(Flatten, self).__init__()
        self.axis = axis

    def forward(self, x):
        self.x_shape = x.shape()
        axis = norm_axis(self.axis, len(self.x_shape), "flatten", allow_end=True)
        outer = int(np.prod(self.x_shape[:axis], dtype=np.int64))
        inner = int(np.prod(self.x_shape[axis:], dtype=np.int64))
        return singa.Reshape(x, [outer, inner])


def flatten(x, axis=1):
    """x as a matrix: the axes before ``axis`` become rows, the rest columns."""
    return Flatten(axis)(x)[0]


class Transpose(Operator):
    """numpy.transpose: permutes the axes (reverses them when perm is None)."""

    def __init__(self, perm=None):
        super(Transpose, self).__init__()
        self.perm = None if perm is None else _ints(perm, "transpose", "shape")

    def forward(self, x):
        nd = x.nDim()
        perm = list(range(nd))[::-1] if self.perm is None else \
            [norm_axis(a, nd, "transpose") for a in self.perm]
        if sorted(perm) != list(range(nd)):
            raise AxisError("transpose: %r is not a permutation of the %d axes of a tensor "
                            "of shape %s" % (self.perm, nd, x.shape()))
        self.perm = perm
        return singa.Transpose(x, perm)

    def backward(self, dy):
        return singa.Transpose(dy, list(np.argsort(self.perm)))


def transpose(x, shape=None):
    """x with its axes permuted by ``shape`` (a permutation; None reverses them)."""
    return Transpose(shape)(x)[0]


class Squeeze(_Rearrange):
    """Removes the listed axes, which must have size 1 (all size-1 axes when axis is empty)."""

    def __init__(self, axis=[]):  # noqa: B006  (SINGA's default; never mutated)
        super(Squeeze, self).__init__()
        self.axis = [] if axis is None else _ints(axis, "squeeze", "axis")

    def forward(self, x):
        self.x_shape = x.shape()
        nd = len(self.x_shape)
        axes = [norm_axis(a, nd, "squeeze") for a in self.axis]
        for a in axes:
            if self.x_shape[a] != 1:
                raise ShapeError("squeeze: axis %d of shape %s has size %d, not 1"
                                 % (a, self.x_shape, self.x_shape[a]))
        if not axes:
            axes = [i for i, d in enumerate(self.x_shape) if d == 1]
        return singa.Reshape(x, [d for i, d in enumerate(self.x_shape) if i not in axes])


def squeeze(x, axis=[]):  # noqa: B006  (SINGA's default; never mutated)
    """x without the size-1 axes listed in ``axis`` (all of them by default)."""
    return Squeeze(axis)(x)[0]


class Unsqueeze(_Rearrange):
    """Inserts size-1 axes; ``axis`` gives their positions in the output."""

    def __init__(self, axis):
        super(Unsqueeze, self).__init__()
        self.axis = _ints(axis, "unsqueeze", "axis")

    def forward(self, x):
        self.x_shape = x.shape()
        out_nd = len(self.x_shape) + len(self.axis)
        axes = sorted(norm_axis(a, out_nd, "unsqueeze") for a in self.axis)
        if len(set(axes)) != len(axes):
            raise AxisError("unsqueeze: repeated axis in %r" % (self.axis,))
        shape = list(self.x_shape)
        for a in axes:
            shape.insert(a, 1)
        return singa.Reshape(x, shape)


def unsqueeze(x, axis=-1):
    """x with size-1 axes inserted at the output positions ``axis`` (an int or a list)."""
    return Unsqueeze(axis)(x)[0]


class Concat(Operator):
    """Joins tensors along ``axis``; the other dimensions must agree."""

    def __init__(self, axis=0):
        super(Concat, self).__init__()
        self.axis = axis

    def forward(self, *xs):
        if not xs:
            raise InputError("cat: expected at least one tensor")
        self.axis = norm_axis(self.axis, xs[0].nDim(), "cat")
        self.sizes = [x.shape()[self.axis] if x.nDim() > self.axis else 0 for x in xs]
        return singa.ConcatOn(list(xs), self.axis)

    def backward(self, dy):
        out, start = [], 0
        for n in self.sizes:
            out.append(singa.SliceOn(dy, start, start + n, self.axis))
            start += n
        return tuple(out)


def cat(xs, axis=0):
    """The tensors of list ``xs`` joined along ``axis``."""
    if not isinstance(xs, (list, tuple)):
        raise TypeError("cat: expected a list of Tensors, got %s" % type(xs).__name__)
    return Concat(axis)(*xs)[0]


class Split(Operator):
    """Splits x along ``axis`` into pieces of the sizes in ``parts``, or into ``num_output``
    equal pieces."""

    def __init__(self, axis, parts, num_output=None):
        super(Split, self).__init__()
        if parts is None and num_output is None:
            raise InputError("split: give parts or num_output")
        self.axis = axis
        self.parts = None if parts is None else _ints(parts, "split", "parts")
        self.num_output = num_output

    def forward(self, x):
        self.axis = norm_axis(self.axis, x.nDim(), "split")
        n = x.shape()[self.axis]
        if self.parts is None:
            k = as_int(self.num_output, "num_output", "split")
            if k <= 0 or n % k:
                raise ShapeError("split: axis %d of shape %s (size %d) cannot be split into "
                                 "%d equal parts" % (self.axis, x.shape(), n, k))
            self.parts = [n // k] * k
        if any(p < 0 for p in self.parts) or sum(self.parts) != n:
            raise ShapeError("split: parts %s do not add up to the size %d of axis %d of "
                             "shape %s" % (self.parts, n, self.axis, x.shape()))
        out, start = [], 0
        for p in self.parts:
            out.append(singa.SliceOn(x, start, start + p, self.axis))
            start += p
        return tuple(out)

    def backward(self, *dys):
        return singa.ConcatOn(list(dys), self.axis)


def split(x, axis, parts, num_output=None):
    """A tuple of the pieces of x along ``axis`` (sizes ``parts``, or num_output equal ones)."""
    return Split(axis, parts, num_output)(x)


class _Broadcasting(Operator):
    """Forward: x reshaped to ``view`` and broadcast to ``full``, then reshaped to the output;
    backward: the sum over the broadcast copies."""

    def plan(self, shape):
        raise NotImplementedError

    def forward(self, x):
        self.x_shape = x.shape()
        self.view, self.full, out = self.plan(list(self.x_shape))
        y = singa.Broadcast(singa.Reshape(x, self.view), self.full)
        return singa.Reshape(y.Contiguous(), out)

    def backward(self, dy):
        dy = reduce_to(singa.Reshape(dy, self.full), self.view)
        return singa.Reshape(dy, list(self.x_shape))


class Tile(_Broadcasting):
    """Repeats x ``repeats[i]`` times along axis i (numpy.tile where len(repeats) >= x.ndim).

    With fewer repeats than axes, SINGA's rule, not numpy's: the repeats apply from the first
    axis and the remaining axes repeat once, so tile(x of shape (1, 10), 64) has shape (64, 10)
    (numpy.tile pads the repeats at the front and gives (1, 640); SINGA 5.1's healthcare models
    rely on SINGA's rule). With more repeats than axes, x first gains leading axes of size 1, as
    in both.
    """

    def __init__(self, repeats):
        super(Tile, self).__init__()
        self.repeats = _ints(repeats, "tile", "repeats")
        if any(r < 0 for r in self.repeats):
            raise InputError("tile: repeats must not be negative, got %r" % (self.repeats,))

    def plan(self, shape):
        nd = max(len(shape), len(self.repeats))
        shape = [1] * (nd - len(shape)) + shape
        reps = self.repeats + [1] * (nd - len(self.repeats))  # SINGA: from the first axis
        view = [v for d in shape for v in (1, d)]
        full = [v for r, d in zip(reps, shape) for v in (r, d)]
        return view, full, [r * d for r, d in zip(reps, shape)]


def tile(x, repeats):
    """x repeated ``repeats[i]`` times along axis i; fewer repeats than axes apply from the first
    axis, as in SINGA (see Tile)."""
    return Tile(repeats)(x)[0]


class Expand(_Broadcasting):
    """ONNX Expand: x broadcast with ``shape`` (numpy rules, in both directions)."""

    def __init__(self, shape):
        super(Expand, self).__init__()
        self.shape = _ints(shape, "expand", "shape")

    def plan(self, shape):
        try:
            out = list(np.broadcast_shapes(tuple(shape), tuple(self.shape)))
        except (ValueError, RuntimeError):  # RuntimeError: more axes than numpy handles
            raise ShapeError("expand: shape %s cannot be broadcast to %s"
                             % (tuple(shape), tuple(self.shape)))
        view = [1] * (len(out) - len(shape)) + shape
        return view, out, out


def expand(x, shape):
    """x broadcast to ``shape`` (ONNX Expand)."""
    return Expand(shape)(x)[0]


class UpSample(_Broadcasting):
    """Nearest-neighbour upsampling: every element repeated ``scales[i]`` times along axis i
    (integer scales, one per axis)."""

    def __init__(self, mode, scales):
        super(UpSample, self).__init__()
        if mode != "nearest":
            raise InputError("upsample: only mode 'nearest' is supported, got %r" % (mode,))
        if not isinstance(scales, (list, tuple, np.ndarray)):
            raise type_error("upsample", "scales", "sequence of numbers", scales)
        # is_integer, not == int(s): int() of inf or nan raises without naming the op
        if any(not as_float(s, "scales", "upsample").is_integer() or s < 1 for s in scales):
            raise InputError("upsample: scales must be positive integers, got %r" % (scales,))
        self.mode, self.scales = mode, [int(s) for s in scales]

    def plan(self, shape):
        if len(self.scales) != len(shape):
            raise ShapeError("upsample: %d scales for an input of shape %s"
                             % (len(self.scales), tuple(shape)))
        view = [v for d in shape for v in (d, 1)]
        full = [v for s, d in zip(self.scales, shape) for v in (d, s)]
        return view, full, [s * d for s, d in zip(self.scales, shape)]


def upsample(x, mode, scales):
    """x upsampled by integer ``scales`` per axis (mode 'nearest')."""
    return UpSample(mode, scales)(x)[0]


class _Permute(Operator):
    """y = reshape(transpose(reshape(x, s1), perm), s2); backward the inverse."""

    def forward(self, x):
        if x.nDim() != 4:
            raise ShapeError("%s: expected a 4-d input (N, C, H, W), got shape %s"
                             % (self.op, x.shape()))
        self.x_shape = x.shape()
        s1, self.perm, s2 = self.plan(*self.x_shape)
        self.mid = list(np.array(s1)[self.perm])
        return singa.Reshape(singa.Transpose(singa.Reshape(x, s1), self.perm).Contiguous(), s2)

    def backward(self, dy):
        dx = singa.Transpose(singa.Reshape(dy, self.mid), list(np.argsort(self.perm)))
        return singa.Reshape(dx.Contiguous(), list(self.x_shape))

    def check(self, ok, what):
        if not ok:
            raise ShapeError("%s: %s (input shape %s, blocksize %d)"
                             % (self.op, what, self.x_shape, self.b))


class DepthToSpace(_Permute):
    """(N, C*b*b, H, W) -> (N, C, H*b, W*b); mode 'DCR' (depth-column-row) or 'CRD'."""
    op = "depth_to_space"

    def __init__(self, blocksize, mode="DCR"):
        super(DepthToSpace, self).__init__()
        if mode not in ("DCR", "CRD"):
            raise InputError("depth_to_space: mode must be 'DCR' or 'CRD', got %r" % (mode,))
        self.b, self.mode = as_int(blocksize, "blocksize", "depth_to_space"), mode

    def plan(self, n, c, h, w):
        """(the 6-d shape to view x as, the permutation, the output shape) for an (n, c, h, w) input."""
        b = self.b
        self.check(b > 0 and c % (b * b) == 0, "the channels must be divisible by blocksize^2")
        c2 = c // (b * b)
        if self.mode == "DCR":
            return [n, b, b, c2, h, w], [0, 3, 4, 1, 5, 2], [n, c2, h * b, w * b]
        return [n, c2, b, b, h, w], [0, 1, 4, 2, 5, 3], [n, c2, h * b, w * b]


def depth_to_space(x, blocksize, mode="DCR"):
    """Moves blocks of channels into space (ONNX DepthToSpace)."""
    return DepthToSpace(blocksize, mode)(x)[0]


class SpaceToDepth(_Permute):
    """(N, C, H*b, W*b) -> (N, C*b*b, H, W): the inverse of depth_to_space with the same
    ``mode``; 'DCR' is ONNX SpaceToDepth, 'CRD' keeps each channel's block together."""
    op = "space_to_depth"

    def __init__(self, blocksize, mode="DCR"):
        super(SpaceToDepth, self).__init__()
        if mode not in ("DCR", "CRD"):
            raise InputError("space_to_depth: mode must be 'DCR' or 'CRD', got %r" % (mode,))
        self.b, self.mode = as_int(blocksize, "blocksize", "space_to_depth"), mode

    def plan(self, n, c, h, w):
        """(the 6-d shape to view x as, the permutation, the output shape) for an (n, c, h, w) input."""
        b = self.b
        self.check(b > 0 and h % b == 0 and w % b == 0, "H and W must be divisible by blocksize")
        perm = [0, 3, 5, 1, 2, 4] if self.mode == "DCR" else [0, 1, 3, 5, 2, 4]
        return [n, c, h // b, b, w // b, b], perm, [n, c * b * b, h // b, w // b]


def space_to_depth(x, blocksize, mode="DCR"):
    """Moves blocks of space into channels (the inverse of depth_to_space in ``mode``)."""
    return SpaceToDepth(blocksize, mode)(x)[0]
