// The reference kernel of bfloat16 matrix products (slot GemmBf16, ../bf16.h): each matrix
// widened to a contiguous float32 copy, one sgemm, the result rounded once to bfloat16. The
// oneDNN backend runs its native bf16 matmul instead (../dnnl/matmul_bf16.cc).
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "../bf16.h"

namespace singa {
namespace cpu {
namespace {

// op(M) (rows x cols, stored with leading dimension ld, transposed when trans) as float32.
void Widen(const BFloat16* p, int rows, int cols, bool trans, int ld, float* out) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      out[size_t(r) * cols + c] =
          BFloat16ToFloat(trans ? p[size_t(c) * ld + r] : p[size_t(r) * ld + c]);
}

void GemmBf16(const BatchedGemmArgs& g, Context*) {
  if (g.m == 0 || g.n == 0) return;
  const auto* pa = static_cast<const BFloat16*>(g.a.block()->data());
  const auto* pb = static_cast<const BFloat16*>(g.b.block()->data());
  auto* pc = static_cast<BFloat16*>(g.c.block()->mutable_data());
  const size_t mn = size_t(g.m) * g.n;
  std::vector<float> a(size_t(g.m) * g.k), b(size_t(g.k) * g.n), c(mn);
  for (size_t i = 0, count = Product(g.batch); i < count; ++i) {
    std::ptrdiff_t oa, ob;
    BatchOffsets(g, i, &oa, &ob);
    Widen(pa + oa, g.m, g.k, g.trans_a, g.lda, a.data());
    Widen(pb + ob, g.k, g.n, g.trans_b, g.ldb, b.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.m, g.n, g.k, 1.f, a.data(),
                std::max(g.k, 1), b.data(), g.n, 0.f, c.data(), g.n);
    for (size_t j = 0; j < mn; ++j) pc[i * mn + j] = FloatToBFloat16(c[j]);
  }
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(GemmBf16, kCpuRef, cpu::GemmBf16);

}  // namespace singa
