// 2-d convolution as im2col + OpenBLAS sgemm: the reference CPU kernel of every non-depthwise
// convolution (ops/conv.cc checks the inputs; cpu/conv.cc registers these kernels).
//
// With K = C/g * kh * kw rows per group, P = conv_height * conv_width columns per sample:
//   forward   y[g]   (OC/g, cols) = W[g] (OC/g, K) x col(x)[g] (K, cols)           (+ bias)
//   backward  col(dx)[g]          = W[g]^T x dy[g], then col2im adds the columns back into dx
//             dW[g]              += dy[g] x col(x)[g]^T
// How many samples share a GEMM (cols = S * P), from measurements on 2 cores (ResNet-18 CIFAR
// and ResNet-50 layer shapes, OpenBLAS 0.3.21, with and without OPENBLAS_CORETYPE=Haswell):
//   per sample (S = 1) when one sample's GEMM is already wide, P >= kNarrowCols: OpenBLAS runs
//     near peak there, and grouping only makes the im2col buffer bigger (measured slower at
//     P = 196 and 256). With at least as many samples as threads, samples are split between
//     OpenMP threads, each with its own scratch slice (and dW accumulator) and a single-threaded
//     sgemm (OpenBLAS' OpenMP build runs single-threaded inside a parallel region, so the cores
//     never oversubscribe); otherwise im2col is split over channels and each sgemm uses every
//     thread. A 1x1 stride-1 unpadded kernel needs no im2col: the sample is the column matrix.
//   grouped (S = ceil(kTargetCols / P)) for narrow layers: ResNet-18 CIFAR layer4 has P = 16
//     with a 512 x 4608 weight, and a GEMM per sample streams the whole 9 MB weight for 16
//     columns of work. S samples' columns sit side by side in one (C*kh*kw, S*P) buffer, and the
//     (M, S*P) GEMM operand is permuted from / to the (N, M, P) tensor layout by cheap copies.
//     Forward and dx keep the thread split (each thread owns whole groups: measured faster than
//     one multithreaded GEMM); dW runs one multithreaded GEMM per group outside any OpenMP
//     region, accumulating with beta = 1, since per-thread accumulators of a 9 MB dW cost more
//     than the GEMM saves.
// The plan is chosen when the kernel is prepared, before Exec (it depends on the thread count,
// which must not change under a recorded graph); its scratch is the workspace tensor the front
// lists among the writes, so the graph's memory planner sees it and may reuse its bytes.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "../strided.h"
#include "conv_cpu.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace singa {
namespace cpu {

// col rows for channels [c0, c1) of one image x (C, H, W): row (c*kh + i)*kw + j (stored at
// col + row * ld), column oh*OW + ow holds x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], or 0 in
// the padding. ld is OH*OW for one sample's matrix, S*OH*OW when S samples sit side by side.
void Im2Col(const float* x, const ConvHandle& h, size_t c0, size_t c1, float* col, size_t ld) {
  const size_t OW = h.conv_width, T = h.kernel_h * h.kernel_w, s = h.stride_w;
  for (size_t c = c0; c < c1; ++c) {
    const float* xc = x + c * h.height * h.width;
    ForEachTapRow(h, [&](size_t t, size_t oh, std::ptrdiff_t in, size_t lo, size_t hi) {
      float* r = col + (c * T + t) * ld + oh * OW;
      if (in < 0) {
        std::memset(r, 0, OW * sizeof(float));
        return;
      }
      std::memset(r, 0, lo * sizeof(float));
      const float* src = xc + in;
      float* dst = r + lo;
      const size_t n = hi - lo;
      // Local copies and a constant stride 2 (ResNet's downsampling) keep the strided copy in
      // registers; through the lambda's captures GCC reloaded the stride every element.
      if (s == 1) std::memcpy(dst, src, n * sizeof(float));
      else if (s == 2)
        for (size_t k = 0; k < n; ++k) dst[k] = src[2 * k];
      else
        for (size_t k = 0, st = s; k < n; ++k) dst[k] = src[k * st];
      std::memset(r + hi, 0, (OW - hi) * sizeof(float));
    });
  }
}

// The adjoint of Im2Col for channels [c0, c1): adds the column entries into dx (zeroed by the
// caller).
void Col2Im(const float* col, const ConvHandle& h, size_t c0, size_t c1, float* dx, size_t ld) {
  const size_t OW = h.conv_width, T = h.kernel_h * h.kernel_w, s = h.stride_w;
  for (size_t c = c0; c < c1; ++c) {
    float* dxc = dx + c * h.height * h.width;
    ForEachTapRow(h, [&](size_t t, size_t oh, std::ptrdiff_t in, size_t lo, size_t hi) {
      if (in < 0) return;
      const float* src = col + (c * T + t) * ld + oh * OW + lo;
      float* dst = dxc + in;
      const size_t n = hi - lo;  // local copies, as in Im2Col
      if (s == 1)
        for (size_t k = 0; k < n; ++k) dst[k] += src[k];
      else if (s == 2)
        for (size_t k = 0; k < n; ++k) dst[2 * k] += src[k];
      else
        for (size_t k = 0, st = s; k < n; ++k) dst[k * st] += src[k];
    });
  }
}

namespace {

constexpr size_t kGrain = 1 << 15;  // elements before a loop goes parallel
// Samples are grouped when one sample has fewer output positions than this, into groups of about
// kTargetCols columns (measured: 128 columns per GEMM gain nothing at P = 49; 384 or 512 no more
// than 256, with a larger buffer).
constexpr size_t kNarrowCols = 128;
constexpr size_t kTargetCols = 256;
// Upper bound on the grouped scratch: im2col columns + the GEMM's (M, S*P) operand, all threads.
constexpr size_t kMaxScratchFloats = size_t(32) << 18;  // 32 MiB

int ThreadId() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

bool Is1x1(const ConvHandle& h) {
  return h.kernel_h == 1 && h.kernel_w == 1 && h.stride_h == 1 && h.stride_w == 1 &&
         h.pad_h == 0 && h.pad_w == 0;
}

size_t ColRows(const ConvHandle& h) { return h.channels / h.group * h.kernel_h * h.kernel_w; }

// How a batch is cut: S samples side by side per GEMM, and nt threads that each take whole
// groups of samples (nt == 1: groups in turn, each loop and GEMM using every thread).
struct Plan {
  size_t S = 1;
  int nt = 1;
  bool direct = false;  // S == 1 and a 1x1 stride-1 unpadded kernel: the sample is the matrix
  // Floats of scratch per thread: im2col columns, the GEMM's (M, S*P) operand, a dW accumulator.
  size_t col = 0, buf = 0, acc = 0;
  size_t slot() const { return col + buf + acc; }
};

// Chosen before Exec: a replayed graph runs with the sizes its scratch was allocated for.
Plan MakePlan(const ConvHandle& h, size_t N, bool weight_grad) {
  Plan p;
  const size_t P = ColCols(h), rows = ColRows(h) * h.group, OC = h.num_filters;
  const int T = MaxThreads();
  size_t S = P < kNarrowCols ? (kTargetCols + P - 1) / P : 1;
  // Threads own whole groups, except for a grouped dW (one multithreaded GEMM, see the top).
  if (T > 1 && N >= size_t(T) && (!weight_grad || S == 1)) p.nt = T;
  S = std::min({S, (N + size_t(p.nt) - 1) / size_t(p.nt),
                std::max<size_t>(1, kMaxScratchFloats / (size_t(p.nt) * (rows + OC) * P))});
  if (p.nt > 1 && S > 1) {
    // As many groups for each thread: round the group count up to a multiple of the threads.
    size_t groups = (N + S - 1) / S;
    groups = (groups + size_t(p.nt) - 1) / size_t(p.nt) * size_t(p.nt);
    S = (N + groups - 1) / groups;
  }
  p.S = std::max<size_t>(1, S);
  p.direct = p.S == 1 && Is1x1(h);
  if (N == 0) return p;  // nothing to compute (dW is zeros): no scratch
  p.col = p.direct ? 0 : rows * p.S * P;
  p.buf = p.S > 1 ? OC * p.S * P : 0;
  p.acc = weight_grad && p.nt > 1 ? OC * ColRows(h) : 0;
  return p;
}

// Runs body(n0, s, slot) for groups of s <= S samples from n0, split between p.nt threads.
template <typename Body>
void ForEachGroup(size_t N, const Plan& p, Body&& body) {
  const std::ptrdiff_t groups = std::ptrdiff_t((N + p.S - 1) / p.S);
  auto run = [&](std::ptrdiff_t gi, int slot) {
    const size_t n0 = size_t(gi) * p.S;
    body(n0, std::min(p.S, N - n0), slot);
  };
  if (p.nt > 1) {
#pragma omp parallel num_threads(p.nt)
    {
      const int t = ThreadId();
#pragma omp for schedule(static)
      for (std::ptrdiff_t gi = 0; gi < groups; ++gi) run(gi, t);
    }
  } else {
    for (std::ptrdiff_t gi = 0; gi < groups; ++gi) run(gi, 0);
  }
}

// The helpers below split their loop between threads when `par` (no thread owns the group).
// col (C*kh*kw, s*P): sample j's columns at [j*P, (j+1)*P) of every row; x is the first sample.
void Im2ColGroup(const ConvHandle& h, const float* x, size_t s, float* col, bool par) {
  const size_t C = h.channels, in = C * h.height * h.width, P = ColCols(h), ld = s * P;
  const std::ptrdiff_t items = std::ptrdiff_t(s * C);
  const size_t elems = ColRows(h) * h.group * ld;
#pragma omp parallel for schedule(static) if (par && items > 1 && elems >= kGrain)
  for (std::ptrdiff_t i = 0; i < items; ++i) {
    const size_t j = size_t(i) / C, c = size_t(i) % C;
    Im2Col(x + j * in, h, c, c + 1, col + j * P, ld);
  }
}

// The adjoint: dx of s samples (from the first) = col2im of each sample's columns.
void Col2ImGroup(const ConvHandle& h, const float* col, size_t s, float* dx, bool par) {
  const size_t C = h.channels, plane = h.height * h.width, P = ColCols(h), ld = s * P;
  const std::ptrdiff_t items = std::ptrdiff_t(s * C);
#pragma omp parallel for schedule(static) if (par && items > 1 && s * C * plane >= kGrain / 4)
  for (std::ptrdiff_t i = 0; i < items; ++i) {
    const size_t j = size_t(i) / C, c = size_t(i) % C;
    float* dxj = dx + j * C * plane;
    std::memset(dxj + c * plane, 0, plane * sizeof(float));
    Col2Im(col + j * P, h, c, c + 1, dxj, ld);
  }
}

// buf (M, s*P) <- t (s, M, P): s samples of a (N, M, P) tensor, from the first.
void GatherGroup(const float* t, size_t s, size_t M, size_t P, float* buf, bool par) {
  const size_t ld = s * P;
  const std::ptrdiff_t rows = std::ptrdiff_t(s * M);
#pragma omp parallel for schedule(static) if (par && s * M * P >= kGrain)
  for (std::ptrdiff_t i = 0; i < rows; ++i) {
    const size_t j = size_t(i) / M, m = size_t(i) % M;
    std::memcpy(buf + m * ld + j * P, t + size_t(i) * P, P * sizeof(float));
  }
}

// t (s, M, P) <- buf (M, s*P) + bias[m] (bias may be null).
void ScatterGroup(const float* buf, const float* bias, size_t s, size_t M, size_t P, float* t,
                  bool par) {
  const size_t ld = s * P;
  const std::ptrdiff_t rows = std::ptrdiff_t(s * M);
#pragma omp parallel for schedule(static) if (par && s * M * P >= kGrain)
  for (std::ptrdiff_t i = 0; i < rows; ++i) {
    const size_t j = size_t(i) / M, m = size_t(i) % M;
    const float* src = buf + m * ld + j * P;
    float* dst = t + size_t(i) * P;
    const float b = bias ? bias[m] : 0.f;
    for (size_t p = 0; p < P; ++p) dst[p] = src[p] + b;
  }
}

void ForwardKernel(const ConvHandle& h, const Plan& p, size_t N, const float* px,
                   const float* pw, const float* pb, const CpuEpilogue& epi, float* py,
                   float* scratch) {
  const size_t G = h.group, K = ColRows(h), P = ColCols(h), OC = h.num_filters, OCg = OC / G,
               in = h.channels * h.height * h.width;
  const bool par = p.nt == 1;
  ForEachGroup(N, p, [&](size_t n0, size_t s, int slot) {
    float* col = scratch ? scratch + size_t(slot) * p.slot() : nullptr;
    float* buf = col ? col + p.col : nullptr;
    const size_t ld = s * P;
    const float* B = px + n0 * in;
    if (!p.direct) {
      Im2ColGroup(h, B, s, col, par);
      B = col;
    }
    float* yn = py + n0 * OC * P;
    // One sample: the GEMM writes y itself, on top of the bias; several: buf, then scatter.
    const bool onto_bias = s == 1 && pb;
    if (onto_bias)
      for (size_t o = 0; o < OC; ++o) std::fill(yn + o * P, yn + (o + 1) * P, pb[o]);
    float* C = s == 1 ? yn : buf;
    for (size_t g = 0; g < G; ++g)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(OCg), int(ld), int(K), 1.f,
                  pw + g * OCg * K, int(K), B + g * K * ld, int(ld), onto_bias ? 1.f : 0.f,
                  C + g * OCg * ld, int(ld));
    if (s > 1) ScatterGroup(buf, pb, s, OC, P, yn, par);
    // the epilogue while the group's output is still in cache
    if (epi.relu_only() && !epi.empty()) ReluInPlace(yn, s * OC * P);
    else if (!epi.empty()) epi.Apply(py, n0 * OC, (n0 + s) * OC, par);
  });
}

void BackwardXKernel(const ConvHandle& h, const Plan& p, size_t N, const float* pdy,
                     const float* pw, float* pdx, float* scratch) {
  const size_t G = h.group, K = ColRows(h), P = ColCols(h), OC = h.num_filters, OCg = OC / G,
               in = h.channels * h.height * h.width;
  const bool par = p.nt == 1;
  ForEachGroup(N, p, [&](size_t n0, size_t s, int slot) {
    float* col = scratch ? scratch + size_t(slot) * p.slot() : nullptr;
    float* buf = col ? col + p.col : nullptr;
    const size_t ld = s * P;
    const float* D = pdy + n0 * OC * P;
    if (s > 1) {
      GatherGroup(D, s, OC, P, buf, par);
      D = buf;
    }
    float* dxn = pdx + n0 * in;
    float* C = p.direct ? dxn : col;
    for (size_t g = 0; g < G; ++g)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(K), int(ld), int(OCg), 1.f,
                  pw + g * OCg * K, int(K), D + g * OCg * ld, int(ld), 0.f, C + g * K * ld,
                  int(ld));
    if (!p.direct) Col2ImGroup(h, col, s, dxn, par);
  });
}

void BackwardWKernel(const ConvHandle& h, const Plan& p, size_t N, const float* pdy,
                     const float* px, float* pdw, float* scratch) {
  const size_t G = h.group, K = ColRows(h), P = ColCols(h), OC = h.num_filters, OCg = OC / G,
               in = h.channels * h.height * h.width, wsize = OC * K;
  const bool par = p.nt == 1;
  std::memset(pdw, 0, wsize * sizeof(float));
  if (p.acc)
    for (int t = 0; t < p.nt; ++t)
      std::memset(scratch + size_t(t) * p.slot() + p.col + p.buf, 0, wsize * sizeof(float));
  ForEachGroup(N, p, [&](size_t n0, size_t s, int slot) {
    float* col = scratch ? scratch + size_t(slot) * p.slot() : nullptr;
    float* buf = col ? col + p.col : nullptr;
    float* acc = p.acc ? buf + p.buf : pdw;  // a private dW per thread when threads split
    const size_t ld = s * P;
    const float* B = px + n0 * in;
    if (!p.direct) {
      Im2ColGroup(h, B, s, col, par);
      B = col;
    }
    const float* D = pdy + n0 * OC * P;
    if (s > 1) {
      GatherGroup(D, s, OC, P, buf, par);
      D = buf;
    }
    for (size_t g = 0; g < G; ++g)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(OCg), int(K), int(ld), 1.f,
                  D + g * OCg * ld, int(ld), B + g * K * ld, int(ld), 1.f, acc + g * OCg * K,
                  int(K));
  });
  if (p.acc) {
#pragma omp parallel for schedule(static) if (wsize >= kGrain)
    for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(wsize); ++i) {
      float s = 0.f;
      for (int t = 0; t < p.nt; ++t) s += scratch[size_t(t) * p.slot() + p.col + p.buf + i];
      pdw[i] = s;
    }
  }
}

}  // namespace

// The entry points cpu/conv.cc registers: the plan (and so the workspace) is settled here, when
// the front prepares the call.
Prepared<ConvFwdArgs> GemmForward(const ConvFwdArgs& a) {
  const Plan p = MakePlan(a.h, a.x.shape(0), false);
  Prepared<ConvFwdArgs> r;
  r.workspace = size_t(p.nt) * p.slot();
  r.run = [p](const ConvFwdArgs& a, float* ws) {
    const CpuEpilogue epi(a.epi, a.relu, a.h.num_filters, ColCols(a.h));
    ForwardKernel(a.h, p, a.x.shape(0), InPtr(a.x), InPtr(a.W), a.b.empty() ? nullptr : InPtr(a.b),
                  epi, OutPtr(a.y), ws);
  };
  r.epilogue = kEpiBatchNorm | kEpiAdd;
  return r;
}

Prepared<ConvBwdXArgs> GemmBackwardX(const ConvBwdXArgs& a) {
  const Plan p = MakePlan(a.h, a.dy.shape(0), false);
  Prepared<ConvBwdXArgs> r;
  r.workspace = size_t(p.nt) * p.slot();
  r.run = [p](const ConvBwdXArgs& a, float* ws) {
    BackwardXKernel(a.h, p, a.dy.shape(0), InPtr(a.dy), InPtr(a.W), OutPtr(a.dx), ws);
  };
  return r;
}

Prepared<ConvBwdWArgs> GemmBackwardW(const ConvBwdWArgs& a) {
  const size_t N = a.x.shape(0);
  const Plan p = MakePlan(a.h, N, true);
  Prepared<ConvBwdWArgs> r;
  r.workspace = size_t(p.nt) * p.slot();
  r.run = [p](const ConvBwdWArgs& a, float* ws) {
    const size_t n = a.x.shape(0);
    BackwardWKernel(a.h, p, n, n ? InPtr(a.dy) : nullptr, n ? InPtr(a.x) : nullptr, OutPtr(a.dW),
                    ws);
  };
  return r;
}

}  // namespace cpu
}  // namespace singa
