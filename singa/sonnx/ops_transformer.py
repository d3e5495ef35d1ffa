"""Import handlers for the ONNX ops that exported transformers (BERT, RoBERTa, GPT-2, ViT from
torch.onnx.export, both exporters) emit beyond ops.py / ops_tensor.py (registered into
ops.HANDLERS).

    outs = HANDLERS["CumSum"]([x, axis], {"exclusive": 1}, 14, {})

``OPSETS`` names, per op, the ONNX versions of the op whose semantics these handlers implement
(test_onnx_transformers.py checks the list against onnx.defs, so a new version of one of these
ops in a newer onnx is noticed):

    IsNaN 9, 13, 20           IsInf 10, 20 (detect_negative / detect_positive)
    GatherND 11, 12, 13       (batch_dims from 12)
    GatherElements 11, 13     CumSum 11, 14 (exclusive, reverse; axis as a tensor)
    LayerNormalization 17     (axis, epsilon; the Mean and InvStdDev outputs too)
    Gelu 20                   Trilu 14 (upper, k)
    Range 11, 27              Mod 10, 13, 28

Where, Expand, Erf and Gather live in ops_tensor.py / ops.py; their versions are listed in
``OPSETS`` as well, as they are part of what transformers need.

Range and integer Mod compute on the host (numpy): exported graphs apply them to shapes and
positions, which are host values (backend.py's note), and they have no gradient. Trilu and the
boolean outputs follow ops_tensor's conventions (float 0/1 for a bool).
"""
import numpy as np

from .. import autograd, tensor
from .errors import SonnxError
from .ops_tensor import _np, _given, _str

OPSETS = {
    "IsNaN": (9, 13, 20), "IsInf": (10, 20), "GatherND": (11, 12, 13),
    "GatherElements": (11, 13), "CumSum": (11, 14), "LayerNormalization": (17,),
    "Gelu": (20,), "Trilu": (14,), "Range": (11, 27), "Mod": (10, 13, 28),
    "Erf": (9, 13), "Where": (9, 16), "Expand": (8, 13), "Gather": (1, 11, 13),
}


def _host_int(t, op, what):
    v = _np(t).reshape(-1)
    if v.size != 1:
        raise SonnxError("%s: %s must be a scalar, got shape %s" % (op, what, _np(t).shape))
    if v.dtype.kind not in "biu" and not float(v[0]).is_integer():  # 1.5, inf, nan
        raise SonnxError("%s: %s must be an integer, got %r" % (op, what, v[0]))
    return int(v[0])


def _isinf(ins, attrs, opset, cache):
    x = ins[0]
    y = autograd.isinf(x)
    if not int(attrs.get("detect_negative", 1)):
        y = autograd._and(y, autograd.greater(x, 0.0))
    if not int(attrs.get("detect_positive", 1)):
        y = autograd._and(y, autograd.less(x, 0.0))
    return [y]


def _gather_nd(ins, attrs, opset, cache):
    return [autograd.gather_nd(ins[0], ins[1], int(attrs.get("batch_dims", 0)))]


def _gather_elements(ins, attrs, opset, cache):
    return [autograd.gather_elements(ins[0], ins[1], int(attrs.get("axis", 0)))]


def _cumsum(ins, attrs, opset, cache):
    axis = _host_int(ins[1], "CumSum", "the axis")
    return [autograd.cumsum(ins[0], axis, bool(attrs.get("exclusive", 0)),
                            bool(attrs.get("reverse", 0)))]


def _layer_norm(ins, attrs, opset, cache):
    """autograd.layer_norm over the axes from ``axis`` on; the scale and bias, which ONNX lets
    broadcast to the normalised shape, are broadcast to it first. When the node asks for the
    Mean and InvStdDev outputs, the statistics are composed of reductions instead."""
    x = ins[0]
    nd = len(x.shape)
    axis = int(attrs.get("axis", -1))
    axis = axis + nd if axis < 0 else axis
    if not 0 <= axis < nd:
        raise autograd.AxisError("LayerNormalization: axis %d is out of range for an input "
                                 "of shape %s" % (int(attrs.get("axis", -1)), tuple(x.shape)))
    eps = float(attrs.get("epsilon", 1e-5))
    if attrs.get("__outputs__", 1) > 1:
        return _layer_norm_with_stats(ins, axis, eps)
    norm = tuple(x.shape[axis:])
    affine = [_broadcast_to(ins[i], norm) if _given(ins, i) else None for i in (1, 2)]
    return [autograd.layer_norm(x, norm, affine[0], affine[1], eps)]


def _broadcast_to(t, shape):
    if tuple(t.shape) == tuple(shape):
        return t
    return autograd.expand(t, list(shape))


def _layer_norm_with_stats(ins, axis, eps):
    """Y, Mean and InvStdDev (both of shape x.shape[:axis] + [1] * (rank - axis))."""
    x = ins[0]
    axes = list(range(axis, len(x.shape)))
    mean = autograd.reduce_mean(x, axes, 1)
    d = autograd.sub(x, mean)
    var = autograd.reduce_mean(autograd.mul(d, d), axes, 1)
    inv = autograd.reciprocal(autograd.sqrt(autograd.add(var, eps)))
    y = autograd.mul(autograd.mul(d, inv), ins[1])
    if _given(ins, 2):
        y = autograd.add(y, ins[2])
    return [y, mean, inv]


def _gelu(ins, attrs, opset, cache):
    approximate = _str(attrs, "approximate", "none")
    if approximate not in ("none", "tanh"):
        raise SonnxError("Gelu: approximate must be 'none' or 'tanh', got %r" % approximate)
    return [autograd.gelu(ins[0], approximate=approximate)]


def _trilu(ins, attrs, opset, cache):
    """The upper (or lower) triangle of the last two axes from diagonal k; the rest is 0
    (a constant mask filled in, so that a NaN or inf outside the triangle becomes 0 too)."""
    x = ins[0]
    if len(x.shape) < 2:
        raise autograd.ShapeError("Trilu: the input must have 2 or more axes, got shape %s"
                                  % (tuple(x.shape),))
    k = _host_int(ins[1], "Trilu", "k") if _given(ins, 1) else 0
    rows, cols = x.shape[-2:]
    keep = np.triu(np.ones((rows, cols), bool), k) if int(attrs.get("upper", 1)) \
        else np.tril(np.ones((rows, cols), bool), k)
    if isinstance(x, np.ndarray):
        return [np.where(keep, x, np.zeros((), x.dtype))]
    return [autograd.masked_fill(x, ~keep, 0.0)]


def _range(ins, attrs, opset, cache):
    """start, start + delta, ... up to limit (exclusive), in the inputs' type, on the host."""
    start, limit, delta = (_np(t).reshape(-1) for t in ins[:3])
    if not start.size == limit.size == delta.size == 1:
        raise SonnxError("Range: start, limit and delta must be scalars")
    if delta[0] == 0:
        raise SonnxError("Range: delta must not be 0")
    dtype = np.result_type(start, limit, delta)
    n = max(int(np.ceil((float(limit[0]) - float(start[0])) / float(delta[0]))), 0)
    return [(start[0] + np.arange(n) * delta[0]).astype(dtype)]


def _mod(ins, attrs, opset, cache):
    """Integer Mod on the host; float Mod as a - floor(a / b) * b (fmod=0) or
    a - trunc(a / b) * b (fmod=1) with autograd, so that it has a gradient."""
    a, b = ins[0], ins[1]
    fmod = int(attrs.get("fmod", 0))
    floats = [not isinstance(t, np.ndarray) and t.dtype == tensor.float32 for t in (a, b)]
    if not any(floats):
        a, b = _np(a), _np(b)
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise SonnxError("Mod: shapes %s and %s cannot be broadcast together"
                             % (a.shape, b.shape))
        return [np.fmod(a, b) if fmod else np.mod(a, b)]
    q = autograd.div(a, b)
    if fmod:  # trunc(q) = sign(q) * floor(|q|)
        q = autograd.mul(autograd.sign(q), autograd.floor(autograd.abs(q)))
    else:
        q = autograd.floor(q)
    return [autograd.sub(a, autograd.mul(q, b))]


HANDLERS = {
    "IsNaN": lambda ins, a, o, c: [autograd.isnan(ins[0])], "IsInf": _isinf,
    "GatherND": _gather_nd, "GatherElements": _gather_elements, "CumSum": _cumsum,
    "LayerNormalization": _layer_norm, "Gelu": _gelu, "Trilu": _trilu, "Range": _range,
    "Mod": _mod,
}

def _host_gather_elements(ins, attrs):
    """GatherElements on host values (onnx 1.23's reference fails on axes longer than 32:
    it goes through numpy.choose)."""
    x, idx = ins[0], ins[1].astype(np.int64)
    axis = int(attrs.get("axis", 0)) % x.ndim
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    return [np.take_along_axis(x, idx, axis)]


# op type -> fn(numpy inputs, attributes): the outputs; used by the backend for host values
HOST_KERNELS = {"GatherElements": _host_gather_elements}

# outputs that ONNX types as bool: run_node gives them as numpy bool
BOOL_OUTPUTS = {"IsNaN", "IsInf"}
