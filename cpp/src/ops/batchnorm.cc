// Batch normalisation over axis 1 (see singa/ops/nn.h): the device-independent fronts; the
// kernels are in cpu/batchnorm.cc (reference) and dnnl/batchnorm.cc (oneDNN).
#include <tuple>
#include <vector>

#include "bf16.h"
#include "nn_kernels.h"

namespace singa {

SINGA_KERNEL_SLOT(BatchNormForwardTraining, PrepareFn<BnTrainArgs>);
SINGA_KERNEL_SLOT(BatchNormForwardInference, PrepareFn<BnInferArgs>);
SINGA_KERNEL_SLOT(BatchNormBackward, PrepareFn<BnBwdArgs>);

namespace {

// Per-channel tensors stay float32 (cuDNN's convention); activations (x, dy) are checked with
// CheckNnFloat (float16 too on a CUDA device, computed in float there).
void CheckFloat32(const char* op, const char* what, const Tensor& t) {
  SINGA_CHECK(t.block() != nullptr, ValueError, op << ": the " << what << " tensor is empty");
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32,
                    op << ": expects a float32 " << what << ", got " << t.data_type());
}

// Checks x and returns the (N, C, S) view of it.
void CheckInput(const char* op, const Tensor& x, size_t* N, size_t* C, size_t* S) {
  CheckNnFloat(op, "input", x);
  SINGA_CHECK_SHAPE(x.nDim() >= 2, op << ": expected an input (N, C) or (N, C, H, W), got "
                                      << x.shape());
  *N = x.shape(0);
  *C = x.shape(1);
  *S = Product(x.shape(), 2);
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
  BnTrainArgs a;
  CheckInput(op, x_in, &a.N, &a.C, &a.S);
  CheckChannelVector(op, "scale", scale_in, x_in);
  CheckChannelVector(op, "bias", bias_in, x_in);
  SINGA_CHECK_VALUE(eps >= 0.f, op << ": eps must be >= 0, got " << eps);
  SINGA_CHECK_VALUE(momentum >= 0.f && momentum <= 1.f,
                    op << ": momentum must be in [0, 1], got " << momentum);
  SINGA_CHECK_VALUE(a.N * a.S > 1, op << ": expected more than 1 value per channel when "
                                         "training, got an input of shape "
                                      << x_in.shape());
  if (Bf16ViaFloat32(x_in)) {  // statistics in float32 (bf16.h); y rounded once
    std::vector<Tensor> r = BatchNormForwardTraining(ToFloat32(x_in), scale_in, bias_in,
                                                     running_mean, running_var, momentum, eps,
                                                     relu);
    r[0] = ToBFloat16(r[0]);
    return r;
  }
  std::vector<Block*> reads, writes;
  for (auto [ptr, name, dst] : {std::make_tuple(running_mean, "running_mean", &a.running_mean),
                                std::make_tuple(running_var, "running_var", &a.running_var)}) {
    if (ptr == nullptr) continue;
    CheckChannelVector(op, name, *ptr, x_in);
    SINGA_CHECK_SHAPE(ptr->IsContiguous(), op << ": " << name
                                              << " is a non-contiguous view; it is updated in "
                                                 "place");
    *dst = *ptr;
    reads.push_back(ptr->block());
    writes.push_back(ptr->block());
  }
  a.x = x_in.Contiguous();
  a.scale = scale_in.Contiguous();
  a.bias = bias_in.Contiguous();
  a.momentum = momentum;
  a.eps = eps;
  a.relu = relu;
  const auto& dev = a.x.device();
  a.y = Tensor(a.x.shape(), dev, a.x.data_type());
  a.mean = Tensor(Shape{a.C}, dev, kFloat32);
  a.var = Tensor(Shape{a.C}, dev, kFloat32);
  // y first: writes[0] is the block a graph may fuse a following ReLU into (nn_kernels.h)
  writes.insert(writes.begin(), {a.y.block(), a.mean.block(), a.var.block()});
  reads.insert(reads.begin(), {a.x.block(), a.scale.block(), a.bias.block()});
  LaunchKernel(BatchNormForwardTrainingKernel(), a, dev, reads, writes,
               relu ? OpId::kBatchNormForwardTrainingReLU : OpId::kBatchNormForwardTraining);
  return {a.y, a.mean, a.var};
}

Tensor BatchNormForwardInference(const Tensor& x_in, const Tensor& scale_in,
                                 const Tensor& bias_in, const Tensor& running_mean_in,
                                 const Tensor& running_var_in, float eps, bool relu) {
  const char* op = "BatchNormForwardInference";
  BnInferArgs a;
  CheckInput(op, x_in, &a.N, &a.C, &a.S);
  CheckChannelVector(op, "scale", scale_in, x_in);
  CheckChannelVector(op, "bias", bias_in, x_in);
  CheckChannelVector(op, "running_mean", running_mean_in, x_in);
  CheckChannelVector(op, "running_var", running_var_in, x_in);
  SINGA_CHECK_VALUE(eps >= 0.f, op << ": eps must be >= 0, got " << eps);
  if (Bf16ViaFloat32(x_in))
    return ToBFloat16(BatchNormForwardInference(ToFloat32(x_in), scale_in, bias_in,
                                                running_mean_in, running_var_in, eps, relu));
  a.x = x_in.Contiguous();
  a.scale = scale_in.Contiguous();
  a.bias = bias_in.Contiguous();
  a.running_mean = running_mean_in.Contiguous();
  a.running_var = running_var_in.Contiguous();
  a.eps = eps;
  a.relu = relu;
  a.y = Tensor(a.x.shape(), a.x.device(), a.x.data_type());
  if (a.y.Size() == 0) return a.y;
  // As an epilogue, this batch norm folds into the convolution that produced x (Graph).
  Epilogue self;
  if (!relu) {
    self.bn_scale = a.scale.block();
    self.bn_bias = a.bias.block();
    self.bn_mean = a.running_mean.block();
    self.bn_var = a.running_var.block();
    self.bn_eps = a.eps;
  }
  LaunchKernel(BatchNormForwardInferenceKernel(), a, a.x.device(),
               {a.x.block(), a.scale.block(), a.bias.block(), a.running_mean.block(),
                a.running_var.block()},
               {a.y.block()},
               relu ? OpId::kBatchNormForwardInferenceReLU : OpId::kBatchNormForwardInference, self);
  return a.y;
}

std::vector<Tensor> BatchNormBackward(const Tensor& dy_in, const Tensor& x_in,
                                      const Tensor& scale_in, const Tensor& mean_in,
                                      const Tensor& var_in, float eps) {
  const char* op = "BatchNormBackward";
  BnBwdArgs a;
  CheckInput(op, x_in, &a.N, &a.C, &a.S);
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
  a.dy = dy_in.Contiguous();
  a.x = x_in.Contiguous();
  a.scale = scale_in.Contiguous();
  a.mean = mean_in.Contiguous();
  a.var = var_in.Contiguous();
  a.eps = eps;
  const auto& dev = a.x.device();
  a.dx = Tensor(a.x.shape(), dev, a.x.data_type());
  a.dscale = Tensor(Shape{a.C}, dev, kFloat32);
  a.dbias = Tensor(Shape{a.C}, dev, kFloat32);
  LaunchKernel(BatchNormBackwardKernel(), a, dev,
               {a.dy.block(), a.x.block(), a.scale.block(), a.mean.block(), a.var.block()},
               {a.dx.block(), a.dscale.block(), a.dbias.block()}, OpId::kBatchNormBackward);
  return {a.dx, a.dscale, a.dbias};
}

}  // namespace singa
