// CUDA kernels of the fused attention (front: ops/attention.cc; CPU: ops/cpu/attention.cc): a
// straightforward flash attention, one thread per query (or key) row, the other operand staged
// through shared memory in tiles.
//
// Forward: a block per (batch-head, kRows queries); keys and values go by in tiles in shared
// memory; each thread keeps its query row and output accumulator in registers and runs the
// online softmax key by key. Backward (FlashAttention-2's order, probabilities recomputed from
// the saved lse): D = rowsum(dO * O); a block per (batch-head, kRows keys) accumulates dK and dV
// over query tiles in shared memory; a block per (batch-head, kRows queries) accumulates dQ over
// key tiles. No (L, S) matrix exists; dropout regenerates its keep bits from the forward's seed
// with the hash the CPU uses (attention_kernel.h), so both devices drop the same elements.
// Head sizes up to kMaxHead (per-thread arrays); larger ones throw NotImplementedError. Each
// kernel is a template on the head size: for E == Ev in {16, 32, 64, 128} (kHead) every loop
// over a row has a constant trip count, so the per-thread rows live in registers; with a
// runtime size (kHead 0) they are indexed at run time, which puts them in local memory (ptxas,
// sm_90: the runtime-sized kernels keep 1-2 KiB of stack per thread; Forward<64> none, the
// backward ones at 64 spill 0.2-0.4 KiB). The same arithmetic, row by row, either way.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "../attention_kernel.h"
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

constexpr int kRows = 64;        // threads per block: one query (or key) row each
constexpr int kMaxHead = 128;    // E and Ev at most this
constexpr int kSmemFloats = 12288;  // 48 KiB of staged rows per block

struct AttnDev {
  const float *q, *k, *v, *mask_f, *seed, *dout, *lse_in, *out_in, *D_in;
  const int32_t* mask_i;
  float *out, *lse, *D, *dq, *dk, *dv;
  int64_t nb, L, S, E, Ev, mask_row, mask_col;
  AttnBatch batch;
  int mask_kind;
  float scale, inv_keep;
  uint32_t thr;
  bool causal, dropout;
};

AttnDev Prepare(const AttentionArgs& a) {
  AttnDev d{};
  auto in = [](const Tensor& t) {
    return t.block() == nullptr ? nullptr : static_cast<const float*>(t.block()->data());
  };
  d.q = in(a.q);
  d.k = in(a.k);
  d.v = in(a.v);
  d.mask_f = a.mask_kind == kAttnAddMask ? in(a.mask) : nullptr;
  d.mask_i = a.mask_kind == kAttnKeepMask ? static_cast<const int32_t*>(a.mask.block()->data())
                                          : nullptr;
  d.seed = a.dropout_p > 0.f ? in(a.seed) : nullptr;
  d.nb = a.nb;
  d.L = a.L;
  d.S = a.S;
  d.E = a.E;
  d.Ev = a.Ev;
  d.mask_row = a.mask_row;
  d.mask_col = a.mask_col;
  d.batch = a.batch;
  d.mask_kind = a.mask_kind;
  d.scale = a.scale;
  d.dropout = a.dropout_p > 0.f;
  d.inv_keep = d.dropout ? 1.f / (1.f - a.dropout_p) : 1.f;
  d.thr = AttnDropThreshold(a.dropout_p);
  d.causal = a.causal;
  return d;
}

// The score of (i, j) from the dot product q_i . k_j: scaled, masked (-inf) or biased.
__device__ __forceinline__ float Score(const AttnDev& a, const AttnOffsets& o, int64_t i,
                                       int64_t j, float dot) {
  float s = dot * a.scale;
  if (a.causal && j > i) return -INFINITY;
  if (a.mask_kind == kAttnKeepMask) {
    if (a.mask_i[o.m + i * a.mask_row + j * a.mask_col] == 0) return -INFINITY;
  } else if (a.mask_kind == kAttnAddMask) {
    s += a.mask_f[o.m + i * a.mask_row + j * a.mask_col];
  }
  return s;
}

__device__ __forceinline__ uint32_t RowKey(const AttnDev& a, int64_t b, int64_t i) {
  return a.dropout ? AttnRowKey(__float_as_uint(a.seed[0]), __float_as_uint(a.seed[1]), b, i)
                   : 0u;
}

// The dropout factor of (i, j): 1 without dropout, else 0 or 1 / (1 - p).
__device__ __forceinline__ float DropFactor(const AttnDev& a, uint32_t row_key, int64_t j) {
  return !a.dropout ? 1.f : AttnKeep(row_key, j, a.thr) ? a.inv_keep : 0.f;
}

// Rows [r0, r0 + n) of x (row length d) into smem (n x d), by the whole block.
__device__ void Stage(const float* x, int64_t r0, int64_t n, int64_t d, int64_t rows,
                      float* smem) {
  for (int64_t t = threadIdx.x; t < n * d; t += blockDim.x) {
    const int64_t r = r0 + t / d;
    smem[t] = r < rows ? x[r0 * d + t] : 0.f;
  }
}

// Keys and values [j0, j0 + n) of batch offsets o into ks (n x E) and vs (n x Ev), once every
// thread of the block is done with the previous tile.
__device__ void StageKeys(const AttnDev& a, const AttnOffsets& o, int64_t j0, int64_t n,
                          float* ks, float* vs) {
  __syncthreads();
  Stage(a.k + o.k, j0, n, a.E, a.S, ks);
  Stage(a.v + o.v, j0, n, a.Ev, a.S, vs);
  __syncthreads();
}

template <int kHead>
__global__ void Forward(AttnDev a, int64_t tile) {
  extern __shared__ float smem[];
  const int64_t E = kHead ? kHead : a.E, Ev = kHead ? kHead : a.Ev;
  float* ks = smem;
  float* vs = smem + tile * E;
  const int64_t b = blockIdx.y, i0 = int64_t(blockIdx.x) * kRows, i = i0 + threadIdx.x;
  const AttnOffsets o = AttnOffsetsOf(a.batch, b);
  const bool active = i < a.L;
  float q[kHead ? kHead : kMaxHead], acc[kHead ? kHead : kMaxHead];
#pragma unroll
  for (int64_t e = 0; e < E; ++e) q[e] = active ? a.q[o.q + i * E + e] : 0.f;
#pragma unroll
  for (int64_t e = 0; e < Ev; ++e) acc[e] = 0.f;
  float m = -INFINITY, l = 0.f;
  const uint32_t key = active ? RowKey(a, b, i) : 0u;
  const int64_t S = a.causal ? min(a.S, i0 + kRows) : a.S;
  for (int64_t j0 = 0; j0 < S; j0 += tile) {
    const int64_t n = min(tile, S - j0);
    StageKeys(a, o, j0, n, ks, vs);
    if (!active) continue;
    for (int64_t c = 0; c < n; ++c) {
      float dot = 0.f;
#pragma unroll
      for (int64_t e = 0; e < E; ++e) dot += q[e] * ks[c * E + e];
      const float s = Score(a, o, i, j0 + c, dot);
      const float m_new = s > m ? s : m;  // NaN reaches the output through p
      if (m_new == -INFINITY) continue;  // nothing kept so far
      const float corr = m == -INFINITY ? 0.f : expf(m - m_new), p = expf(s - m_new);
      l = l * corr + p;
      const float pd = p * DropFactor(a, key, j0 + c);
#pragma unroll
      for (int64_t e = 0; e < Ev; ++e) acc[e] = acc[e] * corr + pd * vs[c * Ev + e];
      m = m_new;
    }
  }
  if (!active) return;
  const float inv = l == 0.f ? 0.f : 1.f / l;  // every key masked: zeros
#pragma unroll
  for (int64_t e = 0; e < Ev; ++e) a.out[(b * a.L + i) * Ev + e] = acc[e] * inv;
  a.lse[b * a.L + i] = l == 0.f ? kAttnMaskedLse : m + logf(l);
}

__global__ void RowDots(AttnDev a) {
  SINGA_GRID_STRIDE(r, a.nb * a.L) {
    float d = 0.f;
    for (int64_t e = 0; e < a.Ev; ++e) d += a.dout[r * a.Ev + e] * a.out_in[r * a.Ev + e];
    a.D[r] = d;
  }
}

// p(i, j) recomputed from the saved lse (kAttnMaskedLse for a fully masked row: p = 0).
__device__ __forceinline__ float Prob(float s, float lse) { return expf(s - lse); }

// dK, dV of keys [j0, j0 + kRows): queries staged tile by tile (q, dO, lse, D).
template <int kHead>
__global__ void BackwardKV(AttnDev a, int64_t tile) {
  extern __shared__ float smem[];
  const int64_t E = kHead ? kHead : a.E, Ev = kHead ? kHead : a.Ev;
  float* qs = smem;
  float* dos = qs + tile * E;
  float* lses = dos + tile * Ev;
  float* Ds = lses + tile;
  const int64_t b = blockIdx.y, j0 = int64_t(blockIdx.x) * kRows, j = j0 + threadIdx.x;
  const AttnOffsets o = AttnOffsetsOf(a.batch, b);
  const bool active = j < a.S;
  constexpr int kArr = kHead ? kHead : kMaxHead;
  float k[kArr], v[kArr], dk[kArr], dv[kArr];
#pragma unroll
  for (int64_t e = 0; e < E; ++e) {
    k[e] = active ? a.k[o.k + j * E + e] : 0.f;
    dk[e] = 0.f;
  }
#pragma unroll
  for (int64_t e = 0; e < Ev; ++e) {
    v[e] = active ? a.v[o.v + j * Ev + e] : 0.f;
    dv[e] = 0.f;
  }
  const int64_t first = a.causal ? j0 : 0;  // earlier queries see none of these keys
  for (int64_t i0 = first; i0 < a.L; i0 += tile) {
    const int64_t n = min(tile, a.L - i0);
    __syncthreads();
    Stage(a.q + o.q, i0, n, E, a.L, qs);
    Stage(a.dout + b * a.L * Ev, i0, n, Ev, a.L, dos);
    Stage(a.lse_in + b * a.L, i0, n, 1, a.L, lses);
    Stage(a.D_in + b * a.L, i0, n, 1, a.L, Ds);
    __syncthreads();
    if (!active) continue;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = i0 + r;
      const float* qi = qs + r * E;
      const float* doi = dos + r * Ev;
      float dot = 0.f, dp = 0.f;
#pragma unroll
      for (int64_t e = 0; e < E; ++e) dot += qi[e] * k[e];
      const float p = Prob(Score(a, o, i, j, dot), lses[r]);
      const float drop = DropFactor(a, RowKey(a, b, i), j);
#pragma unroll
      for (int64_t e = 0; e < Ev; ++e) {
        dv[e] += p * drop * doi[e];
        dp += doi[e] * v[e];
      }
      const float ds = p * (dp * drop - Ds[r]) * a.scale;
#pragma unroll
      for (int64_t e = 0; e < E; ++e) dk[e] += ds * qi[e];
    }
  }
  if (!active) return;
#pragma unroll
  for (int64_t e = 0; e < E; ++e) a.dk[(b * a.S + j) * E + e] = dk[e];
#pragma unroll
  for (int64_t e = 0; e < Ev; ++e) a.dv[(b * a.S + j) * Ev + e] = dv[e];
}

// dQ of queries [i0, i0 + kRows): keys and values staged tile by tile.
template <int kHead>
__global__ void BackwardQ(AttnDev a, int64_t tile) {
  extern __shared__ float smem[];
  const int64_t E = kHead ? kHead : a.E, Ev = kHead ? kHead : a.Ev;
  float* ks = smem;
  float* vs = smem + tile * E;
  const int64_t b = blockIdx.y, i0 = int64_t(blockIdx.x) * kRows, i = i0 + threadIdx.x;
  const AttnOffsets o = AttnOffsetsOf(a.batch, b);
  const bool active = i < a.L;
  constexpr int kArr = kHead ? kHead : kMaxHead;
  float q[kArr], dO[kArr], dq[kArr];
#pragma unroll
  for (int64_t e = 0; e < E; ++e) {
    q[e] = active ? a.q[o.q + i * E + e] : 0.f;
    dq[e] = 0.f;
  }
#pragma unroll
  for (int64_t e = 0; e < Ev; ++e) dO[e] = active ? a.dout[(b * a.L + i) * Ev + e] : 0.f;
  const float lse = active ? a.lse_in[b * a.L + i] : 0.f, D = active ? a.D_in[b * a.L + i] : 0.f;
  const uint32_t key = active ? RowKey(a, b, i) : 0u;
  const int64_t S = a.causal ? min(a.S, i0 + kRows) : a.S;
  for (int64_t j0 = 0; j0 < S; j0 += tile) {
    const int64_t n = min(tile, S - j0);
    StageKeys(a, o, j0, n, ks, vs);
    if (!active) continue;
    for (int64_t c = 0; c < n; ++c) {
      const float* kc = ks + c * E;
      const float* vc = vs + c * Ev;
      float dot = 0.f, dp = 0.f;
#pragma unroll
      for (int64_t e = 0; e < E; ++e) dot += q[e] * kc[e];
#pragma unroll
      for (int64_t e = 0; e < Ev; ++e) dp += dO[e] * vc[e];
      const float p = Prob(Score(a, o, i, j0 + c, dot), lse);
      const float ds = p * (dp * DropFactor(a, key, j0 + c) - D) * a.scale;
#pragma unroll
      for (int64_t e = 0; e < E; ++e) dq[e] += ds * kc[e];
    }
  }
  if (!active) return;
#pragma unroll
  for (int64_t e = 0; e < E; ++e) a.dq[(b * a.L + i) * E + e] = dq[e];
}

// Calls f(std::integral_constant<int, kHead>) with kHead the head size when E == Ev is one of
// the specialised sizes, else 0 (the runtime-sized kernels).
template <typename F>
void WithHead(const AttentionArgs& a, F&& f) {
  if (a.E == a.Ev) switch (a.E) {
      case 16: return f(std::integral_constant<int, 16>{});
      case 32: return f(std::integral_constant<int, 32>{});
      case 64: return f(std::integral_constant<int, 64>{});
      case 128: return f(std::integral_constant<int, 128>{});
      default: break;
    }
  f(std::integral_constant<int, 0>{});
}

void CheckHead(const AttentionArgs& a, const char* op) {
  SINGA_CHECK(a.E <= kMaxHead && a.Ev <= kMaxHead, NotImplementedError,
              op << ": the CUDA kernel supports head sizes up to " << kMaxHead << ", got E "
                 << a.E << " and Ev " << a.Ev);
  SINGA_CHECK(a.nb <= 65535, NotImplementedError,
              op << ": the CUDA kernel supports up to 65535 batch-heads, got " << a.nb);
}

// Rows per staged tile so that tiles of `per_row` floats a row fit kSmemFloats (at most 64).
int64_t TileRows(int64_t per_row) {
  return std::max<int64_t>(1, std::min<int64_t>(64, kSmemFloats / std::max<int64_t>(1, per_row)));
}

void AttentionForward(const AttentionArgs& a, Context* ctx) {
  CheckHead(a, "ScaledDotProductAttention");
  AttnDev d = Prepare(a);
  d.out = static_cast<float*>(a.out.block()->mutable_data());
  d.lse = static_cast<float*>(a.lse.block()->mutable_data());
  if (a.L == 0) return;
  const int64_t tile = TileRows(a.E + a.Ev);
  const dim3 grid(unsigned((a.L + kRows - 1) / kRows), unsigned(a.nb));
  WithHead(a, [&](auto head) {
    Forward<decltype(head)::value>
        <<<grid, kRows, size_t(tile * (a.E + a.Ev)) * sizeof(float), Stream(ctx)>>>(d, tile);
  });
  SINGA_CUDA_CHECK_LAUNCH("ScaledDotProductAttention");
}

void AttentionBackward(const AttentionArgs& a, Context* ctx) {
  const char* op = "ScaledDotProductAttentionBackward";
  CheckHead(a, op);
  AttnDev d = Prepare(a);
  d.dout = static_cast<const float*>(a.dout.block()->data());
  d.out_in = static_cast<const float*>(a.out.block()->data());
  d.lse_in = static_cast<const float*>(a.lse.block()->data());
  d.D = static_cast<float*>(a.work.block()->mutable_data());
  d.D_in = d.D;
  if (a.L == 0 || a.S == 0) {  // no query or no key: the gradients that exist are zeros
    for (const Tensor* t : {&a.dq, &a.dk, &a.dv})
      if (t->Size() > 0)
        SINGA_CUDA_CHECK(
            cudaMemsetAsync(t->block()->mutable_data(), 0, t->MemSize(), Stream(ctx)), op);
    return;
  }
  d.dq = static_cast<float*>(a.dq.block()->mutable_data());
  d.dk = static_cast<float*>(a.dk.block()->mutable_data());
  d.dv = static_cast<float*>(a.dv.block()->mutable_data());
  RowDots<<<Blocks(size_t(a.nb * a.L)), kThreads, 0, Stream(ctx)>>>(d);
  SINGA_CUDA_CHECK_LAUNCH(op);
  const int64_t qtile = TileRows(a.E + a.Ev + 2);
  const dim3 kv_grid(unsigned((a.S + kRows - 1) / kRows), unsigned(a.nb));
  WithHead(a, [&](auto head) {
    BackwardKV<decltype(head)::value>
        <<<kv_grid, kRows, size_t(qtile * (a.E + a.Ev + 2)) * sizeof(float), Stream(ctx)>>>(
            d, qtile);
  });
  SINGA_CUDA_CHECK_LAUNCH(op);
  const int64_t ktile = TileRows(a.E + a.Ev);
  const dim3 q_grid(unsigned((a.L + kRows - 1) / kRows), unsigned(a.nb));
  WithHead(a, [&](auto head) {
    BackwardQ<decltype(head)::value>
        <<<q_grid, kRows, size_t(ktile * (a.E + a.Ev)) * sizeof(float), Stream(ctx)>>>(d, ktile);
  });
  SINGA_CUDA_CHECK_LAUNCH(op);
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(AttentionForward, kCuda, cuda::AttentionForward);
SINGA_REGISTER_KERNEL(AttentionBackward, kCuda, cuda::AttentionBackward);

}  // namespace singa
