// Fused optimizer updates: the fronts (see singa/ops/optim.h); the CPU kernels are in
// cpu/optim.cc. Hyper-parameters stay in device tensors, read by the kernel when it runs.
#include "singa/ops/optim.h"

#include <vector>

#include "kernel_slots.h"

namespace singa {

SINGA_KERNEL_SLOT(SGDUpdate, void(const SGDArgs&, Context*));
SINGA_KERNEL_SLOT(AdamUpdate, void(const AdamArgs&, Context*));
namespace {

void CheckScalar(const char* what, const Tensor& t, const Tensor& param,
                 const char* op = "SGDUpdate") {
  SINGA_CHECK(t.block() != nullptr, ValueError, op << ": " << what << " is an empty tensor");
  SINGA_CHECK_SHAPE(t.Size() == 1, op << ": " << what << " must hold one value, got shape "
                                      << t.shape());
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32, op << ": " << what << " must be float32");
  CheckSameDevice(op, {&param, &t});
}

}  // namespace

void SGDUpdate(Tensor* param, const Tensor& grad, Tensor* buf, const Tensor& lr,
               const Tensor& momentum, const Tensor& dampening, const Tensor& weight_decay,
               bool nesterov) {
  SINGA_CHECK_SHAPE(param->shape() == grad.shape(), "SGDUpdate: parameter " << param->shape()
                                                        << " and gradient " << grad.shape()
                                                        << " differ");
  // float16 parameters (SINGA's float16 training: the update runs in float16 storage, computed
  // in float) are updated by the CUDA kernel only; hyper-parameters stay float32.
  const bool half = param->data_type() == kFloat16 &&
                    DeviceBackend(*param->device()) == Backend::kCuda;
  SINGA_CHECK_DTYPE((param->data_type() == kFloat32 || half) &&
                        grad.data_type() == param->data_type(),
                    "SGDUpdate: expects float32 parameter and gradient (float16 on CUDA devices), "
                    "got " << param->data_type() << " and " << grad.data_type());
  SINGA_CHECK_SHAPE(param->IsContiguous(), "SGDUpdate: the parameter is a non-contiguous view");
  CheckSameDevice("SGDUpdate", {param, &grad});
  for (auto& [what, t] : {std::pair<const char*, const Tensor*>{"lr", &lr},
                          {"momentum", &momentum}, {"dampening", &dampening},
                          {"weight_decay", &weight_decay}})
    CheckScalar(what, *t, *param);
  const bool has_buf = buf != nullptr && buf->block() != nullptr;
  if (has_buf) {
    SINGA_CHECK_SHAPE(buf->shape() == param->shape() && buf->IsContiguous() &&
                          buf->data_type() == param->data_type(),
                      "SGDUpdate: the momentum buffer " << buf->shape()
                                                        << " does not match the parameter "
                                                        << param->shape());
  }
  SGDArgs args;
  args.param = *param;
  args.grad = grad.Contiguous();
  args.buf = has_buf ? *buf : Tensor();
  args.lr = lr;
  args.momentum = momentum;
  args.dampening = dampening;
  args.weight_decay = weight_decay;
  args.has_buf = has_buf;
  args.nesterov = nesterov;
  std::vector<Block*> reads{args.param.block(), args.grad.block(), lr.block(), momentum.block(),
                            dampening.block(), weight_decay.block()};
  std::vector<Block*> writes{args.param.block()};
  if (has_buf) {
    reads.push_back(args.buf.block());
    writes.push_back(args.buf.block());
  }
  auto* k = SGDUpdateKernel().For(*param->device());
  param->device()->Exec({.id = OpId::kSGDUpdate, .reads = reads, .writes = writes},
                        [k, args](Context* ctx) { k(args, ctx); });
}

void AdamUpdate(Tensor* param, const Tensor& grad, Tensor* m, Tensor* v, const Tensor& lr,
                const Tensor& beta_1, const Tensor& beta_2, const Tensor& epsilon,
                const Tensor& weight_decay, const Tensor& step, bool decay) {
  SINGA_CHECK(param->block() != nullptr && grad.block() != nullptr, ValueError,
              "AdamUpdate: the parameter or its gradient is empty");
  SINGA_CHECK_DTYPE(param->data_type() == kFloat32 && grad.data_type() == kFloat32,
                    "AdamUpdate: expects float32 parameter and gradient, got "
                        << param->data_type() << " and " << grad.data_type());
  SINGA_CHECK_SHAPE(param->IsContiguous(), "AdamUpdate: the parameter is a non-contiguous view");
  SINGA_CHECK_SHAPE(param->shape() == grad.shape(), "AdamUpdate: parameter "
                                                        << param->shape() << " and gradient "
                                                        << grad.shape() << " differ");
  CheckSameDevice("AdamUpdate", {param, &grad});
  for (auto& [what, t] : {std::pair<const char*, const Tensor*>{"m", m}, {"v", v}}) {
    SINGA_CHECK(t != nullptr && t->block() != nullptr, ValueError,
                "AdamUpdate: the state " << what << " is empty");
    SINGA_CHECK_SHAPE(t->shape() == param->shape() && t->IsContiguous() &&
                          t->data_type() == kFloat32,
                      "AdamUpdate: the state " << what << " (" << t->shape() << ", "
                                               << t->data_type()
                                               << ") does not match the float32 parameter "
                                               << param->shape());
    CheckSameDevice("AdamUpdate", {param, t});
  }
  for (auto& [what, t] : {std::pair<const char*, const Tensor*>{"lr", &lr},
                          {"beta_1", &beta_1}, {"beta_2", &beta_2}, {"epsilon", &epsilon},
                          {"weight_decay", &weight_decay}, {"step", &step}})
    CheckScalar(what, *t, *param, "AdamUpdate");
  AdamArgs a;
  a.param = *param;
  a.grad = grad.Contiguous();
  a.m = *m;
  a.v = *v;
  a.lr = lr;
  a.beta1 = beta_1;
  a.beta2 = beta_2;
  a.epsilon = epsilon;
  a.weight_decay = weight_decay;
  a.step = step;
  a.decay = decay;
  std::vector<Block*> reads{a.param.block(), a.grad.block(),  a.m.block(),
                            a.v.block(),     lr.block(),      beta_1.block(),
                            beta_2.block(),  epsilon.block(), weight_decay.block(),
                            step.block()};
  auto* k = AdamUpdateKernel().For(*param->device());
  param->device()->Exec({.id = OpId::kAdamUpdate,
                         .reads = std::move(reads),
                         .writes = {a.param.block(), a.m.block(), a.v.block()}},
                        [k, a](Context* ctx) { k(a, ctx); });
}

}  // namespace singa
