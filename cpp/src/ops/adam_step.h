// adam_step.h (private): one element of the fused Adam update, shared by the CPU kernel
// (cpu/optim.cc) and the CUDA kernel (cuda/optim.cu).
//
//   const AdamScalars s = AdamScalarsOf(lr, beta1, beta2, eps, wd, step, decay);  // per run
//   AdamElement(p[i], g[i], m[i], v[i], s);                                       // per element
//
// Invariant: the arithmetic, operation by operation and in float32, of the unfused update in
// singa/opt.py's Adam.apply (each line there is one core op, each rounding here one op there),
// so that the fused step gives the same bits, eager or replayed:
//   g = grad + p * wd                   (only when weight decay is on: p * 0 would turn an Inf
//                                        parameter's gradient into NaN)
//   m = m * b1 + g * (1 - b1)
//   v = v * b2 + (g * g) * (1 - b2)
//   c1 = 1 - pow(b1, step + 1)          c2 = 1 - pow(b2, step + 1)
//   p = p - ((m / c1) / (sqrt(v / c2) + eps)) * lr
// (The compiler must not contract a * b + c into an FMA for this: the host code is built for
// x86-64-v2, which has none; nvcc's default contraction may differ by an ulp on the GPU.)
#pragma once

#include "singa/ops/elementwise_functors.h"

namespace singa {

struct AdamScalars {
  float lr, b1, one_minus_b1, b2, one_minus_b2, c1, c2, eps, wd;
  bool decay;
};

SINGA_HOST_DEVICE inline AdamScalars AdamScalarsOf(float lr, float b1, float b2, float eps,
                                                   float wd, float step, bool decay) {
  const float t = step + 1.f;
  return {lr,     b1, 1.f - b1, b2, 1.f - b2, 1.f - fn::PowOp{}(b1, t), 1.f - fn::PowOp{}(b2, t),
          eps,    wd, decay};
}

SINGA_HOST_DEVICE SINGA_FN_INLINE void AdamElement(float& p, float grad, float& m, float& v,
                                                   const AdamScalars& s) {
  const float g = s.decay ? grad + p * s.wd : grad;
  m = m * s.b1 + g * s.one_minus_b1;
  v = v * s.b2 + (g * g) * s.one_minus_b2;
  const float denom = fn::SqrtOp{}(v / s.c2) + s.eps;
  p = p - ((m / s.c1) / denom) * s.lr;
}

}  // namespace singa
