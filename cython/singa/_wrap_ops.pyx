# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_ops: wrappers of the reductions, BLAS, shape, random and optimizer-update ops.
# Names follow the C++ API (and Apache SINGA's singa_wrap). Elementwise ops are generated.
# Every call that runs a kernel releases the GIL (`with nogil:`); Python-level argument
# conversions happen before, while the GIL is held.
import numpy as np
from libcpp cimport bool
from libcpp.vector cimport vector

from csinga cimport *
from singa._wrap_tensor cimport Tensor, wrap, as_shape, as_float

from singa._wrap_errors import AxisError

register_error_classes()


cdef vector[int] as_axes(axes) except *:
    cdef vector[int] out
    if axes is None:
        return out
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    for a in axes:
        out.push_back(<int>a)
    return out


cdef vector[CTensor] as_tensor_list(str op, tensors) except *:
    cdef vector[CTensor] out
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError("%s: expected singa_wrap.Tensor items, got %s" % (op, type(t).__name__))
        out.push_back((<Tensor>t).c)
    return out


# ---- reductions --------------------------------------------------------------------------
def ReduceSum(Tensor x not None, axes=None, bool keepdims=False):
    cdef vector[int] a1 = as_axes(axes)
    cdef CTensor r
    with nogil:
        r = c_ReduceSum(x.c, a1, keepdims)
    return wrap(r)

def ReduceMean(Tensor x not None, axes=None, bool keepdims=False):
    cdef vector[int] a1 = as_axes(axes)
    cdef CTensor r
    with nogil:
        r = c_ReduceMean(x.c, a1, keepdims)
    return wrap(r)

def ReduceMax(Tensor x not None, axes=None, bool keepdims=False):
    cdef vector[int] a1 = as_axes(axes)
    cdef CTensor r
    with nogil:
        r = c_ReduceMax(x.c, a1, keepdims)
    return wrap(r)

def ReduceMin(Tensor x not None, axes=None, bool keepdims=False):
    cdef vector[int] a1 = as_axes(axes)
    cdef CTensor r
    with nogil:
        r = c_ReduceMin(x.c, a1, keepdims)
    return wrap(r)

def Argmax(Tensor x not None, int axis, bool keepdims=False):
    cdef CTensor r
    with nogil:
        r = c_Argmax(x.c, axis, keepdims)
    return wrap(r)

def Argmin(Tensor x not None, int axis, bool keepdims=False):
    cdef CTensor r
    with nogil:
        r = c_Argmin(x.c, axis, keepdims)
    return wrap(r)

def Sum(Tensor x not None, int axis):
    cdef CTensor r
    with nogil:
        r = c_Sum(x.c, axis)
    return wrap(r)

def Average(Tensor x not None, int axis):
    cdef CTensor r
    with nogil:
        r = c_Average(x.c, axis)
    return wrap(r)

def SumAll(Tensor x not None):
    """The sum of all elements as a (1,) tensor of x's dtype on x's device (Apache SINGA's
    SumAll; nothing is read back to the host). SumAsFloat returns it as a Python float."""
    cdef vector[int] all_axes, one
    one.push_back(1)
    cdef CTensor r
    with nogil:
        r = c_Reshape(c_ReduceSum(x.c, all_axes, False), one)
    return wrap(r)

def SumAsFloat(Tensor x not None):
    cdef float r
    with nogil:
        r = c_SumAll(x.c)
    return r

def SumRows(Tensor x not None):
    cdef CTensor r
    with nogil:
        r = c_SumRows(x.c)
    return wrap(r)

def SumColumns(Tensor x not None):
    cdef CTensor r
    with nogil:
        r = c_SumColumns(x.c)
    return wrap(r)

def RowMax(Tensor x not None):
    cdef CTensor r
    with nogil:
        r = c_RowMax(x.c)
    return wrap(r)

def Clamp(Tensor x not None, float low, float high):
    cdef CTensor r
    with nogil:
        r = c_Clamp(x.c, low, high)
    return wrap(r)


# ---- BLAS ----------------------------------------------------------------------------------
def Mult(Tensor A not None, Tensor B not None):
    """Matrix product with numpy.matmul semantics (1-d, 2-d and batched)."""
    cdef CTensor r
    with nogil:
        r = c_Mult(A.c, B.c)
    return wrap(r)

def MultWithScale(float alpha, Tensor A not None, Tensor B not None, float beta,
                  Tensor C not None):
    """C = alpha * A B + beta * C, in place."""
    with nogil:
        c_MultWithScale(alpha, A.c, B.c, beta, &C.c)
    return C

def Axpy(alpha, Tensor x not None, Tensor y not None):
    """y += alpha * x, in place (x and y of one size). alpha is a number, or (Apache SINGA's
    overload, which its optimizers use) a one-element float32 tensor on y's device, read there."""
    cdef float a
    cdef Tensor ta
    if isinstance(alpha, Tensor):
        ta = alpha
        with nogil:
            c_AxpyT(ta.c, x.c, &y.c)
        return y
    a = as_float("Axpy", alpha)
    with nogil:
        c_Axpy(a, x.c, &y.c)
    return y

def Dot(Tensor a not None, Tensor b not None):
    cdef float r
    with nogil:
        r = c_Dot(a.c, b.c)
    return r

def AddColumnWithScale(float alpha, float beta, Tensor v not None, Tensor M not None):
    with nogil:
        c_AddColumnWithScale(alpha, beta, v.c, &M.c)
    return M

def AddRowWithScale(float alpha, float beta, Tensor v not None, Tensor M not None):
    with nogil:
        c_AddRowWithScale(alpha, beta, v.c, &M.c)
    return M


# The in-place matrix-vector updates of ops/blas.h, one wrapper per entry: M[:, j] op= v for
# every column j (v has M's rows) or M[i, :] op= v for every row i (v has M's columns); each
# returns M.
ctypedef void (*MatVecFn)(const CTensor&, CTensor*) except +raise_py_error nogil
_MAT_VEC = ("AddColumn", "AddRow", "SubColumn", "SubRow", "MultColumn", "MultRow", "DivColumn",
            "DivRow")
cdef MatVecFn[8] _mat_vec_fns = [c_AddColumn, c_AddRow, c_SubColumn, c_SubRow, c_MultColumn,
                                 c_MultRow, c_DivColumn, c_DivRow]


def _mat_vec(int k):
    name = _MAT_VEC[k]

    def mat_vec(Tensor v not None, Tensor M not None):
        with nogil:
            _mat_vec_fns[k](v.c, &M.c)
        return M

    mat_vec.__name__ = mat_vec.__qualname__ = name
    mat_vec.__doc__ = ("M[:, j] %s= v for every column j (v: one value per row of M)"
                       if k % 2 == 0 else
                       "M[i, :] %s= v for every row i (v: one value per column of M)") % (
        "+-*/"[k // 2]) + ", in place; returns M."
    return mat_vec


for _k, _name in enumerate(_MAT_VEC):
    globals()[_name] = _mat_vec(_k)
del _k, _name


# ---- shape ---------------------------------------------------------------------------------
def Reshape(Tensor x not None, shape):
    """A reshaped tensor (a view when x is contiguous); one entry of shape may be -1."""
    cdef vector[int] s
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    for d in shape:
        s.push_back(<int>d)
    cdef CTensor r
    with nogil:
        r = c_Reshape(x.c, s)
    return wrap(r)

def Transpose(Tensor x not None, axes=None):
    cdef vector[size_t] a
    if axes is None:
        return wrap(c_Transpose(x.c))
    nd = x.c.nDim()
    for ax in axes:
        ax = int(ax)
        if not -nd <= ax < nd:
            raise AxisError("Transpose: axis %d is out of range for a tensor of rank %d" % (ax, nd))
        a.push_back(<size_t>(ax + nd if ax < 0 else ax))
    cdef CTensor r
    with nogil:
        r = c_TransposeAxes(x.c, a)
    return wrap(r)

def Broadcast(Tensor x not None, shape):
    cdef vector[size_t] a1 = as_shape("Broadcast", shape)
    cdef CTensor r
    with nogil:
        r = c_Broadcast(x.c, a1)
    return wrap(r)

def ConcatOn(tensors, int axis):
    cdef vector[CTensor] a1 = as_tensor_list("ConcatOn", tensors)
    cdef CTensor r
    with nogil:
        r = c_ConcatOn(a1, axis)
    return wrap(r)

def ConcatenateRows(tensors):
    cdef vector[CTensor] a1 = as_tensor_list("ConcatenateRows", tensors)
    cdef CTensor r
    with nogil:
        r = c_ConcatenateRows(a1)
    return wrap(r)

def ConcatenateColumns(tensors):
    cdef vector[CTensor] a1 = as_tensor_list("ConcatenateColumns", tensors)
    cdef CTensor r
    with nogil:
        r = c_ConcatenateColumns(a1)
    return wrap(r)

def SliceOn(Tensor x not None, size_t start, size_t end, int axis):
    cdef CTensor r
    with nogil:
        r = c_SliceOn(x.c, start, end, axis)
    return wrap(r)

def SliceRows(Tensor x not None, size_t start, size_t end):
    cdef CTensor r
    with nogil:
        r = c_SliceRows(x.c, start, end)
    return wrap(r)

def SliceColumns(Tensor x not None, size_t start, size_t end):
    cdef CTensor r
    with nogil:
        r = c_SliceColumns(x.c, start, end)
    return wrap(r)

def CopyRows(Tensor x not None, size_t start, size_t end):
    cdef CTensor r
    with nogil:
        r = c_CopyRows(x.c, start, end)
    return wrap(r)

def CopyColumns(Tensor x not None, size_t start, size_t end):
    cdef CTensor r
    with nogil:
        r = c_CopyColumns(x.c, start, end)
    return wrap(r)

def CopyDataToFrom(Tensor dst not None, Tensor src not None, size_t num, size_t dst_offset=0,
                   size_t src_offset=0):
    with nogil:
        c_CopyDataToFrom(&dst.c, src.c, num, dst_offset, src_offset)


# ---- random --------------------------------------------------------------------------------
def Uniform(float low, float high, Tensor t not None):
    with nogil:
        c_Uniform(low, high, &t.c)
    return t

def Gaussian(float mean, float std, Tensor t not None):
    with nogil:
        c_Gaussian(mean, std, &t.c)
    return t

def Bernoulli(float p, Tensor t not None):
    with nogil:
        c_Bernoulli(p, &t.c)
    return t


# ---- fused optimizer updates -----------------------------------------------------------------
def SGDUpdate(Tensor param not None, Tensor grad not None, Tensor buf, Tensor lr not None,
              Tensor momentum not None, Tensor dampening not None, Tensor weight_decay not None,
              bool nesterov=False):
    """One fused SGD step in place (singa/ops/optim.h); buf None means no momentum."""
    cdef CTensor* b = NULL
    if buf is not None:
        b = &buf.c
    with nogil:
        c_SGDUpdate(&param.c, grad.c, b, lr.c, momentum.c, dampening.c, weight_decay.c, nesterov)


def AdamUpdate(Tensor param not None, Tensor grad not None, Tensor m not None,
               Tensor v not None, Tensor lr not None, Tensor beta_1 not None,
               Tensor beta_2 not None, Tensor epsilon not None, Tensor weight_decay not None,
               Tensor step not None, bool decay=False):
    """One fused Adam step in place on param, m and v (singa/ops/optim.h); step is the
    optimizer's step counter (t = step + 1); decay applies weight_decay."""
    with nogil:
        c_AdamUpdate(&param.c, grad.c, &m.c, &v.c, lr.c, beta_1.c, beta_2.c, epsilon.c,
                     weight_decay.c, step.c, decay)
