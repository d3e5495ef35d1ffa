"""Import: one ONNX node -> SINGA autograd operators.

    outs = run_onnx_node("Conv", [x, W, b], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 13)

Each handler takes the node's inputs (Tensors, None for an omitted optional input), its
attributes (a dict of Python values) and the opset, and returns the list of outputs. Shape-like
inputs (Reshape's shape, Clip's bounds...) are read as numpy values. Handlers cache the conv and
pooling handles per input shape in ``cache``, so a prepared model runs many batches.
"""
import numpy as np

from .. import autograd, tensor
from .. import singa_wrap as singa
from .._padding import same_pad_split
from . import names
from .errors import SonnxError, UnsupportedOpError
from .ops_tensor import HANDLERS as _TENSOR_HANDLERS, ints as _ints, scalar
from .ops_rnn import HANDLERS as _RNN_HANDLERS
from .ops_transformer import HANDLERS as _TRANSFORMER_HANDLERS
from .schema_map import IMPORT as _SCHEMA_IMPORT



def _spatial_pads(op, x, attrs, kernel, strides, dilations):
    """(pad_h, pad_w) for the handle and odd (top, bottom, left, right) for the rest, from
    pads / auto_pad. Only 2-d (N, C, H, W) inputs."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        split = [same_pad_split(auto, n, k, s, d)
                 for n, k, s, d in zip(x.shape[2:], kernel, strides, dilations)]
        pads = [b for b, _ in split] + [e for _, e in split]
    elif auto == "VALID":
        pads = [0, 0, 0, 0]
    elif auto == "NOTSET":
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
    else:
        raise SonnxError("%s: unknown auto_pad %r" % (op, auto))
    t, l, b, r = pads
    ph, pw = min(t, b), min(l, r)
    return (ph, pw), (t - ph, b - ph, l - pw, r - pw)


def _check_2d(op, x, kernel):
    if len(x.shape) != 4 or len(kernel) != 2:
        raise UnsupportedOpError("%s: only 2-d inputs (N, C, H, W) are supported, got input "
                                 "shape %s and kernel %s" % (op, x.shape, list(kernel)))


def _geometry(op, x, kernel, attrs):
    """(kernel, strides, dilations) of a 2-d conv / pool node, each two positive ints, after
    the pads are checked too (a zero stride divided by zero further on)."""
    _check_2d(op, x, kernel)
    strides = list(attrs.get("strides", [1, 1]))
    dil = list(attrs.get("dilations", [1, 1]))
    for what, v, n, low in (("kernel_shape", kernel, 2, 1), ("strides", strides, 2, 1),
                            ("dilations", dil, 2, 1), ("pads", attrs.get("pads", [0] * 4), 4, 0)):
        if len(v) != n or any(int(e) < low for e in v):
            raise SonnxError("%s: %s must be %d ints >= %d, got %s" % (op, what, n, low, list(v)))
    return kernel, strides, dil


def _conv(ins, attrs, opset, cache):
    x, W = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    if len(W.shape) != 4:
        raise SonnxError("Conv: the weight must be 4-d (M, C/group, kH, kW), got shape %s"
                         % (tuple(W.shape),))
    kernel, strides, dil = _geometry("Conv", x, list(attrs.get("kernel_shape", W.shape[2:])),
                                     attrs)
    group = int(attrs.get("group", 1))
    pad, odd = _spatial_pads("Conv", x, attrs, kernel, strides, dil)
    in_shape = (x.shape[1], x.shape[2] + odd[0] + odd[1], x.shape[3] + odd[2] + odd[3])
    key = ("conv", in_shape, W.shape[0], tuple(kernel), tuple(strides), pad, tuple(dil), group,
           b is None)
    if key not in cache:
        cache[key] = singa.ConvHandle((1,) + in_shape, kernel, strides, pad, x.shape[1],
                                      W.shape[0], b is not None, group, dil)
    return [autograd.conv2d(cache[key], x, W, b, odd)]


def _pool(is_max):
    op = "MaxPool" if is_max else "AveragePool"

    def run(ins, attrs, opset, cache):
        x = ins[0]
        kernel, strides, dil = _geometry(op, x, list(attrs["kernel_shape"]), attrs)
        if dil != [1, 1]:
            raise UnsupportedOpError("%s: dilations %s are not supported (opset %d)"
                                     % (op, attrs["dilations"], opset))
        if len(ins) > 1 or attrs.get("storage_order", 0):
            raise UnsupportedOpError("%s: the Indices output / storage_order is not supported"
                                     % op)
        pad, odd = _spatial_pads(op, x, attrs, kernel, strides, [1, 1])
        cip = bool(attrs.get("count_include_pad", 0))
        extra_ceil = (0, 0)
        if attrs.get("ceil_mode", 0):
            # extra bottom/right rows so that floor division gives the ceil output size, only
            # where the last window still starts inside the input (as ONNX)
            extra = []
            for n, k, s, p, o in zip(x.shape[2:], kernel, strides, pad, (odd[:2], odd[2:])):
                span = n + 2 * p + sum(o) - k
                out = -(-span // s) + 1
                if (out - 1) * s >= n + p + o[0]:
                    out -= 1
                extra.append(max(0, (out - 1) * s + k - (n + 2 * p + sum(o))))
            extra_ceil = tuple(extra)
            odd = (odd[0], odd[1] + extra[0], odd[2], odd[3] + extra[1])
        if any(odd) and is_max:
            # asymmetric pads: -inf rows/columns, then the symmetric part in the handle
            t, b_, l, r = odd
            x = autograd.pad(x, "constant", [0, 0, t, l, 0, 0, b_, r], -np.inf)
        elif any(odd):
            return [_avg_pool_padded(x, kernel, strides, pad, odd, extra_ceil, cip, cache)]
        key = (op, tuple(x.shape[1:]), tuple(kernel), tuple(strides), pad, cip)
        if key not in cache:
            cache[key] = singa.PoolingHandle((1,) + tuple(x.shape[1:]), kernel, strides, pad,
                                             is_max, cip)
        return [autograd.pooling_2d(cache[key], x)]
    return run


def _avg_pool_padded(x, kernel, strides, pad, odd, extra_ceil, cip, cache):
    """Average pooling with asymmetric pads or a ceil_mode partial window, as ONNX counts:
    the window sum over the zero-padded input divided by the number of counted cells (input
    cells, plus the declared pads when count_include_pad), both from pooling with the pads
    made explicit."""
    (ph, pw), (t, b, l, r) = pad, odd
    full = [0, 0, ph + t, pw + l, 0, 0, ph + b, pw + r]
    xp = autograd.pad(x, "constant", full, 0.0)
    n, c, hh, ww = x.shape
    if cip:  # the declared pads count; the ceil extension never does
        ones = np.ones((1, c, hh + 2 * ph + t + b - extra_ceil[0],
                        ww + 2 * pw + l + r - extra_ceil[1]), np.float32)
        ones = np.pad(ones, [(0, 0), (0, 0), (0, extra_ceil[0]), (0, extra_ceil[1])])
    else:
        ones = np.pad(np.ones((1, c, hh, ww), np.float32),
                      [(0, 0), (0, 0), (ph + t, ph + b), (pw + l, pw + r)])
    key = ("avgpad", tuple(xp.shape[1:]), tuple(kernel), tuple(strides))
    if key not in cache:
        cache[key] = singa.PoolingHandle((1,) + tuple(xp.shape[1:]), kernel, strides, (0, 0),
                                         False, True)
    h = cache[key]
    count = tensor.to_numpy(autograd.pooling_2d(h, tensor.from_numpy(ones, x.device)))
    count = tensor.from_numpy(np.ascontiguousarray(count), x.device)
    count.requires_grad = False
    return autograd.div(autograd.pooling_2d(h, xp), count)


def _flatten(x, axis):
    return autograd.flatten(x, axis + len(x.shape) if axis < 0 else axis)


def _batchnorm(ins, attrs, opset, cache):
    x, scale, bias, mean, var = ins[:5]
    if attrs.get("training_mode", 0):
        raise UnsupportedOpError("BatchNormalization: training_mode=1 is not supported "
                                 "(opset %d)" % opset)
    h = autograd.BatchNormHandle(x.shape, float(attrs.get("momentum", 0.9)),
                                 float(attrs.get("epsilon", 1e-5)))
    return [autograd.batchnorm_2d(h, x, scale, bias, mean, var)]


def _gemm(ins, attrs, opset, cache):
    return [autograd.gemm(ins[0], ins[1], ins[2] if len(ins) > 2 else None,
                          float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0)),
                          int(attrs.get("transA", 0)), int(attrs.get("transB", 0)))]


def _softmax(fn, op):
    def run(ins, attrs, opset, cache):
        x = ins[0]
        nd = len(x.shape)
        axis = int(attrs.get("axis", -1 if opset >= 13 else 1))
        # opset 13 names one axis; before, the flattening point, which may be the rank itself
        if nd == 0 or not -nd <= axis < nd + (opset < 13):
            raise SonnxError("%s: axis %d is out of range for an input of shape %s (opset %d)"
                             % (op, axis, tuple(x.shape), opset))
        if opset >= 13:  # along one axis: moved last, where both conventions agree
            axis %= nd
            if axis == nd - 1:
                return [fn(x, axis)]
            perm = [i for i in range(nd) if i != axis] + [axis]
            back = list(np.argsort(perm))
            return [autograd.transpose(fn(autograd.transpose(x, perm), nd - 1), back)]
        # before opset 13: softmax over the flattened trailing axes from ``axis``
        y = fn(_flatten(x, axis), 1)
        return [autograd.reshape(y, list(x.shape))]
    return run


def _reshape(ins, attrs, opset, cache):
    shape = _ints(ins[1])
    if attrs.get("allowzero", 0) and 0 in shape:
        raise UnsupportedOpError("Reshape: allowzero=1 with a 0 in the shape")
    return [autograd.reshape(ins[0], shape)]


def _concat(ins, attrs, opset, cache):
    return [autograd.cat(list(ins), int(attrs["axis"]))]


def _pad(ins, attrs, opset, cache):
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    x = ins[0]
    pads = _ints(ins[1]) if len(ins) > 1 else list(attrs.get("pads", []))
    value = float(scalar(ins[2], "Pad", "constant_value")) if len(ins) > 2 and ins[2] is not None \
        else float(attrs.get("value", 0.0))
    if len(ins) > 3 and ins[3] is not None:  # opset 18 axes: pads only for those axes
        nd = len(x.shape)
        axes = [a + nd if a < 0 else a for a in _ints(ins[3])]
        if any(not 0 <= a < nd for a in axes) or len(pads) != 2 * len(axes):
            raise SonnxError("Pad: axes %s and pads %s do not fit an input of shape %s"
                             % (_ints(ins[3]), pads, tuple(x.shape)))
        full = [0] * (2 * nd)
        for i, a in enumerate(axes):
            full[a], full[nd + a] = pads[i], pads[len(axes) + i]
        pads = full
    if any(p < 0 for p in pads):
        raise UnsupportedOpError("Pad: negative pads (cropping) %s are not supported" % pads)
    if mode not in ("constant", "reflect", "edge"):
        raise UnsupportedOpError("Pad: mode %r is not supported (opset %d)" % (mode, opset))
    return [autograd.pad(x, mode, pads, value)]


def _identity(ins, attrs, opset, cache):
    return [autograd.Identity()(ins[0])[0]] if hasattr(autograd, "Identity") else [ins[0]]



def _dropout(ins, attrs, opset, cache):
    """ONNX Dropout: the identity (mask all true) unless the node's training_mode input is
    true; then each element is kept with probability 1 - ratio and scaled by 1 / (1 - ratio),
    the mask drawn from the device's generator (so not ONNX's numpy draw for a ``seed``)."""
    x = ins[0]
    ratio = float(scalar(ins[1], "Dropout", "ratio")) if len(ins) > 1 and ins[1] is not None \
        else float(attrs.get("ratio", 0.5))
    training = len(ins) > 2 and ins[2] is not None and \
        bool(scalar(ins[2], "Dropout", "training_mode"))
    want_mask = attrs.get("__outputs__", 1) > 1
    if not training or ratio == 0.0:
        y = _identity([x], attrs, opset, cache)[0]
        return [y, np.ones(x.shape, np.bool_)] if want_mask else [y]
    if not 0.0 <= ratio < 1.0:
        raise singa.ArgumentError("Dropout: ratio must be in [0, 1) in training mode, got %r"
                                  % ratio)
    keep = tensor.Tensor(x.shape, x.device, tensor.float32)
    tensor.bernoulli(1.0 - ratio, keep)
    scale = keep * (1.0 / (1.0 - ratio))
    scale.requires_grad = scale.stores_grad = False
    y = autograd.mul(x, scale)
    keep.requires_grad = keep.stores_grad = False
    return [y, keep] if want_mask else [y]  # the mask as float 0/1 (see ops_tensor's note)


def _constant(ins, attrs, opset, cache):
    """ONNX Constant: its one value attribute, as a host (numpy) value."""
    values = [(k, v) for k, v in attrs.items() if not k.startswith("__")]
    if len(values) != 1:
        raise SonnxError("Constant: expected exactly one value attribute, got %s"
                         % [k for k, _ in values])
    name, value = values[0]
    if name == "sparse_value":
        from onnx import numpy_helper
        dense = np.zeros(tuple(value.dims), numpy_helper.to_array(value.values).dtype)
        idx = numpy_helper.to_array(value.indices)
        dense.reshape(-1)[idx.reshape(-1) if idx.ndim == 1 else
                          np.ravel_multi_index(idx.T, dense.shape)] = \
            numpy_helper.to_array(value.values)
        return [dense]
    if hasattr(value, "dims"):  # a TensorProto
        from onnx import numpy_helper
        return [numpy_helper.to_array(value)]
    if name in ("value_string", "value_strings"):
        raise UnsupportedOpError("Constant: string values are not supported")
    dtype = np.float32 if name.startswith("value_float") else np.int64
    return [np.asarray(value, dtype)]


def _cast_like(ins, attrs, opset, cache):
    """ONNX CastLike: Cast to the element type of the second input (singa's for a Tensor:
    float32 or int32; numpy's for a host value)."""
    from onnx import helper
    x, like = ins[0], ins[1]
    if isinstance(like, np.ndarray):
        to = helper.np_dtype_to_tensor_dtype(like.dtype)
    else:
        to = helper.np_dtype_to_tensor_dtype(np.dtype(np.int32 if like.dtype == tensor.int32
                                                      else np.float32))
    given = {k: v for k, v in attrs.items() if not k.startswith("__")}  # saturate...
    return _TENSOR_HANDLERS["Cast"]([x], dict(given, to=to), opset, cache)


HANDLERS = {
    "Conv": _conv, "MaxPool": _pool(True), "AveragePool": _pool(False),
    "BatchNormalization": _batchnorm, "Gemm": _gemm,
    "Softmax": _softmax(autograd.softmax, "Softmax"),
    "LogSoftmax": _softmax(autograd.log_softmax, "LogSoftmax"),
    "Reshape": _reshape, "Pad": _pad, "Concat": _concat, "Identity": _identity, "Dropout": _dropout,
    "Constant": _constant, "CastLike": _cast_like,
    "Flatten": lambda ins, a, o, c: [_flatten(ins[0], int(a.get("axis", 1)))],
    "GlobalAveragePool": lambda ins, a, o, c: [autograd.globalaveragepool(ins[0])],
    "Transpose": lambda ins, a, o, c: [autograd.transpose(ins[0], a.get("perm"))],
}
# the plain ops (names.py): the function applied to the inputs as given
for _k, (_f, _) in {**names.UNARY, **names.BINARY, **names.VARIADIC}.items():
    HANDLERS[_k] = (lambda f: lambda ins, a, o, c: [f(*ins)])(getattr(autograd, _f))

HANDLERS.update(_TENSOR_HANDLERS)
HANDLERS.update(_RNN_HANDLERS)
HANDLERS.update(_TRANSFORMER_HANDLERS)
HANDLERS.update(_SCHEMA_IMPORT)  # the op schema's rows (schema_map.py)

SUPPORTED_OPS = sorted(HANDLERS)


def run_onnx_node(op_type, ins, attrs, opset, cache=None):
    """The outputs (a list of Tensors) of one ONNX node on Tensors ``ins``."""
    fn = HANDLERS.get(op_type)
    if fn is None:
        raise UnsupportedOpError("sonnx: ONNX op %s (opset %d) is not supported; supported: %s"
                                 % (op_type, opset, ", ".join(SUPPORTED_OPS)))
    return fn(list(ins), attrs, opset, {} if cache is None else cache)
