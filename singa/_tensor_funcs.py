"""The module-level functions of singa.tensor: creation and conversion, element-wise math,
reductions, products, shapes and random fills (re-exported there; import singa.tensor, not this).

    from singa import tensor
    y = tensor.exp(x)                 # one function per row of singa_wrap.ELEMENTWISE_OPS
    z = tensor.add(x, 2.0)            # the C++ name lower-cased, or the name in _PY_NAMES

Every function computes with the C++ core (singa_wrap); only index bookkeeping (einsum,
tensordot) happens in Python. The elementwise functions are made from the table generated from
cpp/include/singa/ops/elementwise.def, so a new line there gets its tensor function here.

Every public function is annotated (PEP 484; the package carries a ``py.typed`` marker); the
annotations describe what a caller passes, while each function still checks its arguments itself.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import singa_wrap as singa
from ._core import (Tensor, _NAMES, _wrap, _ct, _operand, _dev, _dtype, _np_input, product,
                    bfloat16, float16, float32, int32)
from ._args import as_axes, as_axis, as_float, as_int
from .errors import CheckShapeError

# ---- the types of the annotations ------------------------------------------------------------
TensorLike = Union[Tensor, "singa.Tensor"]            # a Tensor or a core tensor
Number = Union[int, float]
# one side of a binary function: a tensor, a number or a numpy array (copied to the device)
Operand = Union[Tensor, "singa.Tensor", int, float, np.ndarray]
Shape = Union[int, Sequence[int]]
Axes = Union[int, Sequence[int]]
DType = int                                            # tensor.float32, float16, int32

# SINGA's names where they are not the C++ name lower-cased (ReLUBackward: not in SINGA).
_PY_NAMES = {"EltwiseMult": "eltwise_mult", "ReLUBackward": "relu_backward",
             "GELUBackward": "gelu_backward", "GELUTanhBackward": "gelu_tanh_backward"}


def py_name(op: str) -> str:
    """The tensor function's name of elementwise op ``op`` (its C++ name)."""
    return _PY_NAMES.get(op, op.lower())


_ELEMENTWISE = tuple(py_name(name) for name, _, _ in singa.ELEMENTWISE_OPS)

__all__ = [
    # creation and conversion
    "from_raw_tensor", "from_raw_tensors", "sizeof", "dtype_name", "from_numpy", "to_numpy",
    "from_dlpack", "to_host", "copy_from_numpy", "zeros", "ones", "zeros_like", "ones_like", "random", "_call_singa_func",
    # element-wise: the table's ops, and two with parameters
    *_ELEMENTWISE, "clip", "leakyrelu",
    # reductions
    "sum", "average", "softmax", "sum_columns", "sum_rows",
    # products
    "mult", "axpy", "einsum", "tensordot",
    # shapes and copies
    "contiguous", "reshape", "transpose", "repeat", "concatenate", "copy_data_to_from",
    # random fills and row/column helpers
    "bernoulli", "gaussian", "uniform", "add_column", "add_row",
]


# ---- creation and conversion ----------------------------------------------------------------
def from_raw_tensor(t: TensorLike) -> Tensor:
    """A Tensor around core tensor ``t`` (no copy)."""
    return _wrap(_ct(t, "from_raw_tensor"))


def from_raw_tensors(tt: Sequence[TensorLike]) -> List[Tensor]:
    """A list of Tensors, one per core tensor (``singa_wrap.Tensor``) of ``tt``; each shares its
    core tensor's memory (see from_raw_tensor)."""
    return [from_raw_tensor(t) for t in tt]


def dtype_name(t: Union[TensorLike, DType]) -> str:
    """The name of the dtype of Tensor ``t`` (or of a dtype code): "float32", "float16" or
    "int32"."""
    if isinstance(t, (Tensor, singa.Tensor)):
        code = t.dtype if isinstance(t, Tensor) else t.data_type()
    else:
        code = _dtype(t, "dtype_name")
    return _NAMES[code]


def sizeof(dtype: DType) -> int:
    """Bytes per element of a singa dtype."""
    return {float32: 4, float16: 2, int32: 4, bfloat16: 2}[_dtype(dtype, "sizeof")]


def from_numpy(np_array: np.ndarray, dev: Optional[singa.Device] = None) -> Tensor:
    """A new tensor with a copy of a numpy array (float64 -> float32, int64 -> int32)."""
    arr = _np_input(np_array, "from_numpy")
    return _wrap(singa.from_numpy(arr, _dev(dev, "from_numpy")))


def to_numpy(t: TensorLike) -> np.ndarray:
    """A numpy copy of the values of ``t`` (through t.to_numpy(): a schedule's step refuses)."""
    if isinstance(t, Tensor):
        return t.to_numpy()
    return singa.to_numpy(_ct(t, "to_numpy"))


def from_dlpack(x: object, device: Optional[singa.Device] = None,
                copy: Optional[bool] = None) -> Tensor:
    """A tensor sharing the memory of ``x``, any object with ``__dlpack__`` (a numpy array, a
    PyTorch tensor, another singa tensor...): the Python array API's ``from_dlpack``.

    Zero-copy when ``x`` is host memory, row-major contiguous, aligned, writable and float32,
    float16 or int32: writes on either side show on the other, and ``x``'s memory stays alive
    while any tensor, view or recorded graph uses it. Strided (``x[:, ::2]``, ``x.T``), read-only
    or unaligned host memory is copied into a contiguous tensor; ``copy=False`` raises
    BufferError instead, ``copy=True`` always copies. Other dtypes raise DTypeError (a
    TypeError): ``tensor.from_numpy`` converts them as SINGA does. Memory on a GPU raises
    NotImplementedError (move it to the host first). ``device``: a host device (default: the
    default host device), or a GPU device, which receives a copy. Example::

        a = np.zeros((2, 3), np.float32)
        t = tensor.from_dlpack(a)
        t += 1                      # a is now all ones
    """
    if device is not None and not isinstance(device, singa.Device):
        raise TypeError("from_dlpack: expected a singa Device or None, got %s"
                        % type(device).__name__)
    return _wrap(singa.from_dlpack(x, device, copy))


def to_host(t: TensorLike) -> Tensor:
    """A copy of ``t`` on the host device."""
    return _wrap(_ct(t, "to_host").Clone().ToHost())


def copy_from_numpy(data: TensorLike, np_array: np.ndarray) -> None:
    """Copies a numpy array of the same size into a Tensor or core tensor."""
    if isinstance(data, Tensor):
        data.copy_from_numpy(np_array)
        return
    arr = _np_input(np_array, "copy_from_numpy")
    ct = _ct(data, "copy_from_numpy")
    if arr.size != ct.Size():
        raise CheckShapeError("copy_from_numpy: the array has %d elements %s, the tensor %d %s"
                              % (arr.size, arr.shape, ct.Size(), ct.shape()))
    singa.copy_from_numpy(ct, arr)


def zeros(shape: Shape, device: Optional[singa.Device] = None, dtype: DType = float32) -> Tensor:
    """A new tensor of ``shape`` filled with 0, on ``device`` (default: the default device).

    Example::

        t = tensor.zeros((2, 3))                        # float32
        i = tensor.zeros((4,), dtype=tensor.int32)
    """
    return Tensor(shape, device, dtype).set_value(0)


def ones(shape: Shape, device: Optional[singa.Device] = None, dtype: DType = float32) -> Tensor:
    """A new tensor of ``shape`` filled with 1, on ``device`` (default: the default device)."""
    return Tensor(shape, device, dtype).set_value(1)


def zeros_like(t: Tensor) -> Tensor:
    """A new tensor of 0s with the shape, device and dtype of Tensor ``t``."""
    _ct(t, "zeros_like")
    return Tensor(t.shape, t.device, t.dtype).set_value(0)


def ones_like(t: Tensor) -> Tensor:
    """A new tensor of 1s with the shape, device and dtype of Tensor ``t``."""
    _ct(t, "ones_like")
    return Tensor(t.shape, t.device, t.dtype).set_value(1)


def random(shape: Shape, device: Optional[singa.Device] = None) -> Tensor:
    """A float32 tensor of samples of U[0, 1)."""
    return Tensor(shape, device).uniform(0, 1)


def _call_singa_func(_singa_func, *args):
    """Calls a singa_wrap function returning a core tensor and wraps the result."""
    return _wrap(_singa_func(*args))


# ---- element-wise: one function per row of the table ---------------------------------------
def _binary(fn, lhs, rhs, ret, op):
    if isinstance(lhs, Tensor):
        like = lhs.data
    elif isinstance(rhs, Tensor):
        like = rhs.data
    else:
        raise TypeError("%s: expected at least one singa Tensor operand, got %s and %s"
                        % (op, type(lhs).__name__, type(rhs).__name__))
    a, b = _operand(lhs, like, op), _operand(rhs, like, op)
    for x, v in ((a, lhs), (b, rhs)):
        if x is NotImplemented:
            raise TypeError("%s: expected a Tensor, a numpy array or a number, got %s"
                            % (op, type(v).__name__))
    if ret is None:
        return _wrap(fn(a, b))
    fn(a, b, out=_ct(ret, op))
    return ret


# SINGA's parameter names differ by function; each form keeps them (callers pass them by name).
def _unary_form(fn, op, name):
    def f(t: TensorLike, out: Optional[Tensor] = None) -> Tensor:
        x = _ct(t, name)
        if out is None:
            return _wrap(fn(x))
        fn(x, out=_ct(out, name))
        return out
    return f


def _arith_form(fn, op, name):  # add, sub, eltwise_mult, div, maximum, minimum
    def f(lhs: Operand, rhs: Operand, ret: Optional[Tensor] = None) -> Tensor:
        return _binary(fn, lhs, rhs, ret, op)
    return f


def _pow_form(fn, op, name):
    def f(t: Operand, x: Operand, out: Optional[Tensor] = None) -> Tensor:
        return _binary(fn, t, x, out, op)
    return f


def _compare_form(fn, op, name):  # no output argument in SINGA
    def f(t: Operand, x: Operand) -> Tensor:
        return _binary(fn, t, x, None, op)
    return f


_FORMS = {"Pow": _pow_form, "LT": _compare_form, "LE": _compare_form, "GT": _compare_form,
          "GE": _compare_form, "EQ": _compare_form, "NE": _compare_form}
_KINDS = {"F": "float32", "FI": "float32 or int32"}


def _define(op, arity, kinds):
    name = py_name(op)
    form = _unary_form if arity == 1 else _FORMS.get(op, _arith_form)
    f = form(getattr(singa, op), op, name)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = ("Elementwise %s (the core's %s, %s%s): a new tensor, or the output argument "
                 "filled when given." % (name, op, _KINDS[kinds],
                                         "" if arity == 1 else ", numpy broadcasting; either "
                                         "operand may be a number or a numpy array"))
    return name, f


for _row in singa.ELEMENTWISE_OPS:
    _name, _f = _define(*_row)
    globals()[_name] = _f
del _row, _name, _f

if TYPE_CHECKING:
    # What the loop above defines, spelled out for type checkers, which do not run it (with the
    # py.typed marker mypy would otherwise report tensor.exp as missing). test_typing.py checks
    # that these lines name every row of the op table with its form's signature.
    def _unary_sig(t: TensorLike, out: Optional[Tensor] = None) -> Tensor: ...
    def _arith_sig(lhs: Operand, rhs: Operand, ret: Optional[Tensor] = None) -> Tensor: ...
    def _pow_sig(t: Operand, x: Operand, out: Optional[Tensor] = None) -> Tensor: ...
    def _compare_sig(t: Operand, x: Operand) -> Tensor: ...

    abs = negative = sign = square = relu = ceil = floor = round = rounde = _unary_sig
    exp = log = sqrt = reciprocal = sigmoid = softplus = softsign = tanh = _unary_sig
    sin = cos = tan = asin = acos = atan = sinh = cosh = asinh = acosh = atanh = erf = _unary_sig
    gelu = gelutanh = isnan = isinf = _unary_sig
    add = sub = eltwise_mult = div = maximum = minimum = relu_backward = fmod = _arith_sig
    floordiv = mod = _arith_sig
    gelu_backward = gelu_tanh_backward = _arith_sig
    pow = _pow_sig
    lt = le = gt = ge = eq = ne = _compare_sig
    # the names __all__ takes from the table (a starred entry type checkers cannot evaluate)
    __all__ += ["abs", "negative", "sign", "square", "relu", "ceil", "floor", "round", "rounde",
                "exp", "log", "sqrt", "reciprocal", "sigmoid", "softplus", "softsign", "tanh",
                "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
                "atanh", "erf", "add", "sub", "eltwise_mult", "div", "maximum", "minimum",
                "relu_backward", "fmod", "floordiv", "mod", "pow", "lt", "le", "gt", "ge", "eq", "ne",
                "gelu", "gelutanh", "isnan", "isinf", "gelu_backward", "gelu_tanh_backward"]


def clip(t: TensorLike, low: Number, high: Number) -> Tensor:
    """Each element limited to [low, high]."""
    return _wrap(singa.Clamp(_ct(t, "clip"), as_float(low, "low", "clip"),
                              as_float(high, "high", "clip")))


def leakyrelu(t: TensorLike, a: float = 0.01) -> Tensor:
    """x if x > 0 else a * x."""
    return _wrap(singa.LeakyReLU(_ct(t, "leakyrelu"), as_float(a, "a", "leakyrelu")))


# ---- reductions ---------------------------------------------------------------------------
def _axes(axis, op):
    return as_axes(axis, "axis", op)


def _into(out, res, op):
    """Copies result ``res`` into ``out`` (same shape) and returns out."""
    if not isinstance(out, Tensor):
        raise TypeError("%s: out must be a singa Tensor, got %s" % (op, type(out).__name__))
    if tuple(out.shape) != tuple(res.shape):
        raise singa.ShapeError("%s: out has shape %s but the result has shape %s"
                               % (op, tuple(out.shape), tuple(res.shape)))
    out.copy_data(res)
    return out


def sum(t: TensorLike, axis: Optional[Axes] = None, out: Optional[Tensor] = None) -> Tensor:
    """The sum over ``axis`` (an int or a tuple of ints), the summed axes removed; into ``out``
    if given. With axis None the sum of every element comes as a (1, 1) tensor, as in SINGA
    (whose tensordot-based sum gives that shape; SINGA code reads it with to_numpy(s)[0])."""
    res = singa.ReduceSum(_ct(t, "sum"), _axes(axis, "sum"), False)
    if axis is None:
        res = singa.Reshape(res, [1, 1])
    res = _wrap(res)
    return res if out is None else _into(out, res, "sum")


def average(t: TensorLike, axis: Optional[Axes] = None) -> Union[float, Tensor]:
    """The mean of all elements as a float if ``axis`` is None, else a tensor of the means
    along ``axis`` (an int or a tuple)."""
    x = _ct(t, "average")
    if axis is None:
        if x.Size() == 0:
            raise singa.ShapeError("average: the tensor of shape %s has no elements"
                                   % (x.shape(),))
        if x.data_type() == singa.kInt:  # an int32 sum wraps past 2^31 (numpy's mean is float)
            x = x.AsType(singa.kFloat32)
        return singa.SumAsFloat(x) / x.Size()
    axes = _axes(axis, "average")
    if len(axes) == 1 and not isinstance(axis, (list, tuple)):
        return _wrap(singa.Average(x, axes[0]))
    return _wrap(singa.ReduceMean(x, axes, False))


def softmax(t: TensorLike, out: Optional[Tensor] = None, axis: Optional[int] = None) -> Tensor:
    """Softmax of each row: of all elements for a 1-d tensor, of each t[i] (flattened) for a
    tensor of higher rank, as in SINGA; or along ``axis`` when given. Into ``out`` if given."""
    x = _ct(t, "softmax")
    if axis is not None:
        res = singa.SoftMax(x, as_axis(axis, "axis", "softmax"))
    elif x.nDim() <= 1:
        res = singa.SoftMax(x, -1)
    else:
        shape = x.shape()
        # the row length spelled out: -1 cannot be inferred when a dimension is 0
        cols = int(np.prod(shape[1:], dtype=np.int64))
        res = singa.Reshape(singa.SoftMax(singa.Reshape(x, [shape[0], cols]), -1), list(shape))
    res = _wrap(res)
    return res if out is None else _into(out, res, "softmax")


def sum_columns(M: TensorLike) -> Tensor:
    """The sum of the columns of matrix M, as a (rows, 1) tensor."""
    x = _ct(M, "sum_columns")
    return _wrap(singa.Reshape(singa.SumColumns(x), [-1, 1]))


def sum_rows(M: TensorLike) -> Tensor:
    """The sum of the rows of matrix M, as a (1, cols) tensor."""
    x = _ct(M, "sum_rows")
    return _wrap(singa.Reshape(singa.SumRows(x), [1, -1]))


# ---- products -----------------------------------------------------------------------------
def mult(A: TensorLike, B: TensorLike, C: Optional[Tensor] = None, alpha: float = 1.0,
         beta: float = 0.0) -> Tensor:
    """The matrix product A B (numpy.matmul rules: 1-d, 2-d and batched). With C given,
    C = alpha * A B + beta * C in place and C is returned."""
    a, b = _ct(A, "mult"), _ct(B, "mult")
    alpha, beta = as_float(alpha, "alpha", "mult"), as_float(beta, "beta", "mult")
    if C is None:
        res = singa.Mult(a, b)
        if alpha != 1.0:
            res = singa.EltwiseMult(res, alpha)
        return _wrap(res)
    singa.MultWithScale(alpha, a, b, beta, _ct(C, "mult"))
    return C


def axpy(alpha: float, x: TensorLike, y: Tensor) -> Tensor:
    """y += alpha * x in place; returns y."""
    singa.Axpy(as_float(alpha, "alpha", "axpy"), _ct(x, "axpy"), _ct(y, "axpy"))
    return y


def tensordot(A: TensorLike, B: TensorLike,
              axes: Union[int, Tuple[Axes, Axes]] = 2) -> Tensor:
    """Sum of products over the given axes, like numpy.tensordot: ``axes`` is n (the last n axes
    of A with the first n of B) or a pair (axes of A, axes of B)."""
    a, b = _ct(A, "tensordot"), _ct(B, "tensordot")
    sa, sb = a.shape(), b.shape()
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > len(sa) or n > len(sb):
            raise singa.AxisError("tensordot: cannot contract %d axes of shapes %s and %s"
                                  % (n, sa, sb))
        ax_a, ax_b = list(range(len(sa) - n, len(sa))), list(range(n))
    else:
        try:
            ax_a, ax_b = axes  # type: ignore[assignment]  # made lists below
        except (TypeError, ValueError):
            raise TypeError("tensordot: axes must be an int or a pair of axis lists, got %r"
                            % (axes,))
        ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
    if len(ax_a) != len(ax_b):
        raise singa.ShapeError("tensordot: %d axes of A %s but %d axes of B %s"
                               % (len(ax_a), sa, len(ax_b), sb))
    ax_a = [_norm_axis(x, len(sa), "tensordot") for x in ax_a]
    ax_b = [_norm_axis(x, len(sb), "tensordot") for x in ax_b]
    for i, j in zip(ax_a, ax_b):
        if sa[i] != sb[j]:
            raise singa.ShapeError("tensordot: axis %d of A %s has length %d but axis %d of B %s "
                                   "has length %d" % (i, sa, sa[i], j, sb, sb[j]))
    free_a = [i for i in range(len(sa)) if i not in ax_a]
    free_b = [j for j in range(len(sb)) if j not in ax_b]
    k = product(sa[i] for i in ax_a)
    m = product(sa[i] for i in free_a)
    n = product(sb[j] for j in free_b)
    a2 = singa.Reshape(singa.Transpose(a, free_a + ax_a), [m, k])
    b2 = singa.Reshape(singa.Transpose(b, ax_b + free_b), [k, n])
    out_shape = [sa[i] for i in free_a] + [sb[j] for j in free_b]
    return _wrap(singa.Reshape(singa.Mult(a2, b2), out_shape))


def _norm_axis(axis, nd, op):
    axis = as_axis(axis, "axes", op)
    if not -nd <= axis < nd:
        raise singa.AxisError("%s: axis %d is out of range for rank %d" % (op, axis, nd))
    return axis + nd if axis < 0 else axis


def einsum(ops: str, *args: TensorLike) -> Tensor:
    """Einstein summation, e.g. einsum('ij,jk->ik', A, B), einsum('ki,kj->kij', A, B).

    Each operand's subscripts are letters, one per axis (no repeated letter in one operand, no
    '...'); without '->' the output is the letters used once, in alphabetical order (numpy's
    rule). Computed by aligning every operand on all letters, multiplying with broadcasting and
    summing the letters that are not in the output.
    """
    # '' is valid, as in numpy: one 0-d operand (then checked like any subscripts)
    if not isinstance(ops, str):
        raise ValueError("einsum: expected a subscripts string such as 'ij,jk->ik', got %r"
                         % (ops,))
    spec = ops.replace(" ", "")
    if "." in spec:
        raise singa.ArgumentError("einsum: '...' is not supported (%r)" % ops)
    if "->" in spec:
        ins, out = spec.split("->", 1)
    else:
        ins, out = spec, None
    ins = ins.split(",")  # type: ignore[assignment]  # one per operand
    if len(ins) != len(args):
        raise ValueError("einsum: %r names %d operands but %d were given"
                         % (ops, len(ins), len(args)))
    cts = [_ct(t, "einsum") for t in args]
    sizes: dict = {}
    for k, (sub, ct) in enumerate(zip(ins, cts)):
        if not sub.isalpha() and sub:
            raise ValueError("einsum: subscripts must be letters, got %r" % sub)
        if len(sub) != ct.nDim():
            raise singa.ShapeError("einsum: operand %d has shape %s but subscripts %r"
                                   % (k, ct.shape(), sub))
        if len(set(sub)) != len(sub):
            raise singa.ArgumentError("einsum: repeated subscript in %r (diagonals are not "
                                      "supported)" % sub)
        for letter, d in zip(sub, ct.shape()):
            if sizes.setdefault(letter, d) != d:
                raise singa.ShapeError("einsum: subscript %r has size %d in one operand and %d in "
                                       "operand %d (shape %s)"
                                       % (letter, sizes[letter], d, k, ct.shape()))
    if out is None:
        joined = "".join(ins)
        out = "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    for c in out:
        if c not in sizes or out.count(c) > 1:
            raise ValueError("einsum: output subscript %r must appear once in the output and in an "
                             "input (%r)" % (c, ops))
    letters = list(out) + sorted(set(sizes) - set(out))
    res = None
    for sub, ct in zip(ins, cts):
        present = [c for c in letters if c in sub]
        aligned = singa.Transpose(ct, [sub.index(c) for c in present]) if sub else ct
        aligned = singa.Reshape(aligned, [sizes[c] if c in sub else 1 for c in letters])
        res = aligned if res is None else singa.EltwiseMult(res, aligned)
    if len(letters) > len(out):
        res = singa.ReduceSum(res, list(range(len(out), len(letters))), False)
    elif len(cts) == 1:
        res = res.Clone()  # type: ignore[union-attr]  # its own result, not a view of the operand
    return _wrap(res)


# ---- shapes and copies --------------------------------------------------------------------
def contiguous(tensor: TensorLike) -> Tensor:
    """``tensor``'s values in row-major layout (the tensor itself if already contiguous)."""
    return _wrap(_ct(tensor, "contiguous").Contiguous())


def reshape(tensor: TensorLike, shape: Sequence[int]) -> Tensor:
    """``tensor`` with a new shape (one entry may be -1); a view when contiguous."""
    return tensor.reshape(shape) if isinstance(tensor, Tensor) else \
        _wrap(singa.Reshape(_ct(tensor, "reshape"), list(shape)))


def transpose(t: Tensor, axes: Optional[Sequence[int]] = None) -> Tensor:
    """A view of ``t`` with permuted axes (reversed if None)."""
    if not isinstance(t, Tensor):
        raise TypeError("transpose: expected a singa Tensor, got %s" % type(t).__name__)
    return t.transpose(axes)


def repeat(t: Tensor, repeats: Union[int, Sequence[int]], axis: Optional[int] = None) -> Tensor:
    """numpy.repeat: repeat elements along ``axis`` (the flattened tensor if None)."""
    if not isinstance(t, Tensor):
        raise TypeError("repeat: expected a singa Tensor, got %s" % type(t).__name__)
    return t.repeat(repeats, axis)


def concatenate(tensors: Sequence[TensorLike], axis: int) -> Tensor:
    """The tensors joined along ``axis``; other dimensions must agree."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError("concatenate(): argument 'tensors' must be a sequence of Tensors, not %s"
                        % type(tensors).__name__)
    cts = [_ct(t, "concatenate") for t in tensors]
    return _wrap(singa.ConcatOn(cts, as_axis(axis, "axis", "concatenate")))


def copy_data_to_from(dst: TensorLike, src: TensorLike, size: int, dst_offset: int = 0,
                      src_offset: int = 0) -> None:
    """Copies ``size`` elements of src (from src_offset, row-major) into dst at dst_offset."""
    singa.CopyDataToFrom(_ct(dst, "copy_data_to_from"), _ct(src, "copy_data_to_from"),
                         as_int(size, "size", "copy_data_to_from"),
                         as_int(dst_offset, "dst_offset", "copy_data_to_from"),
                         as_int(src_offset, "src_offset", "copy_data_to_from"))


# ---- random fills and row/column helpers ----------------------------------------------------
def bernoulli(p: float, t: Tensor) -> Tensor:
    """Fills t with 1 (probability p) or 0; returns t."""
    _ct(t, "bernoulli")
    return t.bernoulli(p)


def gaussian(mean: float, std: float, t: Tensor) -> Tensor:
    """Fills t with samples of N(mean, std^2); returns t."""
    _ct(t, "gaussian")
    return t.gaussian(mean, std)


def uniform(low: float, high: float, t: Tensor) -> Tensor:
    """Fills t with samples of U[low, high); returns t."""
    _ct(t, "uniform")
    return t.uniform(low, high)


def add_column(alpha: float, v: TensorLike, beta: float, M: Tensor) -> Tensor:
    """Every column m of matrix M becomes alpha * v + beta * m; returns M."""
    singa.AddColumnWithScale(as_float(alpha, "alpha", "add_column"),
                             as_float(beta, "beta", "add_column"),
                             _ct(v, "add_column"), _ct(M, "add_column"))
    return M


def add_row(alpha: float, v: TensorLike, beta: float, M: Tensor) -> Tensor:
    """Every row m of matrix M becomes alpha * v + beta * m; returns M."""
    singa.AddRowWithScale(as_float(alpha, "alpha", "add_row"), as_float(beta, "beta", "add_row"),
                          _ct(v, "add_row"), _ct(M, "add_row"))
    return M
