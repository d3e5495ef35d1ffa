"""Targets of tools/fuzz_numpy.py: the Tensor class's operators (+, -, *, /, **, //, %, @,
comparisons, reflected forms with a number or numpy array on the left) and methods (reshape,
transpose, repeat, as_type, l1, l2, the row / column helpers), with numpy references."""
import numpy as np

from singa import tensor
from fuzz_numpy_gen import In, f64, target
from fuzz_numpy_math import _binary_gen, _cmp, _div, _pow, unary_gen
from fuzz_numpy_shapes import _matmul_gen, _perm_gen, _repeat_gen, _reshape_gen


def _as_float32(op):
    """op computed in float32 where either operand is a float (singa's and torch's promotion of
    int32 with float32, and of a Python float; numpy's is float64)."""
    def f(a, b):
        a, b = np.asarray(a), np.asarray(b)
        if "f" in (a.dtype.kind, b.dtype.kind):
            a, b = a.astype(np.float32), b.astype(np.float32)
        with np.errstate(all="ignore"):
            return op(a, b)
    return f


# numpy's floor_divide and mod (0 for a zero int32 divisor; floats from fmod: exact however large
# a / b, 1 // 0.1 is 9, inf // 2 NaN)
_floordiv = _as_float32(np.floor_divide)
_mod = _as_float32(np.mod)


OPERATORS = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", _div),
             ("pow", _pow), ("floordiv", _floordiv), ("mod", _mod)]
COMPARISONS = [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
               ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)]


def _numpy_operand(gen):
    """gen's calls with the right operand sometimes a numpy array instead of a tensor."""
    def g2(g):
        args, kw = gen(g)
        if isinstance(args[1], In) and g.r.random() < 0.25:
            args[1] = args[1].a
        return args, kw
    return g2


def _reflected_gen(g):
    x = g.x(ints=True)
    num = g.choice([2.0, -1.5, 0.0, 3]) if x.a.dtype == np.float32 else g.choice([2, -3, 0, 7])
    return [x, num], {}


def _method(name, *fixed):
    def call(t, *args, **kw):
        return getattr(t, name)(*(fixed + args), **kw)
    call.__name__ = name
    return call


def _inplace(name):
    """A method that changes the tensor and returns None: the call returns the tensor."""
    def call(t, v):
        getattr(t, name)(v)
        return t
    return call


def _matrix_vec_gen(along):
    def gen(g):
        r, c = g.choice([0, 1, 2, 3]), g.choice([0, 1, 2, 4])
        return [g.x((r, c)), g.x((c,) if along == "row" else (r,))], {}
    return gen


def _as_type_gen(g):
    x = g.x(ints=True, fill=g.choice(["randn", "ints", "small"]))
    return [x, g.choice(["int32", "float32"])], {}


def _as_type(x, dtype):
    """float -> int truncates toward zero, as numpy's astype and torch's .to do."""
    return x.astype(dtype)


def method_targets():
    for name, op in OPERATORS:
        gen = _numpy_operand(_binary_gen(scalar=True, positive_rhs=name == "pow"))
        ref = op if name in ("floordiv", "mod") else f64(op)  # float32's rounding decides
        target("tensor.Tensor.__%s__" % name, gen, getattr(tensor.Tensor, "__%s__" % name),
               ref, rtol=1e-4 if name == "pow" else 1e-5)
        target("tensor.Tensor.__r%s__" % name, _reflected_gen,
               lambda t, x, name=name: getattr(t, "__r%s__" % name)(x),
               lambda t, x, ref=ref: ref(np.asarray(x, t.dtype), t),
               rtol=1e-4 if name == "pow" else 1e-5)
    # the table's rows behind // and % (and C's fmod), called as functions: numpy's bits
    for name, op in (("floordiv", _floordiv), ("mod", _mod), ("fmod", _as_float32(np.fmod))):
        target("tensor." + name, _numpy_operand(_binary_gen(scalar=True)), getattr(tensor, name),
               op, exact=True)
    for name, op in COMPARISONS:
        target("tensor.Tensor.__%s__" % name, _numpy_operand(_binary_gen(scalar=True)),
               getattr(tensor.Tensor, "__%s__" % name), _cmp(op), exact=True)
    target("tensor.Tensor.__neg__", _one_tensor, tensor.Tensor.__neg__, np.negative,
           exact=True)
    target("tensor.Tensor.__abs__", _one_tensor, tensor.Tensor.__abs__, np.abs, exact=True)
    target("tensor.Tensor.__matmul__", _matmul_gen, tensor.Tensor.__matmul__, f64(np.matmul),
           accum=True)
    target("tensor.Tensor.reshape", _reshape_gen(False), _method("reshape"), np.reshape,
           exact=True)
    target("tensor.Tensor.transpose", _perm_gen, _method("transpose"), np.transpose, exact=True)
    target("tensor.Tensor.repeat", _repeat_gen, lambda t, r, axis=None: t.repeat(r, axis),
           lambda x, r, axis=None: np.repeat(x, r, axis), exact=True)
    target("tensor.Tensor.as_type", _as_type_gen, _method("as_type"), _as_type, exact=True)
    # float32 only, as torch's norms (an int32 tensor raises DTypeError)
    target("tensor.Tensor.l1", unary_gen, _method("l1"),
           f64(lambda x: float(np.abs(x).sum() / x.size) if x.size else np.nan), accum=True)
    target("tensor.Tensor.l2", unary_gen, _method("l2"),
           f64(lambda x: float(np.sqrt((x ** 2).sum()) / x.size) if x.size else np.nan),
           accum=True)
    target("tensor.Tensor.clone", _one_tensor, _method("clone"), np.copy, exact=True)
    for name, op in (("add_row", np.add), ("sub_row", np.subtract), ("mult_row", np.multiply),
                     ("div_row", _div)):
        target("tensor.Tensor." + name, _matrix_vec_gen("row"), _inplace(name),
               f64(lambda m, v, op=op: op(m, v[None, :])))
        col = name.replace("row", "column")
        target("tensor.Tensor." + col, _matrix_vec_gen("column"), _inplace(col),
               f64(lambda m, v, op=op: op(m, v[:, None])))
    target("tensor.sum_rows", _one_matrix, tensor.sum_rows,
           f64(lambda m: m.sum(axis=0, keepdims=True)), accum=True)
    target("tensor.sum_columns", _one_matrix, tensor.sum_columns,
           f64(lambda m: m.sum(axis=1, keepdims=True)), accum=True)


def _one_tensor(g):
    return [g.x(ints=True)], {}


def _one_matrix(g):
    return [g.x((g.choice([0, 1, 2, 3]), g.choice([0, 1, 2, 4])))], {}


method_targets()
