// singa/ops/nn.h: the neural-network kernels: convolution, pooling, batch norm, losses, gathers.
//
//   singa::Tensor x({32, 3, 32, 32}), W({16, 3, 3, 3}), b({16});   // ... filled somehow
//   singa::ConvHandle ch(x.shape(), {3, 3}, {1, 1}, {1, 1}, 3, 16, /*bias=*/true);
//   singa::Tensor y = singa::Conv2dForward(x, W, b, ch);        // (32, 16, 32, 32)
//   singa::Tensor dx = singa::Conv2dBackwardX(dy, W, ch), dW = singa::Conv2dBackwardW(dy, x, ch);
//   singa::PoolingHandle ph(y.shape(), {2, 2}, {2, 2}, {0, 0}, /*is_max=*/true);
//   singa::Tensor p = singa::Pool2dForward(y, ph);              // (32, 16, 16, 16)
//   auto r = singa::BatchNormForwardTraining(x, scale, bias, &rmean, &rvar, 0.1f, 1e-5f);
//   singa::Tensor loss = singa::SoftmaxCrossEntropyForward(logits, labels);   // (N,)
//   singa::Tensor emb = singa::IndexSelect(table, 0, ids);                    // embedding lookup
//
// Layout is NCHW, dtype float32 (index tensors: int32, or float32 holding integers). Every
// function validates its operands first and throws ShapeError / AxisError / DTypeError /
// ValueError naming the op; results are new contiguous tensors.
//
// Each op runs the kernel of its device's backend (singa/core/kernel.h): on CppCPU oneDNN when
// built with USE_DNNL (the default then), else the reference kernels (im2col + OpenBLAS sgemm,
// OpenMP loops); dev->set_backend(Backend::kCpuRef) picks the reference kernels. A kernel's
// scratch (im2col buffer, oneDNN scratchpad) is a tensor listed among the operation's writes, so
// a graph plans its memory; oneDNN primitives are created once per shape and cached. Batch norm
// runs the reference kernel under oneDNN too (measured faster on plain NCHW; see dnnl/common.h).
// Conv2dForward and the batch-norm forwards take `relu`: y = max(0, op(x)) in the same pass (the
// backward of such a fused op masks dy with y > 0 first, e.g. with ReLUBackward).
// Values (class labels, gather indices) are checked when the operation runs: eagerly that is at
// the call; inside a graph it is at RunGraph, which then throws.
#pragma once

#include <vector>

#include "singa/core/tensor.h"

namespace singa {

/// What the convolution and pooling handles share: the input (N, C, H, W) and the 2-d window
/// sliding over it.
struct Window2d {
  size_t batchsize = 0, channels = 0, height = 0, width = 0;  ///< the input (N, C, H, W)
  size_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;

 protected:
  Window2d() = default;
  /// Throws ShapeError (`op`'s) unless input_shape is 4-d, ValueError unless each size has one
  /// or two values ({h, w}, one value = both).
  Window2d(const char* op, const Shape& input_shape, const std::vector<size_t>& kernel_size,
           const std::vector<size_t>& stride, const std::vector<size_t>& padding);
};

/// The geometry of a 2-d convolution. Built once per layer (and input size); plain and copyable.
/// The input's channels, height and width are fixed; the batch size is taken from x at each call.
struct ConvHandle : Window2d {
  ConvHandle() = default;
  /// input_shape: (N, C, H, W). kernel_size/stride/padding/dilation: {h, w} (one value = both).
  /// Throws ShapeError when the (dilated) kernel does not fit the padded input, ValueError for
  /// zero sizes or when the channels are not divisible by groups.
  ConvHandle(const Shape& input_shape, const std::vector<size_t>& kernel_size,
             const std::vector<size_t>& stride, const std::vector<size_t>& padding,
             size_t in_channels, size_t out_channels, bool bias, size_t groups = 1,
             const std::vector<size_t>& dilation = {1, 1});

  size_t dilation_h = 1, dilation_w = 1;
  size_t num_filters = 0;  ///< out_channels
  size_t group = 1;
  bool bias_term = false;
  size_t conv_height = 0, conv_width = 0;  ///< the output's H and W

  /// (N, out_channels, conv_height, conv_width) for a batch of n.
  Shape OutputShape(size_t n) const { return {n, num_filters, conv_height, conv_width}; }
  /// (out_channels, in_channels / groups, kernel_h, kernel_w).
  Shape WeightShape() const { return {num_filters, channels / group, kernel_h, kernel_w}; }
};

// Conv2dForward(x, W, b, h, relu = false) (b may be an empty Tensor(): no bias),
// Conv2dBackwardX(dy, W, h), Conv2dBackwardW(dy, x, h, float32_grad = false) and
// Conv2dBackwardB(dy, h, float32_grad = false): schema/nn.py's rows, declared in
// singa/ops/nn_schema.h (generated; included at the end of this header).

/// The geometry of 2-d max / average pooling (floor mode). Padding must be smaller than the
/// kernel, so every window holds at least one input element.
struct PoolingHandle : Window2d {
  PoolingHandle() = default;
  PoolingHandle(const Shape& input_shape, const std::vector<size_t>& kernel_size,
                const std::vector<size_t>& stride, const std::vector<size_t>& padding,
                bool is_max, bool count_include_pad = false);

  bool is_max_pooling = true;
  /// Average pooling divides by kernel_h * kernel_w when true, else by the number of
  /// non-padding elements of the window.
  bool count_include_pad = false;
  size_t pooled_height = 0, pooled_width = 0;

  Shape OutputShape(size_t n) const { return {n, channels, pooled_height, pooled_width}; }
};

// Pool2dForward(x, h) and Pool2dBackward(dy, x, y, h): schema/nn.py's rows, declared in
// singa/ops/nn_schema.h (generated; included at the end of this header).

// BatchNormForwardTraining(x, scale, bias, &running_mean, &running_var, momentum, eps, relu),
// BatchNormForwardInference(x, scale, bias, running_mean, running_var, eps, relu) and
// BatchNormBackward(dy, x, scale, batch_mean, batch_var, eps): schema/nn.py's rows, declared
// in singa/ops/nn_schema.h. Over axis 1 of x (N, C, ...); the per-channel tensors hold C
// float32 values.

/// Per-sample cross entropy of softmax(logits), computed stably through log-softmax.
/// logits: (N, C). target: int32 class indices (N,) or (N, 1); float32 indices of shape (N,);
/// or a float32 probability / one-hot matrix of logits' shape. Returns (N,).
/// Labels outside [0, C) throw ValueError; a label count other than N throws ShapeError.
Tensor SoftmaxCrossEntropyForward(const Tensor& logits, const Tensor& target);
/// d(loss_i)/d(logits), NOT divided by N (divide yourself for a mean loss): softmax - onehot for
/// labels; for a probability matrix t the exact softmax * sum(t_i) - t_i (= softmax - t when the
/// rows of t sum to 1).
Tensor SoftmaxCrossEntropyBackward(const Tensor& logits, const Tensor& target);
/// Apache SINGA's pair, on probabilities p (N, C): loss_i = -sum_j t_ij log(max(p_ij, FLT_MIN))
/// (one-hot / probability t) or -log(max(p_i,label, FLT_MIN)) (labels). Returns (N,).
Tensor CrossEntropyFwd(const Tensor& p, const Tensor& t);
/// p - onehot(t) (or p - t for a matrix t): the logits' gradient when p = softmax(logits).
Tensor SoftmaxCrossEntropyBwd(const Tensor& p, const Tensor& t);

/// Gathers along `axis` (numpy.take): out shape = x.shape[:axis] + indices.shape +
/// x.shape[axis+1:]. indices: int32 of any shape, or float32 holding integers; negative indices
/// count from the end; out-of-range ones throw AxisError. x may be float32, int32 or float16.
Tensor IndexSelect(const Tensor& x, int axis, const Tensor& indices);
/// The backward of IndexSelect: zeros of x_shape, then dy's slices added at the indices
/// (repeated indices accumulate). dy: float32 or int32 of IndexSelect's output shape.
Tensor IndexAdd(const Tensor& dy, int axis, const Tensor& indices, const Shape& x_shape);

}  // namespace singa

#include "singa/ops/nn_schema.h"  // the op schema's NN ops (schema/nn.py), on the handles above
