"""Import handlers for the ONNX ops that rearrange, index, reduce, compare or cast tensors,
and Clip (registered into ops.HANDLERS; the activations with attributes come from the op
schema, schema_map.py).

    outs = HANDLERS["Squeeze"]([x, axes], {}, 13, {})

Inputs that ONNX moved from attributes to tensors at some opset (Squeeze / Unsqueeze /
ReduceSum axes and Split's split at 13, ReduceMean's axes at 18, Clip's bounds at 11, Slice's
starts... at 10) are read from whichever form the node carries, so both import. Such inputs
are read into Python (numpy), as singa's operators take them as constants.

Booleans: singa has no bool tensor; comparisons and logical ops give float 0/1 and a bool
ONNX tensor is read as float 0/1 (non-zero = true).

Types singa has no dtype for (bfloat16, the float8 / float4 / int4 / int2 families, strings):
such values stay numpy arrays on the host (``holdable`` is False), and a Cast to or from one
runs there with onnx's reference implementation. Such a Cast has no gradient: with
autograd.training on it raises when its input requires one.
"""

import numpy as np

from .. import autograd, tensor
from .. import singa_wrap as singa
from . import names
from .errors import SonnxError, UnsupportedOpError, reference_errors
from .ops_resize import resize_axes, resize_by_axis_maps


def _np(t):
    return np.asarray(t if isinstance(t, np.ndarray) else tensor.to_numpy(t))


def ints(t):
    """The values of a shape-like input (Tensor or numpy) as a list of ints; SonnxError for
    values that are not integers (ONNX types these inputs int64; a float NaN leaked numpy's
    conversion error)."""
    a = _np(t).reshape(-1)
    if a.dtype.kind == "f" and not (np.isfinite(a).all() and (a == np.round(a)).all()):
        raise SonnxError("a shape, axes or pads input holds non-integer values %s" % (a[:8],))
    return [int(v) for v in a]


def _given(ins, i):
    return len(ins) > i and ins[i] is not None


def _axes(ins, i, attrs, opset, since):
    """Axes from input i (from opset ``since``) or from the 'axes' attribute (before it);
    None when absent."""
    if opset >= since:
        return ints(ins[i]) if _given(ins, i) else None
    return list(attrs["axes"]) if "axes" in attrs else None


def scalar(t, op, what):
    """The one value of a scalar input (a 0-d or one-element Tensor or array); SonnxError naming
    the op and the input otherwise (an empty bound used to leak numpy's IndexError)."""
    a = _np(t).reshape(-1)
    if a.size != 1:
        raise SonnxError("%s: %s must hold one value, got %d" % (op, what, a.size))
    return a[0]


def _clip(ins, attrs, opset, cache):
    if opset >= 11:
        lo = float(scalar(ins[1], "Clip", "min")) if _given(ins, 1) else None
        hi = float(scalar(ins[2], "Clip", "max")) if _given(ins, 2) else None
    else:
        lo, hi = attrs.get("min"), attrs.get("max")
    if lo is not None and hi is not None and lo > hi:  # ONNX: every value becomes max
        lo = hi
    return [autograd.clip(ins[0], lo, hi)]


def _squeeze(ins, attrs, opset, cache):
    return [autograd.squeeze(ins[0], _axes(ins, 1, attrs, opset, 13) or [])]


def _unsqueeze(ins, attrs, opset, cache):
    axes = _axes(ins, 1, attrs, opset, 13)
    if not axes:
        raise SonnxError("Unsqueeze: the axes are missing (opset %d)" % opset)
    return [autograd.unsqueeze(ins[0], axes)]


def _slice(ins, attrs, opset, cache):
    if opset >= 10:
        starts, ends = ints(ins[1]), ints(ins[2])
        axes = ints(ins[3]) if _given(ins, 3) else None
        steps = ints(ins[4]) if _given(ins, 4) else None
    else:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes, steps = attrs.get("axes"), None
    return [autograd.slice(ins[0], starts, ends, axes, steps)]


def _gather(ins, attrs, opset, cache):
    # index Tensors (token ids) stay on the device, so that a graph records the gather; the
    # core checks and wraps negative ones when it runs, as autograd.gather does host indices
    idx = ins[1] if isinstance(ins[1], tensor.Tensor) else _np(ins[1]).astype(np.int64)
    return [autograd.gather(ins[0], int(attrs.get("axis", 0)), idx)]


def _split(ins, attrs, opset, cache):
    x, axis, n = ins[0], int(attrs.get("axis", 0)), attrs["__outputs__"]
    if not -len(x.shape) <= axis < len(x.shape):  # x.shape[axis] below would raise IndexError
        raise SonnxError("Split: axis %d is out of range for an input of shape %s"
                         % (axis, tuple(x.shape)))
    if opset >= 13:
        parts = ints(ins[1]) if _given(ins, 1) else None
    else:
        parts = list(attrs["split"]) if "split" in attrs else None
    if parts is None:
        size = x.shape[axis]
        step = -(-size // n)  # opset 18: the last piece may be smaller
        parts = [min(step, size - i * step) for i in range(n)]
    return list(autograd.split(x, axis, parts))


def _reduce(fn, axes_input_since):
    def run(ins, attrs, opset, cache):
        axes = _axes(ins, 1, attrs, opset, axes_input_since)
        keep = int(attrs.get("keepdims", 1))
        if not axes:  # absent or empty: every axis, unless noop_with_empty_axes
            if attrs.get("noop_with_empty_axes", 0):
                return [autograd.identity(ins[0])]
            axes = None
        return [fn(ins[0], axes, keep)]
    return run


class _ReduceExtreme(autograd.Operator):
    """ONNX ReduceMax / ReduceMin over ``axes`` (None: all): the gradient goes to the elements
    equal to the result, split evenly between ties (as PyTorch's amax / amin)."""

    def __init__(self, is_max, axes=None, keepdims=1):
        super(_ReduceExtreme, self).__init__()
        self.is_max, self.axes, self.keepdims = is_max, axes, bool(keepdims)

    def forward(self, x):
        nd, op = x.nDim(), "ReduceMax" if self.is_max else "ReduceMin"
        axes = list(range(nd)) if self.axes is None else self.axes
        try:
            axes = sorted({a + nd if a < 0 else a for a in axes})
        except TypeError:
            raise SonnxError("%s: axes must be ints, got %r" % (op, self.axes)) from None
        if any(not 0 <= a < nd for a in axes):
            raise autograd.AxisError("%s: axes %s are out of range for a tensor of rank %d"
                                     % (op, list(self.axes), nd))
        self.x_shape = list(x.shape())
        self.kept = [1 if i in axes else d for i, d in enumerate(self.x_shape)]
        fn = singa.ReduceMax if self.is_max else singa.ReduceMin
        y = fn(x, axes, True)
        hit = singa.EQ(x, singa.Broadcast(y, self.x_shape))
        if hit.data_type() != singa.kFloat32:
            hit = hit.AsType(singa.kFloat32)
        ties = singa.Broadcast(singa.ReduceSum(hit, axes, True), self.x_shape)
        self.share = singa.Div(hit, ties)
        if self.keepdims:
            return y
        return singa.Reshape(y, [d for i, d in enumerate(self.x_shape) if i not in axes])

    def backward(self, dy):
        dy = singa.Broadcast(singa.Reshape(dy, self.kept), self.x_shape)
        return singa.EltwiseMult(dy, self.share)


def _reduce_extreme(is_max):
    return _reduce(lambda x, axes, keep: _ReduceExtreme(is_max, axes, keep)(x)[0], 18)


_ONNX_FLOATS = {1, 10, 11}  # FLOAT, FLOAT16, DOUBLE -> float32
_ONNX_INTS = {2, 3, 4, 5, 6, 7, 12, 13}  # (u)int8..64 -> int32
_ONNX_BOOL = 9


# numpy's own float, int and bool type codes: what singa holds (as float32 / int32). Compared
# by code, not kind: ml_dtypes' float8_e5m2 says kind "f" too.
_HOLDABLE_CODES = set(np.typecodes["Float"] + np.typecodes["AllInteger"] + "?")


def holdable(a):
    """Whether singa can hold numpy array ``a`` as a Tensor (floats, ints and bools)."""
    return np.asarray(a).dtype.char in _HOLDABLE_CODES


def _host_only(to):
    """Whether ONNX element type ``to`` has no singa dtype (see the module note)."""
    from onnx import helper
    try:
        return not holdable(np.empty(0, helper.tensor_dtype_to_np_dtype(to)))
    except (KeyError, TypeError, ValueError):
        return True


def _host_cast(x, attrs, opset, cache):
    """Cast on the host with onnx's reference implementation (saturate, round_mode...)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    if isinstance(x, tensor.Tensor):
        if autograd.training and x.requires_grad:
            raise UnsupportedOpError(
                "Cast: to=%d (%s) has no singa dtype, so it runs on the host without a "
                "gradient; run it with autograd.training = False" % (attrs["to"],
                                                                     _dtype_name(attrs["to"])))
        x = tensor.to_numpy(x)
    given = {k: v for k, v in attrs.items() if not k.startswith("__")}
    key = ("host_cast", repr(sorted(given.items())), opset)
    with reference_errors("Cast"):
        if key not in cache:
            cache[key] = ReferenceEvaluator(helper.make_node("Cast", ["x"], ["y"], **given),
                                            opsets={"": opset})
        return np.asarray(cache[key].run(None, {"x": x})[0])


def _cast(ins, attrs, opset, cache):
    to, x = int(attrs["to"]), ins[0]
    import onnx
    if to == onnx.TensorProto.UNDEFINED or to not in onnx.TensorProto.DataType.values():
        raise SonnxError("Cast: to=%d is not an ONNX element type" % to)
    if isinstance(x, np.ndarray) or _host_only(to):
        return [_host_cast(x, attrs, opset, cache)]
    if to in _ONNX_FLOATS:
        return [autograd.cast(x, tensor.float32)]
    if to in _ONNX_INTS:
        return [autograd.cast(x, tensor.int32)]
    if to == _ONNX_BOOL:  # float 0/1 (see the module note)
        return [autograd._not(autograd._not(x))]
    raise UnsupportedOpError("Cast: to=%d (%s) is not supported (opset %d)"
                             % (to, _dtype_name(to), opset))


def _dtype_name(to):
    import onnx
    return onnx.TensorProto.DataType.Name(to)


def _where(ins, attrs, opset, cache):
    return [autograd.where(ins[1], ins[2], ins[0])]


def _constant_of_shape(ins, attrs, opset, cache):
    value = attrs.get("value")
    v = 0.0 if value is None else float(scalar(_onnx_array(value), "ConstantOfShape", "value"))
    return [autograd.constant_of_shape(ins[0], v)]


def _onnx_array(t):
    from onnx import numpy_helper
    return numpy_helper.to_array(t)


def _onehot(ins, attrs, opset, cache):
    depth = int(scalar(ins[1], "OneHot", "depth"))
    values = _np(ins[2]).reshape(-1)
    if values.size != 2:
        raise SonnxError("OneHot: values must hold [off_value, on_value], got %d values"
                         % values.size)
    return [autograd.onehot(int(attrs.get("axis", -1)), ins[0], depth,
                            [float(v) for v in values])]


def _scatter_elements(ins, attrs, opset, cache):
    if attrs.get("reduction", b"none") not in (b"none", "none"):
        raise UnsupportedOpError("ScatterElements: reduction %r is not supported (opset %d)"
                                 % (attrs["reduction"], opset))
    return [autograd.scatter_elements(ins[0], _np(ins[1]), ins[2], int(attrs.get("axis", 0)))]


def _str(attrs, key, default):
    v = attrs.get(key, default)
    return v.decode() if isinstance(v, bytes) else v


def _resize(ins, attrs, opset, cache):
    """Nearest-neighbour resizing by integer scales repeats elements (autograd.upsample) where
    the coordinate mode and rounding agree with repetition; everything else goes through
    ops_resize's per-axis maps."""
    x = ins[0]
    mode = _str(attrs, "mode", "nearest")
    coord = _str(attrs, "coordinate_transformation_mode", "half_pixel")
    scale_i, size_i = (1, 2) if opset < 11 else (2, 3)
    nd = len(x.shape)
    axes = resize_axes(attrs, x.shape)  # opset 18
    sizes = ints(ins[size_i]) if _given(ins, size_i) and _np(ins[size_i]).size else None
    if sizes is None and not _given(ins, scale_i):
        raise SonnxError("Resize: neither scales nor sizes is given (opset %d)" % opset)
    scales = None if sizes is not None else [float(v) for v in _np(ins[scale_i]).reshape(-1)]
    if scales is not None and not all(np.isfinite(s) and s > 0 for s in scales):
        raise SonnxError("Resize: scales must be finite and positive, got %s" % (scales,))
    roi = _np(ins[1]).reshape(-1) if opset >= 11 and _given(ins, 1) else None
    if sizes is not None and any(x.shape[a] == 0 and s != 0 for s, a in zip(sizes, axes)):
        raise SonnxError("Resize: sizes %s ask for elements along an empty axis of the input "
                         "%s" % (sizes, tuple(x.shape)))
    given = scales if sizes is None else [s / x.shape[a] if x.shape[a] else 1.0
                                          for s, a in zip(sizes, axes)]
    full = [1.0] * nd
    for a, s in zip(axes, given):
        full[a] = s
    policy = _str(attrs, "keep_aspect_ratio_policy", "stretch")
    # repetition is nearest sampling for integer scales: with half-pixel centres (no ties
    # there) and rounding, or with asymmetric coordinates and floor
    rounding = _str(attrs, "nearest_mode", "round_prefer_floor")
    repeats = (coord in ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric") and
               rounding.startswith("round")) or (coord == "asymmetric" and rounding == "floor")
    if mode == "nearest" and repeats and policy == "stretch" and \
            all(s == int(s) and s >= 1 for s in full):
        return [autograd.upsample(x, "nearest", [int(s) for s in full])]
    return [resize_by_axis_maps(x, attrs, scales, sizes, roi, opset, cache)]


def _space_to_depth(ins, attrs, opset, cache):
    if _str(attrs, "mode", "DCR") != "DCR":
        # singa's 'CRD' is the inverse of depth_to_space 'CRD', not ONNX's channel order
        raise UnsupportedOpError("SpaceToDepth: mode %r is not supported (opset %d)"
                                 % (_str(attrs, "mode", "DCR"), opset))
    return [autograd.space_to_depth(ins[0], int(attrs["blocksize"]))]


HANDLERS = {
    "Clip": _clip, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Slice": _slice,
    "Gather": _gather, "Split": _split, "Cast": _cast, "Where": _where,
    "ReduceSum": _reduce(autograd.reduce_sum, 13),
    "ReduceMean": _reduce(autograd.reduce_mean, 18),
    "ReduceMax": _reduce_extreme(True), "ReduceMin": _reduce_extreme(False),
    "Tile": lambda ins, a, o, c: [autograd.tile(ins[0], ints(ins[1]))],
    "Expand": lambda ins, a, o, c: [autograd.expand(ins[0], ints(ins[1]))],
    "Round": lambda ins, a, o, c: [autograd.rounde(ins[0])],
    "Shape": lambda ins, a, o, c: [autograd.shape(ins[0])],
    # the element count depends on the shape only: a host value, as Shape's in backend.py
    "Size": lambda ins, a, o, c: [np.array(int(np.prod(ins[0].shape)), np.int64)],
    "ConstantOfShape": _constant_of_shape,
    "NonZero": lambda ins, a, o, c: [autograd.nonzero(ins[0])],
    "OneHot": _onehot, "ScatterElements": _scatter_elements, "Resize": _resize,
    "DepthToSpace": lambda ins, a, o, c: [autograd.depth_to_space(
        ins[0], int(a["blocksize"]), _str(a, "mode", "DCR"))],
    "SpaceToDepth": _space_to_depth,
}

# comparisons and logic (names.py): the function applied to the inputs as given
for _k, (_f, _) in {**names.COMPARE, **names.LOGICAL}.items():
    HANDLERS[_k] = (lambda f: lambda ins, a, o, c: [f(*ins)])(getattr(autograd, _f))

# outputs that ONNX types as bool: run_node gives them as numpy bool
BOOL_OUTPUTS = set(names.COMPARE) | set(names.LOGICAL)
