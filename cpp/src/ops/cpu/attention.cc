// CPU kernels of the fused attention (front: ../attention.cc), FlashAttention-2 on tiles.
//
// Forward: one task per (batch-head, block of kQ query rows); the keys go by in tiles of kK:
// S = scale Q K^T (sgemm), mask, online softmax (running max m and sum l per row, the output
// accumulator rescaled when m grows), acc += P V (sgemm). The output is acc / l and the saved
// lse = m + log(l). Backward: D = rowsum(dO * O) per row first; then one task per (batch-head,
// share of the key tiles) recomputes P = exp(S - lse) tile by tile and accumulates
// dV += P^T dO, dP = dO V^T, dS = P (dP - D), dQ += scale dS K, dK += scale dS^T Q.
// A task owns its dK / dV rows; dQ is shared by the tasks of one batch-head, so when there are
// fewer batch-heads than threads each task adds into a private (L, E) copy, summed at the end.
// Scratch is per thread and O(kQ * kK + L * E): nothing is (L, S).
//
// The tile products are single-threaded OpenBLAS sgemm calls inside the OpenMP region (the
// OpenMP build of OpenBLAS runs one thread there). The elementwise passes (exp, masks, dropout)
// are loops the compiler vectorises, built for AVX-512, AVX2 and the baseline and picked at load
// time (target_clones): the library's baseline ISA (x86-64-v2) has no AVX.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../attention_kernel.h"
#include "../strided.h"

namespace singa {
namespace cpu {
namespace {

constexpr int64_t kQ = 64, kK = 256;  // query rows and keys per tile
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define SINGA_ATTN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SINGA_ATTN_CLONES
#endif

// exp(x) within 2 ulp for x <= 88, written so that it vectorises: 2^n * p(r) with r = x - n ln2.
// exp(-inf) and anything below -87.3 give 0; NaN stays NaN.
inline float Exp(float x) {
  const float lo = -87.3f, hi = 88.7f;
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  float fn = std::floor(xc * 1.44269504f + 0.5f);
  fn = fn == fn ? fn : 0.f;  // NaN: any finite n keeps the NaN of p
  float r = xc - fn * 0.693359375f;
  r -= fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const int32_t bits = (int32_t(fn) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < lo ? 0.f : p * scale;
}

// s[c] = exp(s[c] - m) for c < n; returns the sum.
SINGA_ATTN_CLONES float ExpShiftSum(float* s, int64_t n, float m) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) {
    const float e = Exp(s[c] - m);
    s[c] = e;
    sum += e;
  }
  return sum;
}

// Largest value of s[0..n), ignoring NaN (NaN reaches the output through exp anyway).
SINGA_ATTN_CLONES float RowMax(const float* s, int64_t n) {
  float m = kNegInf;
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < n; ++c) m = s[c] > m ? s[c] : m;
  return m;
}

// p[c] *= 1/(1-p) where the hash keeps column j0 + c, else 0.
SINGA_ATTN_CLONES void Dropout(float* p, int64_t n, uint32_t row_key, int64_t j0, uint32_t thr,
                               float inv_keep) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) p[c] = AttnKeep(row_key, j0 + c, thr) ? p[c] * inv_keep : 0.f;
}

// ds[c] = p[c] * (dp[c] * drop[c] - d) where drop is the dropout factor (1 without dropout).
SINGA_ATTN_CLONES void SoftmaxGrad(const float* p, float* dp, int64_t n, float d) {
#pragma omp simd
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

// The scores tile rows [i0, i0+bq) x keys [j0, j0+bk) of batch b: s = scale q k^T, then the mask
// (or the causal cut) applied. ld = kK.
void Scores(const AttentionArgs& a, const AttnOffsets& off, int64_t i0, int64_t bq, int64_t j0,
            int64_t bk, float* s) {
  const float* q = static_cast<const float*>(a.q.block()->data()) + off.q + i0 * a.E;
  const float* k = static_cast<const float*>(a.k.block()->data()) + off.k + j0 * a.E;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(bq), int(bk), int(a.E), a.scale, q,
              int(a.E), k, int(a.E), 0.f, s, int(kK));
  if (a.causal) {
    for (int64_t r = 0; r < bq; ++r) {
      const int64_t keep = std::clamp<int64_t>(i0 + r - j0 + 1, 0, bk);
      std::fill(s + r * kK + keep, s + r * kK + bk, kNegInf);
    }
  } else if (a.mask_kind == kAttnKeepMask) {
    const int32_t* m = static_cast<const int32_t*>(a.mask.block()->data()) + off.m;
    for (int64_t r = 0; r < bq; ++r) {
      const int32_t* mr = m + (i0 + r) * a.mask_row + j0 * a.mask_col;
      float* sr = s + r * kK;
      for (int64_t c = 0; c < bk; ++c) sr[c] = mr[c * a.mask_col] != 0 ? sr[c] : kNegInf;
    }
  } else if (a.mask_kind == kAttnAddMask) {
    const float* m = static_cast<const float*>(a.mask.block()->data()) + off.m;
    for (int64_t r = 0; r < bq; ++r) {
      const float* mr = m + (i0 + r) * a.mask_row + j0 * a.mask_col;
      float* sr = s + r * kK;
      for (int64_t c = 0; c < bk; ++c) sr[c] += mr[c * a.mask_col];
    }
  }
}

// Key tiles a query block [i0, i0+bq) sees: all, or up to its last row when causal.
int64_t KeysSeen(const AttentionArgs& a, int64_t i0, int64_t bq) {
  return a.causal ? std::min(a.S, i0 + bq) : a.S;
}

void ForwardBlock(const AttentionArgs& a, const Seed& seed, int64_t b, int64_t i0, float* s,
                  float* acc, float* m, float* l) {
  const int64_t bq = std::min(kQ, a.L - i0), Ev = a.Ev;
  const AttnOffsets off = AttnOffsetsOf(a.batch, b);
  const float* v = static_cast<const float*>(a.v.block()->data()) + off.v;
  std::fill(acc, acc + bq * Ev, 0.f);
  std::fill(m, m + bq, kNegInf);
  std::fill(l, l + bq, 0.f);
  const int64_t S = KeysSeen(a, i0, bq);
  for (int64_t j0 = 0; j0 < S; j0 += kK) {
    const int64_t bk = std::min(kK, S - j0);
    Scores(a, off, i0, bq, j0, bk, s);
    for (int64_t r = 0; r < bq; ++r) {
      float* sr = s + r * kK;
      const float m_new = std::max(m[r], RowMax(sr, bk));
      // all -inf so far: p = exp(-inf) = 0 without the NaN of -inf - -inf
      const float shift = m_new == kNegInf ? 0.f : m_new;
      const float corr = m[r] == kNegInf ? 0.f : Exp(m[r] - shift);
      l[r] = l[r] * corr + ExpShiftSum(sr, bk, shift);
      m[r] = m_new;
      if (corr != 1.f) {
        float* ar = acc + r * Ev;
        for (int64_t c = 0; c < Ev; ++c) ar[c] *= corr;
      }
      if (seed.on)
        Dropout(sr, bk, AttnRowKey(seed.s0, seed.s1, b, i0 + r), j0, seed.thr, seed.inv_keep);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(bq), int(Ev), int(bk), 1.f, s,
                int(kK), v + j0 * Ev, int(Ev), 1.f, acc, int(Ev));
  }
  float* out = static_cast<float*>(a.out.block()->mutable_data()) + (b * a.L + i0) * Ev;
  float* lse = static_cast<float*>(a.lse.block()->mutable_data()) + b * a.L + i0;
  for (int64_t r = 0; r < bq; ++r) {
    // l == 0: every key masked; the row is zeros (PyTorch 2.13), lse -inf
    const float inv = l[r] == 0.f ? 0.f : 1.f / l[r];
    for (int64_t c = 0; c < Ev; ++c) out[r * Ev + c] = acc[r * Ev + c] * inv;
    lse[r] = l[r] == 0.f ? kNegInf : m[r] + std::log(l[r]);
  }
}

void AttentionForward(const AttentionArgs& a, Context*) {
  const Seed seed = ReadSeed(a);
  const int64_t qblocks = (a.L + kQ - 1) / kQ, tasks = a.nb * qblocks;
#pragma omp parallel if (tasks > 1)
  {
    std::vector<float> s(size_t(kQ * kK)), acc(size_t(kQ * a.Ev)), m(kQ), l(kQ);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t)
      ForwardBlock(a, seed, t / qblocks, (t % qblocks) * kQ, s.data(), acc.data(), m.data(),
                   l.data());
  }
}

// ---- backward ----

struct BwdScratch {
  std::vector<float> p, dp, pd;
};

// dK, dV of key tile [j0, j0+bk) of batch b (rows of a.dk / a.dv, owned by this task), and the
// tile's share of dQ added into dq (rows of batch b: (L, E)).
void BackwardKeyTile(const AttentionArgs& a, const Seed& seed, int64_t b, int64_t j0,
                     BwdScratch* w, float* dq) {
  const int64_t bk = std::min(kK, a.S - j0), E = a.E, Ev = a.Ev;
  const AttnOffsets off = AttnOffsetsOf(a.batch, b);
  const float* q = static_cast<const float*>(a.q.block()->data()) + off.q;
  const float* k = static_cast<const float*>(a.k.block()->data()) + off.k + j0 * E;
  const float* v = static_cast<const float*>(a.v.block()->data()) + off.v + j0 * Ev;
  const float* dout = static_cast<const float*>(a.dout.block()->data()) + b * a.L * Ev;
  const float* lse = static_cast<const float*>(a.lse.block()->data()) + b * a.L;
  const float* D = static_cast<const float*>(a.work.block()->data()) + b * a.L;
  float* dk = static_cast<float*>(a.dk.block()->mutable_data()) + (b * a.S + j0) * E;
  float* dv = static_cast<float*>(a.dv.block()->mutable_data()) + (b * a.S + j0) * Ev;
  std::fill(dk, dk + bk * E, 0.f);
  std::fill(dv, dv + bk * Ev, 0.f);
  float *p = w->p.data(), *dp = w->dp.data(), *pd = seed.on ? w->pd.data() : p;
  const int64_t first = a.causal ? j0 / kQ * kQ : 0;  // earlier queries see none of the tile
  for (int64_t i0 = first; i0 < a.L; i0 += kQ) {
    const int64_t bq = std::min(kQ, a.L - i0);
    Scores(a, off, i0, bq, j0, bk, p);
    for (int64_t r = 0; r < bq; ++r) {
      float* pr = p + r * kK;
      const float shift = lse[i0 + r];
      if (shift == kNegInf) {  // a fully masked row: no probability, no gradient
        std::fill(pr, pr + bk, 0.f);
      } else {
        ExpShiftSum(pr, bk, shift);
      }
      if (seed.on) {
        std::copy(pr, pr + bk, pd + r * kK);
        Dropout(pd + r * kK, bk, AttnRowKey(seed.s0, seed.s1, b, i0 + r), j0, seed.thr,
                seed.inv_keep);
      }
    }
    const float* dout_i = dout + i0 * Ev;
    // dV += Pd^T dO
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(bk), int(Ev), int(bq), 1.f, pd,
                int(kK), dout_i, int(Ev), 1.f, dv, int(Ev));
    // dP = dO V^T, through the dropout; dS = P (dP - D)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(bq), int(bk), int(Ev), 1.f, dout_i,
                int(Ev), v, int(Ev), 0.f, dp, int(kK));
    for (int64_t r = 0; r < bq; ++r) {
      float* dpr = dp + r * kK;
      if (seed.on)
        Dropout(dpr, bk, AttnRowKey(seed.s0, seed.s1, b, i0 + r), j0, seed.thr, seed.inv_keep);
      SoftmaxGrad(p + r * kK, dpr, bk, D[i0 + r]);
    }
    // dQ += scale dS K, dK += scale dS^T Q
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(bq), int(E), int(bk), a.scale, dp,
                int(kK), k, int(E), 1.f, dq + i0 * E, int(E));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(bk), int(E), int(bq), a.scale, dp,
                int(kK), q + i0 * E, int(E), 1.f, dk, int(E));
  }
}

// D[b, i] = sum_c dO[b, i, c] * O[b, i, c].
void RowDots(const AttentionArgs& a) {
  const float* dout = static_cast<const float*>(a.dout.block()->data());
  const float* out = static_cast<const float*>(a.out.block()->data());
  float* D = static_cast<float*>(a.work.block()->mutable_data());
  const int64_t rows = a.nb * a.L, Ev = a.Ev;
#pragma omp parallel for schedule(static) if (rows * Ev >= int64_t(kParallelGrain))
  for (int64_t i = 0; i < rows; ++i) {
    float d = 0.f;
    for (int64_t c = 0; c < Ev; ++c) d += dout[i * Ev + c] * out[i * Ev + c];
    D[i] = d;
  }
}

void AttentionBackward(const AttentionArgs& a, Context*) {
  const Seed seed = ReadSeed(a);
  float* dq = static_cast<float*>(a.dq.block()->mutable_data());
  std::fill(dq, dq + a.nb * a.L * a.E, 0.f);
  if (a.S == 0) return;  // no key: every gradient is zero (dk, dv are empty)
  RowDots(a);
  const int64_t nt = MaxThreads(), ktiles = (a.S + kK - 1) / kK;
  // key tiles of one batch-head split into `chunks` interleaved shares when batch-heads are few
  const int64_t chunks = a.nb >= nt ? 1 : std::min(ktiles, (nt + a.nb - 1) / a.nb);
  const int64_t tasks = a.nb * chunks, LE = a.L * a.E;
  std::vector<float> partial(chunks > 1 ? size_t(tasks * LE) : 0, 0.f);
#pragma omp parallel if (tasks > 1)
  {
    BwdScratch w;
    w.p.resize(size_t(kQ * kK));
    w.dp.resize(size_t(kQ * kK));
    if (seed.on) w.pd.resize(size_t(kQ * kK));
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t b = t / chunks, c = t % chunks;
      float* dq_b = chunks > 1 ? partial.data() + t * LE : dq + b * LE;
      for (int64_t kt = c; kt < ktiles; kt += chunks) BackwardKeyTile(a, seed, b, kt * kK, &w, dq_b);
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

SINGA_REGISTER_KERNEL(AttentionForward, kCpuRef, &AttentionForward);
SINGA_REGISTER_KERNEL(AttentionBackward, kCpuRef, &AttentionBackward);
// oneDNN has no fused attention primitive in the version we build against: the tiles above
// already call sgemm, so the reference kernels run.
SINGA_KERNEL_FALLBACK(AttentionForward, kCpuDnnl, kCpuRef);
SINGA_KERNEL_FALLBACK(AttentionBackward, kCpuDnnl, kCpuRef);

}  // namespace cpu
}  // namespace singa
