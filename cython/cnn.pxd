# cnn.pxd: C++ declarations of singa/ops/nn.h (convolution, pooling, batch norm, losses, index
# ops) for Cython; the Python wrappers are in singa/_wrap_nn.pyx.
#
#   from cnn cimport CConvHandle, c_IndexSelect
#
# Same conventions as csinga.pxd: every call that can fail is `except +raise_py_error`. The ops
# release the GIL while they run: SINGA_NOGIL in their C names (cython/error_translate.h).
from libcpp cimport bool
from libcpp.vector cimport vector

from csinga cimport *

cdef extern from "singa/ops/nn.h" namespace "singa":
    cdef cppclass CWindow2d "singa::Window2d":
        size_t batchsize, channels, height, width
        size_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w

    cdef cppclass CConvHandle "singa::ConvHandle"(CWindow2d):
        CConvHandle()
        CConvHandle(const vector[size_t]& input_shape, const vector[size_t]& kernel_size,
                    const vector[size_t]& stride, const vector[size_t]& padding,
                    size_t in_channels, size_t out_channels, bool bias, size_t groups,
                    const vector[size_t]& dilation) except +raise_py_error
        size_t dilation_h, dilation_w
        size_t num_filters, group
        bool bias_term
        size_t conv_height, conv_width
        vector[size_t] OutputShape(size_t n)
        vector[size_t] WeightShape()

    cdef cppclass CPoolingHandle "singa::PoolingHandle"(CWindow2d):
        CPoolingHandle()
        CPoolingHandle(const vector[size_t]& input_shape, const vector[size_t]& kernel_size,
                       const vector[size_t]& stride, const vector[size_t]& padding,
                       bool is_max, bool count_include_pad) except +raise_py_error
        bool is_max_pooling, count_include_pad
        size_t pooled_height, pooled_width
        vector[size_t] OutputShape(size_t n)

    # the handles' ops (convolution, pooling, batch norm): schema/nn.py's rows, declared in the
    # generated nn_ops.pxi

    CTensor c_SoftmaxCrossEntropyForward "SINGA_NOGIL(singa::SoftmaxCrossEntropyForward)"(
        const CTensor& logits, const CTensor& target) except +raise_py_error
    CTensor c_SoftmaxCrossEntropyBackward "SINGA_NOGIL(singa::SoftmaxCrossEntropyBackward)"(
        const CTensor& logits, const CTensor& target) except +raise_py_error
    CTensor c_CrossEntropyFwd "SINGA_NOGIL(singa::CrossEntropyFwd)"(const CTensor& p,
                                                       const CTensor& t) except +raise_py_error
    CTensor c_SoftmaxCrossEntropyBwd "SINGA_NOGIL(singa::SoftmaxCrossEntropyBwd)"(const CTensor& p,
                                                                     const CTensor& t) except +raise_py_error

    CTensor c_IndexSelect "SINGA_NOGIL(singa::IndexSelect)"(const CTensor& x, int axis,
                                               const CTensor& indices) except +raise_py_error
    CTensor c_IndexAdd "SINGA_NOGIL(singa::IndexAdd)"(const CTensor& dy, int axis, const CTensor& indices,
                                         const vector[size_t]& x_shape) except +raise_py_error
