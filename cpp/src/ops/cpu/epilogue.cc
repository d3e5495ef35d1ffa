// The CPU epilogue of fused operations (see ops/epilogue_cpu.h).
#include "../epilogue_cpu.h"

#include <cmath>

#include "singa/core/block.h"
#include "singa/ops/elementwise_functors.h"

namespace singa {

void FoldBatchNorm(const float* scale, const float* bias, const float* mean, const float* var,
                   float eps, size_t C, float* k, float* b) {
  for (size_t c = 0; c < C; ++c) {
    const double q = scale[c] / std::sqrt(double(var[c]) + double(eps));
    k[c] = float(q);
    b[c] = float(bias[c] - mean[c] * q);
  }
}

CpuEpilogue::CpuEpilogue(const Epilogue& e, bool relu, size_t C, size_t S)
    : relu_(relu), C_(C), S_(S) {
  if (e.bn_scale) {
    k_.resize(C);
    b_.resize(C);
    auto in = [](Block* b) { return static_cast<const float*>(b->data()); };
    FoldBatchNorm(in(e.bn_scale), in(e.bn_bias), in(e.bn_mean), in(e.bn_var), e.bn_eps, C,
                  k_.data(), b_.data());
  }
  if (e.residual) residual_ = static_cast<const float*>(e.residual->data());
}

void CpuEpilogue::Apply(float* y, size_t p0, size_t p1, bool parallel) const {
  const fn::ReLUOp relu;
  const size_t S = S_;
  const float *k = k_.empty() ? nullptr : k_.data(), *b = b_.data(), *res = residual_;
  const bool do_relu = relu_;
  const std::ptrdiff_t n = std::ptrdiff_t(p1 - p0);
#pragma omp parallel for schedule(static) if (parallel && n * std::ptrdiff_t(S) >= (1 << 16))
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const size_t q = p0 + size_t(i), c = q % C_;
    float* o = y + q * S;
    const float* r = res ? res + q * S : nullptr;
    const float kc = k ? k[c] : 1.f, bc = k ? b[c] : 0.f;
    for (size_t j = 0; j < S; ++j) {
      float v = o[j];
      if (k) v = v * kc + bc;
      if (r) v = v + r[j];
      if (do_relu) v = relu(v);
      o[j] = v;
    }
  }
}

void CpuEpilogue::ApplyChannels16(float* y, size_t N, bool parallel) const {
  const fn::ReLUOp relu;
  const size_t CB = C_ / 16, run = S_ * 16;  // a run: one image's 16 channels, all positions
  const float *k = k_.empty() ? nullptr : k_.data(), *b = b_.data(), *res = residual_;
  const bool do_relu = relu_;
  const std::ptrdiff_t n = std::ptrdiff_t(N * CB);
#pragma omp parallel for schedule(static) if (parallel && n * std::ptrdiff_t(run) >= (1 << 16))
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const size_t c0 = size_t(i) % CB * 16;
    float* o = y + size_t(i) * run;
    const float* r = res ? res + size_t(i) * run : nullptr;
    for (size_t j = 0; j < run; ++j) {
      const size_t c = c0 + j % 16;
      float v = o[j];
      if (k) v = v * k[c] + b[c];
      if (r) v = v + r[j];
      if (do_relu) v = relu(v);
      o[j] = v;
    }
  }
}

}  // namespace singa
