// attention_kernel.h (private): the kernel slots of the fused attention (front: ops/attention.cc,
// CPU: ops/cpu/attention.cc, CUDA: ops/cuda/attention.cu) and the dropout hash both backends
// share, so a GPU run drops the same elements as a CPU run with the same seed.
//
//   auto* k = AttentionForwardKernel().For(*q.device());
//   dev->Exec({.id = OpId::kScaledDotProductAttention, .reads = {q, k, v, ...},
//              .writes = {out, lse}}, [k, a](Context* ctx) { k(a, ctx); });
//
// Layout the kernels see: q, k, v, mask contiguous in their own shapes; the flat batch index b
// (0 <= b < nb over the broadcast batch shape) maps to each operand's element offset through
// AttnBatch (stride 0 on broadcast axes). out, dout and the full-batch gradients dq (nb, L, E),
// dk (nb, S, E), dv (nb, S, Ev) are contiguous; lse is (nb, L).
#pragma once

#include <cstdint>
#include <cstring>

#include "singa/core/context.h"
#include "singa/core/host_device.h"
#include "singa/core/kernel.h"
#include "singa/core/tensor.h"

namespace singa {

constexpr int kAttnMaxBatchDims = 8;

/// Flat batch index -> element offsets of q, k, v and the mask (fixed-size: passed by value to a
/// CUDA kernel).
struct AttnBatch {
  int ndim = 0;
  int64_t shape[kAttnMaxBatchDims] = {};
  int64_t q[kAttnMaxBatchDims] = {}, k[kAttnMaxBatchDims] = {}, v[kAttnMaxBatchDims] = {},
          m[kAttnMaxBatchDims] = {};
};

struct AttnOffsets {
  int64_t q = 0, k = 0, v = 0, m = 0;
};

SINGA_HOST_DEVICE inline AttnOffsets AttnOffsetsOf(const AttnBatch& bt, int64_t b) {
  AttnOffsets o;
  for (int d = bt.ndim - 1; d >= 0; --d) {
    const int64_t i = b % bt.shape[d];
    b /= bt.shape[d];
    o.q += i * bt.q[d];
    o.k += i * bt.k[d];
    o.v += i * bt.v[d];
    o.m += i * bt.m[d];
  }
  return o;
}

/// The lse of a query row whose every key is masked: finite (a device checking outputs for Inf
/// must not stop there) and so large that exp(s - lse) is 0 for every score s.
constexpr float kAttnMaskedLse = 3.0e38f;

enum AttnMaskKind : int { kAttnNoMask = 0, kAttnKeepMask = 1, kAttnAddMask = 2 };

struct AttentionArgs {
  Tensor q, k, v, mask, seed;  ///< mask, seed: empty when unused
  Tensor out, lse;             ///< forward outputs; backward inputs
  Tensor dout, dq, dk, dv;     ///< backward only
  Tensor work;                 ///< backward scratch: (nb, L) floats (D = rowsum(dout * out))
  int64_t nb = 0, L = 0, S = 0, E = 0, Ev = 0;
  int64_t mask_row = 0, mask_col = 0;  ///< the mask's strides along L and S (0: broadcast)
  AttnBatch batch;
  int mask_kind = kAttnNoMask;
  float scale = 1.f, dropout_p = 0.f;
  bool causal = false;
};

using AttentionKernelFn = void(const AttentionArgs& a, Context* ctx);
SINGA_KERNEL_SLOT_DECL(AttentionForward, AttentionKernelFn);
SINGA_KERNEL_SLOT_DECL(AttentionBackward, AttentionKernelFn);

// ---- dropout: keep bit of (seed, batch-head b, row i, column j), no stored mask ----
// murmur3's 32-bit finaliser: every input bit flips each output bit with probability ~1/2.
// (cpu/attention_avx512.cc computes the same with vector instructions and these constants.)
constexpr uint32_t kAttnMix1 = 0x85ebca6bu, kAttnMix2 = 0xc2b2ae35u, kAttnColMul = 0x9e3779b1u;
SINGA_HOST_DEVICE inline uint32_t AttnMix(uint32_t h) {
  h ^= h >> 16;
  h *= kAttnMix1;
  h ^= h >> 13;
  h *= kAttnMix2;
  h ^= h >> 16;
  return h;
}
/// The per-row key; seed words s0, s1 are the bits of the forward's two uniform draws.
SINGA_HOST_DEVICE inline uint32_t AttnRowKey(uint32_t s0, uint32_t s1, int64_t b, int64_t i) {
  return AttnMix(AttnMix(s0 ^ AttnMix(s1 + uint32_t(b) * 0x9e3779b9u)) + uint32_t(i) * 0x7feb352du);
}
/// Kept when the hash is at or above p * 2^32 (probability 1 - p).
SINGA_HOST_DEVICE inline bool AttnKeep(uint32_t row_key, int64_t j, uint32_t threshold) {
  return AttnMix(row_key ^ (uint32_t(j) * kAttnColMul)) >= threshold;
}
inline uint32_t AttnDropThreshold(float p) {
  return uint32_t(double(p) * 4294967296.0 > 4294967295.0 ? 4294967295.0
                                                          : double(p) * 4294967296.0);
}
inline uint32_t AttnFloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace singa
