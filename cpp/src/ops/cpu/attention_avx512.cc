// The AVX-512 tile primitives of the CPU attention (see attention_tiles.h). Compiled for the
// avx512f target function by function (the library's baseline is x86-64-v2) and handed out only
// when the CPU reports AVX-512F.
//
// gemm: register blocks of 6 rows x 64 columns (24 zmm accumulators), one pass over k, B rows
// loaded once per 6 rows of A and the A elements broadcast; column tails use masked loads and
// stores (which never touch memory past the mask). exp: range reduction to [-ln2/2, ln2/2],
// a degree-6 polynomial (Cephes' expf coefficients) and vscalefps for the 2^n.
#include "attention_tiles.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <limits>

#include "../attention_kernel.h"

// Everything compiled for AVX-512 below has internal linkage and calls no out-of-line function
// from the headers above, so no AVX-512 copy of a shared inline function can reach other code.
#pragma GCC push_options
#pragma GCC target("avx512f")
// GCC 12's own avx512fintrin.h trips these on its _mm512_undefined_* placeholders.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace singa {
namespace cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

constexpr int64_t kMR = 6;    // rows per register block (of 4 x 16 columns)
constexpr int64_t kKC = 128;  // rows of B per pass

inline __mmask16 TailMask(int64_t n) {  // the first n (1..16) lanes
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u);
}

// C rows [0, mr) x 64 columns (lanes beyond the masks untouched) = alpha A B + beta C, for
// mr <= kMR = 6: 24 accumulators, 4 B vectors and a broadcast fill 29 of the 32 zmm registers.
// The accumulators are named variables: as an array GCC 12 kept them on the stack. Rows past
// mr repeat row 0's loads and are not stored.
#define SINGA_ATTN_ROW(r)                                            \
  {                                                                  \
    const __m512 x = _mm512_set1_ps(a##r[k * sak]);                  \
    c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                       \
    c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);                       \
    c##r##2 = _mm512_fmadd_ps(x, b2, c##r##2);                       \
    c##r##3 = _mm512_fmadd_ps(x, b3, c##r##3);                       \
  }
void Block(int64_t K, int64_t mr, float alpha, const float* a, int64_t sai, int64_t sak,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const __mmask16* m) {
  const float* a0 = a;
  const float* a1 = a + (mr > 1 ? sai : 0);
  const float* a2 = a + (mr > 2 ? 2 * sai : 0);
  const float* a3 = a + (mr > 3 ? 3 * sai : 0);
  const float* a4 = a + (mr > 4 ? 4 * sai : 0);
  const float* a5 = a + (mr > 5 ? 5 * sai : 0);
  const __m512 z = _mm512_setzero_ps();
  __m512 c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z, c20 = z,
         c21 = z, c22 = z, c23 = z, c30 = z, c31 = z, c32 = z, c33 = z, c40 = z, c41 = z,
         c42 = z, c43 = z, c50 = z, c51 = z, c52 = z, c53 = z;
  const __mmask16 m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3];
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, bk), b1 = _mm512_maskz_loadu_ps(m1, bk + 16),
                 b2 = _mm512_maskz_loadu_ps(m2, bk + 32), b3 = _mm512_maskz_loadu_ps(m3, bk + 48);
    SINGA_ATTN_ROW(0)
    SINGA_ATTN_ROW(1)
    SINGA_ATTN_ROW(2)
    SINGA_ATTN_ROW(3)
    SINGA_ATTN_ROW(4)
    SINGA_ATTN_ROW(5)
  }
  const __m512 acc[6][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23},
                            {c30, c31, c32, c33}, {c40, c41, c42, c43}, {c50, c51, c52, c53}};
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t r = 0; r < mr; ++r)
    for (int v = 0; v < 4; ++v) {
      float* cp = c + r * ldc + 16 * v;
      __m512 res = _mm512_mul_ps(va, acc[r][v]);
      if (beta != 0.f) res = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m[v], cp), res);
      _mm512_mask_storeu_ps(cp, m[v], res);
    }
}
#undef SINGA_ATTN_ROW

void Gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t sai,
          int64_t sak, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t j0 = 0; j0 < n; j0 += 64) {
    __mmask16 masks[4];
    for (int v = 0; v < 4; ++v) {
      const int64_t left = n - j0 - 16 * v;
      masks[v] = left <= 0 ? __mmask16(0) : TailMask(left);
    }
    // k in chunks of kKC rows of B (32 KiB of a 64-column panel): the panel stays in L1 while
    // every row block of A passes over it; later chunks add to C
    for (int64_t k0 = 0; k0 < k; k0 += kKC) {
      const int64_t kc = Min(kKC, k - k0);
      const float beta_k = k0 == 0 ? beta : 1.f;
      for (int64_t i0 = 0; i0 < m; i0 += kMR)
        Block(kc, Min(kMR, m - i0), alpha, a + i0 * sai + k0 * sak, sai, sak,
              b + k0 * ldb + j0, ldb, beta_k, c + i0 * ldc + j0, ldc, masks);
    }
  }
}

// exp(x); below -87.3 (and -inf) 0; NaN stays NaN (max/min return their second operand, x, on
// NaN, and the compare is false for NaN).
inline __m512 Exp(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(lo, x));
  const __m512 fn = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_mask_mov_ps(_mm512_scalef_ps(p, fn), under, _mm512_setzero_ps());
}

float ExpShiftSum(float* s, int64_t n, float shift) {
  const __m512 vs = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 m = TailMask(n - c);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + c), vs));
    _mm512_mask_storeu_ps(s + c, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

float RowMax(const float* s, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-kInf);
  __m512 mx = ninf;
  for (int64_t c = 0; c < n; c += 16)  // max_ps(x, mx) keeps mx where x is NaN
    mx = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, TailMask(n - c), s + c), mx);
  return _mm512_reduce_max_ps(mx);
}

inline __m512i Mix(__m512i h) {
  h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int32_t(kAttnMix1)));
  h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 13));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int32_t(kAttnMix2)));
  return _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
}

void Dropout(float* p, int64_t n, uint32_t row_key, int64_t j0, uint32_t thr, float inv_keep) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i key = _mm512_set1_epi32(int32_t(row_key)), vt = _mm512_set1_epi32(int32_t(thr));
  const __m512i mul = _mm512_set1_epi32(int32_t(kAttnColMul));
  const __m512 inv = _mm512_set1_ps(inv_keep);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 m = TailMask(n - c);
    const __m512i j = _mm512_add_epi32(_mm512_set1_epi32(int32_t(uint32_t(j0 + c))), iota);
    const __m512i h = Mix(_mm512_xor_si512(key, _mm512_mullo_epi32(j, mul)));
    const __mmask16 keep = _mm512_cmp_epu32_mask(h, vt, _MM_CMPINT_NLT);
    const __m512 v = _mm512_maskz_loadu_ps(m, p + c);
    _mm512_mask_storeu_ps(p + c, m, _mm512_maskz_mul_ps(keep, v, inv));
  }
}

void SoftmaxGrad(const float* p, float* dp, int64_t n, float d) {
  const __m512 vd = _mm512_set1_ps(d);
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 m = TailMask(n - c);
    const __m512 g = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dp + c), vd);
    _mm512_mask_storeu_ps(dp + c, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + c), g));
  }
}

}  // namespace

#pragma GCC diagnostic pop
#pragma GCC pop_options

const AttnTileOps* Avx512AttnTiles() {
  static const AttnTileOps ops = {&Gemm, &ExpShiftSum, &RowMax, &Dropout, &SoftmaxGrad,
                                  "avx512"};
  return __builtin_cpu_supports("avx512f") ? &ops : nullptr;
}

}  // namespace cpu
}  // namespace singa

#else  // not GCC-compatible x86-64: the portable ops only

namespace singa {
namespace cpu {
const AttnTileOps* Avx512AttnTiles() { return nullptr; }
}  // namespace cpu
}  // namespace singa

#endif
