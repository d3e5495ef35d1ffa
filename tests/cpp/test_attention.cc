// The CPU attention's tile primitives (cpu/attention_tiles.h): the AVX-512 build against the
// portable one (loops and sgemm) on odd sizes, both A layouts, -inf and NaN; and the C++ front:
// the output shapes, the errors that must not abort, and the forward against a direct loop.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/attention_kernel.h"
#include "ops/cpu/attention_tiles.h"
#include "singa/core/error.h"
#include "singa/ops/attention.h"

namespace {

using singa::Shape;
using singa::Tensor;
using singa::cpu::AttnTileOps;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

const AttnTileOps* Fast() { return singa::cpu::Avx512AttnTiles(); }

TEST(AttentionTiles, GemmMatchesPortableForBothLayoutsAndOddSizes) {
  if (Fast() == nullptr) GTEST_SKIP() << "no AVX-512 on this CPU";
  const AttnTileOps& ref = singa::cpu::PortableAttnTiles();
  for (int64_t m : {1, 5, 7, 64}) {
    for (int64_t n : {1, 17, 64, 70, 256}) {
      for (int64_t k : {1, 3, 64, 300}) {  // 300: three passes over B
        for (bool trans : {false, true}) {
          SCOPED_TRACE(testing::Message() << m << "x" << n << "x" << k << " trans " << trans);
          const std::vector<float> a = Random(size_t(m * k), 1), b = Random(size_t(k * n), 2);
          std::vector<float> c1 = Random(size_t(m * n), 3), c2 = c1;
          const int64_t sai = trans ? 1 : k, sak = trans ? m : 1;
          Fast()->gemm(m, n, k, 0.5f, a.data(), sai, sak, b.data(), n, 1.f, c1.data(), n);
          ref.gemm(m, n, k, 0.5f, a.data(), sai, sak, b.data(), n, 1.f, c2.data(), n);
          const float tol = 1e-4f * float(1 + k / 64);
          for (size_t i = 0; i < c1.size(); ++i) ASSERT_NEAR(c1[i], c2[i], tol) << i;
          // beta 0 ignores C, NaN included
          std::vector<float> c3(size_t(m * n), std::numeric_limits<float>::quiet_NaN());
          Fast()->gemm(m, n, k, 1.f, a.data(), sai, sak, b.data(), n, 0.f, c3.data(), n);
          for (float x : c3) ASSERT_FALSE(std::isnan(x));
        }
      }
    }
  }
}

TEST(AttentionTiles, ExpRowMaxDropoutAndSoftmaxGradMatchPortable) {
  if (Fast() == nullptr) GTEST_SKIP() << "no AVX-512 on this CPU";
  const AttnTileOps& ref = singa::cpu::PortableAttnTiles();
  for (int64_t n : {1, 15, 16, 33, 256}) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    std::vector<float> s = Random(size_t(n), 4);
    for (float& x : s) x *= 40.f;  // exponents from -80 to 80
    s[0] = -kInf;
    if (n > 2) s[2] = -200.f;
    EXPECT_EQ(Fast()->row_max(s.data(), n), ref.row_max(s.data(), n));
    std::vector<float> e1 = s, e2 = s;
    const float sum1 = Fast()->exp_shift_sum(e1.data(), n, 1.f);
    const float sum2 = ref.exp_shift_sum(e2.data(), n, 1.f);
    EXPECT_NEAR(sum1, sum2, 1e-5f * std::fabs(sum2));
    EXPECT_EQ(e1[0], 0.f);  // exp(-inf)
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(e1[i], e2[i], 5e-7f * e2[i] + 1e-30f) << i;
      EXPECT_NEAR(e1[i], std::exp(s[i] - 1.f), 5e-7f * std::exp(s[i] - 1.f) + 1e-30f) << i;
    }
    std::vector<float> p1 = Random(size_t(n), 5), p2 = p1;
    Fast()->dropout(p1.data(), n, 12345u, 77, singa::AttnDropThreshold(0.3f), 2.f);
    ref.dropout(p2.data(), n, 12345u, 77, singa::AttnDropThreshold(0.3f), 2.f);
    EXPECT_EQ(p1, p2);
    std::vector<float> g1 = Random(size_t(n), 6), g2 = g1;
    const std::vector<float> p = Random(size_t(n), 7);
    Fast()->softmax_grad(p.data(), g1.data(), n, 0.25f);
    ref.softmax_grad(p.data(), g2.data(), n, 0.25f);
    EXPECT_EQ(g1, g2);
  }
  std::vector<float> nan = {1.f, std::numeric_limits<float>::quiet_NaN(), 2.f};
  EXPECT_EQ(Fast()->row_max(nan.data(), 3), 2.f);  // NaN skipped by the max...
  EXPECT_TRUE(std::isnan(Fast()->exp_shift_sum(nan.data(), 3, 2.f)));  // ...kept by the sum
}

TEST(AttentionFront, ShapesErrorsAndValuesAgainstALoop) {
  const size_t L = 3, S = 5, E = 4, Ev = 2;
  Tensor q(Shape{2, 1, L, E}), k(Shape{1, 3, S, E}), v(Shape{1, 3, S, Ev});
  const std::vector<float> qv = Random(q.Size(), 8), kv = Random(k.Size(), 9),
                           vv = Random(v.Size(), 10);
  q.CopyDataFromHostPtr(qv.data(), qv.size());
  k.CopyDataFromHostPtr(kv.data(), kv.size());
  v.CopyDataFromHostPtr(vv.data(), vv.size());
  singa::AttentionOptions o;
  singa::AttentionForwardResult f = singa::ScaledDotProductAttention(q, k, v, Tensor(), o);
  EXPECT_EQ(f.out.shape(), (Shape{2, 3, L, Ev}));
  EXPECT_EQ(f.lse.shape(), (Shape{2, 3, L}));
  const std::vector<float> out = f.out.ToVector<float>();
  for (size_t b = 0; b < 2; ++b)
    for (size_t h = 0; h < 3; ++h)
      for (size_t i = 0; i < L; ++i) {
        std::vector<double> s(S);
        double mx = -1e300, den = 0;
        for (size_t j = 0; j < S; ++j) {
          s[j] = 0;
          for (size_t e = 0; e < E; ++e)
            s[j] += double(qv[(b * L + i) * E + e]) * kv[(h * S + j) * E + e];
          s[j] /= std::sqrt(double(E));
          mx = std::max(mx, s[j]);
        }
        for (size_t j = 0; j < S; ++j) den += std::exp(s[j] - mx);
        for (size_t c = 0; c < Ev; ++c) {
          double want = 0;
          for (size_t j = 0; j < S; ++j)
            want += std::exp(s[j] - mx) / den * vv[(h * S + j) * Ev + c];
          EXPECT_NEAR(out[((b * 3 + h) * L + i) * Ev + c], want, 1e-5);
        }
      }
  const std::vector<Tensor> g = singa::ScaledDotProductAttentionBackward(f.out, q, k, v, Tensor(),
                                                                        f, o);
  EXPECT_EQ(g[0].shape(), q.shape());
  EXPECT_EQ(g[1].shape(), k.shape());
  EXPECT_EQ(g[2].shape(), v.shape());
  EXPECT_THROW(singa::ScaledDotProductAttention(q, k, Tensor(Shape{1, 3, S + 1, Ev}), Tensor(), o),
               singa::ShapeError);
  EXPECT_THROW(singa::ScaledDotProductAttention(q, k, v, Tensor(Shape{L, S + 1}), o),
               singa::ShapeError);
  o.dropout_p = 1.f;
  EXPECT_THROW(singa::ScaledDotProductAttention(q, k, v, Tensor(), o), singa::ValueError);
  o.dropout_p = 0.f;
  o.causal = true;
  EXPECT_THROW(singa::ScaledDotProductAttention(q, k, v, Tensor(Shape{L, S}), o),
               singa::ValueError);
  EXPECT_THROW(singa::ScaledDotProductAttention(q.AsType(singa::kInt), k, v, Tensor(),
                                                singa::AttentionOptions()),
               singa::DTypeError);
}

}  // namespace
