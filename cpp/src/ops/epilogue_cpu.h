// epilogue_cpu.h (private): a fused epilogue (singa/core/fusion.h) on a float32 output viewed
// as (N, C, S), for the CPU kernels (reference and oneDNN).
//
//   const CpuEpilogue epi(a.epi, a.relu, C, S);  // once per run: folds the batch norm's factors
//   epi.Apply(y, n0 * C, n1 * C, parallel);      // planes [p0, p1) of y, in any split
//   epi.ApplyChannels16(y, N, parallel);         // y kept channel-blocked by a graph
//
// The arithmetic is the unfused operations', in their order: the batch norm's y * k[c] + b[c]
// with the inference kernel's k and b (FoldBatchNorm), then + residual, then the table's ReLU
// (NaN kept), so fused and unfused runs round alike.
#pragma once

#include <cstddef>
#include <vector>

#include "singa/core/fusion.h"

namespace singa {

/// The inference batch norm as y * k[c] + b[c]: k = scale / sqrt(var + eps), b = bias - mean * k
/// (in double, as the reference kernel computes them).
void FoldBatchNorm(const float* scale, const float* bias, const float* mean, const float* var,
                   float eps, size_t C, float* k, float* b);

class CpuEpilogue {
 public:
  CpuEpilogue(const Epilogue& e, bool relu, size_t C, size_t S);
  /// Nothing to apply beyond the ReLU (kernels keep their own ReLU pass then).
  bool relu_only() const { return k_.empty() && residual_ == nullptr; }
  bool empty() const { return relu_only() && !relu_; }
  /// Applies the epilogue to the planes [p0, p1) of y (plane n * C + c holds S values).
  void Apply(float* y, size_t p0, size_t p1, bool parallel) const;
  /// The same on a y of N images the graph keeps in MemLayout::kChannels16 (singa/core/layout.h:
  /// C % 16 == 0; element (n, c, s) at ((n * C/16 + c/16) * S + s) * 16 + c % 16).
  void ApplyChannels16(float* y, size_t N, bool parallel) const;

 private:
  std::vector<float> k_, b_;  ///< empty: no batch norm
  const float* residual_ = nullptr;
  bool relu_;
  size_t C_, S_;
};

}  // namespace singa
