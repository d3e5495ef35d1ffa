// 2-d max / average pooling (see singa/ops/nn.h): the handle and the device-independent fronts;
// the kernels are in cpu/pooling.cc (reference), dnnl/pooling.cc (oneDNN) and cuda/pooling.cu;
// their Args, slots, OpIds, outputs and launch are schema/nn.py's rows (Run<Name>, generated).
#include "bf16.h"
#include "nn_kernels.h"

namespace singa {

PoolingHandle::PoolingHandle(const Shape& input_shape, const std::vector<size_t>& kernel_size,
                             const std::vector<size_t>& stride,
                             const std::vector<size_t>& padding, bool is_max,
                             bool count_include_pad_)
    : Window2d("PoolingHandle", input_shape, kernel_size, stride, padding),
      is_max_pooling(is_max),
      count_include_pad(count_include_pad_) {
  const char* op = "PoolingHandle";
  SINGA_CHECK_VALUE(kernel_h > 0 && kernel_w > 0 && stride_h > 0 && stride_w > 0,
                    op << ": kernel " << kernel_h << "x" << kernel_w << " and stride "
                       << stride_h << "x" << stride_w << " must be positive");
  SINGA_CHECK_VALUE(pad_h < kernel_h && pad_w < kernel_w,
                    op << ": padding " << pad_h << "x" << pad_w
                       << " must be smaller than the kernel " << kernel_h << "x" << kernel_w);
  SINGA_CHECK_SHAPE(height + 2 * pad_h >= kernel_h && width + 2 * pad_w >= kernel_w,
                    op << ": the kernel " << kernel_h << "x" << kernel_w
                       << " does not fit the input " << height << "x" << width
                       << " padded by " << pad_h << "x" << pad_w);
  pooled_height = (height + 2 * pad_h - kernel_h) / stride_h + 1;
  pooled_width = (width + 2 * pad_w - kernel_w) / stride_w + 1;
}

Tensor Pool2dForward(const Tensor& x_in, const PoolingHandle& h) {
  const char* op = "Pool2d";
  CheckNnFloat(op, "input", x_in);
  CheckImage(op, "input", x_in, h.channels, h.height, h.width);
  if (Bf16ViaFloat32(x_in))  // bf16 pooling on a GPU: through float32 (bf16.h)
    return ToBFloat16(Pool2dForward(ToFloat32(x_in), h));
  return RunPool2dForward(x_in, h);
}

Tensor Pool2dBackward(const Tensor& dy_in, const Tensor& x_in, const Tensor& y_in,
                      const PoolingHandle& h) {
  const char* op = "Pool2dBackward";
  CheckNnFloat(op, "gradient dy", dy_in);
  CheckNnFloat(op, "input x", x_in);
  CheckImage(op, "input x", x_in, h.channels, h.height, h.width);
  const Shape out_shape = h.OutputShape(x_in.shape(0));
  SINGA_CHECK_SHAPE(dy_in.shape() == out_shape, op << ": dy has shape " << dy_in.shape()
                                                   << ", expected " << out_shape
                                                   << " for the input " << x_in.shape());
  if (y_in.block() != nullptr)  // y is not needed (the max is recomputed); checked if given
    SINGA_CHECK_SHAPE(y_in.shape() == out_shape, op << ": y has shape " << y_in.shape()
                                                    << ", expected " << out_shape);
  CheckSameDevice(op, {&dy_in, &x_in});
  CheckSameDtype(op, {&dy_in, &x_in});
  if (Bf16ViaFloat32(x_in))
    return ToBFloat16(Pool2dBackward(ToFloat32(dy_in), ToFloat32(x_in), Tensor(), h));
  return RunPool2dBackward(dy_in, x_in, h);
}

}  // namespace singa
