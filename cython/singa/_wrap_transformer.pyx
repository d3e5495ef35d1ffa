# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_transformer: wrappers of singa/ops/transformer.h and of
# MaskedFill (elementwise.h), the ops autograd's transformer functions call.
#
#   y, mean, rstd = LayerNormForward(x, w, b, (512,), 1e-5)      # w, b may be None
#   dx, dw, db = LayerNormBackward(dy, x, w, mean, rstd, (512,))  # dw, db None without w
#   c = CumSum(x, -1, False, False)                               # (axis, exclusive, reverse)
#   e = GatherElements(x, idx, 1);  n = GatherND(x, idx, 0)
#   m = MaskedFill(x, mask, -1e9)                                 # value where mask != 0
#
# The GELU, IsNaN and IsInf rows are generated with the rest of elementwise.def.
from libcpp cimport bool
from libcpp.vector cimport vector

from csinga cimport *
from singa._wrap_tensor cimport Tensor, wrap, as_shape, opt_tensor

from ctransformer cimport *

register_error_classes()


cdef object wrap_or_none(CTensor c):
    return None if c.block() == NULL else wrap(c)


def LayerNormForward(Tensor x not None, Tensor weight, Tensor bias, normalized_shape,
                     float eps=1e-5):
    """{y, mean, rstd} of layer normalisation over the trailing normalized_shape axes."""
    cdef vector[CTensor] r = c_LayerNormForward(
        x.c, opt_tensor(weight), opt_tensor(bias),
        as_shape("LayerNormForward", normalized_shape), eps)
    return wrap(r[0]), wrap(r[1]), wrap(r[2])


def LayerNormBackward(Tensor dy not None, Tensor x not None, Tensor weight, Tensor mean not None,
                      Tensor rstd not None, normalized_shape):
    """(dx, dweight, dbias); dweight and dbias are None when weight is."""
    cdef vector[CTensor] r = c_LayerNormBackward(
        dy.c, x.c, opt_tensor(weight), mean.c, rstd.c,
        as_shape("LayerNormBackward", normalized_shape))
    return wrap(r[0]), wrap_or_none(r[1]), wrap_or_none(r[2])


def CumSum(Tensor x not None, int axis, bool exclusive=False, bool reverse=False):
    """The running sum along axis (ONNX CumSum's exclusive and reverse)."""
    return wrap(c_CumSum(x.c, axis, exclusive, reverse))


def GatherElements(Tensor x not None, Tensor indices not None, int axis=0):
    """ONNX GatherElements: out has the indices' shape."""
    return wrap(c_GatherElements(x.c, indices.c, axis))


def GatherElementsBackward(Tensor dy not None, Tensor indices not None, int axis, x_shape):
    """Zeros of x_shape with dy added at GatherElements' indices."""
    return wrap(c_GatherElementsBackward(dy.c, indices.c, axis,
                                         as_shape("GatherElementsBackward", x_shape)))


def GatherND(Tensor x not None, Tensor indices not None, int batch_dims=0):
    """ONNX GatherND."""
    return wrap(c_GatherND(x.c, indices.c, batch_dims))


def GatherNDBackward(Tensor dy not None, Tensor indices not None, int batch_dims, x_shape):
    """Zeros of x_shape with dy's slices added at GatherND's indices."""
    return wrap(c_GatherNDBackward(dy.c, indices.c, batch_dims,
                                   as_shape("GatherNDBackward", x_shape)))


def MaskedFill(Tensor x not None, Tensor mask not None, float value):
    """value where mask != 0, else x (broadcast like numpy; x's dtype)."""
    return wrap(c_MaskedFill(x.c, mask.c, value))
