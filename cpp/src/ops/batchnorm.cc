// Batch normalisation over axis 1 (schema/nn.py's rows; declared in singa/ops/nn_schema.h):
// the fronts' checks. The kernels are in cpu/batchnorm.cc (reference), dnnl/batchnorm.cc
// (oneDNN) and cuda/batchnorm.cu; their Args, slots, OpIds, outputs and launch are generated
// from the rows (Run<Name>).
#include <vector>

#include "bf16.h"
#include "nn_kernels.h"

namespace singa {

namespace {

// Per-channel tensors stay float32 (cuDNN's convention); activations (x, dy) are checked with
// CheckNnFloat (float16 too on a CUDA device, computed in float there).
void CheckFloat32(const char* op, const char* what, const Tensor& t) {
  SINGA_CHECK(t.block() != nullptr, ValueError, op << ": the " << what << " tensor is empty");
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32,
                    op << ": expects a float32 " << what << ", got " << t.data_type());
}

// Checks x: (N, C, ...).
void CheckInput(const char* op, const Tensor& x) {
  CheckNnFloat(op, "input", x);
  SINGA_CHECK_SHAPE(x.nDim() >= 2, op << ": expected an input (N, C) or (N, C, H, W), got "
                                      << x.shape());
}

// A per-channel parameter: C float32 values on x's device.
void CheckChannelVector(const char* op, const char* what, const Tensor& v, const Tensor& x) {
  CheckFloat32(op, what, v);
  SINGA_CHECK_SHAPE(v.Size() == x.shape(1),
                    op << ": " << what << " has shape " << v.shape() << ", expected "
                       << x.shape(1) << " values (one per channel of the input " << x.shape()
                       << ")");
  CheckSameDevice(op, {&x, &v});
}

}  // namespace

std::vector<Tensor> BatchNormForwardTraining(const Tensor& x_in, const Tensor& scale_in,
                                             const Tensor& bias_in, Tensor* running_mean,
                                             Tensor* running_var, float momentum, float eps,
                                             bool relu) {
  const char* op = "BatchNormForwardTraining";
  CheckInput(op, x_in);
  CheckChannelVector(op, "scale", scale_in, x_in);
  CheckChannelVector(op, "bias", bias_in, x_in);
  SINGA_CHECK_VALUE(eps >= 0.f, op << ": eps must be >= 0, got " << eps);
  SINGA_CHECK_VALUE(momentum >= 0.f && momentum <= 1.f,
                    op << ": momentum must be in [0, 1], got " << momentum);
  SINGA_CHECK_VALUE(x_in.shape(0) * Product(x_in.shape(), 2) > 1,
                    op << ": expected more than 1 value per channel when training, got an "
                          "input of shape "
                       << x_in.shape());
  if (Bf16ViaFloat32(x_in)) {  // statistics in float32 (bf16.h); y rounded once
    std::vector<Tensor> r = BatchNormForwardTraining(ToFloat32(x_in), scale_in, bias_in,
                                                     running_mean, running_var, momentum, eps,
                                                     relu);
    r[0] = ToBFloat16(r[0]);
    return r;
  }
  for (auto [ptr, name] : {std::make_pair(running_mean, "running_mean"),
                           std::make_pair(running_var, "running_var")}) {
    if (ptr == nullptr) continue;
    CheckChannelVector(op, name, *ptr, x_in);
    SINGA_CHECK_SHAPE(ptr->IsContiguous(), op << ": " << name
                                              << " is a non-contiguous view; it is updated in "
                                                 "place");
  }
  return RunBatchNormForwardTraining(x_in, scale_in, bias_in, running_mean, running_var,
                                     momentum, eps, relu);
}

Tensor BatchNormForwardInference(const Tensor& x_in, const Tensor& scale_in,
                                 const Tensor& bias_in, const Tensor& running_mean_in,
                                 const Tensor& running_var_in, float eps, bool relu) {
  const char* op = "BatchNormForwardInference";
  CheckInput(op, x_in);
  CheckChannelVector(op, "scale", scale_in, x_in);
  CheckChannelVector(op, "bias", bias_in, x_in);
  CheckChannelVector(op, "running_mean", running_mean_in, x_in);
  CheckChannelVector(op, "running_var", running_var_in, x_in);
  SINGA_CHECK_VALUE(eps >= 0.f, op << ": eps must be >= 0, got " << eps);
  if (Bf16ViaFloat32(x_in))
    return ToBFloat16(BatchNormForwardInference(ToFloat32(x_in), scale_in, bias_in,
                                                running_mean_in, running_var_in, eps, relu));
  return RunBatchNormForwardInference(x_in, scale_in, bias_in, running_mean_in, running_var_in,
                                      eps, relu);
}

std::vector<Tensor> BatchNormBackward(const Tensor& dy_in, const Tensor& x_in,
                                      const Tensor& scale_in, const Tensor& mean_in,
                                      const Tensor& var_in, float eps) {
  const char* op = "BatchNormBackward";
  CheckInput(op, x_in);
  CheckNnFloat(op, "gradient dy", dy_in);
  SINGA_CHECK_SHAPE(dy_in.shape() == x_in.shape(), op << ": dy has shape " << dy_in.shape()
                                                      << " but x has shape " << x_in.shape());
  CheckSameDevice(op, {&x_in, &dy_in});
  CheckSameDtype(op, {&x_in, &dy_in});
  CheckChannelVector(op, "scale", scale_in, x_in);
  CheckChannelVector(op, "batch_mean", mean_in, x_in);
  CheckChannelVector(op, "batch_var", var_in, x_in);
  SINGA_CHECK_VALUE(eps >= 0.f, op << ": eps must be >= 0, got " << eps);
  if (Bf16ViaFloat32(x_in)) {
    std::vector<Tensor> r = BatchNormBackward(ToFloat32(dy_in), ToFloat32(x_in), scale_in,
                                              mean_in, var_in, eps);
    r[0] = ToBFloat16(r[0]);
    return r;
  }
  return RunBatchNormBackward(dy_in, x_in, scale_in, mean_in, var_in, eps);
}

}  // namespace singa
