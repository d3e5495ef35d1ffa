// CPU reference kernels of the fused optimizer updates (fronts: ../optim.cc). The learning rate
// and the other hyper-parameters are read here, from their device tensors, at every run.
#include <cstddef>

#include "../adam_step.h"
#include "../kernel_slots.h"
#include "../strided.h"

namespace singa {
namespace cpu {
namespace {

void SGDUpdate(const SGDArgs& a, Context*) {
  auto value = [](const Tensor& t) { return *static_cast<const float*>(t.block()->data()); };
  float* __restrict pp = static_cast<float*>(a.param.block()->mutable_data());
  const float* __restrict gp = static_cast<const float*>(a.grad.block()->data());
  float* __restrict bp = a.has_buf ? static_cast<float*>(a.buf.block()->mutable_data()) : nullptr;
  const float rate = value(a.lr), mom = value(a.momentum), wd = value(a.weight_decay);
  const float one_minus_damp = 1.f - value(a.dampening);
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(a.param.Size());
  // Three branch-free loops (restrict-qualified, so they vectorise).
  if (bp == nullptr) {
#pragma omp parallel for simd schedule(static) if (n >= std::ptrdiff_t(kParallelGrain))
    for (std::ptrdiff_t i = 0; i < n; ++i) pp[i] = pp[i] - (gp[i] + pp[i] * wd) * rate;
  } else if (!a.nesterov) {
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
}

void AdamUpdate(const AdamArgs& a, Context*) {
  auto value = [](const Tensor& t) { return *static_cast<const float*>(t.block()->data()); };
  const AdamScalars s = AdamScalarsOf(value(a.lr), value(a.beta1), value(a.beta2),
                                      value(a.epsilon), value(a.weight_decay), value(a.step),
                                      a.decay);
  float* __restrict pp = static_cast<float*>(a.param.block()->mutable_data());
  const float* __restrict gp = static_cast<const float*>(a.grad.block()->data());
  float* __restrict mp = static_cast<float*>(a.m.block()->mutable_data());
  float* __restrict vp = static_cast<float*>(a.v.block()->mutable_data());
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(a.param.Size());
#pragma omp parallel for simd schedule(static) if (n >= std::ptrdiff_t(kParallelGrain))
  for (std::ptrdiff_t i = 0; i < n; ++i) AdamElement(pp[i], gp[i], mp[i], vp[i], s);
}

}  // namespace

SINGA_REGISTER_KERNEL(AdamUpdate, kCpuRef, &AdamUpdate);
SINGA_REGISTER_KERNEL(SGDUpdate, kCpuRef, &SGDUpdate);
// a vector loop: nothing for oneDNN to do (oneDNN devices run it: their default fallback)

}  // namespace cpu
}  // namespace singa
