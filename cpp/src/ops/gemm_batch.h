// gemm_batch.h (private): how the CPU kernels (cpu/blas.cc: OpenBLAS, dnnl/gemm.cc: oneDNN)
// walk a BatchedGemm's products.
//
//   int status = ForEachProduct(g, [&](const float* a, const float* b, float* c) {
//     return sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, a, g.lda, b, g.ldb, c, g.n);  // 0: ok
//   });
//
// Many small products (attention heads, a batch of sequences) are spread over the OpenMP
// threads, each product on one thread: both libraries stay single-threaded inside a parallel
// region. Measured on 2 loaded cores, 64 products of 256x64x256 ran at 45-70 GFLOP/s that way
// and at 1-50 GFLOP/s one after the other with each product on both threads (every product
// waits at a barrier for a thread the machine may have descheduled). Few large products keep
// the library's own threading, which divides them evenly.
#pragma once

#include <omp.h>

#include <atomic>
#include <cstddef>

#include "kernel_slots.h"

namespace singa {

/// Runs product(a, b, c) (returning 0 on success) for every batch index of g; returns the first
/// non-zero status, else 0.
template <typename Fn>
int ForEachProduct(const BatchedGemmArgs& g, Fn&& product) {
  const float* pa = static_cast<const float*>(g.a.block()->data());
  const float* pb = static_cast<const float*>(g.b.block()->data());
  float* pc = static_cast<float*>(g.c.block()->mutable_data());
  const std::ptrdiff_t nb = static_cast<std::ptrdiff_t>(Product(g.batch));
  const size_t mn = size_t(g.m) * size_t(g.n);
  // a and b's offsets for batch index i (their batch strides may be 0: broadcast)
  auto run = [&](std::ptrdiff_t i) {
    std::ptrdiff_t oa = 0, ob = 0, rem = i;
    for (size_t d = g.batch.size(); d-- > 0;) {
      const std::ptrdiff_t dim = static_cast<std::ptrdiff_t>(g.batch[d]);
      oa += (rem % dim) * g.a.stride()[d];
      ob += (rem % dim) * g.b.stride()[d];
      rem /= dim;
    }
    return product(pa + oa, pb + ob, pc + size_t(i) * mn);
  };
  const std::ptrdiff_t threads = omp_get_max_threads();
  const double macs = double(g.m) * g.n * g.k;
  const bool spread = threads > 1 && nb >= threads &&
                      (nb % threads == 0 || nb >= 4 * threads || macs <= double(1 << 23));
  if (!spread) {
    for (std::ptrdiff_t i = 0; i < nb; ++i)
      if (int s = run(i)) return s;
    return 0;
  }
  std::atomic<int> first{0};
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < nb; ++i) {
    if (int s = run(i)) {
      int zero = 0;
      first.compare_exchange_strong(zero, s);
    }
  }
  return first.load();
}

}  // namespace singa
