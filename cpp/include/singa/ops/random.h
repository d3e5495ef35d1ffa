// singa/ops/random.h: random fills, drawn from the device's seedable generator.
//
//   x.device()->SetRandSeed(0);
//   singa::Gaussian(0.f, 0.1f, &x);     // mean, std
//   singa::Uniform(-1.f, 1.f, &x);      // [low, high)
//   singa::Bernoulli(0.5f, &mask);      // 1 with probability p, else 0
//
// Bad parameters (std < 0, low > high, p outside [0, 1]) throw ValueError.
//
// The numbers are Apache SINGA 3.3's: its CppCPU draws with libstdc++'s uniform_real_distribution,
// normal_distribution (Marsaglia's polar method) and bernoulli_distribution on the device's
// std::mt19937 (default seed 5489); the CPU kernels (cpp/src/ops/cpu/random.cc, registered per
// backend, see singa/core/kernel.h) write those algorithms out, so the same seed gives the same
// tensor as SINGA whatever standard library builds us. One deliberate difference: Uniform stays
// below `high` when float rounding would land on it (SINGA would return `high`).
#pragma once

#include "singa/core/tensor.h"

namespace singa {

void Uniform(float low, float high, Tensor* out);
void Gaussian(float mean, float std, Tensor* out);
void Bernoulli(float p, Tensor* out);

}  // namespace singa
