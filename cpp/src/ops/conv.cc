// 2-d convolution (see singa/ops/nn.h): the handle and the device-independent fronts. A front
// checks what a user can get wrong and runs the op on the checked operands (Run<Name>, from
// schema/nn.py's rows: the output by the row's shape rule, the launch of the device's backend's
// kernel): the reference kernels are in cpu/ (im2col + OpenBLAS, depthwise loops), the oneDNN
// ones in dnnl/, cuDNN's in cuda/conv.cc.
#include "bf16.h"
#include "nn_kernels.h"

namespace singa {
namespace {

void CheckWeight(const char* op, const Tensor& W, const ConvHandle& h) {
  CheckNnFloat(op, "weight", W);
  SINGA_CHECK_SHAPE(W.shape() == h.WeightShape(),
                    op << ": the weight has shape " << W.shape() << ", expected "
                       << h.WeightShape() << " (out_channels, in_channels / groups, kh, kw)");
}

}  // namespace

Window2d::Window2d(const char* op, const Shape& input_shape,
                   const std::vector<size_t>& kernel_size, const std::vector<size_t>& stride,
                   const std::vector<size_t>& padding) {
  SINGA_CHECK_SHAPE(input_shape.size() == 4, op << ": expected a 4-d input (N, C, H, W), got "
                                                << input_shape);
  PairOf(op, "kernel_size", kernel_size, &kernel_h, &kernel_w);
  PairOf(op, "stride", stride, &stride_h, &stride_w);
  PairOf(op, "padding", padding, &pad_h, &pad_w);
  batchsize = input_shape[0];
  channels = input_shape[1];
  height = input_shape[2];
  width = input_shape[3];
}

ConvHandle::ConvHandle(const Shape& input_shape, const std::vector<size_t>& kernel_size,
                       const std::vector<size_t>& stride, const std::vector<size_t>& padding,
                       size_t in_channels, size_t out_channels, bool bias, size_t groups,
                       const std::vector<size_t>& dilation)
    : Window2d("ConvHandle", input_shape, kernel_size, stride, padding) {
  const char* op = "ConvHandle";
  PairOf(op, "dilation", dilation, &dilation_h, &dilation_w);
  SINGA_CHECK_VALUE(kernel_h > 0 && kernel_w > 0 && stride_h > 0 && stride_w > 0 &&
                        dilation_h > 0 && dilation_w > 0,
                    op << ": kernel " << kernel_h << "x" << kernel_w << ", stride " << stride_h
                       << "x" << stride_w << " and dilation " << dilation_h << "x" << dilation_w
                       << " must all be positive");
  SINGA_CHECK_SHAPE(in_channels == channels, op << ": in_channels is " << in_channels
                                                << " but the input " << input_shape << " has "
                                                << channels << " channels");
  SINGA_CHECK_VALUE(groups > 0 && in_channels > 0 && out_channels > 0,
                    op << ": in_channels (" << in_channels << "), out_channels ("
                       << out_channels << ") and groups (" << groups
                       << ") must be positive");
  SINGA_CHECK_VALUE(in_channels % groups == 0 && out_channels % groups == 0,
                    op << ": in_channels (" << in_channels << ") and out_channels ("
                       << out_channels << ") must be divisible by groups (" << groups << ")");
  const size_t eh = dilation_h * (kernel_h - 1) + 1, ew = dilation_w * (kernel_w - 1) + 1;
  SINGA_CHECK_SHAPE(height + 2 * pad_h >= eh && width + 2 * pad_w >= ew,
                    op << ": the kernel " << kernel_h << "x" << kernel_w << " (dilation "
                       << dilation_h << "x" << dilation_w << ", extent " << eh << "x" << ew
                       << ") does not fit the input " << height << "x" << width
                       << " padded by " << pad_h << "x" << pad_w);
  num_filters = out_channels;
  group = groups;
  bias_term = bias;
  conv_height = (height + 2 * pad_h - eh) / stride_h + 1;
  conv_width = (width + 2 * pad_w - ew) / stride_w + 1;
}

Tensor Conv2dForward(const Tensor& x_in, const Tensor& W_in, const Tensor& b_in,
                     const ConvHandle& h, bool relu) {
  const char* op = "Conv2d";
  CheckNnFloat(op, "input", x_in);
  CheckImage(op, "input", x_in, h.channels, h.height, h.width);
  CheckWeight(op, W_in, h);
  const bool has_bias = !b_in.empty();
  if (has_bias) {
    CheckNnFloat(op, "bias", b_in);
    SINGA_CHECK_SHAPE(b_in.Size() == h.num_filters, op << ": the bias has shape " << b_in.shape()
                                                       << ", expected (" << h.num_filters
                                                       << ",)");
    CheckSameDevice(op, {&x_in, &W_in, &b_in});
    CheckSameDtype(op, {&x_in, &W_in, &b_in});
  } else {
    CheckSameDevice(op, {&x_in, &W_in});
    CheckSameDtype(op, {&x_in, &W_in});
  }
  if (x_in.data_type() == kBFloat16 && !Bf16Native(op, *x_in.device()))
    return ToBFloat16(Conv2dForward(ToFloat32(x_in), ToFloat32(W_in), ToFloat32(b_in), h, relu));
  return RunConv2dForward(x_in, W_in, b_in, h, relu);
}

Tensor Conv2dBackwardX(const Tensor& dy_in, const Tensor& W_in, const ConvHandle& h) {
  const char* op = "Conv2dBackwardX";
  CheckNnFloat(op, "gradient dy", dy_in);
  CheckImage(op, "gradient dy", dy_in, h.num_filters, h.conv_height, h.conv_width);
  CheckWeight(op, W_in, h);
  CheckSameDevice(op, {&dy_in, &W_in});
  CheckSameDtype(op, {&dy_in, &W_in});
  if (dy_in.data_type() == kBFloat16 && !Bf16Native(op, *dy_in.device()))
    return ToBFloat16(Conv2dBackwardX(ToFloat32(dy_in), ToFloat32(W_in), h));
  return RunConv2dBackwardX(dy_in, W_in, h);
}

Tensor Conv2dBackwardW(const Tensor& dy_in, const Tensor& x_in, const ConvHandle& h,
                       bool float32_grad) {
  const char* op = "Conv2dBackwardW";
  CheckNnFloat(op, "gradient dy", dy_in);
  CheckNnFloat(op, "input", x_in);
  CheckImage(op, "gradient dy", dy_in, h.num_filters, h.conv_height, h.conv_width);
  CheckImage(op, "input", x_in, h.channels, h.height, h.width);
  SINGA_CHECK_SHAPE(dy_in.shape(0) == x_in.shape(0),
                    op << ": dy " << dy_in.shape() << " and x " << x_in.shape()
                       << " have different batch sizes");
  CheckSameDevice(op, {&dy_in, &x_in});
  CheckSameDtype(op, {&dy_in, &x_in});
  const DataType dt = x_in.data_type();
  const bool widen = float32_grad && dt != kFloat32;
  if (dt == kBFloat16 && (!Bf16Native(op, *x_in.device()) || x_in.shape(0) == 0)) {
    const Tensor dW = Conv2dBackwardW(ToFloat32(dy_in), ToFloat32(x_in), h);
    return widen ? dW : ToBFloat16(dW);
  }
  // oneDNN's bfloat16 backward-weights accumulates in float32 and writes a float32 dW as
  // cheaply as a bfloat16 one (no rounding, no cast op after it: the row's dtype rule);
  // float16 (CUDA) casts.
  const Tensor dW = RunConv2dBackwardW(dy_in, x_in, h, float32_grad);
  return widen && dW.data_type() != kFloat32 ? dW.AsType(kFloat32) : dW;
}

Tensor Conv2dBackwardB(const Tensor& dy_in, const ConvHandle& h, bool float32_grad) {
  const char* op = "Conv2dBackwardB";
  CheckNnFloat(op, "gradient dy", dy_in);
  CheckImage(op, "gradient dy", dy_in, h.num_filters, h.conv_height, h.conv_width);
  if (dy_in.data_type() == kBFloat16) {  // one reduction: accumulated in float32, rounded once
    const Tensor db = Conv2dBackwardB(ToFloat32(dy_in), h);
    return float32_grad ? db : ToBFloat16(db);
  }
  if (float32_grad && dy_in.data_type() != kFloat32)
    return Conv2dBackwardB(dy_in, h).AsType(kFloat32);
  return RunConv2dBackwardB(dy_in, h, float32_grad);
}

}  // namespace singa
