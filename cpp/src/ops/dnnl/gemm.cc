// The oneDNN backend's matrix products: dnnl_sgemm, or OpenBLAS (the reference kernels) when
// that is the process's choice (singa/ops/gemm_backend.h says which and why).
//
// dnnl_sgemm rather than a cached matmul primitive per shape: measured here (2 cores, AVX-512)
// both ran oneDNN's AVX-512 kernels at the same speed, from 64x784x100 to 4096x384x1536, and
// dnnl_sgemm takes our row-major leading dimensions as they are, with nothing to create or cache.
#include <dnnl.h>

#include <algorithm>

#include "../gemm_batch.h"
#include "../kernel_slots.h"
#include "singa/ops/gemm_backend.h"
#include "sgemm.h"

namespace singa {
namespace dnnl_kernel {

// dnnl_sgemm leaves C untouched when k == 0, where BLAS scales it by beta (zeroes it for
// beta == 0), so that case is done here.
int Sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (k == 0) {
    for (int i = 0; i < m; ++i) {
      float* row = c + size_t(i) * ldc;
      if (beta == 0.f)
        std::fill(row, row + n, 0.f);
      else
        for (int j = 0; j < n; ++j) row[j] *= beta;
    }
    return 0;
  }
  return static_cast<int>(dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                                     ldb, beta, c, ldc));
}

void CheckStatus(int status, const char* op, int m, int n, int k) {
  SINGA_CHECK(status == 0, Error,
              op << ": oneDNN's sgemm failed (status " << status << ") for (" << m << " x " << k
                 << ") x (" << k << " x " << n << ")");
}

namespace {

void Gemm(const GemmArgs& g, Context* ctx) {
  if (SelectedGemmLib() != GemmLib::kDnnl) {
    GemmKernel().Get(Backend::kCpuRef)(g, ctx);
    return;
  }
  if (g.m == 0 || g.n == 0) return;
  NoteGemmRan(GemmLib::kDnnl);
  CheckStatus(Sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha,
                    static_cast<const float*>(g.a.block()->data()), g.lda,
                    static_cast<const float*>(g.b.block()->data()), g.ldb, g.beta,
                    static_cast<float*>(g.c.block()->mutable_data()), g.n),
              "Mult", g.m, g.n, g.k);
}

void BatchedGemm(const BatchedGemmArgs& g, Context* ctx) {
  if (SelectedGemmLib() != GemmLib::kDnnl) {
    BatchedGemmKernel().Get(Backend::kCpuRef)(g, ctx);
    return;
  }
  if (g.m == 0 || g.n == 0) return;
  NoteGemmRan(GemmLib::kDnnl);
  const int status = ForEachProduct(g, [&](const float* a, const float* b, float* c) {
    return Sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.f, a, g.lda, b, g.ldb, 0.f, c, g.n);
  });
  CheckStatus(status, "Mult (batched)", g.m, g.n, g.k);
}

}  // namespace

SINGA_REGISTER_KERNEL(Gemm, kCpuDnnl, &Gemm);
SINGA_REGISTER_KERNEL(BatchedGemm, kCpuDnnl, &BatchedGemm);

}  // namespace dnnl_kernel
}  // namespace singa
