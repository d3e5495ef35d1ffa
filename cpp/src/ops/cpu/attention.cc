// CPU kernels of the fused attention (front: ../attention.cc), FlashAttention-2 on tiles.
//
// Forward: one task per (batch-head, block of kQ query rows); the keys go by in tiles of kK:
// S = scale Q K^T, mask, online softmax (running max m and sum l per row, the output
// accumulator rescaled when m grows), acc += P V. The output is acc / l and the saved
// lse = m + log(l). Backward: D = rowsum(dO * O) per row first; then one task per (batch-head,
// share of the key tiles) recomputes P = exp(S - lse) tile by tile and accumulates
// dV += P^T dO, dP = dO V^T, dS = P (dP - D), dQ += scale dS K, dK += scale dS^T Q.
// A task owns its dK / dV rows; dQ is shared by the tasks of one batch-head, so when there are
// fewer batch-heads than threads each task adds into a private (L, E) copy, summed at the end.
// Scratch, allocated by the kernel: O(S * E + kQ * kK) per thread (a batch's transposed keys,
// the tiles) and, in the backward with fewer batch-heads than threads, the dQ copies, O(L * E)
// each: nothing is (L, S).
//
// The tile products and the elementwise passes (exp, dropout, dS) go through AttnTiles()
// (attention_tiles.h): AVX-512 register-blocked loops where the CPU has AVX-512, else
// single-threaded OpenBLAS sgemm calls (the OpenMP build of OpenBLAS runs one thread inside our
// parallel region) and plain loops. Keys (and in the backward values) are transposed (E x keys)
// so that every product streams rows of its right operand.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../attention_kernel.h"
#include "../strided.h"
#include "attention_tiles.h"

namespace singa {
namespace cpu {
namespace {

constexpr int64_t kQ = 128, kK = 256;  // query rows and keys per tile
// Row stride of the tile buffers: kK plus one cache line, so that the rows of a tile do not all
// fall into the same few L1 sets (a stride of a multiple of 4 KiB maps every row to one set).
constexpr int64_t kPad = 16, kLd = kK + kPad;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---- the portable tile primitives (attention_tiles.h; AVX-512 ones in attention_avx512.cc) ----

void PortableGemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t sai,
                  int64_t sak, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // A row-major (element (i, k) at i * sai + k), else stored transposed (at i + k * sak); with
  // one row or one column both strides can be 1, and the leading dimension decides
  const bool plain = sak == 1 && sai >= std::max<int64_t>(1, k);
  cblas_sgemm(CblasRowMajor, plain ? CblasNoTrans : CblasTrans, CblasNoTrans, int(m), int(n),
              int(k), alpha, a, int(plain ? sai : sak), b, int(ldb), beta, c, int(ldc));
}

// exp(x) within 2 ulp for x <= 88: 2^n * p(r) with r = x - n ln2 (Cephes' expf polynomial).
// exp(-inf) and anything below -87.3 give 0; NaN stays NaN.
inline float Exp(float x) {
  const float lo = -87.3f;
  if (!(x >= lo)) return x < lo ? 0.f : x;  // NaN returned as is
  const float xc = x > 88.7f ? 88.7f : x;
  const float fn = std::nearbyint(xc * 1.44269504f);
  float r = xc - fn * 0.693359375f;
  r -= fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  return std::ldexp(p, int(fn));
}

float PortableExpShiftSum(float* s, int64_t n, float m) {
  float sum = 0.f;
  for (int64_t c = 0; c < n; ++c) {
    s[c] = Exp(s[c] - m);
    sum += s[c];
  }
  return sum;
}

float PortableRowMax(const float* s, int64_t n) {
  float m = kNegInf;
  for (int64_t c = 0; c < n; ++c) m = s[c] > m ? s[c] : m;
  return m;
}

void PortableDropout(float* p, int64_t n, uint32_t row_key, int64_t j0, uint32_t thr,
                     float inv_keep) {
  for (int64_t c = 0; c < n; ++c) p[c] = AttnKeep(row_key, j0 + c, thr) ? p[c] * inv_keep : 0.f;
}

void PortableSoftmaxGrad(const float* p, float* dp, int64_t n, float d) {
  for (int64_t c = 0; c < n; ++c) dp[c] = p[c] * (dp[c] - d);
}

struct Seed {
  uint32_t s0 = 0, s1 = 0, thr = 0;
  float inv_keep = 1.f;
  bool on = false;
};

Seed ReadSeed(const AttentionArgs& a) {
  Seed s;
  if (a.dropout_p <= 0.f) return s;
  const float* p = static_cast<const float*>(a.seed.block()->data());
  s.s0 = AttnFloatBits(p[0]);
  s.s1 = AttnFloatBits(p[1]);
  s.thr = AttnDropThreshold(a.dropout_p);
  s.inv_keep = 1.f / (1.f - a.dropout_p);
  s.on = true;
  return s;
}

// The operands' memory, looked up once before any parallel region: Block::data() and
// mutable_data() allocate on first use, which two threads must never race to do.
struct Mem {
  const float *q, *k, *v;
  const void* mask;
  float *out = nullptr, *lse = nullptr;                           // forward
  const float *dout = nullptr, *lse_in = nullptr, *D = nullptr;  // backward
  float *dk = nullptr, *dv = nullptr;                             // backward
};

Mem Inputs(const AttentionArgs& a) {
  Mem m;
  m.q = static_cast<const float*>(a.q.block()->data());
  m.k = static_cast<const float*>(a.k.block()->data());
  m.v = static_cast<const float*>(a.v.block()->data());
  m.mask = a.mask.block() != nullptr ? a.mask.block()->data() : nullptr;
  return m;
}

// The n rows of x (row length d) transposed into t (d x n, row stride ldt), in 8 x 8 blocks.
void Transpose(const float* x, int64_t d, int64_t n, float* t, int64_t ldt) {
  for (int64_t c0 = 0; c0 < n; c0 += 8)
    for (int64_t e0 = 0; e0 < d; e0 += 8) {
      const int64_t c1 = std::min(n, c0 + 8), e1 = std::min(d, e0 + 8);
      for (int64_t e = e0; e < e1; ++e)
        for (int64_t c = c0; c < c1; ++c) t[e * ldt + c] = x[c * d + e];
    }
}

// The scores tile rows [i0, i0+bq) x keys [j0, j0+bk) of batch b: s = scale q k^T (kt: the key
// tile transposed, E x bk with row stride ldkt), then the mask (or the causal cut) applied.
// Row stride kLd.
void Scores(const AttnTileOps& t, const AttentionArgs& a, const Mem& mem, const AttnOffsets& off,
            int64_t i0, int64_t bq, int64_t j0, int64_t bk, const float* kt, int64_t ldkt,
            float* s) {
  const float* q = mem.q + off.q + i0 * a.E;
  t.gemm(bq, bk, a.E, a.scale, q, a.E, 1, kt, ldkt, 0.f, s, kLd);
  if (a.causal) {
    for (int64_t r = 0; r < bq; ++r) {
      const int64_t keep = std::clamp<int64_t>(i0 + r - j0 + 1, 0, bk);
      std::fill(s + r * kLd + keep, s + r * kLd + bk, kNegInf);
    }
  } else if (a.mask_kind == kAttnKeepMask) {
    const int32_t* m = static_cast<const int32_t*>(mem.mask) + off.m;
    for (int64_t r = 0; r < bq; ++r) {
      const int32_t* mr = m + (i0 + r) * a.mask_row + j0 * a.mask_col;
      float* sr = s + r * kLd;
      for (int64_t c = 0; c < bk; ++c) sr[c] = mr[c * a.mask_col] != 0 ? sr[c] : kNegInf;
    }
  } else if (a.mask_kind == kAttnAddMask) {
    const float* m = static_cast<const float*>(mem.mask) + off.m;
    for (int64_t r = 0; r < bq; ++r) {
      const float* mr = m + (i0 + r) * a.mask_row + j0 * a.mask_col;
      float* sr = s + r * kLd;
      for (int64_t c = 0; c < bk; ++c) sr[c] += mr[c * a.mask_col];
    }
  }
}

// Keys a query block [i0, i0+bq) sees: all, or up to its last row when causal.
int64_t KeysSeen(const AttentionArgs& a, int64_t i0, int64_t bq) {
  return a.causal ? std::min(a.S, i0 + bq) : a.S;
}

struct FwdScratch {
  std::vector<float> s, acc, m, l;
};

// Output rows [i0, i0 + kQ) of batch b; kt: batch b's keys transposed (E x S).
void ForwardBlock(const AttnTileOps& t, const AttentionArgs& a, const Mem& mem, const Seed& seed,
                  int64_t b, int64_t i0, const float* kt, FwdScratch* w) {
  const int64_t bq = std::min(kQ, a.L - i0), Ev = a.Ev;
  const AttnOffsets off = AttnOffsetsOf(a.batch, b);
  const float* v = mem.v + off.v;
  float *s = w->s.data(), *acc = w->acc.data(), *m = w->m.data(), *l = w->l.data();
  std::fill(acc, acc + bq * Ev, 0.f);
  std::fill(m, m + bq, kNegInf);
  std::fill(l, l + bq, 0.f);
  const int64_t S = KeysSeen(a, i0, bq);
  for (int64_t j0 = 0; j0 < S; j0 += kK) {
    const int64_t bk = std::min(kK, S - j0);
    Scores(t, a, mem, off, i0, bq, j0, bk, kt + j0, a.S + kPad, s);
    for (int64_t r = 0; r < bq; ++r) {
      float* sr = s + r * kLd;
      const float m_new = std::max(m[r], t.row_max(sr, bk));
      // all -inf so far: p = exp(-inf) = 0 without the NaN of -inf - -inf
      const float shift = m_new == kNegInf ? 0.f : m_new;
      const float corr = m[r] == kNegInf ? 0.f : Exp(m[r] - shift);
      l[r] = l[r] * corr + t.exp_shift_sum(sr, bk, shift);
      m[r] = m_new;
      if (corr != 1.f) {
        float* ar = acc + r * Ev;
        for (int64_t c = 0; c < Ev; ++c) ar[c] *= corr;
      }
      if (seed.on)
        t.dropout(sr, bk, AttnRowKey(seed.s0, seed.s1, b, i0 + r), j0, seed.thr, seed.inv_keep);
    }
    t.gemm(bq, Ev, bk, 1.f, s, kLd, 1, v + j0 * Ev, Ev, 1.f, acc, Ev);
  }
  float* out = mem.out + (b * a.L + i0) * Ev;
  float* lse = mem.lse + b * a.L + i0;
  for (int64_t r = 0; r < bq; ++r) {
    // l == 0: every key masked; the row is zeros (PyTorch 2.13), written as zeros: acc * 0
    // kept the NaN of p = 0 times an inf or NaN value (the CUDA kernel skips those keys)
    const bool masked = l[r] == 0.f;
    const float inv = masked ? 0.f : 1.f / l[r];
    for (int64_t c = 0; c < Ev; ++c) out[r * Ev + c] = masked ? 0.f : acc[r * Ev + c] * inv;
    lse[r] = l[r] == 0.f ? kAttnMaskedLse : m[r] + std::log(l[r]);
  }
}

void AttentionForward(const AttentionArgs& a, Context*) {
  const AttnTileOps& t = AttnTiles();
  const Seed seed = ReadSeed(a);
  const int64_t qblocks = (a.L + kQ - 1) / kQ, tasks = a.nb * qblocks, ldk = a.S + kPad;
  Mem mem = Inputs(a);
  mem.out = static_cast<float*>(a.out.block()->mutable_data());
  mem.lse = static_cast<float*>(a.lse.block()->mutable_data());
#pragma omp parallel if (tasks > 1)
  {
    // every query block reads all of its batch's keys: each thread keeps the keys of the batch
    // it works on transposed (E x S, rows padded as kLd is); tasks go batch by batch, so it
    // transposes again only when it moves to another batch
    std::vector<float> kt(size_t(a.E * ldk));
    int64_t kt_of = -1;
    FwdScratch w;
    w.s.resize(size_t(kQ * kLd));
    w.acc.resize(size_t(kQ * a.Ev));
    w.m.resize(kQ);
    w.l.resize(kQ);
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < tasks; ++i) {
      const int64_t b = i / qblocks;
      if (b != kt_of) {
        Transpose(mem.k + AttnOffsetsOf(a.batch, b).k, a.E, a.S, kt.data(), ldk);
        kt_of = b;
      }
      ForwardBlock(t, a, mem, seed, b, (i % qblocks) * kQ, kt.data(), &w);
    }
  }
}

// ---- backward ----

struct BwdScratch {
  std::vector<float> p, dp, pd, kt, vt;
};

// dK, dV of key tile [j0, j0+bk) of batch b (rows of a.dk / a.dv, owned by this task), and the
// tile's share of dQ added into dq (rows of batch b: (L, E)).
void BackwardKeyTile(const AttnTileOps& t, const AttentionArgs& a, const Mem& mem,
                     const Seed& seed, int64_t b, int64_t j0, BwdScratch* w, float* dq) {
  const int64_t bk = std::min(kK, a.S - j0), E = a.E, Ev = a.Ev;
  const AttnOffsets off = AttnOffsetsOf(a.batch, b);
  const float* q = mem.q + off.q;
  const float* k = mem.k + off.k + j0 * E;
  const float* v = mem.v + off.v + j0 * Ev;
  const float* dout = mem.dout + b * a.L * Ev;
  const float* lse = mem.lse_in + b * a.L;
  const float* D = mem.D + b * a.L;
  float* dk = mem.dk + (b * a.S + j0) * E;
  float* dv = mem.dv + (b * a.S + j0) * Ev;
  std::fill(dk, dk + bk * E, 0.f);
  std::fill(dv, dv + bk * Ev, 0.f);
  float *p = w->p.data(), *dp = w->dp.data(), *pd = seed.on ? w->pd.data() : p;
  Transpose(k, E, bk, w->kt.data(), kLd);
  Transpose(v, Ev, bk, w->vt.data(), kLd);
  const int64_t first = a.causal ? j0 / kQ * kQ : 0;  // earlier queries see none of the tile
  for (int64_t i0 = first; i0 < a.L; i0 += kQ) {
    const int64_t bq = std::min(kQ, a.L - i0);
    // causal: the block's rows see the tile's keys up to its last row only; the keys after
    // have p = 0 for every row, so their products are skipped (as the forward's KeysSeen
    // does), not multiplied by zero: at L = S = 256 a quarter of the backward's work
    const int64_t n = a.causal ? std::min(bk, i0 + bq - j0) : bk;
    if (n <= 0) continue;
    Scores(t, a, mem, off, i0, bq, j0, n, w->kt.data(), kLd, p);
    for (int64_t r = 0; r < bq; ++r) {
      float* pr = p + r * kLd;
      t.exp_shift_sum(pr, n, lse[i0 + r]);  // a fully masked row: kAttnMaskedLse, p = 0
      if (seed.on) {
        std::copy(pr, pr + n, pd + r * kLd);
        t.dropout(pd + r * kLd, n, AttnRowKey(seed.s0, seed.s1, b, i0 + r), j0, seed.thr,
                  seed.inv_keep);
      }
    }
    const float* dout_i = dout + i0 * Ev;
    t.gemm(n, Ev, bq, 1.f, pd, 1, kLd, dout_i, Ev, 1.f, dv, Ev);             // dV += Pd^T dO
    t.gemm(bq, n, Ev, 1.f, dout_i, Ev, 1, w->vt.data(), kLd, 0.f, dp, kLd);  // dP = dO V^T
    for (int64_t r = 0; r < bq; ++r) {  // through the dropout, then dS = P (dP - D)
      float* dpr = dp + r * kLd;
      if (seed.on)
        t.dropout(dpr, n, AttnRowKey(seed.s0, seed.s1, b, i0 + r), j0, seed.thr, seed.inv_keep);
      t.softmax_grad(p + r * kLd, dpr, n, D[i0 + r]);
    }
    t.gemm(bq, E, n, a.scale, dp, kLd, 1, k, E, 1.f, dq + i0 * E, E);  // dQ += scale dS K
    t.gemm(n, E, bq, a.scale, dp, 1, kLd, q + i0 * E, E, 1.f, dk, E);  // dK += scale dS^T Q
  }
}

// D[b, i] = sum_c dO[b, i, c] * O[b, i, c].
void RowDots(const AttentionArgs& a, const float* dout, const float* out, float* D) {
  const int64_t rows = a.nb * a.L, Ev = a.Ev;
#pragma omp parallel for schedule(static) if (rows * Ev >= int64_t(kParallelGrain))
  for (int64_t i = 0; i < rows; ++i) {
    float d = 0.f;
    for (int64_t c = 0; c < Ev; ++c) d += dout[i * Ev + c] * out[i * Ev + c];
    D[i] = d;
  }
}

void AttentionBackward(const AttentionArgs& a, Context*) {
  const AttnTileOps& t = AttnTiles();
  const Seed seed = ReadSeed(a);
  Mem mem = Inputs(a);
  float* dq = static_cast<float*>(a.dq.block()->mutable_data());
  std::fill(dq, dq + a.nb * a.L * a.E, 0.f);
  if (a.S == 0) return;  // no key: every gradient is zero (dk, dv are empty)
  mem.dout = static_cast<const float*>(a.dout.block()->data());
  mem.lse_in = static_cast<const float*>(a.lse.block()->data());
  mem.dk = static_cast<float*>(a.dk.block()->mutable_data());
  mem.dv = static_cast<float*>(a.dv.block()->mutable_data());
  float* D = static_cast<float*>(a.work.block()->mutable_data());
  mem.D = D;
  RowDots(a, mem.dout, static_cast<const float*>(a.out.block()->data()), D);
  const int64_t nt = MaxThreads(), ktiles = (a.S + kK - 1) / kK;
  // key tiles of one batch-head split into `chunks` interleaved shares when batch-heads are few
  const int64_t chunks = a.nb >= nt ? 1 : std::min(ktiles, (nt + a.nb - 1) / a.nb);
  const int64_t tasks = a.nb * chunks, LE = a.L * a.E;
  std::vector<float> partial(chunks > 1 ? size_t(tasks * LE) : 0, 0.f);
#pragma omp parallel if (tasks > 1)
  {
    BwdScratch w;
    w.p.resize(size_t(kQ * kLd));
    w.dp.resize(size_t(kQ * kLd));
    if (seed.on) w.pd.resize(size_t(kQ * kLd));
    w.kt.resize(size_t(a.E * kLd));
    w.vt.resize(size_t(a.Ev * kLd));
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < tasks; ++i) {
      const int64_t b = i / chunks, c = i % chunks;
      float* dq_b = chunks > 1 ? partial.data() + i * LE : dq + b * LE;
      for (int64_t kt = c; kt < ktiles; kt += chunks)
        BackwardKeyTile(t, a, mem, seed, b, kt * kK, &w, dq_b);
    }
  }
  if (chunks > 1) {
#pragma omp parallel for schedule(static) if (tasks * LE >= int64_t(kParallelGrain))
    for (int64_t i = 0; i < a.nb * LE; ++i) {
      const int64_t b = i / LE, e = i % LE;
      float sum = 0.f;
      for (int64_t c = 0; c < chunks; ++c) sum += partial[size_t((b * chunks + c) * LE + e)];
      dq[i] = sum;
    }
  }
}

}  // namespace

const AttnTileOps& PortableAttnTiles() {
  static const AttnTileOps ops = {&PortableGemm, &PortableExpShiftSum, &PortableRowMax,
                                  &PortableDropout, &PortableSoftmaxGrad, "portable"};
  return ops;
}

const AttnTileOps& AttnTiles() {
  static const AttnTileOps* chosen = Avx512AttnTiles();
  return chosen != nullptr ? *chosen : PortableAttnTiles();
}

SINGA_REGISTER_KERNEL(AttentionForward, kCpuRef, &AttentionForward);
SINGA_REGISTER_KERNEL(AttentionBackward, kCpuRef, &AttentionBackward);
// oneDNN has no fused attention primitive in the version we build against: the tiles above
// already call sgemm, so the reference kernels run.

}  // namespace cpu
}  // namespace singa
