// attention_tiles.h (private): the per-tile primitives of the CPU attention kernels
// (cpu/attention.cc), in two builds picked once at load time: AVX-512 intrinsics
// (cpu/attention_avx512.cc) on CPUs that have it, else portable loops and OpenBLAS sgemm.
//
//   const AttnTileOps& t = AttnTiles();
//   t.gemm(m, n, k, 1.f, a, lda, 1, b, ldb, 0.f, c, ldc);     // C = A B (A row-major)
//   float sum = t.exp_shift_sum(row, n, row_max);              // row = exp(row - max)
//
// Why not sgemm everywhere: the tiles are small (64 x 256 x 64) and Debian's OpenBLAS 0.3.21
// runs its SSE3 ("Prescott") kernels on CPUs newer than it knows (measured here on a Sapphire
// Rapids Xeon: 5 GFLOP/s per core for these tiles); the library's baseline ISA is x86-64-v2, so
// the AVX-512 code is compiled with a function-level target and only called after a CPUID check.
#pragma once

#include <cstdint>

namespace singa {
namespace cpu {

struct AttnTileOps {
  /// C (m x n, row stride ldc) = alpha * sum_k A(i, k) B(k, j) + beta * C, where A(i, k) is
  /// a[i * sai + k * sak] (either stride may be 1: plain or transposed A) and B is row-major.
  /// beta == 0 ignores C's old values (NaN included).
  void (*gemm)(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t sai,
               int64_t sak, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
  /// s[c] = exp(s[c] - shift) for c < n; returns their sum. exp(-inf) = 0; NaN stays NaN.
  float (*exp_shift_sum)(float* s, int64_t n, float shift);
  /// The largest of s[0..n) ignoring NaN; -inf for n == 0 or all -inf.
  float (*row_max)(const float* s, int64_t n);
  /// p[c] = keep(row_key, j0 + c) ? p[c] * inv_keep : 0 (the hash of attention_kernel.h).
  void (*dropout)(float* p, int64_t n, uint32_t row_key, int64_t j0, uint32_t thr,
                  float inv_keep);
  /// dp[c] = p[c] * (dp[c] - d).
  void (*softmax_grad)(const float* p, float* dp, int64_t n, float d);
  const char* name;
};

/// The portable build (every CPU; the tests compare the AVX-512 one with it).
const AttnTileOps& PortableAttnTiles();
/// The AVX-512 build, or nullptr where the compiler or the CPU lacks it.
const AttnTileOps* Avx512AttnTiles();
/// The ops this process uses (AVX-512 when available, else the portable ones).
const AttnTileOps& AttnTiles();

}  // namespace cpu
}  // namespace singa
