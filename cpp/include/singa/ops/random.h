// singa/ops/random.h: random fills, drawn from the device's seedable generator.
//
//   x.device()->SetRandSeed(0);
//   singa::Gaussian(0.f, 0.1f, &x);     // mean, std
//   singa::Uniform(-1.f, 1.f, &x);      // [low, high)
//   singa::Bernoulli(0.5f, &mask);      // 1 with probability p, else 0
//
// Bad parameters (std < 0, low > high, p outside [0, 1]) throw ValueError.
#pragma once

#include "singa/core/tensor.h"

namespace singa {

void Uniform(float low, float high, Tensor* out);
void Gaussian(float mean, float std, Tensor* out);
void Bernoulli(float p, Tensor* out);

}  // namespace singa
