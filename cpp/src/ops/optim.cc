// Fused optimizer updates (see singa/ops/optim.h).
#include "singa/ops/optim.h"

#include "strided.h"

namespace singa {
namespace {

void CheckScalar(const char* what, const Tensor& t, const Tensor& param) {
  SINGA_CHECK_SHAPE(t.Size() == 1, "SGDUpdate: " << what << " must hold one value, got shape "
                                                 << t.shape());
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32, "SGDUpdate: " << what << " must be float32");
  CheckSameDevice("SGDUpdate", {&param, &t});
}

}  // namespace

void SGDUpdate(Tensor* param, const Tensor& grad, Tensor* buf, const Tensor& lr,
               const Tensor& momentum, const Tensor& dampening, const Tensor& weight_decay,
               bool nesterov) {
  SINGA_CHECK_SHAPE(param->shape() == grad.shape(), "SGDUpdate: parameter " << param->shape()
                                                        << " and gradient " << grad.shape()
                                                        << " differ");
  SINGA_CHECK_DTYPE(param->data_type() == kFloat32 && grad.data_type() == kFloat32,
                    "SGDUpdate: expects float32 parameter and gradient");
  SINGA_CHECK_SHAPE(param->IsContiguous(), "SGDUpdate: the parameter is a non-contiguous view");
  CheckSameDevice("SGDUpdate", {param, &grad});
  for (auto& [what, t] : {std::pair<const char*, const Tensor*>{"lr", &lr},
                          {"momentum", &momentum}, {"dampening", &dampening},
                          {"weight_decay", &weight_decay}})
    CheckScalar(what, *t, *param);
  const bool has_buf = buf != nullptr && buf->block() != nullptr;
  if (has_buf) {
    SINGA_CHECK_SHAPE(buf->shape() == param->shape() && buf->IsContiguous() &&
                          buf->data_type() == kFloat32,
                      "SGDUpdate: the momentum buffer " << buf->shape()
                                                        << " does not match the parameter "
                                                        << param->shape());
  }
  Tensor p = *param, g = grad.Contiguous(), b = has_buf ? *buf : Tensor();
  std::vector<Block*> reads{p.block(), g.block(), lr.block(), momentum.block(),
                            dampening.block(), weight_decay.block()};
  std::vector<Block*> writes{p.block()};
  if (has_buf) {
    reads.push_back(b.block());
    writes.push_back(b.block());
  }
  p.device()->Exec(
      [p, g, b, lr, momentum, dampening, weight_decay, nesterov, has_buf](Context*) {
        float* __restrict pp = static_cast<float*>(p.block()->mutable_data());
        const float* __restrict gp = static_cast<const float*>(g.block()->data());
        float* __restrict bp = has_buf ? static_cast<float*>(b.block()->mutable_data()) : nullptr;
        const float rate = *static_cast<const float*>(lr.block()->data());
        const float mom = *static_cast<const float*>(momentum.block()->data());
        const float one_minus_damp = 1.f - *static_cast<const float*>(dampening.block()->data());
        const float wd = *static_cast<const float*>(weight_decay.block()->data());
        const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(p.Size());
        // Three branch-free loops (restrict-qualified, so they vectorise).
        if (bp == nullptr) {
#pragma omp parallel for simd schedule(static) if (n >= std::ptrdiff_t(kParallelGrain))
          for (std::ptrdiff_t i = 0; i < n; ++i) pp[i] = pp[i] - (gp[i] + pp[i] * wd) * rate;
        } else if (!nesterov) {
#pragma omp parallel for simd schedule(static) if (n >= std::ptrdiff_t(kParallelGrain))
          for (std::ptrdiff_t i = 0; i < n; ++i) {
            const float v = bp[i] * mom + (gp[i] + pp[i] * wd) * one_minus_damp;
            bp[i] = v;
            pp[i] = pp[i] - v * rate;
          }
        } else {
#pragma omp parallel for simd schedule(static) if (n >= std::ptrdiff_t(kParallelGrain))
          for (std::ptrdiff_t i = 0; i < n; ++i) {
            const float d = gp[i] + pp[i] * wd;
            const float v = bp[i] * mom + d * one_minus_damp;
            bp[i] = v;
            pp[i] = pp[i] - (d + v * mom) * rate;
          }
        }
      },
      reads, writes, "SGDUpdate");
}

}  // namespace singa
