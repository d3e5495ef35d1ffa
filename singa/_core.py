"""The Tensor class and the helpers every tensor module shares (singa.tensor re-exports them;
import singa.tensor, not this).

    from singa._core import Tensor, _wrap, _ct
    t = _wrap(core_tensor)            # a Tensor around a singa_wrap.Tensor, no copy
    ct = _ct(t, "myop")               # back to the core tensor; TypeError naming "myop" otherwise

It sits below both singa.tensor (the public module) and singa._tensor_funcs (the module
functions): neither imports the other's private names, and this module imports neither.
"""
import builtins
from functools import reduce
from types import GeneratorType

import numpy as np

from . import singa_wrap as singa
from . import _state
from ._args import as_axes, as_axis, as_float, as_shape
from ._indexing import copy_region, drop_leading_ones, slice_axis, take
from .device import get_default_device
from .errors import CheckShapeError

CTensor = singa.Tensor


# SINGA's dtype codes (core.proto: kFloat32 = 0, kFloat16 = 1, kInt = 2).
float32 = getattr(singa, "kFloat32", 0)
float16 = getattr(singa, "kFloat16", 1)
int32 = getattr(singa, "kInt", 2)

# bfloat16 is ours (code 6, past SINGA's last): SINGA 3.3 code never meets it unless it asks.
# Its numpy face is ml_dtypes.bfloat16 when ml_dtypes imports, else uint16 bit patterns
# (singa_wrap.BFLOAT16_NUMPY says which).
bfloat16 = getattr(singa, "kBFloat16", 6)

_NP_TYPE = {float32: np.float32, float16: np.float16, int32: np.int32}
_NAMES = {float32: "float32", float16: "float16", int32: "int32"}
_SINGA_NAMES = dict(_NAMES)  # Apache SINGA 3.3's Tensor.dtype_name
_NAMES[bfloat16] = "bfloat16"
_BY_NAME = {"float": float32, "float32": float32, "float16": float16, "half": float16,
            "bfloat16": bfloat16, "bf16": bfloat16,
            "int": int32, "int32": int32}
_NUMBER = (int, float, np.integer, np.floating, bool, np.bool_)


# ---- conversions shared with _tensor_funcs and autograd -------------------------------------
def _dtype(dtype, op="dtype"):
    """The singa dtype code of ``dtype``: a code, 'int'/'float'/'float16'..., int/float, or a
    numpy dtype among float32, float16 and int32."""
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, (bool, np.bool_)):
        if int(dtype) in _NAMES:
            return int(dtype)
    elif isinstance(dtype, str):
        if dtype.lower() in _BY_NAME:
            return _BY_NAME[dtype.lower()]
    elif dtype is int:
        return int32
    elif dtype is float:
        return float32
    else:
        try:
            nd = np.dtype(dtype)
        except TypeError:
            nd = None
        for code, t in _NP_TYPE.items():
            if nd == np.dtype(t):
                return code
        if nd is not None and nd == singa.BFLOAT16_NUMPY and nd != np.uint16:
            return bfloat16
    raise singa.DTypeError("%s: unsupported dtype %r (expected tensor.float32, tensor.float16, "
                           "tensor.bfloat16 or "
                           "tensor.int32)" % (op, dtype))


def _dev(device, op):
    if device is None:
        return get_default_device()
    if not isinstance(device, singa.Device):
        raise TypeError("%s: expected a singa Device or None, got %s" % (op, type(device).__name__))
    return device


def _ct(x, op):
    """The core tensor of a Tensor (or a core tensor itself); TypeError otherwise."""
    if isinstance(x, Tensor):
        return x.data
    if isinstance(x, CTensor):
        return x
    raise TypeError("%s: expected a singa Tensor, got %s" % (op, type(x).__name__))


_COMPARISONS = ("LT", "LE", "GT", "GE", "EQ", "NE")


def _operand(x, like, op):
    """An operand for a core op: a core tensor or a Python number. numpy arrays and lists are
    copied to ``like``'s device. Returns NotImplemented for anything else."""
    if isinstance(x, Tensor):
        return x.data
    if isinstance(x, CTensor):
        return x
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, (int, np.integer)):
        x = int(x)
        if not -2**31 <= x < 2**31 and like.data_type() == int32 and op not in _COMPARISONS:
            # numpy 2's rule for a Python int with an int32 array (the core would have computed
            # in float32, rounded)
            raise OverflowError("%s: Python integer %d out of bounds for int32 (the tensor's "
                                "dtype)" % (op, x))
        return x
    if isinstance(x, (float, np.floating)):
        if like.data_type() == int32:
            # a float number makes an int32 tensor's result float32, as in numpy and torch: the
            # core's number overloads keep int32 for an integral value (t + 2.0 was int32)
            return singa.from_numpy(np.array(x, np.float32), like.device())
        return float(x)
    if isinstance(x, (np.ndarray, list, tuple)):
        return singa.from_numpy(_np_input(x, op), like.device())
    return NotImplemented


def _np_input(arr, op):
    a = np.asarray(arr)
    if a.dtype.kind not in "biuf" and a.dtype != singa.BFLOAT16_NUMPY:
        raise TypeError("%s: expected numeric data, got a numpy array of dtype %s" % (op, a.dtype))
    return a


def _wrap(ct):
    """A new Python Tensor around core tensor ``ct`` (SINGA's from_raw_tensor)."""
    return Tensor(data=ct)


def _alias(ct):
    """A contiguous core tensor sharing ``ct``'s memory, and the axis order that maps ct onto it
    (None if ct is contiguous). (None, None) when no such alias exists (a broadcast view)."""
    if ct.IsContiguous():
        return ct, None
    stride = ct.stride()
    order = sorted(range(len(stride)), key=lambda i: -stride[i])
    alias = singa.Transpose(ct, order)
    return (alias, order) if alias.IsContiguous() else (None, None)


class _Leaf(object):
    """Tensor._creator of a leaf tensor until its Dummy creator is made (keeps the name the
    tensor was created with, which SINGA gives the Dummy)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class Tensor(object):
    """An n-dimensional array on a device.

    Args:
        shape (tuple of int): the shape; () by default.
        device: a singa Device; the default host device if None.
        dtype: tensor.float32 (default), tensor.float16 or tensor.int32.
        data: a numpy array (copied and converted to ``dtype``) or a core tensor (wrapped, not
            copied); ``shape`` is then ignored.
        requires_grad (bool): whether autograd computes a gradient for this tensor.
        stores_grad (bool): whether autograd returns that gradient (implies requires_grad).
        creator: the autograd operator that produced this tensor; a Dummy when None.
        name (str): a name; 'Dummy#<n>' when None.

    ``shape``, ``dtype`` and ``device`` always describe ``data``; assigning ``shape`` reshapes,
    ``dtype`` converts and ``device`` moves the data.
    """
    tensor_count = 0
    dtype_name = dict(_SINGA_NAMES)  # Apache SINGA 3.3's class attribute: {dtype code: name}
    __array_ufunc__ = None  # numpy defers to our reflected operators (np_array + t -> Tensor)

    def __init__(self, shape=(), device=None, dtype=float32, data=None, requires_grad=True,
                 stores_grad=False, creator=None, name=None):
        if isinstance(data, CTensor):
            if device is not None and not data.device() == _dev(device, "Tensor"):
                raise singa.DeviceError("Tensor: the data lives on %r, not on the given device %r"
                                        % (data.device(), device))
            self.data = data
        elif data is not None:
            code = _dtype(dtype, "Tensor")
            arr = _np_input(data, "Tensor")
            self.data = CTensor(arr.shape, _dev(device, "Tensor"), code)
            if arr.size:
                singa.copy_from_numpy(self.data, arr)
        else:
            self.data = CTensor(shape, _dev(device, "Tensor"), _dtype(dtype, "Tensor"))
        self.requires_grad = requires_grad
        self.stores_grad = stores_grad
        if name is None:
            name = "Dummy#{}".format(Tensor.tensor_count)
            Tensor.tensor_count += 1
        self.name = name
        self._creator = _Leaf(name) if creator is None else creator

    # SINGA gives every tensor made outside autograd a Dummy creator (singa.autograd's class,
    # registered in _state when autograd is imported: this module cannot import autograd). It
    # is made on first read, so a tensor created before autograd was imported gets one too.
    @property
    def creator(self):
        """The operator that produced this tensor (a Dummy for a leaf: an input or a parameter);
        backward walks these links."""
        c = self._creator
        if type(c) is _Leaf:
            make = _state.leaf_creator
            if make is None:
                return None
            c = self._creator = make(self, c.name)
        return c

    @creator.setter
    def creator(self, value):
        self._creator = value

    # ---- attributes derived from the core tensor ---------------------------------------------
    @property
    def shape(self):
        """The shape, a tuple of int; assigning a new shape reshapes the data."""
        return self.data.shape()

    @shape.setter
    def shape(self, shape):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if shape != self.data.shape():
            self.data = singa.Reshape(self.data, shape)

    @property
    def dtype(self):
        """The dtype code (tensor.float32, float16 or int32); assigning one converts the data."""
        return self.data.data_type()

    @dtype.setter
    def dtype(self, dtype):
        self.to_type(dtype)

    @property
    def device(self):
        """The Device holding the data; assigning another moves the data there."""
        return self.data.device()

    @device.setter
    def device(self, device):
        self.to_device(device)

    # ---- information ------------------------------------------------------------------------
    def is_dummy(self):
        """True if the tensor got the automatic name 'Dummy#<n>'."""
        return isinstance(self.name, str) and self.name.startswith("Dummy#")

    def ndim(self):
        """The number of dimensions."""
        return self.data.nDim()

    def is_empty(self):
        """True for a tensor without elements: zero-sized, or SINGA's shape-() placeholder that
        was never written (Tensor() with no arguments)."""
        if self.data.Size() == 0:
            return True
        return self.data.nDim() == 0 and not self.data.initialized()

    def is_transpose(self):
        """True if the data is a non-contiguous view (e.g. after T() or transpose())."""
        return self.data.transpose()

    def size(self):
        """The number of elements."""
        return self.data.Size()

    def memsize(self):
        """The number of bytes of the elements."""
        return self.data.MemSize()

    def __len__(self):
        if self.data.nDim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape()[0]

    # ---- views and copies -------------------------------------------------------------------
    def transpose(self, axes=None):
        """A view with the axes permuted (reversed if ``axes`` is None); shares memory."""
        if axes is None:
            return _wrap(singa.Transpose(self.data))
        return _wrap(singa.Transpose(self.data, as_axes(axes, "axes", "transpose")))

    def T(self):
        """A view with the axes reversed; shares memory."""
        return _wrap(singa.Transpose(self.data))

    def reshape(self, shape, *more):
        """A tensor of the given shape (one entry may be -1); a view when this one is
        contiguous. Accepts reshape((2, 3)) (SINGA's form) and reshape(2, 3)."""
        if more or isinstance(shape, (int, np.integer)):
            shape = (shape,) + more
        try:
            return _wrap(singa.Reshape(self.data, as_shape(shape, "shape", "reshape")))
        except singa.ShapeError as e:  # SINGA asserts the sizes are equal
            raise CheckShapeError(str(e)) from None

    def contiguous(self):
        """This tensor's data in row-major order (a new tensor if it was a view)."""
        return _wrap(self.data.Contiguous())

    def copy(self):
        """A shallow copy: a new Tensor sharing this tensor's memory."""
        return _wrap(singa.Transpose(self.data, list(range(self.data.nDim()))))

    def clone(self):
        """A deep copy (new memory, contiguous)."""
        return _wrap(self.data.Clone())

    deepcopy = clone

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        t = Tensor(data=self.data.Clone(), requires_grad=self.requires_grad,
                   stores_grad=self.stores_grad, creator=self.creator, name=self.name)
        memo[id(self)] = t
        return t

    def repeat(self, repeats, axis):
        """Elements repeated along ``axis`` like numpy.repeat; ``axis=None`` flattens first.
        ``repeats`` is an int or one count per element along the axis."""
        if isinstance(repeats, (int, np.integer)) and not isinstance(repeats, bool):
            reps = [int(repeats)]
        elif isinstance(repeats, (list, tuple)):
            if axis is None:
                raise ValueError("repeat: with axis=None, repeats must be an int, got %r"
                                 % (repeats,))
            reps = as_shape(repeats, "repeats", "repeat", allow_int=False)
        else:
            raise TypeError("repeat(): argument 'repeats' must be int or sequence of ints, not %s"
                            % type(repeats).__name__)
        if any(r < 0 for r in reps):
            raise ValueError("repeat: repeats must not be negative, got %r" % (repeats,))
        if axis is None:
            axis = 9999  # the core's "flatten first"
        return _wrap(self.data.Repeat(reps, as_axis(axis, "axis", "repeat")))

    # ---- dtype and device -------------------------------------------------------------------
    def as_type(self, dtype):
        """A converted copy: dtype may be tensor.float32/float16/int32, 'float', 'int'..."""
        return _wrap(self.data.AsType(_dtype(dtype, "as_type")))

    def to_type(self, dtype):
        """Converts this tensor's data in place and returns self."""
        code = _dtype(dtype, "to_type")
        if code != self.data.data_type():
            self.data = self.data.AsType(code)
        return self

    def to_device(self, device):
        """Moves the data onto ``device`` (in place)."""
        self.data.ToDevice(_dev(device, "to_device"))
        return self

    def to_host(self):
        """Moves the data onto the host device (in place)."""
        self.data.ToHost()
        return self

    def to_numpy(self):
        """A numpy copy of the values."""
        return singa.to_numpy(self.data)

    def numpy(self):
        """A numpy copy of the values (PyTorch's name for to_numpy; a copy, not a view)."""
        return self.to_numpy()

    def item(self):
        """The value of a one-element tensor as a Python number (float; int for int32), as
        PyTorch's item(); ValueError for any other size."""
        if self.data.Size() != 1:
            raise ValueError("item: only one-element tensors can be converted to a Python "
                             "number, this one has shape %s (%d elements)"
                             % (self.shape, self.data.Size()))
        return self.to_numpy().reshape(()).item()

    def reset_like(self, t):
        """Reallocates this tensor with the shape, dtype and device of ``t`` (values undefined)."""
        self.data.ResetLike(_ct(t, "reset_like"))

    # ---- norms ------------------------------------------------------------------------------
    def l1(self):
        """The mean absolute value, ``sum(|x|) / size``, as Apache SINGA defines it (NaN for
        an empty tensor, as numpy's mean: 0 / 0)."""
        n = self.data.Size()
        return self.data.L1() / n if n else float("nan")

    def l2(self):
        """The Euclidean norm divided by the size, sqrt(sum(x^2)) / size, as Apache SINGA
        defines it (NaN for an empty tensor: 0 / 0)."""
        n = self.data.Size()
        return self.data.L2() / n if n else float("nan")

    # ---- writing values ---------------------------------------------------------------------
    def _writable(self):
        """The core tensor to write in place (a contiguous alias of the data) and the axis order
        to apply to values written through it. A broadcast view is first made a real copy."""
        alias, order = _alias(self.data)
        if alias is None:
            self.data = self.data.Contiguous()
            return self.data, None
        return alias, order

    def set_value(self, x, inplace=True):
        """Sets every element to ``x``; returns self (a new tensor if inplace is False)."""
        if not isinstance(x, _NUMBER):
            raise TypeError("set_value: expected a number, got %s" % type(x).__name__)
        t = self if inplace else Tensor(self.shape, self.device, self.dtype)
        t._writable()[0].SetValue(x)
        return t

    def copy_from_numpy(self, np_array, offset=0):
        """Copies a numpy array's values (converted to this dtype) into this tensor, starting at
        element ``offset``. With offset 0 the sizes must be equal."""
        arr = _np_input(np_array, "copy_from_numpy")
        if offset == 0 and arr.size != self.size():
            raise CheckShapeError("copy_from_numpy: the array has %d elements %s, the tensor %d %s"
                                  % (arr.size, arr.shape, self.size(), self.shape))
        target, order = self._writable()
        if order is not None:
            if offset != 0:
                raise CheckShapeError("copy_from_numpy: an offset (%r) into a transposed view "
                                      "%s is not supported; copy into a contiguous tensor"
                                      % (offset, self.shape))
            arr = arr.reshape(self.shape).transpose(order)
        singa.copy_from_numpy(target, arr, offset)

    def copy_data(self, t):
        """Copies the values of Tensor ``t`` (same size) into this tensor."""
        src = _ct(t, "copy_data")
        if src.Size() != self.size():
            raise CheckShapeError("copy_data: the source has %d elements %s, this tensor %d %s"
                                  % (src.Size(), src.shape(), self.size(), self.shape))
        if src.data_type() != self.dtype:
            src = src.AsType(self.dtype)
        target, order = self._writable()
        if order is not None:
            src = singa.Transpose(singa.Reshape(src, list(self.shape)), order)
        target.CopyData(src)

    def copy_from(self, t, offset=0):
        """Copies from a Tensor or a numpy array."""
        if isinstance(t, (Tensor, CTensor)):
            self.copy_data(t)
        elif isinstance(t, np.ndarray):
            self.copy_from_numpy(t, offset)
        else:
            raise TypeError("copy_from: expected a Tensor or a numpy array, got %s"
                            % type(t).__name__)

    def _fill(self, inplace, fill):
        t = self if inplace else Tensor(self.shape, self.device, self.dtype)
        fill(t._writable()[0])
        return t

    def bernoulli(self, p, inplace=True):
        """Each element becomes 1 with probability p, else 0. Returns self."""
        p = as_float(p, "p", "bernoulli")
        return self._fill(inplace, lambda c: singa.Bernoulli(p, c))

    def gaussian(self, mean, std, inplace=True):
        """Fills with samples of N(mean, std^2). Returns self."""
        mean, std = as_float(mean, "mean", "gaussian"), as_float(std, "std", "gaussian")
        return self._fill(inplace, lambda c: singa.Gaussian(mean, std, c))

    def uniform(self, low, high, inplace=True):
        """Fills with samples of U[low, high). Returns self."""
        low, high = as_float(low, "low", "uniform"), as_float(high, "high", "uniform")
        return self._fill(inplace, lambda c: singa.Uniform(low, high, c))

    # Row/column helpers of SINGA (M is this 2-d tensor, v a vector), all in place.
    def _matrix_op(self, fn, v):
        target, order = self._writable()
        if order is not None:  # a transposed matrix: compute, then write back
            res = self.data.Clone()
            fn(_ct(v, fn.__name__), res)
            self.copy_data(_wrap(res))
        else:
            fn(_ct(v, fn.__name__), target)

    def add_column(self, v):
        """Adds v (one value per row) to every column."""
        self._matrix_op(singa.AddColumn, v)

    def add_row(self, v):
        """Adds v (one value per column) to every row."""
        self._matrix_op(singa.AddRow, v)

    def sub_column(self, v):
        """Subtracts v (one value per row) from every column, in place."""
        self._matrix_op(singa.SubColumn, v)

    def sub_row(self, v):
        """Subtracts v (one value per column) from every row, in place."""
        self._matrix_op(singa.SubRow, v)

    def mult_column(self, v):
        """Multiplies every column by v element-wise."""
        self._matrix_op(singa.MultColumn, v)

    def mult_row(self, v):
        """Multiplies every row by v element-wise."""
        self._matrix_op(singa.MultRow, v)

    def div_column(self, v):
        """Divides every column by v element-wise."""
        self._matrix_op(singa.DivColumn, v)

    def div_row(self, v):
        """Divides every row by v element-wise."""
        self._matrix_op(singa.DivRow, v)

    # ---- indexing ---------------------------------------------------------------------------
    def _expand_keys(self, keys, op):
        if not isinstance(keys, tuple):
            keys = (keys,)
        nd = self.data.nDim()
        if builtins.sum(k is Ellipsis for k in keys) > 1:
            raise IndexError("%s: an index can only have a single ellipsis ('...')" % op)
        real = builtins.sum(k is not None and k is not Ellipsis for k in keys)
        if real > nd:
            raise singa.AxisError("%s: too many indices (%d) for a tensor of shape %s"
                                  % (op, real, self.shape))
        out = []
        for k in keys:
            if k is Ellipsis:
                out.extend([slice(None)] * (nd - real))
            else:
                out.append(k)
        if Ellipsis not in keys:
            out.extend([slice(None)] * (nd - real))
        return out

    def _index(self, key, dim, axis, op):
        """(start, stop, step) of ``key`` along an axis of length dim; ints give one element."""
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            k = int(key) + (dim if key < 0 else 0)
            if not 0 <= k < dim:
                raise singa.AxisError("%s: index %d is out of range for axis %d of shape %s"
                                      % (op, int(key), axis, self.shape))
            return k, k + 1, 1
        if isinstance(key, slice):
            start, stop, step = key.indices(dim)
            if step < 0:
                raise singa.ArgumentError("%s: negative slice steps are not supported" % op)
            return start, builtins.max(start, stop), step
        raise TypeError("%s: only integers, slices, None and ... are valid indices (an integer "
                        "list or a boolean mask only as the whole index, for reading), got %s"
                        % (op, type(key).__name__))

    def __getitem__(self, keys):
        """A copy of the selected elements (a new tensor, never a view).

        An integer index keeps its axis with size 1, as Apache SINGA 3.3's Tensor.__getitem__
        does (it slices [i, i+1) on that axis): for t of shape (3, 4), ``t[0]`` has shape
        (1, 4) and ``t[1, 2]`` shape (1, 1), where numpy and PyTorch give (4,) and ().
        Use ``t[0].reshape((4,))``, ``t.numpy()[0]`` or ``t[1, 2].item()`` for those.
        Slices may have positive steps (SINGA ignores the step); None inserts an axis of
        size 1; ... stands for the remaining axes.

        Beyond SINGA, as in numpy: a list or array of integers picks rows of axis 0 (``t[[2,
        0]]`` has shape (2, 4)), and a boolean mask (numpy array or list) of the shape of the
        leading axes picks those entries (``t[t.numpy() > 0]`` is 1-d). Both only as the
        whole index, for reading."""
        if isinstance(keys, Tensor):
            keys = keys.to_numpy()
        taken = take(self.data, keys, "Tensor.__getitem__")
        if taken is not None:
            return _wrap(taken)
        ct, shape, axis, out_shape = self.data, self.shape, 0, []
        for key in self._expand_keys(keys, "Tensor.__getitem__"):
            if key is None:
                out_shape.append(1)
                continue
            start, stop, step = self._index(key, shape[axis], axis, "Tensor.__getitem__")
            ct = slice_axis(ct, start, stop, step, axis)
            out_shape.append(ct.shape()[axis])
            axis += 1
        if ct is self.data:
            ct = ct.Clone()
        if tuple(out_shape) != ct.shape():
            ct = singa.Reshape(ct, out_shape)
        return _wrap(ct)

    def __setitem__(self, keys, value):
        """Writes ``value`` (a number, Tensor or numpy array broadcastable to the selection)
        into the selected elements (integers and step-1 slices)."""
        op = "Tensor.__setitem__"
        region = []
        shape = self.shape
        for key in self._expand_keys(keys, op):
            if key is None:
                continue
            start, stop, step = self._index(key, shape[len(region)], len(region), op)
            if step != 1:
                raise singa.ArgumentError("%s: slices with a step are not supported" % op)
            region.append((start, stop))
        rshape = [b - a for a, b in region]
        if isinstance(value, _NUMBER):
            src = CTensor(rshape, self.device, self.dtype)
            src.SetValue(value)
        else:
            src = _operand(value, self.data, op)
            if src is NotImplemented:
                raise TypeError("%s: cannot assign a %s" % (op, type(value).__name__))
            if src.data_type() != self.dtype:
                src = src.AsType(self.dtype)
            src = singa.Broadcast(drop_leading_ones(src, len(rshape)), rshape)
        target, order = self._writable()
        if order is not None:
            region = [region[i] for i in order]
            src = singa.Transpose(src, order)
            shape = target.shape()
        src = src.Contiguous()
        copy_region(target, shape, region, src)

    # ---- in-place operators -----------------------------------------------------------------
    def _inplace(self, fn, x, op):
        r = _operand(x, self.data, op)
        if r is NotImplemented:
            return NotImplemented
        alias, order = _alias(self.data)
        if order is None and alias is not None:
            fn(self.data, r, out=self.data)
            return self
        res = fn(self.data, r)
        if res.shape() != self.shape:
            raise singa.ShapeError("%s: the result has shape %s but this tensor has shape %s"
                                   % (op, res.shape(), self.shape))
        if res.data_type() != self.dtype:
            raise singa.DTypeError("%s: the result is %s but this tensor is %s"
                                   % (op, _NAMES.get(res.data_type()), _NAMES.get(self.dtype)))
        if alias is None:  # a broadcast view: the result gets its own memory
            self.data = res
        else:
            self.copy_data(_wrap(res))
        return self

    def __iadd__(self, x):
        return self._inplace(singa.Add, x, "Add")

    def __isub__(self, x):
        return self._inplace(singa.Sub, x, "Sub")

    def __imul__(self, x):
        return self._inplace(singa.EltwiseMult, x, "EltwiseMult")

    def __itruediv__(self, x):
        return self._inplace(singa.Div, x, "Div")

    __idiv__ = __itruediv__

    def __ipow__(self, x):
        return self._inplace(singa.Pow, x, "Pow")

    # ---- binary operators -------------------------------------------------------------------
    def _binary(self, fn, x, op, reflected=False):
        r = _operand(x, self.data, op)
        if r is NotImplemented:
            return NotImplemented
        return _wrap(fn(r, self.data) if reflected else fn(self.data, r))

    def __add__(self, x):
        return self._binary(singa.Add, x, "Add")

    def __radd__(self, x):
        return self._binary(singa.Add, x, "Add", True)

    def __sub__(self, x):
        return self._binary(singa.Sub, x, "Sub")

    def __rsub__(self, x):
        return self._binary(singa.Sub, x, "Sub", True)

    def __mul__(self, x):
        return self._binary(singa.EltwiseMult, x, "EltwiseMult")

    def __rmul__(self, x):
        return self._binary(singa.EltwiseMult, x, "EltwiseMult", True)

    def __truediv__(self, x):
        return self._binary(singa.Div, x, "Div")

    def __rtruediv__(self, x):
        return self._binary(singa.Div, x, "Div", True)

    __div__ = __truediv__
    __rdiv__ = __rtruediv__

    # numpy's // and % (the table's FloorDiv and Mod rows): int32 stays int32 and exact, a zero
    # int32 divisor gives 0, the remainder takes the divisor's sign
    def __floordiv__(self, x):
        return self._binary(singa.FloorDiv, x, "FloorDiv")

    def __rfloordiv__(self, x):
        return self._binary(singa.FloorDiv, x, "FloorDiv", True)

    def __mod__(self, x):
        return self._binary(singa.Mod, x, "Mod")

    def __rmod__(self, x):
        return self._binary(singa.Mod, x, "Mod", True)

    # int32 ** int32 stays int32, exact (the table's Pow row)
    def __pow__(self, x):
        if self.dtype == int32 and _is_int(x) and np.ndim(x) == 0 and x < 0:
            raise ValueError("Tensor.__pow__: integers to negative integer powers are not allowed "
                             "(the int32 tensor ** %d; as numpy and torch)" % x)
        return self._binary(singa.Pow, x, "Pow")

    def __rpow__(self, x):
        return self._binary(singa.Pow, x, "Pow", True)

    def __matmul__(self, x):
        if not isinstance(x, Tensor):
            return NotImplemented
        return _wrap(singa.Mult(self.data, x.data))

    def __lt__(self, x):
        return self._binary(singa.LT, x, "LT")

    def __le__(self, x):
        return self._binary(singa.LE, x, "LE")

    def __gt__(self, x):
        return self._binary(singa.GT, x, "GT")

    def __ge__(self, x):
        return self._binary(singa.GE, x, "GE")

    def __eq__(self, x):
        if x is None:
            return False
        return self._binary(singa.EQ, x, "EQ")

    def __ne__(self, x):
        if x is None:
            return True
        return self._binary(singa.NE, x, "NE")

    __hash__ = object.__hash__  # identity, so tensors can key dicts as in SINGA's autograd

    def __neg__(self):
        return _wrap(singa.Negative(self.data))

    def __pos__(self):
        return self

    def __abs__(self):
        return _wrap(singa.Abs(self.data))

    def __bool__(self):
        # Apache SINGA's Tensor defines neither __bool__ nor __len__, so every tensor is true
        # and SINGA code relies on it (its char-RNN example does ``if labels:``). Use
        # float(t) or to_numpy for the value of a one-element tensor.
        return True

    def __float__(self):
        if self.data.Size() != 1:
            raise TypeError("only one-element tensors can be converted to a Python float")
        return float(singa.to_numpy(self.data).reshape(()))

    def __int__(self):
        if self.data.Size() != 1:
            raise TypeError("only one-element tensors can be converted to a Python int")
        return int(singa.to_numpy(self.data).reshape(()))

    # ---- numpy interop and printing ---------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        """``np.asarray(t)``: a view of a host tensor's memory (writes show on both sides; the
        view keeps the memory alive); a copy for a GPU tensor or a dtype conversion.
        ``to_numpy()`` is always a copy."""
        return self.data.__array__(dtype=dtype, copy=copy)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """The DLPack protocol of the Python array API: ``np.from_dlpack(t)`` and
        ``torch.from_dlpack(t)`` share this tensor's memory (its shape and strides; no copy).

        Args:
            stream: None or -1 for a host tensor; for a CUDA tensor None, -1 (no
                synchronisation) or the consumer's stream handle: singa waits for its own stream
                before handing the memory over.
            max_version: the consumer's highest DLPack version; (1, 0) or later gives a
                ``"dltensor_versioned"`` capsule, None the legacy ``"dltensor"`` one.
            dl_device: the device the consumer wants; only this tensor's own, or (1, 0) (the
                host) for a GPU tensor, which exports a host copy.
            copy: True exports a copy; False never copies; None copies only if needed.

        Raises BufferError while the device records a graph (nothing has run yet). The
        consumer's view keeps the memory alive and counts as a user handle: a graph never
        recycles it. Example::

            a = np.from_dlpack(t)   # a[0] = 1 changes t too
        """
        return self.data.__dlpack__(stream=stream, max_version=max_version,
                                    dl_device=dl_device, copy=copy)

    def __buffer__(self, flags):
        """The buffer protocol (PEP 688, Python 3.12+): ``memoryview(t)``, ``np.frombuffer``...
        share a host tensor's memory, as ``memoryview(t.data)`` does on any Python (the core
        tensor implements the protocol). GPU tensors and a device recording a graph raise
        BufferError."""
        return memoryview(self.data)

    def __dlpack_device__(self):
        """(device type, device id) in DLPack's terms: (1, 0) on the host, (2, gpu id) on CUDA."""
        return self.data.__dlpack_device__()

    def __repr__(self):
        return np.array2string(singa.to_numpy(self.data))

    __str__ = __repr__


PlaceHolder = Tensor


def _is_int(x):
    if isinstance(x, Tensor):
        return x.dtype == int32
    if isinstance(x, (np.ndarray, list, tuple)):  # copied to an int32 tensor by _operand
        return np.asarray(x).dtype.kind in "iu"
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


# ---- shared helpers -----------------------------------------------------------------------
def product(shape):
    """The number of elements of ``shape`` (1 for ()); a generator of sizes is taken too (the
    modules' own calls pass one)."""
    if isinstance(shape, GeneratorType):
        shape = list(shape)
    return reduce(lambda x, y: x * y, as_shape(shape, "shape", "product", allow_int=False), 1)

