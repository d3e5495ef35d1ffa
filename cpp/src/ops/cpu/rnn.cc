// The LSTM layer's host kernels (kCpuRef; front: ../rnn.cc): the walk over the steps, shared
// with the oneDNN backend (dnnl/rnn.cc), which passes oneDNN's sgemm for the products.
//
// Per step: the gates' rows get gx_t + b_hh, one product adds h_{t-1} w_hh (beta = 1), then one
// parallel pass applies lstm::CellForward to every (n, h). The backward walks the steps in the
// opposite order: a pass of lstm::CellBackward writes dG_t into dgx and the carried dc, one
// product gives dh_{t-1} = dG_t w_hh^T (w_hh transposed once, up front); then dW_hh =
// sum_t h_{t-1}^T dG_t as two products over all steps (h0's row block and the rest, contiguous
// in hs), and db_hh = the column sums of dG.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../rnn_kernels.h"

namespace singa {
namespace cpu {
namespace {

const float* In(const Tensor& t) { return static_cast<const float*>(t.block()->data()); }
float* Out(const Tensor& t) { return static_cast<float*>(t.block()->mutable_data()); }

// Pointwise passes below this many elements stay on one thread (a fork costs more).
constexpr int64_t kParallelElems = 1 << 14;

void Cblas(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
              n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// One row n of a step's cells: g (4H: i, f, g, o) activated in place, c and h written. Out of
// line, with unaliased pointers, so that the loop over h vectorises (inside an OpenMP region's
// outlined body it did not: GCC 12).
__attribute__((noinline)) void RowForward(float* __restrict g, const float* __restrict c_prev,
                                          float* __restrict c, float* __restrict h, int64_t H) {
  float *__restrict gi = g, *__restrict gf = g + H, *__restrict gg = g + 2 * H,
                    *__restrict go = g + 3 * H;
  for (int64_t k = 0; k < H; ++k) {
    const lstm::Cell r = lstm::CellForward(gi[k], gf[k], gg[k], go[k], c_prev[k]);
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
    const lstm::CellGrad r = lstm::CellBackward(ai[k], af[k], ag[k], ao[k], c[k], c_prev[k],
                                                dh_out[k] + dh_next[k], dc[k]);
    di[k] = r.di;
    df[k] = r.df;
    dgg[k] = r.dg;
    d_o[k] = r.d_o;
    dc[k] = r.dc_prev;
  }
}

void LstmForward(const LstmArgs& a, Context*) { LstmForwardWith(a, &Cblas); }
void LstmBackward(const LstmArgs& a, Context*) { LstmBackwardWith(a, &Cblas); }

}  // namespace

void LstmForwardWith(const LstmArgs& a, RowSgemm gemm) {
  const int64_t N = a.N, H = a.H, G = 4 * H, T = a.T;
  const float *gx = In(a.gx), *w = In(a.w), *h0 = In(a.h0), *c0 = In(a.c0);
  const float* b = a.b.empty() ? nullptr : In(a.b);
  float *hs = Out(a.hs), *cs = Out(a.cs), *gates = Out(a.gates);
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
    for (int64_t n = 0; n < N; ++n)
      RowForward(g + n * G, cp + n * H, ct + n * H, ht + n * H, H);
  }
}

void LstmBackwardWith(const LstmArgs& a, RowSgemm gemm) {
  const int64_t N = a.N, H = a.H, G = 4 * H, T = a.T;
  const float *dhs = In(a.dhs), *gates = In(a.gates), *hs = In(a.hs), *cs = In(a.cs);
  const float *h0 = In(a.h0), *c0 = In(a.c0), *w = In(a.w);
  float *dgx = Out(a.dgx), *dh = Out(a.dh0), *dc = Out(a.dc0), *dw = Out(a.dw);
  // dh and dc carry the gradients between steps (they end as dh0, dc0)
  const size_t state = sizeof(float) * size_t(N * H);
  if (a.dhT.empty()) std::memset(dh, 0, state); else std::memcpy(dh, In(a.dhT), state);
  if (a.dcT.empty()) std::memset(dc, 0, state); else std::memcpy(dc, In(a.dcT), state);
  const bool par = N * G >= kParallelElems;
  // w_hh^T (4H, H) once, so that every step's dh product reads its right operand untransposed
  // (with the transpose flag instead, oneDNN's sgemm took 5x as long for N = 32, H = 256)
  std::vector<float> wt(size_t(G * H));
#pragma omp parallel for if (par)
  for (int64_t j = 0; j < G; ++j)
    for (int64_t k = 0; k < H; ++k) wt[size_t(j * H + k)] = w[k * G + j];
  for (int64_t p = T - 1; p >= 0; --p) {  // p: the forward's processing position
    const int64_t t = a.Step(p);
    const float* cp = p == 0 ? c0 : cs + a.Step(p - 1) * N * H;
    const float *act = gates + t * N * G, *ct = cs + t * N * H, *dht = dhs + t * N * H;
    float* dg = dgx + t * N * G;
#pragma omp parallel for if (par)
    for (int64_t n = 0; n < N; ++n)
      RowBackward(act + n * G, ct + n * H, cp + n * H, dht + n * H, dh + n * H, dg + n * G,
                  dc + n * H, H);
    if (N > 0)
      gemm(false, false, int(N), int(H), int(G), 1.f, dg, int(G), wt.data(), int(H), 0.f, dh,
           int(H));
  }
  // dW_hh: h0's rows meet the first processed step's dG; hs's rows (all but the last processed
  // step's) meet the dG of the step after them, which lies one step further on in memory
  // forward and one step back in reverse
  std::fill(dw, dw + H * G, 0.f);
  if (N > 0) {
    gemm(true, false, int(H), int(G), int(N), 1.f, h0, int(H), dgx + a.Step(0) * N * G, int(G),
         1.f, dw, int(G));
    if (T > 1) {
      const float* hrows = a.reverse ? hs + N * H : hs;
      const float* grows = a.reverse ? dgx : dgx + N * G;
      gemm(true, false, int(H), int(G), int((T - 1) * N), 1.f, hrows, int(H), grows, int(G), 1.f,
           dw, int(G));
    }
  }
  if (!a.db.empty()) {
    float* db = Out(a.db);
    const int64_t rows = T * N;
#pragma omp parallel for if (rows * G >= kParallelElems)
    for (int64_t j0 = 0; j0 < G; j0 += 64) {
      const int64_t j1 = std::min(G, j0 + 64);
      for (int64_t j = j0; j < j1; ++j) db[j] = 0.f;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = j0; j < j1; ++j) db[j] += dgx[r * G + j];
    }
  }
}

}  // namespace cpu

SINGA_REGISTER_KERNEL(LSTMForward, kCpuRef, &cpu::LstmForward);
SINGA_REGISTER_KERNEL(LSTMBackward, kCpuRef, &cpu::LstmBackward);

}  // namespace singa
