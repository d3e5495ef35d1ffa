// The LSTM, GRU and plain RNN layers' host kernels (kCpuRef; front: ../rnn.cc): the walk over
// the steps, shared with the oneDNN backend (dnnl/rnn.cc), which passes oneDNN's sgemm for the
// products.
//
// LSTM, per step: the gates' rows get gx_t + b_hh, one product adds h_{t-1} w_hh (beta = 1),
// then one parallel pass applies rnn_cell::LstmStep to every (n, h). The backward walks the steps
// in the opposite order: a pass of rnn_cell::LstmStepGrad writes dG_t into dgx and the carried dc,
// one product gives dh_{t-1} = dG_t w_hh^T (w_hh transposed once, up front); then dW_hh =
// sum_t h_{t-1}^T dG_t as two products over all steps (h0's row block and the rest, contiguous
// in hs), and db_hh = the column sums of dG (WeightGrads).
// GRU: the recurrent projections gh = h_{t-1} w_hh + b_hh go to a scratch row block, since the
// reset gate multiplies gh's n block before it meets gx; the backward writes both dgx and dgh
// (they differ in the n block by the factor r), adds dgh_t w_hh^T to the direct dh z, and
// WeightGrads takes dgh. The plain RNN computes its pre-activation in hs itself and its
// backward reads only hs (tanh' = 1 - h^2; ReLU's mask is h > 0).
// With a mask (seq_lengths), a row past its sequence's end carries its states unchanged and its
// gradients through (Past, PassRow).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../rnn_kernels.h"
#include "singa/core/cpu_features.h"

// rnn_avx512.cc compiles this file again with SINGA_RNN_AVX512 (GCC on x86-64): the walks and
// their row loops below then become AVX-512 code (namespace rnn_avx512), run only on a CPU that
// has it; the library's baseline copy is namespace rnn_base. Both are built with
// -ffp-contract=off: the same bits (tests/python/test_rnn_layer_ops.py).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SINGA_RNN_HAS_AVX512 1
#else
#define SINGA_RNN_HAS_AVX512 0
#endif
#ifdef SINGA_RNN_AVX512
#pragma GCC target("arch=x86-64-v4")
#define SINGA_RNN_COPY rnn_avx512
#else
#define SINGA_RNN_COPY rnn_base
#endif

namespace singa {
namespace cpu {
namespace SINGA_RNN_COPY {
namespace {

const float* In(const Tensor& t) { return static_cast<const float*>(t.block()->data()); }
float* Out(const Tensor& t) { return static_cast<float*>(t.block()->mutable_data()); }

// Pointwise passes below this many elements stay on one thread (a fork costs more).
constexpr int64_t kParallelElems = 1 << 14;


// One row n of a step's cells: g (4H: i, f, g, o) activated in place, c and h written. Out of
// line, with unaliased pointers, so that the loop over h vectorises (inside an OpenMP region's
// outlined body it did not: GCC 12).
__attribute__((noinline)) void RowForward(float* __restrict g, const float* __restrict c_prev,
                                          float* __restrict c, float* __restrict h, int64_t H) {
  float *__restrict gi = g, *__restrict gf = g + H, *__restrict gg = g + 2 * H,
                    *__restrict go = g + 3 * H;
  for (int64_t k = 0; k < H; ++k) {
    const rnn_cell::LstmCell r = rnn_cell::LstmStep(gi[k], gf[k], gg[k], go[k], c_prev[k]);
    gi[k] = r.i;
    gf[k] = r.f;
    gg[k] = r.g;
    go[k] = r.o;
    c[k] = r.c;
    h[k] = r.h;
  }
}

// One row n of a step's backward: dg (4H) written, dc (the carried dc_t) replaced by dc_{t-1}.
__attribute__((noinline)) void RowBackward(const float* __restrict act,
                                           const float* __restrict c,
                                           const float* __restrict c_prev,
                                           const float* __restrict dh_out,
                                           const float* __restrict dh_next,
                                           float* __restrict dg, float* __restrict dc,
                                           int64_t H) {
  const float *__restrict ai = act, *__restrict af = act + H, *__restrict ag = act + 2 * H,
                          *__restrict ao = act + 3 * H;
  float *__restrict di = dg, *__restrict df = dg + H, *__restrict dgg = dg + 2 * H,
                    *__restrict d_o = dg + 3 * H;
  for (int64_t k = 0; k < H; ++k) {
    const rnn_cell::LstmGrad r = rnn_cell::LstmStepGrad(ai[k], af[k], ag[k], ao[k], c[k],
                                                        c_prev[k], dh_out[k] + dh_next[k], dc[k]);
    di[k] = r.di;
    df[k] = r.df;
    dgg[k] = r.dg;
    d_o[k] = r.d_o;
    dc[k] = r.dc_prev;
  }
}

// One row n of a GRU step: x (3H, the step's input projections) and gh (3H, h_{t-1} W_hh +
// b_hh) give the activated gates (3H), hn (H, gh's n block, kept for the backward) and h.
__attribute__((noinline)) void GruRowForward(const float* __restrict x,
                                             const float* __restrict gh,
                                             const float* __restrict h_prev,
                                             float* __restrict gates, float* __restrict hn,
                                             float* __restrict h, int64_t H) {
  for (int64_t k = 0; k < H; ++k) {
    const rnn_cell::GruCell c = rnn_cell::GruStep(x[k], x[H + k], x[2 * H + k], gh[k],
                                                  gh[H + k], gh[2 * H + k], h_prev[k]);
    gates[k] = c.r;
    gates[H + k] = c.z;
    gates[2 * H + k] = c.n;
    hn[k] = gh[2 * H + k];
    h[k] = c.h;
  }
}

// One row n of a GRU step's backward: dgx and dgh (3H) written; dh holds the gradient reaching
// h_t from the next step and is replaced by the direct part of h_{t-1}'s (dh z).
__attribute__((noinline)) void GruRowBackward(const float* __restrict gates,
                                              const float* __restrict hn,
                                              const float* __restrict h_prev,
                                              const float* __restrict dh_out,
                                              float* __restrict dh, float* __restrict dgx,
                                              float* __restrict dgh, int64_t H) {
  for (int64_t k = 0; k < H; ++k) {
    const rnn_cell::GruGrad g = rnn_cell::GruStepGrad(gates[k], gates[H + k], gates[2 * H + k],
                                                      hn[k], h_prev[k], dh_out[k] + dh[k]);
    dgx[k] = dgh[k] = g.dr;
    dgx[H + k] = dgh[H + k] = g.dz;
    dgx[2 * H + k] = g.dn;
    dgh[2 * H + k] = g.dhn;
    dh[k] = g.dh_prev;
  }
}

// The plain RNN's rows: h = act(h) in place (h holds the pre-activation); dg = act'(h) (dh_out +
// dh).
__attribute__((noinline)) void PlainRowForward(float* __restrict h, int64_t H, bool relu) {
  for (int64_t k = 0; k < H; ++k) h[k] = rnn_cell::PlainAct(h[k], relu);
}
__attribute__((noinline)) void PlainRowBackward(const float* __restrict h,
                                                const float* __restrict dh_out,
                                                const float* __restrict dh,
                                                float* __restrict dg, int64_t H, bool relu) {
  for (int64_t k = 0; k < H; ++k) dg[k] = rnn_cell::PlainGrad(h[k], dh_out[k] + dh[k], relu);
}

// With a mask (T, N) (seq_lengths), row n of step t is past its sequence's end where the mask is
// 0: its state is carried unchanged and its gradients pass straight through.
inline bool Past(const float* mask, int64_t t, int64_t N, int64_t n) {
  return mask != nullptr && mask[t * N + n] == 0.f;
}
void CopyRow(const float* from, float* to, int64_t H) {
  std::memcpy(to, from, sizeof(float) * size_t(H));
}
// A carried gradient's start: the incoming final-state gradient, or zeros without one.
void StartState(float* dst, const Tensor& from, int64_t n) {
  if (from.empty())
    std::fill(dst, dst + n, 0.f);
  else
    std::memcpy(dst, In(from), sizeof(float) * size_t(n));
}

// A backward row past the end: no gate gradients; dh (the carried gradient) gains the output's.
void PassRow(const float* dh_out, float* dh, float* dg, int64_t H, int64_t G) {
  for (int64_t k = 0; k < H; ++k) dh[k] += dh_out[k];
  std::fill(dg, dg + G, 0.f);
}

// w (H, G) transposed: (G, H), so that every step's dh product reads its right operand
// untransposed (with the transpose flag instead, oneDNN's sgemm took 5x as long for N = 32,
// H = 256).
std::vector<float> Transposed(const float* w, int64_t H, int64_t G, bool par) {
  std::vector<float> wt(size_t(G * H));
#pragma omp parallel for if (par)
  for (int64_t j = 0; j < G; ++j)
    for (int64_t k = 0; k < H; ++k) wt[size_t(j * H + k)] = w[k * G + j];
  return wt;
}

// dW_hh = sum over steps of h_{t-1}^T dG_t and db_hh = sum of dG (dG (T, N, G): the gradients of
// the recurrent projections): h0's rows meet the first processed step's dG; hs's rows (all but
// the last processed step's) meet the dG of the step after them, one step further on in memory
// forward and one step back in reverse.
void WeightGrads(const RnnArgs& a, int64_t G, const float* dG, RowSgemm gemm) {
  const int64_t N = a.N, H = a.H, T = a.T;
  float* dw = Out(a.dw);
  std::fill(dw, dw + H * G, 0.f);
  if (N > 0) {
    gemm(true, false, int(H), int(G), int(N), 1.f, In(a.h0), int(H), dG + a.Step(0) * N * G,
         int(G), 1.f, dw, int(G));
    if (T > 1) {
      const float* hs = In(a.hs);
      gemm(true, false, int(H), int(G), int((T - 1) * N), 1.f, a.reverse ? hs + N * H : hs,
           int(H), a.reverse ? dG : dG + N * G, int(G), 1.f, dw, int(G));
    }
  }
  if (a.db.empty()) return;
  float* db = Out(a.db);
  const int64_t rows = T * N;
#pragma omp parallel for if (rows * G >= kParallelElems)
  for (int64_t j0 = 0; j0 < G; j0 += 64) {
    const int64_t j1 = std::min(G, j0 + 64);
    for (int64_t j = j0; j < j1; ++j) db[j] = 0.f;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = j0; j < j1; ++j) db[j] += dG[r * G + j];
  }
}


}  // namespace

void LstmForwardWith(const RnnArgs& a, RowSgemm gemm) {
  const int64_t N = a.N, H = a.H, G = 4 * H, T = a.T;
  const float *gx = In(a.gx), *w = In(a.w), *h0 = In(a.h0), *c0 = In(a.c0);
  const float* b = a.b.empty() ? nullptr : In(a.b);
  float *hs = Out(a.hs), *cs = Out(a.cs), *gates = Out(a.gates);
  const float* mask = a.mask.empty() ? nullptr : In(a.mask);
  const bool par = N * G >= kParallelElems;
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = a.Step(s);
    const float* hp = s == 0 ? h0 : hs + a.Step(s - 1) * N * H;
    const float* cp = s == 0 ? c0 : cs + a.Step(s - 1) * N * H;
    const float* x = gx + t * N * G;
    float* g = gates + t * N * G;
    float *ht = hs + t * N * H, *ct = cs + t * N * H;
#pragma omp parallel for if (par)
    for (int64_t n = 0; n < N; ++n) {
      const float* xr = x + n * G;
      float* gr = g + n * G;
      if (b)
        for (int64_t j = 0; j < G; ++j) gr[j] = xr[j] + b[j];
      else
        std::memcpy(gr, xr, sizeof(float) * size_t(G));
    }
    if (N > 0)
      gemm(false, false, int(N), int(G), int(H), 1.f, hp, int(H), w, int(G), 1.f, g, int(G));
#pragma omp parallel for if (par)
    for (int64_t n = 0; n < N; ++n) {
      RowForward(g + n * G, cp + n * H, ct + n * H, ht + n * H, H);
      if (Past(mask, t, N, n)) {
        CopyRow(cp + n * H, ct + n * H, H);
        CopyRow(hp + n * H, ht + n * H, H);
      }
    }
  }
}

void LstmBackwardWith(const RnnArgs& a, RowSgemm gemm) {
  const int64_t N = a.N, H = a.H, G = 4 * H, T = a.T;
  const float *dhs = In(a.dhs), *gates = In(a.gates), *cs = In(a.cs);
  const float *c0 = In(a.c0), *w = In(a.w);
  float *dgx = Out(a.dgx), *dh = Out(a.dh0), *dc = Out(a.dc0);
  const float* mask = a.mask.empty() ? nullptr : In(a.mask);
  // dh and dc carry the gradients between steps (they end as dh0, dc0)
  StartState(dh, a.dhT, N * H);
  StartState(dc, a.dcT, N * H);
  const bool par = N * G >= kParallelElems;
  const std::vector<float> wt = Transposed(w, H, G, par);
  for (int64_t p = T - 1; p >= 0; --p) {  // p: the forward's processing position
    const int64_t t = a.Step(p);
    const float* cp = p == 0 ? c0 : cs + a.Step(p - 1) * N * H;
    const float *act = gates + t * N * G, *ct = cs + t * N * H, *dht = dhs + t * N * H;
    float* dg = dgx + t * N * G;
#pragma omp parallel for if (par)
    for (int64_t n = 0; n < N; ++n) {
      if (Past(mask, t, N, n)) {
        PassRow(dht + n * H, dh + n * H, dg + n * G, H, G);  // dc passes unchanged
        continue;
      }
      RowBackward(act + n * G, ct + n * H, cp + n * H, dht + n * H, dh + n * H, dg + n * G,
                  dc + n * H, H);
      std::fill(dh + n * H, dh + (n + 1) * H, 0.f);  // the product below adds dG_t w_hh^T
    }
    if (N > 0)
      gemm(false, false, int(N), int(H), int(G), 1.f, dg, int(G), wt.data(), int(H), 1.f, dh,
           int(H));
  }
  WeightGrads(a, G, dgx, gemm);
}

void GruForwardWith(const RnnArgs& a, RowSgemm gemm) {
  const int64_t N = a.N, H = a.H, G = 3 * H, T = a.T;
  const float *gx = In(a.gx), *w = In(a.w), *h0 = In(a.h0);
  const float* b = a.b.empty() ? nullptr : In(a.b);
  float *hs = Out(a.hs), *gates = Out(a.gates), *ghn = Out(a.ghn), *gh = Out(a.gh);
  const float* mask = a.mask.empty() ? nullptr : In(a.mask);
  const bool par = N * G >= kParallelElems;
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = a.Step(s);
    const float* hp = s == 0 ? h0 : hs + a.Step(s - 1) * N * H;
    for (int64_t n = 0; n < N; ++n)
      if (b)
        std::memcpy(gh + n * G, b, sizeof(float) * size_t(G));
      else
        std::fill(gh + n * G, gh + (n + 1) * G, 0.f);
    if (N > 0)
      gemm(false, false, int(N), int(G), int(H), 1.f, hp, int(H), w, int(G), 1.f, gh, int(G));
#pragma omp parallel for if (par)
    for (int64_t n = 0; n < N; ++n) {
      GruRowForward(gx + (t * N + n) * G, gh + n * G, hp + n * H, gates + (t * N + n) * G,
                    ghn + (t * N + n) * H, hs + (t * N + n) * H, H);
      if (Past(mask, t, N, n)) CopyRow(hp + n * H, hs + (t * N + n) * H, H);
    }
  }
}

void GruBackwardWith(const RnnArgs& a, RowSgemm gemm) {
  const int64_t N = a.N, H = a.H, G = 3 * H, T = a.T;
  const float *dhs = In(a.dhs), *gates = In(a.gates), *ghn = In(a.ghn), *hs = In(a.hs);
  const float *h0 = In(a.h0), *w = In(a.w);
  float *dgx = Out(a.dgx), *dgh = Out(a.dgh), *dh = Out(a.dh0);
  const float* mask = a.mask.empty() ? nullptr : In(a.mask);
  StartState(dh, a.dhT, N * H);
  const bool par = N * G >= kParallelElems;
  const std::vector<float> wt = Transposed(w, H, G, par);
  for (int64_t p = T - 1; p >= 0; --p) {
    const int64_t t = a.Step(p);
    const float* hp = p == 0 ? h0 : hs + a.Step(p - 1) * N * H;
#pragma omp parallel for if (par)
    for (int64_t n = 0; n < N; ++n) {
      if (Past(mask, t, N, n)) {
        PassRow(dhs + (t * N + n) * H, dh + n * H, dgx + (t * N + n) * G, H, G);
        std::fill(dgh + (t * N + n) * G, dgh + (t * N + n + 1) * G, 0.f);
        continue;
      }
      GruRowBackward(gates + (t * N + n) * G, ghn + (t * N + n) * H, hp + n * H,
                     dhs + (t * N + n) * H, dh + n * H, dgx + (t * N + n) * G,
                     dgh + (t * N + n) * G, H);
    }
    if (N > 0)
      gemm(false, false, int(N), int(H), int(G), 1.f, dgh + t * N * G, int(G), wt.data(), int(H),
           1.f, dh, int(H));
  }
  WeightGrads(a, G, dgh, gemm);
}

void RnnForwardWith(const RnnArgs& a, RowSgemm gemm) {
  const int64_t N = a.N, H = a.H, T = a.T;
  const float *gx = In(a.gx), *w = In(a.w), *h0 = In(a.h0);
  const float* b = a.b.empty() ? nullptr : In(a.b);
  float* hs = Out(a.hs);
  const float* mask = a.mask.empty() ? nullptr : In(a.mask);
  const bool par = N * H >= kParallelElems;
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = a.Step(s);
    const float* hp = s == 0 ? h0 : hs + a.Step(s - 1) * N * H;
    float* ht = hs + t * N * H;
    const float* x = gx + t * N * H;
    for (int64_t i = 0; i < N * H; ++i) ht[i] = b ? x[i] + b[i % H] : x[i];
    if (N > 0)
      gemm(false, false, int(N), int(H), int(H), 1.f, hp, int(H), w, int(H), 1.f, ht, int(H));
#pragma omp parallel for if (par)
    for (int64_t n = 0; n < N; ++n) {
      PlainRowForward(ht + n * H, H, a.relu);
      if (Past(mask, t, N, n)) CopyRow(hp + n * H, ht + n * H, H);
    }
  }
}

void RnnBackwardWith(const RnnArgs& a, RowSgemm gemm) {
  const int64_t N = a.N, H = a.H, T = a.T;
  const float *dhs = In(a.dhs), *hs = In(a.hs), *w = In(a.w);
  float *dgx = Out(a.dgx), *dh = Out(a.dh0);
  const float* mask = a.mask.empty() ? nullptr : In(a.mask);
  StartState(dh, a.dhT, N * H);
  const bool par = N * H >= kParallelElems;
  const std::vector<float> wt = Transposed(w, H, H, par);
  for (int64_t p = T - 1; p >= 0; --p) {
    const int64_t t = a.Step(p);
    float* dg = dgx + t * N * H;
#pragma omp parallel for if (par)
    for (int64_t n = 0; n < N; ++n) {
      if (Past(mask, t, N, n)) {
        PassRow(dhs + (t * N + n) * H, dh + n * H, dg + n * H, H, H);
        continue;
      }
      PlainRowBackward(hs + (t * N + n) * H, dhs + (t * N + n) * H, dh + n * H, dg + n * H, H,
                       a.relu);
      std::fill(dh + n * H, dh + (n + 1) * H, 0.f);  // the product below adds dG_t w_hh^T
    }
    if (N > 0)
      gemm(false, false, int(N), int(H), int(H), 1.f, dg, int(H), wt.data(), int(H), 1.f, dh,
           int(H));
  }
  WeightGrads(a, H, dgx, gemm);
}

}  // namespace SINGA_RNN_COPY

#ifndef SINGA_RNN_AVX512
// The walks of the AVX-512 copy (rnn_avx512.cc), and the choice between the two: the cells'
// sigmoid / tanh loops run four times as wide (on the LSTM of BENCHMARKS.md, the cell passes
// were ~15% of the two ops' time in the baseline).
namespace rnn_avx512 {
void LstmForwardWith(const RnnArgs& a, RowSgemm gemm);
void LstmBackwardWith(const RnnArgs& a, RowSgemm gemm);
void GruForwardWith(const RnnArgs& a, RowSgemm gemm);
void GruBackwardWith(const RnnArgs& a, RowSgemm gemm);
void RnnForwardWith(const RnnArgs& a, RowSgemm gemm);
void RnnBackwardWith(const RnnArgs& a, RowSgemm gemm);
}  // namespace rnn_avx512

namespace {
bool Avx512() {
  static const bool has = CpuHas("avx512f") && CpuHas("avx512bw") && CpuHas("avx512dq") &&
                          CpuHas("avx512vl");
  return has;
}
}  // namespace

#if SINGA_RNN_HAS_AVX512
#define SINGA_RNN_DISPATCH(Name)                                  \
  void Name(const RnnArgs& a, RowSgemm gemm) {                    \
    if (Avx512()) return rnn_avx512::Name(a, gemm);               \
    rnn_base::Name(a, gemm);                                      \
  }
#else
#define SINGA_RNN_DISPATCH(Name) \
  void Name(const RnnArgs& a, RowSgemm gemm) { rnn_base::Name(a, gemm); }
#endif
SINGA_RNN_DISPATCH(LstmForwardWith)
SINGA_RNN_DISPATCH(LstmBackwardWith)
SINGA_RNN_DISPATCH(GruForwardWith)
SINGA_RNN_DISPATCH(GruBackwardWith)
SINGA_RNN_DISPATCH(RnnForwardWith)
SINGA_RNN_DISPATCH(RnnBackwardWith)
#undef SINGA_RNN_DISPATCH

namespace {
void Cblas(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
              n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void LstmForward(const RnnArgs& a, Context*) { LstmForwardWith(a, &Cblas); }
void LstmBackward(const RnnArgs& a, Context*) { LstmBackwardWith(a, &Cblas); }
void GruForward(const RnnArgs& a, Context*) { GruForwardWith(a, &Cblas); }
void GruBackward(const RnnArgs& a, Context*) { GruBackwardWith(a, &Cblas); }
void RnnForward(const RnnArgs& a, Context*) { RnnForwardWith(a, &Cblas); }
void RnnBackward(const RnnArgs& a, Context*) { RnnBackwardWith(a, &Cblas); }
}  // namespace
#endif  // SINGA_RNN_AVX512
}  // namespace cpu

#ifndef SINGA_RNN_AVX512
SINGA_REGISTER_KERNEL(LSTMForward, kCpuRef, &cpu::LstmForward);
SINGA_REGISTER_KERNEL(LSTMBackward, kCpuRef, &cpu::LstmBackward);
SINGA_REGISTER_KERNEL(GRUForward, kCpuRef, &cpu::GruForward);
SINGA_REGISTER_KERNEL(GRUBackward, kCpuRef, &cpu::GruBackward);
SINGA_REGISTER_KERNEL(RNNForward, kCpuRef, &cpu::RnnForward);
SINGA_REGISTER_KERNEL(RNNBackward, kCpuRef, &cpu::RnnBackward);
#endif

}  // namespace singa
