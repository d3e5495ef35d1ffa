// singa/ops/attention.h: fused scaled dot-product attention, forward and backward, in the
// flash-attention manner (memory linear in the sequence length).
//
//   singa::Tensor q({B, H, L, E}), k({B, H, S, E}), v({B, H, S, Ev});   // ... filled somehow
//   singa::AttentionOptions o;
//   o.causal = true;                                      // scale: 1/sqrt(E) unless o.scale > 0
//   singa::AttentionForwardResult f = singa::ScaledDotProductAttention(q, k, v, Tensor(), o);
//   // f.out: (B, H, L, Ev); f.lse and f.seed are what the backward needs
//   std::vector<singa::Tensor> g = singa::ScaledDotProductAttentionBackward(dout, q, k, v,
//                                                                          Tensor(), f, o);
//   // g: dq, dk, dv in the shapes of q, k, v
//
// Semantics are torch.nn.functional.scaled_dot_product_attention's: softmax(q k^T * scale +
// mask) v over the last two axes; the leading (batch, head...) axes of q, k, v broadcast. The mask
// broadcasts to (..., L, S): an int32 mask keeps the entries where it is nonzero (PyTorch's bool
// mask), a float32 mask is added to the scores. `causal` keeps key j for query i when j <= i (top
// left aligned, as PyTorch) and cannot be combined with a mask. A query row whose every key is
// masked gives zeros (output and gradients), as PyTorch 2.13 does; NaN propagates.
//
// Dropout (o.dropout_p > 0) drops probabilities after the softmax and scales the kept ones by
// 1 / (1 - p). The mask is not stored: each element's keep bit is a hash of (seed, batch-head,
// row, column), the seed is drawn from the device's generator by the forward (so a replayed
// graph draws a fresh one) and kept in f.seed, and the backward regenerates the same bits.
//
// Memory: the forward keeps only the output and one log-sum-exp per query row (f.lse, float32
// (batch..., L)); the backward recomputes the probabilities tile by tile. No (L, S) matrix is
// ever allocated. float32 only; shapes, dtypes and devices are checked before anything runs
// (ShapeError, DTypeError, ValueError, DeviceError naming the op and the shapes).
#pragma once

#include <vector>

#include "singa/core/tensor.h"

namespace singa {

struct AttentionOptions {
  float scale = 0.f;        ///< > 0: this scale; 0: 1 / sqrt(E)
  float dropout_p = 0.f;    ///< in [0, 1)
  bool causal = false;
};

struct AttentionForwardResult {
  Tensor out;   ///< (batch..., L, Ev)
  Tensor lse;   ///< (batch..., L): log-sum-exp of each query row's scores (3e38 for a row
                ///< whose every key is masked: finite, for SetCheckFinite, and exp(s - it) = 0)
  Tensor seed;  ///< (2,) float32 the dropout hash is keyed with (empty without dropout)
};

/// q (..., L, E), k (..., S, E), v (..., S, Ev); mask empty (none) or broadcastable to
/// (..., L, S). The batch axes of the result are the broadcast of q's, k's and v's.
AttentionForwardResult ScaledDotProductAttention(const Tensor& q, const Tensor& k,
                                                 const Tensor& v, const Tensor& mask,
                                                 const AttentionOptions& o);

/// dq, dk, dv (in the shapes of q, k and v: broadcast axes are summed) from dout and what the
/// forward returned; q, k, v, mask and o must be the forward's.
std::vector<Tensor> ScaledDotProductAttentionBackward(const Tensor& dout, const Tensor& q,
                                                      const Tensor& k, const Tensor& v,
                                                      const Tensor& mask,
                                                      const AttentionForwardResult& fwd,
                                                      const AttentionOptions& o);

}  // namespace singa
