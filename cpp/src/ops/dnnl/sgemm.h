// dnnl/sgemm.h (private): oneDNN's sgemm on row-major host pointers, for the oneDNN backend's
// kernels that run products of their own (gemm.cc's Mult, rnn.cc's LSTM steps).
//
//   CheckStatus(Sgemm(false, true, m, n, k, 1.f, a, lda, b, ldb, 0.f, c, n), "Mult", m, n, k);
#pragma once

namespace singa {
namespace dnnl_kernel {

/// Row-major C(m, n) = alpha op(A) op(B) + beta C; returns oneDNN's status (0: success). k == 0
/// scales C by beta, as BLAS does.
int Sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);
/// Throws Error naming `op` and the sizes unless status is 0.
void CheckStatus(int status, const char* op, int m, int n, int k);

}  // namespace dnnl_kernel
}  // namespace singa
