"""Elementwise math: the unary functions (from the op table), arithmetic with numpy broadcasting,
the variadic sum/mean/max/min, comparisons and logic, clip, where and cast.

    y = autograd.exp(x)
    z = autograd.add(x, b)            # b broadcast; its gradient is summed back to b's shape
    m = autograd.max(a, b, c)         # elementwise, like ONNX Max
    c = autograd.greater(x, y)        # 0/1 values; no gradient flows through comparisons

Binary functions also accept a Python number or a numpy array for one operand (a constant).
Every unary row of singa_wrap.ELEMENTWISE_OPS (generated from elementwise.def) becomes an
Operator class and its function here, with its gradient rule from UNARY_GRADIENTS; the binary
rows are listed in BINARY_GRADIENTS with the operator that differentiates them, or None.
"""
import math as _math

import numpy as np

from .. import singa_wrap as singa
from .._args import as_float, type_error
from .._core import Tensor, _dtype
from ..errors import InputError, NoGradientError
from . import base
from .base import Operator, reduce_to

_S = singa


# ---- unary functions: one row per op of the table ------------------------------------------
class _Unary(Operator):
    """y = fn(x), dx = dy * deriv(x, y); ``saves`` says which of x and y deriv reads."""
    fn = None
    deriv = None
    saves = ""

    def forward(self, x):
        y = type(self).fn(x)
        self.x = x if "x" in self.saves else None
        self.y = y if "y" in self.saves else None
        return y

    def backward(self, dy):
        if type(self).deriv is None:  # piecewise constant: the gradient is zero
            return singa.EltwiseMult(dy, 0.0)
        return singa.EltwiseMult(dy, type(self).deriv(self.x, self.y))


def _unary(name, fn, deriv, saves="", base=_Unary, arg="x"):
    """Defines Operator class ``name`` for y = fn(x) and its function (e.g. Exp and exp);
    ``arg`` is the function's parameter name (SINGA calls it ``a`` for abs, exp and sign)."""
    cls = type(name, (base,), {"fn": staticmethod(fn),
                               "deriv": None if deriv is None else staticmethod(deriv),
                               "saves": saves, "__doc__": "Elementwise %s." % name.lower(),
                               "__module__": __name__})

    if arg == "a":
        def function(a):
            return cls()(a)[0]
    else:
        def function(x):
            return cls()(x)[0]

    function.__name__ = function.__qualname__ = name.lower()
    function.__doc__ = "Elementwise %s of Tensor x (autograd operator %s)." % (name.lower(), name)
    return cls, function


class _ReLUBase(_Unary):
    # Saves its output, not its input: y > 0 exactly where x > 0, and y is usually kept anyway
    # (the next layer's input), so the input (e.g. a batch norm output) is freed right away.
    def backward(self, dy):  # one fused kernel instead of a mask and a product
        return singa.ReLUBackward(dy, self.y)


class _GELUBase(_Unary):
    # dy * GELU'(x) in one fused kernel (a table row) instead of five elementwise passes
    def backward(self, dy):
        return type(self).grad(dy, self.x)


class _IdentityBase(_Unary):
    def backward(self, dy):
        return dy


_M, _D, _sq, _neg, _inv = (singa.EltwiseMult, singa.Div, singa.Square, singa.Negative,
                           singa.Reciprocal)


def _rsqrt(t):
    # 1 / sqrt(t), not t ** -0.5: pow(-inf, -0.5) is +0, which made asin's and acos's gradient 0
    # at |x| = inf or 1e30 (1 - x^2 = -inf) where the forward is NaN; sqrt(-inf) is NaN
    return _inv(singa.Sqrt(t))


def _one_minus(t):
    return singa.Sub(1.0, t)


def _one_plus(t):
    return singa.Add(t, 1.0)


_TWO_OVER_SQRT_PI = 2.0 / _math.sqrt(_math.pi)
# A predicate row (0/1 results): an operator without gradient, like the comparisons below.
NO_GRADIENT = "no gradient"

# The gradient rule of each unary op of the table, keyed by its C++ name: (what the rule reads,
# dy/dx from the input x and the output y). None: piecewise constant, the gradient is zero.
UNARY_GRADIENTS = {
    "Abs": ("x", lambda x, y: _S.Sign(x)),
    "Negative": ("", lambda x, y: -1.0),
    "Sign": None,
    "Square": ("x", lambda x, y: _M(x, 2.0)),
    "ReLU": ("y", None),  # _ReLUBase.backward: the fused ReLUBackward kernel
    "Ceil": None,
    "Floor": None,
    "Round": None,
    "RoundE": None,
    "Exp": ("y", lambda x, y: y),
    "Log": ("x", lambda x, y: _inv(x)),
    "Sqrt": ("y", lambda x, y: _D(0.5, y)),
    "Reciprocal": ("y", lambda x, y: _neg(_sq(y))),
    "Sigmoid": ("y", lambda x, y: _M(y, _one_minus(y))),
    "SoftPlus": ("x", lambda x, y: _S.Sigmoid(x)),
    "SoftSign": ("y", lambda x, y: _sq(_one_minus(_S.Abs(y)))),
    "Tanh": ("y", lambda x, y: _one_minus(_sq(y))),
    "Sin": ("x", lambda x, y: _S.Cos(x)),
    "Cos": ("x", lambda x, y: _neg(_S.Sin(x))),
    "Tan": ("y", lambda x, y: _one_plus(_sq(y))),
    "Asin": ("x", lambda x, y: _rsqrt(_one_minus(_sq(x)))),
    "Acos": ("x", lambda x, y: _neg(_rsqrt(_one_minus(_sq(x))))),
    "Atan": ("x", lambda x, y: _inv(_one_plus(_sq(x)))),
    "Sinh": ("x", lambda x, y: _S.Cosh(x)),
    "Cosh": ("x", lambda x, y: _S.Sinh(x)),
    "Asinh": ("x", lambda x, y: _rsqrt(_one_plus(_sq(x)))),
    "Acosh": ("x", lambda x, y: _rsqrt(_S.Sub(_sq(x), 1.0))),
    "Atanh": ("x", lambda x, y: _inv(_one_minus(_sq(x)))),
    "Erf": ("x", lambda x, y: _M(_S.Exp(_neg(_sq(x))), _TWO_OVER_SQRT_PI)),
    "GELU": ("x", None),  # _GELUBase: the GELUBackward row
    "GELUTanh": ("x", None),  # _GELUBase: the GELUTanhBackward row
    "IsNaN": NO_GRADIENT,
    "IsInf": NO_GRADIENT,
}

# Where SINGA's autograd differs from the C++ name: the class name, the function's parameter
# name, the base class.
_CLASS_NAMES = {"RoundE": "Rounde"}
_ARG_A = ("Abs", "Exp", "Sign")
_BASES = {"ReLU": _ReLUBase,
          "GELU": type("_GELU", (_GELUBase,), {"grad": staticmethod(singa.GELUBackward)}),
          "GELUTanh": type("_GELUTanh", (_GELUBase,),
                           {"grad": staticmethod(singa.GELUTanhBackward)})}

UNARY_OPS = []  # (class, function) of each unary row, in the table's order


def _define_unary(op):
    rule = UNARY_GRADIENTS[op]
    saves, deriv = rule if rule is not None else ("", None)
    cls, fn = _unary(_CLASS_NAMES.get(op, op), getattr(singa, op), deriv, saves,
                     _BASES.get(op, _Unary), "a" if op in _ARG_A else "x")
    globals()[cls.__name__], globals()[fn.__name__] = cls, fn
    UNARY_OPS.append((cls, fn))


for _op, _arity, _kinds in singa.ELEMENTWISE_OPS:
    # test_op_table.py checks every row has a rule; predicates are defined with the comparisons
    if _arity == 1 and UNARY_GRADIENTS.get(_op, NO_GRADIENT) != NO_GRADIENT:
        _define_unary(_op)
del _op, _arity, _kinds


def gelu(x, approximate="none"):
    """x * Phi(x) elementwise (torch.nn.functional.gelu): ``approximate="none"`` computes Phi
    with erf, ``"tanh"`` with PyTorch's tanh approximation (autograd operators GELU and
    GELUTanh; each backward is one fused kernel)."""
    if approximate == "none":
        return GELU()(x)[0]
    if approximate == "tanh":
        return GELUTanh()(x)[0]
    raise InputError("gelu: approximate must be 'none' or 'tanh', got %r" % (approximate,))

Identity, identity = _unary("Identity", lambda x: x, None, "", _IdentityBase)


# ---- operands ---------------------------------------------------------------------------------
def as_tensor(x, like, op):
    """``x`` as a Tensor: Tensors pass through; numbers and numpy arrays become constants
    (requires_grad False) on the device of Tensor ``like``."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, np.bool_)):
        x = float(x)
    if isinstance(x, (int, float, np.number, np.ndarray, list, tuple)):
        arr = np.asarray(x)
        if arr.dtype.kind not in "biuf":
            raise TypeError("%s: expected a Tensor or numeric data, got %r" % (op, x))
        if arr.dtype.kind == "f" or like is None or like.dtype != singa.kInt:
            arr = arr.astype(np.float32)
        ct = base.const(arr, like.data) if like is not None else singa.from_numpy(arr)
        return Tensor(data=ct, requires_grad=False)
    raise TypeError("%s: expected a singa Tensor or a number, got %s" % (op, type(x).__name__))


def _pair(a, b, op):
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError("%s: at least one operand must be a singa Tensor, got %s and %s"
                        % (op, type(a).__name__, type(b).__name__))
    like = a if isinstance(a, Tensor) else b
    return as_tensor(a, like, op), as_tensor(b, like, op)


# ---- binary arithmetic with broadcasting -----------------------------------------------------
class _Binary(Operator):
    """y = fn(a, b) with numpy broadcasting; gradients are summed back to each operand's shape."""

    def forward(self, a, b):
        self.a, self.b = a, b
        self.y = self.compute(a, b)
        return self.y

    def backward(self, dy):
        da, db = self.grads(dy)
        return (reduce_to(da, self.a.shape()) if self.need(0) and da is not None else None,
                reduce_to(db, self.b.shape()) if self.need(1) and db is not None else None)


class Add(_Binary):
    """a + b."""
    compute = staticmethod(singa.Add)

    def grads(self, dy):
        """(dy, dy): the gradients of a and b, before they are summed back to their shapes."""
        return dy, dy


class Sub(_Binary):
    """a - b."""
    compute = staticmethod(singa.Sub)

    def grads(self, dy):
        """(dy, -dy): the gradients of a and b, before they are summed back to their shapes."""
        return dy, singa.Negative(dy)


class Mul(_Binary):
    """a * b (elementwise)."""
    compute = staticmethod(singa.EltwiseMult)

    def grads(self, dy):
        """(dy * b, dy * a), each only where its input needs one (else None)."""
        return (_M(dy, self.b) if self.need(0) else None,
                _M(dy, self.a) if self.need(1) else None)


class Div(_Binary):
    """a / b (true division, float32)."""
    compute = staticmethod(singa.Div)

    def grads(self, dy):
        """(dy / b, -dy * y / b), each only where its input needs one (else None)."""
        return (_D(dy, self.b) if self.need(0) else None,
                _S.Negative(_D(_M(dy, self.y), self.b)) if self.need(1) else None)


class Pow(_Binary):
    """a ** b (float32)."""
    compute = staticmethod(singa.Pow)

    def grads(self, dy):
        """(dy * b * a^(b-1), dy * y * log(a)), each only where its input needs one, with
        torch's limits selected in: da is 0 where b == 0 (b * a^(b-1) is 0 * inf at a = 0, and
        a ** 0 is 1 for every a, NaN included), db is 0 where a == 0 and b >= 0 (0 * log 0)."""
        da = db = None
        if self.need(0):
            da = _M(dy, _M(self.b, singa.Pow(self.a, _S.Sub(self.b, 1.0))))
            da = _select(da, singa.NE(self.b, 0.0))
        if self.need(1):
            flat = _M(singa.EQ(self.a, 0.0), singa.GE(self.b, 0.0))  # 0 ** b, b >= 0
            db = _select(_M(dy, _M(self.y, singa.Log(self.a))), _one_minus(flat))
        return da, db


def add(a, b):
    """a + b with numpy broadcasting."""
    return Add()(*_pair(a, b, "add"))[0]


def sub(a, b):
    """a - b with numpy broadcasting."""
    return Sub()(*_pair(a, b, "sub"))[0]


def mul(x, y):
    """Elementwise x * y with numpy broadcasting."""
    return Mul()(*_pair(x, y, "mul"))[0]


def div(a, b):
    """Elementwise a / b with numpy broadcasting."""
    return Div()(*_pair(a, b, "div"))[0]


def pow(a, b):
    """Elementwise a ** b with numpy broadcasting."""
    return Pow()(*_pair(a, b, "pow"))[0]


def add_all(*xs):
    """x0 + x1 + ... (at least one Tensor)."""
    if not xs:
        raise InputError("add_all: expected at least one Tensor")
    y = xs[0]
    for x in xs[1:]:
        y = add(y, x)
    return y


# ---- variadic elementwise sum / mean / max / min (ONNX Sum, Mean, Max, Min) ------------------
class _Variadic(Operator):
    def forward(self, *xs):
        if not xs:
            raise InputError("%s: expected at least one input" % type(self).__name__)
        self.xs = xs
        y = xs[0]
        for x in xs[1:]:
            y = self.combine(y, x)
        self.y = self.finish(y, len(xs))
        return self.y

    def finish(self, y, n):
        return y

    def backward(self, dy):
        return tuple(reduce_to(g, x.shape()) if self.need(i) else None
                     for i, (g, x) in enumerate(zip(self.grads(dy), self.xs)))


class Sum(_Variadic):
    """Elementwise sum of the inputs."""
    combine = staticmethod(singa.Add)

    def grads(self, dy):
        """dy for every input."""
        return [dy] * len(self.xs)


class Mean(_Variadic):
    """Elementwise mean of the inputs."""
    combine = staticmethod(singa.Add)

    def finish(self, y, n):
        return singa.Div(y, float(n))

    def grads(self, dy):
        """dy / n for each of the n inputs."""
        return [singa.Div(dy, float(len(self.xs)))] * len(self.xs)


class _Extremum(_Variadic):
    """The gradient goes to the first input holding the extreme value (ties: the first wins;
    a NaN is the extreme value wherever an input holds one, as in the forward).
    With a single input, backward returns one gradient, not a tuple (as SINGA does)."""

    def backward(self, dy):
        dxs = super(_Extremum, self).backward(dy)
        return dxs[0] if len(dxs) == 1 else dxs

    def grads(self, dy):
        left = None  # 1 where no earlier input matched y
        out = []
        for x in self.xs:
            hit = singa.EQ(x, self.y)
            if x.data_type() == singa.kFloat32:  # NaN == NaN is false: NaN inputs hit too
                hit = singa.Add(hit, singa.NE(x, x))
            if hit.data_type() != singa.kFloat32:
                hit = hit.AsType(singa.kFloat32)
            if left is not None:
                hit = _M(hit, left)
            left = singa.Sub(1.0, hit) if left is None else singa.Sub(left, hit)
            out.append(_M(dy, hit))
        return out


class Max(_Extremum):
    """Elementwise maximum of the inputs."""
    combine = staticmethod(singa.Maximum)


class Min(_Extremum):
    """Elementwise minimum of the inputs."""
    combine = staticmethod(singa.Minimum)


def _variadic(cls, xs, op):
    if len(xs) == 1 and isinstance(xs[0], (list, tuple)):
        xs = tuple(xs[0])
    if not xs:
        raise InputError("%s: expected at least one Tensor" % op)
    return cls()(*xs)[0]


def sum(*l):
    """Elementwise sum of Tensors (with broadcasting)."""
    return _variadic(Sum, l, "sum")


def mean(*l):
    """Elementwise mean of Tensors (with broadcasting)."""
    return _variadic(Mean, l, "mean")


def max(*l):
    """Elementwise maximum of Tensors (with broadcasting)."""
    return _variadic(Max, l, "max")


def min(*l):
    """Elementwise minimum of Tensors (with broadcasting)."""
    return _variadic(Min, l, "min")


# ---- comparisons and logic: 0/1 results, no gradient ----------------------------------------
class _Predicate(Operator):
    differentiable = False
    fn = None

    def forward(self, *xs):
        return type(self).fn(*xs)

    def backward(self, *dys):
        raise NoGradientError("%s has no gradient" % type(self).__name__)


def _truth(x):
    return singa.NE(x, 0.0)


def _predicate(name, fn, doc):
    cls = type(name, (_Predicate,), {"fn": staticmethod(fn), "__doc__": doc})
    return cls


Less = _predicate("Less", singa.LT, "x < y, elementwise (0/1).")
Greater = _predicate("Greater", singa.GT, "x > y, elementwise (0/1).")
Equal = _predicate("Equal", singa.EQ, "x == y, elementwise (0/1).")
LessEqual = _predicate("LessEqual", singa.LE, "x <= y, elementwise (0/1).")
GreaterEqual = _predicate("GreaterEqual", singa.GE, "x >= y, elementwise (0/1).")
And = _predicate("And", lambda a, b: _M(_truth(a), _truth(b)), "logical and (0/1).")
Or = _predicate("Or", lambda a, b: singa.Maximum(_truth(a), _truth(b)), "logical or (0/1).")
Xor = _predicate("Xor", lambda a, b: singa.NE(_truth(a), _truth(b)), "logical xor (0/1).")
Not = _predicate("Not", lambda a: singa.EQ(a, 0.0), "logical not (0/1).")
IsNaN = _predicate("IsNaN", singa.IsNaN, "x is NaN, elementwise (0/1).")
IsInf = _predicate("IsInf", singa.IsInf, "x is +inf or -inf, elementwise (0/1).")


def isnan(x):
    """1 where x is NaN, else 0, in x's dtype (as the comparisons; int32 is never NaN). No
    gradient flows through it (NoGradientError)."""
    return IsNaN()(x)[0]


def isinf(x):
    """1 where x is +inf or -inf, else 0, in x's dtype. No gradient flows through it."""
    return IsInf()(x)[0]


def less(x, y):
    """``x < y`` elementwise, broadcast like numpy: a float32 tensor of 0s and 1s. Either operand
    may be a number or a numpy array; no gradient flows through it (NoGradientError)."""
    return Less()(*_pair(x, y, "less"))[0]


def greater(x, y):
    """``x > y`` elementwise, broadcast like numpy: a float32 tensor of 0s and 1s. Either operand
    may be a number or a numpy array; no gradient flows through it (NoGradientError)."""
    return Greater()(*_pair(x, y, "greater"))[0]


def equal(x, y):
    """``x == y`` elementwise, broadcast like numpy: a float32 tensor of 0s and 1s. Either operand
    may be a number or a numpy array; no gradient flows through it (NoGradientError)."""
    return Equal()(*_pair(x, y, "equal"))[0]


def less_equal(x, y):
    """``x <= y`` elementwise, broadcast like numpy: a float32 tensor of 0s and 1s. Either operand
    may be a number or a numpy array; no gradient flows through it (NoGradientError)."""
    return LessEqual()(*_pair(x, y, "less_equal"))[0]


def greater_equal(x, y):
    """``x >= y`` elementwise, broadcast like numpy: a float32 tensor of 0s and 1s. Either operand
    may be a number or a numpy array; no gradient flows through it (NoGradientError)."""
    return GreaterEqual()(*_pair(x, y, "greater_equal"))[0]


def _and(a, b):
    return And()(*_pair(a, b, "_and"))[0]


def _or(a, b):
    return Or()(*_pair(a, b, "_or"))[0]


def _xor(a, b):
    return Xor()(*_pair(a, b, "_xor"))[0]


def _not(x):
    return Not()(x)[0]


# ---- clip, where, cast ----------------------------------------------------------------------
class Clip(Operator):
    """Clamps x into [min, max]; either bound may be None. The gradient passes where
    min <= x <= max."""

    def __init__(self, min=None, max=None):
        super(Clip, self).__init__()
        self.min = None if min is None else as_float(min, "min", "clip")
        self.max = None if max is None else as_float(max, "max", "clip")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise InputError("clip: min (%s) is greater than max (%s)" % (min, max))

    def forward(self, x):
        self.x = x
        lo = -np.inf if self.min is None else self.min
        hi = np.inf if self.max is None else self.max
        return singa.Clamp(x, lo, hi)

    def backward(self, dy):
        mask = None
        if self.min is not None:
            mask = singa.GE(self.x, self.min)
        if self.max is not None:
            upper = singa.LE(self.x, self.max)
            mask = upper if mask is None else _M(mask, upper)
        return dy if mask is None else _M(dy, mask)


def clip(x, min=None, max=None):
    """np.clip(x, min, max); None means unbounded."""
    return Clip(min, max)(x)[0]


class Where(Operator):
    """condition ? a : b, elementwise with broadcasting; ``condition`` is a Tensor, numpy array
    or list (non-zero = true), fixed when the operator is created."""

    def __init__(self, condition):
        super(Where, self).__init__()
        self.condition = condition

    def forward(self, a, b):
        cond = self.condition
        if isinstance(cond, Tensor):
            cond = cond.data
        if not isinstance(cond, singa.Tensor):
            arr = np.asarray(cond)
            if arr.dtype.kind not in "biuf":  # strings, None, objects: not a mask
                raise type_error("where", "condition", "Tensor or numeric array", cond)
            cond = base.const(arr.astype(np.float32), a)
        self.mask = singa.NE(cond, 0.0)
        if self.mask.data_type() != singa.kFloat32:
            self.mask = self.mask.AsType(singa.kFloat32)
        self.unmask = singa.Sub(1.0, self.mask)  # b's side, kept for backward
        self.a_shape, self.b_shape = a.shape(), b.shape()
        return singa.Add(_select(a, self.mask), _select(b, self.unmask))

    def backward(self, dy):
        da = reduce_to(_select(dy, self.mask), self.a_shape) if self.need(0) else None
        db = reduce_to(_select(dy, self.unmask), self.b_shape) if self.need(1) else None
        return da, db


def _select(x, mask):
    """x where the 0/1 ``mask`` is 1, else exactly 0, broadcasting: ReLUBackward(x, mask) is
    that select. (A product x * mask would make an inf or NaN of the side not taken a NaN:
    where(c, scores, -inf) is how attention masks are written.)"""
    return singa.ReLUBackward(x, mask)


def where(x, y, condition):
    """Elements of x where condition is true, else of y (ONNX Where)."""
    x, y = _pair(x, y, "where")
    return Where(condition)(x, y)[0]


class Cast(Operator):
    """Converts x to dtype ``to`` (tensor.float32 / float16 / int32). The gradient of a float
    input is cast back; an int32 input or result gets none.

    A Cast of float32 to bfloat16 / float16 takes its gradient in float32 as well
    (Operator.takes_float32_grad: a convolution writes its weights' float32 gradient directly);
    ``Cast.float32_grads = False`` turns that off (every gradient rounded to the low dtype first,
    as before: bench_train.py's side-by-side row)."""

    float32_grads = True

    def __init__(self, to):
        super(Cast, self).__init__()
        self.to = _dtype(to, "cast")

    def forward(self, x):
        self.from_dtype = x.data_type()
        self.takes_float32_grad = (self.float32_grads and self.from_dtype == singa.kFloat32
                                   and self.to in (singa.kBFloat16, singa.kFloat16))
        return x if self.from_dtype == self.to else x.AsType(self.to)

    def backward(self, dy):
        if self.from_dtype == singa.kInt or self.to == singa.kInt:
            return None
        # dy is in ``to`` or, from a consumer that wrote it so (takes_float32_grad), in float32
        return dy if dy.data_type() == self.from_dtype else dy.AsType(self.from_dtype)


def cast(x, to):
    """x converted to dtype ``to``."""
    return Cast(to)(x)[0]


# The binary rows of the table: the autograd operator that differentiates each, or None.
BINARY_GRADIENTS = {
    "Add": Add, "Sub": Sub, "EltwiseMult": Mul, "Div": Div, "Pow": Pow,
    "Maximum": Max, "Minimum": Min,
    # comparisons: 0/1 results, no gradient (autograd's Less... raise NoGradientError)
    "LT": None, "LE": None, "GT": None, "GE": None, "EQ": None, "NE": None,
    # they are themselves gradients (of ReLU and GELU, used by their backward)
    "ReLUBackward": None, "GELUBackward": None, "GELUTanhBackward": None,
    # the exact remainder Tensor.__mod__ is built from; SINGA's autograd has no Mod operator
    "Fmod": None,
    # Tensor // and % (numpy's); SINGA's autograd differentiates neither
    "FloorDiv": None, "Mod": None,
}

__all__ = (
    [name for cls, fn in UNARY_OPS for name in (cls.__name__, fn.__name__)] +
    ["Identity", "identity", "Add", "add", "Sub", "sub", "Mul", "mul", "Div", "div", "Pow", "pow",
     "add_all", "Sum", "sum", "Mean", "mean", "Max", "max", "Min", "min",
     "Less", "less", "Greater", "greater", "Equal", "equal", "LessEqual", "less_equal",
     "GreaterEqual", "greater_equal", "And", "_and", "Or", "_or", "Xor", "_xor", "Not", "_not",
     "Clip", "clip", "Where", "where", "Cast", "cast", "IsNaN", "isnan", "IsInf", "isinf"])
