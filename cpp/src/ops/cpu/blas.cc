// CPU reference kernels of the BLAS ops, through OpenBLAS' cblas interface (fronts: ../blas.cc).
// The oneDNN backend's products (dnnl/gemm.cc) run these when OpenBLAS is the process's choice.
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "../gemm_batch.h"
#include "../kernel_slots.h"
#include "singa/ops/gemm_backend.h"

namespace singa {
namespace cpu {
namespace {

// Row-major C(m,n) = alpha op(A) op(B) + beta C. Medium products (an MLP layer: 64x784x100)
// run slower on OpenBLAS' own threads than on one (measured here: 154 us on two threads, 56 us
// on one, for 784x64x100 with A transposed), so below kSplitMacs we split the larger of m and n
// between the OpenMP threads ourselves and each runs a single-threaded sgemm (OpenBLAS' OpenMP
// build stays on one thread inside a parallel region). Large products keep OpenBLAS' threading.
constexpr double kSplitMacs = 1 << 23, kTinyMacs = 1 << 18;  // tiny: not worth a fork
void SplitSgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* pa, int lda,
                const float* pb, int ldb, float beta, float* pc, int ldc) {
  const CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  const int threads = omp_get_max_threads();
  const double macs = double(m) * n * k;
  const bool split = threads > 1 && macs <= kSplitMacs && macs >= kTinyMacs && std::max(m, n) >= 32;
  if (!split) {
    cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc);
    return;
  }
  const bool by_rows = m >= n;
  const int total = by_rows ? m : n;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    // chunks rounded to 8 so that each thread's block stays vector-aligned
    const int per = ((total + nt - 1) / nt + 7) / 8 * 8;
    const int lo = std::min(total, t * per), hi = std::min(total, lo + per);
    if (hi > lo) {
      if (by_rows) {  // rows of op(A) and of C
        const float* a0 = ta ? pa + lo : pa + static_cast<size_t>(lo) * lda;
        cblas_sgemm(CblasRowMajor, TA, TB, hi - lo, n, k, alpha, a0, lda, pb, ldb, beta,
                    pc + static_cast<size_t>(lo) * ldc, ldc);
      } else {  // columns of op(B) and of C
        const float* b0 = tb ? pb + static_cast<size_t>(lo) * ldb : pb + lo;
        cblas_sgemm(CblasRowMajor, TA, TB, m, hi - lo, k, alpha, pa, lda, b0, ldb, beta,
                    pc + lo, ldc);
      }
    }
  }
}

void Gemm(const GemmArgs& g, Context*) {
  if (g.m == 0 || g.n == 0) return;
  NoteGemmRan(GemmLib::kOpenBlas);
  SplitSgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha,
             static_cast<const float*>(g.a.block()->data()), g.lda,
             static_cast<const float*>(g.b.block()->data()), g.ldb, g.beta,
             static_cast<float*>(g.c.block()->mutable_data()), g.n);
}

void BatchedGemm(const BatchedGemmArgs& g, Context*) {
  if (g.m == 0 || g.n == 0) return;
  NoteGemmRan(GemmLib::kOpenBlas);
  const CBLAS_TRANSPOSE TA = g.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE TB = g.trans_b ? CblasTrans : CblasNoTrans;
  ForEachProduct(g, [&](const float* a, const float* b, float* c) {
    cblas_sgemm(CblasRowMajor, TA, TB, g.m, g.n, g.k, 1.f, a, g.lda, b, g.ldb, 0.f, c, g.n);
    return 0;
  });
}

void Axpy(float alpha, const Tensor& x, const Tensor& y, Context*) {
  cblas_saxpy(static_cast<int>(x.Size()), alpha, static_cast<const float*>(x.block()->data()), 1,
              static_cast<float*>(y.block()->mutable_data()), 1);
}

void Dot(const Tensor& a, const Tensor& b, const Tensor& out, Context*) {
  *static_cast<float*>(out.block()->mutable_data()) =
      a.Size() == 0 ? 0.f
                    : cblas_sdot(static_cast<int>(a.Size()),
                                 static_cast<const float*>(a.block()->data()), 1,
                                 static_cast<const float*>(b.block()->data()), 1);
}

void Asum(const Tensor& x, const Tensor& out, Context*) {
  *static_cast<float*>(out.block()->mutable_data()) =
      x.Size() == 0 ? 0.f
                    : cblas_sasum(static_cast<int>(x.Size()),
                                  static_cast<const float*>(x.block()->data()), 1);
}

void Nrm2(const Tensor& x, const Tensor& out, Context*) {
  *static_cast<float*>(out.block()->mutable_data()) =
      x.Size() == 0 ? 0.f
                    : cblas_snrm2(static_cast<int>(x.Size()),
                                  static_cast<const float*>(x.block()->data()), 1);
}

}  // namespace

SINGA_REGISTER_KERNEL(Gemm, kCpuRef, &Gemm);
SINGA_REGISTER_KERNEL(BatchedGemm, kCpuRef, &BatchedGemm);
SINGA_REGISTER_KERNEL(Axpy, kCpuRef, &Axpy);
SINGA_REGISTER_KERNEL(Dot, kCpuRef, &Dot);
SINGA_REGISTER_KERNEL(Asum, kCpuRef, &Asum);
SINGA_REGISTER_KERNEL(Nrm2, kCpuRef, &Nrm2);
// The oneDNN backend's Gemm and BatchedGemm (dnnl/gemm.cc) run dnnl_sgemm or these, chosen once
// per process (gemm_backend.h); its other products fall back to these (kernel.h: Fallback).

}  // namespace cpu
}  // namespace singa
