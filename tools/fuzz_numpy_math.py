"""Targets of tools/fuzz_numpy.py: elementwise unary and binary ops (with broadcasting),
comparisons and logic, reductions and softmax, each paired with its numpy reference."""
import math
import warnings

import numpy as np

from singa import autograd, tensor
from fuzz_numpy_gen import target, f64

def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x) if np.size(x) else np.zeros_like(x)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))),
                        np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))


def _elu(x, alpha=1.0):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _gelutanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _round_half_away(x):
    if x.dtype.kind == "i":
        return x
    return np.where(np.isfinite(x), np.sign(x) * np.floor(np.abs(x) + 0.5), x)


def unary(x):
    return [x], {}


# name: (reference, domain of its gradient check or None); every one checks its gradient
# (piecewise-constant ones: zero)
UNARY = {
    "exp": (np.exp, None), "log": (np.log, lambda a: np.abs(a) + 0.1),
    "sqrt": (np.sqrt, lambda a: np.abs(a) + 0.1), "abs": (np.abs, None),
    "sign": (np.sign, None), "tanh": (np.tanh, None),
    "sigmoid": (_sigmoid, None), "ceil": (np.ceil, None),
    "floor": (np.floor, None), "square": (np.square, None),
    "sin": (np.sin, None), "cos": (np.cos, None), "tan": (np.tan, None),
    "asin": (np.arcsin, lambda a: np.tanh(a) * 0.9),
    "acos": (np.arccos, lambda a: np.tanh(a) * 0.9), "atan": (np.arctan, None),
    "sinh": (np.sinh, None), "cosh": (np.cosh, None),
    "asinh": (np.arcsinh, None), "acosh": (np.arccosh, lambda a: np.abs(a) + 1.1),
    "atanh": (np.arctanh, lambda a: np.tanh(a) * 0.9),
    "relu": (lambda x: np.where(np.isnan(x), x, np.maximum(x, 0)), None),
    "reciprocal": (lambda x: 1 / x, lambda a: np.sign(a) * (np.abs(a) + 0.2)),
    "negative": (np.negative, None), "erf": (_erf, None),
    "softplus": (lambda x: np.logaddexp(0, x), None),
    "softsign": (lambda x: x / (1 + np.abs(x)), None),
    "round": (_round_half_away, None), "rounde": (np.round, None),
    "gelu": (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), None),
    "gelutanh": (_gelutanh, None),
}
# Which of them tensor.* has (every one of them is an autograd function).
TENSOR_UNARY = ["exp", "log", "sqrt", "abs", "sign", "tanh", "sigmoid", "ceil", "floor", "square",
                "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
                "atanh", "relu", "reciprocal", "negative", "erf", "softplus", "softsign",
                "round", "rounde", "gelu", "gelutanh"]
INT_OK = ("abs", "sign", "negative", "square", "relu", "ceil", "floor", "round", "rounde")


def _unary_targets():
    for name, (ref, domain) in sorted(UNARY.items()):
        ints = name in INT_OK

        def gen(g, ints=ints):
            return [g.x(ints=ints)], {}
        target("autograd." + name, gen, getattr(autograd, name), f64(ref), grad=True,
               domain=domain)
        if name in TENSOR_UNARY:
            target("tensor." + name, gen, getattr(tensor, name), f64(ref))
    extra = [
        ("autograd.elu", lambda g: ([g.x()], {"alpha": g.choice([1.0, 0.5, 2.0])}),
         autograd.elu, _elu),
        ("autograd.selu", lambda g: ([g.x()], {"alpha": 1.67326, "gamma": 1.0507}),
         autograd.selu, lambda x, alpha, gamma: gamma * _elu(x, alpha)),
        ("autograd.leakyrelu", lambda g: ([g.x()], {"a": g.choice([0.01, 0.2, -0.5])}),
         autograd.leakyrelu, lambda x, a: np.where(x >= 0, x, a * x)),
        ("tensor.leakyrelu", lambda g: ([g.x()], {"a": g.choice([0.01, 0.2])}),
         tensor.leakyrelu, lambda x, a: np.where(x >= 0, x, a * x)),
        ("autograd.hardsigmoid", lambda g: ([g.x()], {"alpha": g.choice([0.2, 0.5]),
                                                      "gamma": g.choice([0.5, 0.1])}),
         autograd.hardsigmoid, lambda x, alpha, gamma: np.clip(alpha * x + gamma, 0, 1)),
        ("autograd.hardswish", unary_gen, autograd.hardswish,
         lambda x: x * np.clip(x + 3, 0, 6) / 6),
        ("autograd.clip", lambda g: ([g.x(ints=True)], _bounds(g)), autograd.clip,
         lambda x, min=None, max=None: _clip_ref(x, min, max)),
        ("tensor.clip", lambda g: [[g.x()] + list(_bounds(g, none=False).values()), {}],
         tensor.clip, lambda x, lo, hi: _clip_ref(x, lo, hi)),
        ("autograd.isnan", unary_gen, autograd.isnan, lambda x: np.isnan(x).astype(x.dtype)),
        ("autograd.isinf", unary_gen, autograd.isinf, lambda x: np.isinf(x).astype(x.dtype)),
        ("autograd.identity", unary_gen, autograd.identity, lambda x: x),
    ]
    for name, gen, call, ref in extra:
        target(name, gen, call, f64(ref), grad=name.startswith("autograd.") and
               name not in ("autograd.isnan", "autograd.isinf"))


def unary_gen(g):
    return [g.x()], {}


def _bounds(g, none=True):
    lo, hi = sorted([g.choice([-1.0, -0.5, 0.0, 0.3]), g.choice([0.0, 0.5, 1.0, 2.0])])
    if none and g.r.random() < 0.3:
        return g.choice([{"min": lo}, {"max": hi}])
    return {"min": lo, "max": hi}


def _clip_ref(x, lo, hi):
    y = x
    if lo is not None:
        y = np.where(y < lo, np.asarray(lo, x.dtype), y)
    if hi is not None:
        y = np.where(y > hi, np.asarray(hi, x.dtype), y)
    return y


# ---- binary, with broadcasting


def _binary_gen(ints=True, scalar=False, positive_rhs=False):
    def gen(g):
        s, t = g.pair_shapes()
        dtype = "int32" if ints and g.r.random() < 0.3 else "float32"
        # now and then int32 with float32 (both promote to float32) or with a float number
        other = ({"int32": "float32", "float32": "int32"}[dtype] if ints and g.r.random() < 0.15
                 else dtype)
        a = g.x(s, dtype)
        if scalar and g.r.random() < 0.25:
            b = float(g.choice([2.0, -1.5, 0.0, 0.5])) if other == "float32" else g.choice([2, 0])
        else:
            b = g.x(t, other)
            if positive_rhs and other == "int32":
                b.a = np.abs(b.a)
        return [a, b], {}
    return gen


def _cmp(op):
    """SINGA's comparisons give 0/1 in the operands' common dtype (int32 only when both are)."""
    def ref(a, b):
        ints = all(np.asarray(v).dtype.kind in "iu" for v in (a, b))
        return op(a, b).astype(np.int32 if ints else np.float32)
    return ref


def _truth(v):
    return v != 0


def _div(a, b):
    """True division, as numpy and torch: singa's Div of int32 tensors gives float32 too."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


def _pow(a, b):
    """numpy.float_power; for int32 operands numpy's wrapping integer power (singa's Pow row is
    exact in int32), and for a negative exponent torch's tensor ** tensor (1, -1 or 0: numpy
    raises)."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(all="ignore"):
        if a.dtype.kind == "i" and b.dtype.kind == "i":
            a, b = a.astype(np.int32), b.astype(np.int32)
            neg = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
            return np.where(b < 0, neg, np.power(a, np.abs(b))).astype(np.int32)
        # int32 with float32 meets in float32 (as torch): 701341871 is even there
        return np.float_power(*(v.astype(np.float32) if v.dtype.kind == "i" else v
                                for v in (a, b)))


BINARY = [
    ("add", autograd.add, tensor.add, np.add),
    ("sub", autograd.sub, tensor.sub, np.subtract),
    ("mul", autograd.mul, tensor.eltwise_mult, np.multiply),
    ("div", autograd.div, tensor.div, _div),
    ("pow", autograd.pow, tensor.pow, _pow),
]
COMPARE = [
    ("less", "lt", np.less), ("less_equal", "le", np.less_equal), ("greater", "gt", np.greater),
    ("greater_equal", "ge", np.greater_equal), ("equal", "eq", np.equal), (None, "ne", np.not_equal),
]


def _binary_targets():
    for name, ag, tn, ref in BINARY:
        gen = _binary_gen(scalar=True, positive_rhs=name == "pow")
        target("autograd." + name, gen, ag, f64(ref), grad=True, rtol=1e-5 if name != "pow"
               else 1e-4)
        target("tensor." + tn.__name__, gen, tn, f64(ref), rtol=1e-5 if name != "pow" else 1e-4)
    for ag, tn, op in COMPARE:
        gen = _binary_gen(scalar=True)
        if ag:
            target("autograd." + ag, gen, getattr(autograd, ag), _cmp(op), exact=True)
        target("tensor." + tn, gen, getattr(tensor, tn), _cmp(op), exact=True)
    for name, op in (("_and", np.logical_and), ("_or", np.logical_or), ("_xor", np.logical_xor)):
        target("autograd." + name, _binary_gen(),
               getattr(autograd, name), _cmp(lambda a, b, op=op: op(_truth(a), _truth(b))),
               exact=True)
    for name, op in (("maximum", np.maximum), ("minimum", np.minimum)):
        # int32 with float32 compares in float32 (numpy: float64), so not bit for bit
        target("tensor." + name, _binary_gen(scalar=True), getattr(tensor, name), op)

    def where_gen(g):
        s, t = g.pair_shapes()
        c = g.x(g.choice([s, t, s[1:]]), fill="ints", grad=False)
        return [g.x(s), g.x(t), c], {}
    target("autograd.where", where_gen, autograd.where,
           lambda x, y, c: np.where(c != 0, x, y), exact=True, grad=True)

    def prelu_gen(g):
        s, t = g.pair_shapes()
        return [g.x(s), g.x(t)], {}
    target("autograd.prelu", prelu_gen, autograd.prelu,
           f64(lambda x, s: np.where(x > 0, x, np.where(np.isnan(x), x, s * x))), grad=True)

    def several_gen(g):
        s, t = g.pair_shapes()
        return [g.x(g.choice([s, t])) for _ in range(g.r.randint(1, 3))], {}
    for name, op in (("max", np.fmax), ("min", np.fmin)):
        target("autograd." + name, several_gen, getattr(autograd, name),
               lambda *xs, op=op: _nan_reduce(op, xs), exact=True, grad=True)
    target("autograd.sum", several_gen, autograd.sum, f64(lambda *xs: sum(np.broadcast_arrays(
        *xs))), grad=True)
    target("autograd.mean", several_gen, autograd.mean, f64(lambda *xs: sum(np.broadcast_arrays(
        *xs)) / len(xs)), grad=True)


def _nan_reduce(op, xs):
    """numpy.maximum over several arrays, NaN propagating (np.maximum's rule)."""
    out = np.broadcast_arrays(*xs)
    y = out[0]
    for v in out[1:]:
        y = np.where(np.isnan(y) | np.isnan(v), np.nan, op(y, v)).astype(y.dtype)
    return y


# ---- reductions


def _softmax_rows(x):
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(x, axis=-1, keepdims=True) if x.shape[-1] else 0
        e = np.exp(x - m)
        return e / np.sum(e, axis=-1, keepdims=True)


def _flat_softmax(x, axis):
    """SINGA's softmax: the axes from ``axis`` on flattened into one row."""
    axis = axis + x.ndim if axis < 0 else axis
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    return _softmax_rows(x.reshape(rows, int(np.prod(x.shape[axis:], dtype=np.int64)))).reshape(
        x.shape)


def _log_softmax(x, axis):
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(x, axis=axis, keepdims=True) if x.shape[axis] else 0
        return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def _tensor_softmax(x, axis=None):
    if axis is not None:
        return np.moveaxis(_softmax_rows(np.moveaxis(x, axis, -1)), -1, axis)
    return _flat_softmax(x, 0 if x.ndim == 1 else 1)


def _sum(x, axis=None, keepdims=False):
    """numpy.sum, int32 kept int32: singa has no int64 to sum into (numpy's int32 sum is int64),
    so an int32 sum past 2^31 wraps, as numpy's int32 additions do."""
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype if x.dtype.kind == "i" else None)


def _mean(x, axis=None, keepdims=False):
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.mean(x, axis=axis, keepdims=keepdims)


def _reduction_targets():
    def red_gen(g):
        x = g.x(rmin=1, ints=True)
        axes = None if g.r.random() < 0.2 else g.axes(x.a.ndim)
        return [x], {"axes": axes, "keepdims": g.choice([0, 1])}
    target("autograd.reduce_sum", red_gen, autograd.reduce_sum,
           f64(lambda x, axes, keepdims: _sum(x, axis=None if axes is None else tuple(axes),
                                                 keepdims=bool(keepdims))), accum=True, grad=True)
    target("autograd.reduce_mean", red_gen, autograd.reduce_mean,
           f64(lambda x, axes, keepdims: _mean(x, None if axes is None else tuple(axes),
                                                bool(keepdims))), accum=True, grad=True)

    def sum_gen(g):
        x = g.x(ints=True)
        u = g.r.random()
        axis = None if u < 0.3 or x.a.ndim == 0 else (
            g.axis(x.a.ndim) if u < 0.75 else tuple(g.axes(x.a.ndim)))
        return [x], {"axis": axis}
    target("tensor.sum", sum_gen, tensor.sum, f64(
        lambda x, axis: _sum(x).reshape(1, 1) if axis is None else _sum(x, axis=axis)),
        accum=True)
    target("tensor.average", sum_gen, tensor.average,
           f64(lambda x, axis: _mean(x, axis) if axis is not None else float(_mean(x))),
           accum=True)

    def softmax_gen(g):
        x = g.x(rmin=1)
        return [x], {"axis": g.axis(x.a.ndim)}
    target("autograd.softmax", softmax_gen, autograd.softmax, f64(_flat_softmax), grad=True)
    target("autograd.log_softmax", softmax_gen, autograd.log_softmax, f64(_log_softmax),
           grad=True)

    def tsoftmax_gen(g):
        x = g.x(rmin=1)
        return [x], ({"axis": g.axis(x.a.ndim)} if g.r.random() < 0.5 else {})
    target("tensor.softmax", tsoftmax_gen, tensor.softmax, f64(_tensor_softmax))

    def cumsum_gen(g):
        x = g.x(rmin=1, ints=True)
        return [x, g.axis(x.a.ndim)], {"exclusive": g.choice([False, True]),
                                       "reverse": g.choice([False, True])}
    target("autograd.cumsum", cumsum_gen, autograd.cumsum, f64(_cumsum), accum=True, grad=True)


def _cumsum(x, axis, exclusive=False, reverse=False):
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis)) if c.shape[axis] else
                            np.take(c, [], axis), np.take(c, range(c.shape[axis] - 1), axis)],
                           axis)
    return np.flip(c, axis) if reverse else c




_unary_targets()
_binary_targets()
_reduction_targets()
