# ops.pxi (included by singa_wrap.pyx): wrappers of the reductions, BLAS, shape and random ops.
# Names follow the C++ API (and Apache SINGA's singa_wrap). Elementwise ops are generated.

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
    return wrap(c_ReduceSum(x.c, as_axes(axes), keepdims))

def ReduceMean(Tensor x not None, axes=None, bool keepdims=False):
    return wrap(c_ReduceMean(x.c, as_axes(axes), keepdims))

def ReduceMax(Tensor x not None, axes=None, bool keepdims=False):
    return wrap(c_ReduceMax(x.c, as_axes(axes), keepdims))

def ReduceMin(Tensor x not None, axes=None, bool keepdims=False):
    return wrap(c_ReduceMin(x.c, as_axes(axes), keepdims))

def Argmax(Tensor x not None, int axis, bool keepdims=False):
    return wrap(c_Argmax(x.c, axis, keepdims))

def Argmin(Tensor x not None, int axis, bool keepdims=False):
    return wrap(c_Argmin(x.c, axis, keepdims))

def Sum(Tensor x not None, int axis):
    return wrap(c_Sum(x.c, axis))

def Average(Tensor x not None, int axis):
    return wrap(c_Average(x.c, axis))

def SumAll(Tensor x not None):
    return c_SumAll(x.c)

def SumAsFloat(Tensor x not None):
    return c_SumAll(x.c)

def SumRows(Tensor x not None):
    return wrap(c_SumRows(x.c))

def SumColumns(Tensor x not None):
    return wrap(c_SumColumns(x.c))

def RowMax(Tensor x not None):
    return wrap(c_RowMax(x.c))

def SoftMax(Tensor x not None, int axis=-1):
    return wrap(c_SoftMax(x.c, axis))

def SoftMaxBackward(Tensor dy not None, Tensor y not None, int axis=-1):
    return wrap(c_SoftMaxBackward(dy.c, y.c, axis))

def LogSoftMax(Tensor x not None, int axis=-1):
    return wrap(c_LogSoftMax(x.c, axis))

def Clamp(Tensor x not None, float low, float high):
    return wrap(c_Clamp(x.c, low, high))

def LeakyReLU(Tensor x not None, float slope):
    return wrap(c_LeakyReLU(x.c, slope))


# ---- BLAS ----------------------------------------------------------------------------------
def Mult(Tensor A not None, Tensor B not None):
    """Matrix product with numpy.matmul semantics (1-d, 2-d and batched)."""
    return wrap(c_Mult(A.c, B.c))

def MultWithScale(float alpha, Tensor A not None, Tensor B not None, float beta,
                  Tensor C not None):
    """C = alpha * A B + beta * C, in place."""
    c_MultWithScale(alpha, A.c, B.c, beta, &C.c)
    return C

def Axpy(float alpha, Tensor x not None, Tensor y not None):
    c_Axpy(alpha, x.c, &y.c)
    return y

def Dot(Tensor a not None, Tensor b not None):
    return c_Dot(a.c, b.c)

def AddColumn(Tensor v not None, Tensor M not None):
    c_AddColumn(v.c, &M.c)
    return M

def AddColumnWithScale(float alpha, float beta, Tensor v not None, Tensor M not None):
    c_AddColumnWithScale(alpha, beta, v.c, &M.c)
    return M

def AddRow(Tensor v not None, Tensor M not None):
    c_AddRow(v.c, &M.c)
    return M

def AddRowWithScale(float alpha, float beta, Tensor v not None, Tensor M not None):
    c_AddRowWithScale(alpha, beta, v.c, &M.c)
    return M

def SubColumn(Tensor v not None, Tensor M not None):
    c_SubColumn(v.c, &M.c)
    return M

def SubRow(Tensor v not None, Tensor M not None):
    c_SubRow(v.c, &M.c)
    return M

def MultColumn(Tensor v not None, Tensor M not None):
    c_MultColumn(v.c, &M.c)
    return M

def MultRow(Tensor v not None, Tensor M not None):
    c_MultRow(v.c, &M.c)
    return M

def DivColumn(Tensor v not None, Tensor M not None):
    c_DivColumn(v.c, &M.c)
    return M

def DivRow(Tensor v not None, Tensor M not None):
    c_DivRow(v.c, &M.c)
    return M


# ---- shape ---------------------------------------------------------------------------------
def Reshape(Tensor x not None, shape):
    """A reshaped tensor (a view when x is contiguous); one entry of shape may be -1."""
    cdef vector[int] s
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    for d in shape:
        s.push_back(<int>d)
    return wrap(c_Reshape(x.c, s))

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
    return wrap(c_TransposeAxes(x.c, a))

def Broadcast(Tensor x not None, shape):
    return wrap(c_Broadcast(x.c, as_shape("Broadcast", shape)))

def ConcatOn(tensors, int axis):
    return wrap(c_ConcatOn(as_tensor_list("ConcatOn", tensors), axis))

def ConcatenateRows(tensors):
    return wrap(c_ConcatenateRows(as_tensor_list("ConcatenateRows", tensors)))

def ConcatenateColumns(tensors):
    return wrap(c_ConcatenateColumns(as_tensor_list("ConcatenateColumns", tensors)))

def SliceOn(Tensor x not None, size_t start, size_t end, int axis):
    return wrap(c_SliceOn(x.c, start, end, axis))

def SliceRows(Tensor x not None, size_t start, size_t end):
    return wrap(c_SliceRows(x.c, start, end))

def SliceColumns(Tensor x not None, size_t start, size_t end):
    return wrap(c_SliceColumns(x.c, start, end))

def CopyRows(Tensor x not None, size_t start, size_t end):
    return wrap(c_CopyRows(x.c, start, end))

def CopyColumns(Tensor x not None, size_t start, size_t end):
    return wrap(c_CopyColumns(x.c, start, end))

def CopyDataToFrom(Tensor dst not None, Tensor src not None, size_t num, size_t dst_offset=0,
                   size_t src_offset=0):
    c_CopyDataToFrom(&dst.c, src.c, num, dst_offset, src_offset)


# ---- random --------------------------------------------------------------------------------
def Uniform(float low, float high, Tensor t not None):
    c_Uniform(low, high, &t.c)
    return t

def Gaussian(float mean, float std, Tensor t not None):
    c_Gaussian(mean, std, &t.c)
    return t

def Bernoulli(float p, Tensor t not None):
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
    c_SGDUpdate(&param.c, grad.c, b, lr.c, momentum.c, dampening.c, weight_decay.c, nesterov)
