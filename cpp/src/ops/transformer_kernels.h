// transformer_kernels.h (private): the kernel slots of singa/ops/transformer.h, shared by the
// fronts (layer_norm.cc, cumsum.cc, gather.cc) and the kernels (cpu/, dnnl/, cuda/).
//
//   SINGA_REGISTER_KERNEL(LayerNormForward, kCpuRef, &PrepareForward);   // cpu/layer_norm.cc
//   LaunchKernel(LayerNormForwardKernel(), args, dev, reads, writes, OpId::kLayerNormForward);
//
// Layer norm uses nn_kernels.h's prepare + run form (a oneDNN primitive is made once per shape);
// the scan and the gathers are plain kernels, like IndexSelect.
#pragma once

#include <cstdint>

#include "kernel_slots.h"
#include "nn_kernels.h"

namespace singa {

/// x viewed as (M, N): M rows of N normalised values; weight / bias empty when not affine.
struct LnFwdArgs {
  Tensor x, weight, bias, y, mean, rstd;
  size_t M = 0, N = 0;
  float eps = 0.f;
};
/// dweight / dbias empty when there is no weight (then only dx is computed).
struct LnBwdArgs {
  Tensor dy, x, weight, mean, rstd, dx, dweight, dbias;
  size_t M = 0, N = 0;
};
SINGA_KERNEL_SLOT_DECL(LayerNormForward, PrepareFn<LnFwdArgs>);
/// The backward reads mean and rstd: a recomputation (under a memory budget) writes them into
/// scratch (nn_kernels.h: StatsRerun), so y can be dropped after the forward.
template <>
struct SavedStats<LnFwdArgs> {
  static std::vector<Tensor*> Of(LnFwdArgs& a) { return {&a.mean, &a.rstd}; }
};
SINGA_KERNEL_SLOT_DECL(LayerNormBackward, PrepareFn<LnBwdArgs>);

/// Contiguous in and out (float32 or int32) viewed as (outer, mid, inner); scan along mid.
SINGA_KERNEL_SLOT_DECL(CumSum, void(const Tensor& in, const Dims3& d, bool exclusive,
                                    bool reverse, const Tensor& out, Context* ctx));

/// GatherElements: indices and out contiguous, of the indices' shape `idx_shape`; x contiguous
/// of `x_shape`; both have the same rank. The backward writes (zeroes, then adds into) dx of
/// x_shape from dy of idx_shape.
struct ElementsArgs {
  Tensor indices;
  Shape x_shape, idx_shape;
  size_t axis = 0;
};
SINGA_KERNEL_SLOT_DECL(GatherElements, void(const Tensor& x, const ElementsArgs& g,
                                            const Tensor& out, Context* ctx));
SINGA_KERNEL_SLOT_DECL(GatherElementsBackward, void(const Tensor& dy, const ElementsArgs& g,
                                                    const Tensor& dx, Context* ctx));

/// GatherND on contiguous tensors: x is (B, ...) with `x_dims` the q addressed axes' sizes and
/// `slice` elements per addressed position; indices (B * K, q); out (B * K, slice).
struct NdArgs {
  Tensor indices;
  size_t batch = 1, per_batch = 0, slice = 1;  // B, K, elements per gathered slice
  size_t batch_dims = 0;                        // for error messages
  std::vector<size_t> x_dims;                   // the q addressed axes' sizes
  Shape x_shape;                                // for error messages
};
SINGA_KERNEL_SLOT_DECL(GatherND, void(const Tensor& x, const NdArgs& g, const Tensor& out,
                                      Context* ctx));
SINGA_KERNEL_SLOT_DECL(GatherNDBackward, void(const Tensor& dy, const NdArgs& g,
                                              const Tensor& dx, Context* ctx));

}  // namespace singa
