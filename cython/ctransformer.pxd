# ctransformer.pxd: C++ declarations of singa/ops/transformer.h (layer norm, cumsum, the ONNX
# gathers) and of elementwise.h's MaskedFill, for Cython; the Python wrappers are in
# singa/_wrap_transformer.pyx. Same conventions as cnn.pxd (errors translated, the GIL released).
from libcpp cimport bool
from libcpp.vector cimport vector

from csinga cimport *

cdef extern from "singa/ops/transformer.h" namespace "singa":
    vector[CTensor] c_LayerNormForward "SINGA_NOGIL(singa::LayerNormForward)"(
        const CTensor& x, const CTensor& weight, const CTensor& bias,
        const vector[size_t]& normalized_shape, float eps) except +raise_py_error
    vector[CTensor] c_LayerNormBackward "SINGA_NOGIL(singa::LayerNormBackward)"(
        const CTensor& dy, const CTensor& x, const CTensor& weight, const CTensor& mean,
        const CTensor& rstd, const vector[size_t]& normalized_shape) except +raise_py_error
    CTensor c_CumSum "SINGA_NOGIL(singa::CumSum)"(const CTensor& x, int axis, bool exclusive,
                                                  bool reverse) except +raise_py_error
    CTensor c_GatherElements "SINGA_NOGIL(singa::GatherElements)"(
        const CTensor& x, const CTensor& indices, int axis) except +raise_py_error
    CTensor c_GatherElementsBackward "SINGA_NOGIL(singa::GatherElementsBackward)"(
        const CTensor& dy, const CTensor& indices, int axis,
        const vector[size_t]& x_shape) except +raise_py_error
    CTensor c_GatherND "SINGA_NOGIL(singa::GatherND)"(
        const CTensor& x, const CTensor& indices, int batch_dims) except +raise_py_error
    CTensor c_GatherNDBackward "SINGA_NOGIL(singa::GatherNDBackward)"(
        const CTensor& dy, const CTensor& indices, int batch_dims,
        const vector[size_t]& x_shape) except +raise_py_error

cdef extern from "singa/ops/elementwise.h" namespace "singa":
    CTensor c_MaskedFill "SINGA_NOGIL(singa::MaskedFill)"(
        const CTensor& x, const CTensor& mask, float value) except +raise_py_error
