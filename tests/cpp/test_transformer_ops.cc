// The transformer ops of singa/ops/transformer.h and their elementwise rows (GELU, IsNaN, IsInf,
// MaskedFill) against plain C++ references, on the CPU's reference kernels; errors and NaN.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "test_helpers.h"

#ifdef SINGA_USE_DNNL
#include "ops/dnnl/common.h"
#endif

using namespace singa;
using singa_test::FromVector;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor Ints(const std::vector<int>& v, const Shape& shape) {
  Tensor t(shape, defaultDevice(), kInt);
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

TEST(TransformerOps, GeluRowsAndTheirDerivatives) {
  const std::vector<float> xs{-4.f, -1.f, -0.3f, 0.f, 0.5f, 2.f};
  const Tensor x = FromVector(xs, {6});
  std::vector<double> exact, approx, d_exact, d_approx;
  const double k = std::sqrt(2.0 / M_PI);
  for (float f : xs) {
    const double v = f, t = std::tanh(k * (v + 0.044715 * v * v * v));
    exact.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    approx.push_back(0.5 * v * (1 + t));
    // derivatives by central differences of the references
    const double h = 1e-4;
    auto ge = [](double z) { return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0))); };
    auto gt = [k](double z) { return 0.5 * z * (1 + std::tanh(k * (z + 0.044715 * z * z * z))); };
    d_exact.push_back(2.0 * (ge(v + h) - ge(v - h)) / (2 * h));
    d_approx.push_back(2.0 * (gt(v + h) - gt(v - h)) / (2 * h));
  }
  ExpectNear(GELU(x).ToVector<float>(), exact, 1e-6);
  ExpectNear(GELUTanh(x).ToVector<float>(), approx, 1e-6);
  const Tensor dy = FromVector(std::vector<float>(6, 2.f), {6});
  ExpectNear(GELUBackward(dy, x).ToVector<float>(), d_exact, 1e-4);
  ExpectNear(GELUTanhBackward(dy, x).ToVector<float>(), d_approx, 1e-4);
}

TEST(TransformerOps, IsNaNIsInfGiveZeroOneInTheInputsDtype) {
  const Tensor x = FromVector({1.f, kNaN, kInf, -kInf}, {4});
  EXPECT_EQ(IsNaN(x).ToVector<float>(), (std::vector<float>{0, 1, 0, 0}));
  EXPECT_EQ(IsInf(x).ToVector<float>(), (std::vector<float>{0, 0, 1, 1}));
  const Tensor i = Ints({3, -7}, {2});
  EXPECT_EQ(IsNaN(i).data_type(), kInt);
  EXPECT_EQ(IsInf(i).ToVector<int>(), (std::vector<int>{0, 0}));
}

TEST(TransformerOps, MaskedFillBroadcastsAndKeepsXsDtype) {
  const Tensor x = FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor mask = FromVector({0, 1, 0}, {3});
  EXPECT_EQ(MaskedFill(x, mask, -9.f).ToVector<float>(), (std::vector<float>{1, -9, 3, 4, -9, 6}));
  const Tensor imask = Ints({1, 0}, {2, 1});  // another dtype: compared with 0 first
  const std::vector<float> y = MaskedFill(x, imask, kNaN).ToVector<float>();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;  // row 0 masked
  EXPECT_EQ(std::vector<float>(y.begin() + 3, y.end()), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(MaskedFill(Ints({1, 2}, {2}), Ints({0, 1}, {2}), 7.f).ToVector<int>(),
            (std::vector<int>{1, 7}));
  EXPECT_THROW(MaskedFill(x, FromVector({1, 0}, {2}), 0.f), ShapeError);
}

// Layer norm of rows of N values against a double reference, forward and backward.
void CheckLayerNorm(size_t M, size_t N, bool affine) {
  const Tensor x = singa_test::FromVector(singa_test::Iota(M * N, -3.f, 0.37f), {M, N});
  std::vector<float> xv = x.ToVector<float>();
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(xv[i]) * 2.f + 0.1f * float(i % 7);
  const Tensor xs = FromVector(xv, {M, N});
  const Tensor w = affine ? FromVector(singa_test::Iota(N, 0.5f, 0.1f), {N}) : Tensor();
  const Tensor b = affine ? FromVector(singa_test::Iota(N, -0.2f, 0.05f), {N}) : Tensor();
  const float eps = 1e-5f;
  auto r = LayerNormForward(xs, w, b, {N}, eps);
  std::vector<double> want(M * N), mean(M), rstd(M);
  for (size_t m = 0; m < M; ++m) {
    double s = 0, q = 0;
    for (size_t i = 0; i < N; ++i) s += xv[m * N + i];
    mean[m] = s / double(N);
    for (size_t i = 0; i < N; ++i) q += (xv[m * N + i] - mean[m]) * (xv[m * N + i] - mean[m]);
    rstd[m] = 1.0 / std::sqrt(q / double(N) + eps);
    for (size_t i = 0; i < N; ++i) {
      const double xh = (xv[m * N + i] - mean[m]) * rstd[m];
      want[m * N + i] = affine ? xh * (0.5 + 0.1 * double(i)) + (-0.2 + 0.05 * double(i)) : xh;
    }
  }
  ExpectNear(r[0].ToVector<float>(), want, 1e-4);
  ExpectNear(r[1].ToVector<float>(), mean, 1e-5);
  ExpectNear(r[2].ToVector<float>(), rstd, 1e-3);
  // backward with dy = 1 everywhere: dbias = M per column, sum(dx) per row = 0
  const Tensor dy = FromVector(std::vector<float>(M * N, 1.f), {M, N});
  auto g = LayerNormBackward(dy, xs, w, r[1], r[2], {N});
  const std::vector<float> dx = g[0].ToVector<float>();
  for (size_t m = 0; m < M; ++m) {
    double s = 0;
    for (size_t i = 0; i < N; ++i) s += dx[m * N + i];
    EXPECT_NEAR(s, 0.0, 1e-3);
  }
  EXPECT_EQ(g[1].empty(), !affine);
  if (affine) ExpectNear(g[2].ToVector<float>(), std::vector<double>(N, double(M)), 1e-3);
}

TEST(TransformerOps, LayerNormSmallAndThreadedShapes) {
  CheckLayerNorm(3, 5, true);
  CheckLayerNorm(3, 5, false);
  CheckLayerNorm(300, 257, true);  // enough work to split between threads
}

TEST(TransformerOps, LayerNormChecksItsOperands) {
  const Tensor x = FromVector(singa_test::Iota(6), {2, 3});
  EXPECT_THROW_MSG(LayerNormForward(x, Tensor(), Tensor(), {2}, 1e-5f), ShapeError,
                   "normalized_shape");
  EXPECT_THROW_MSG(LayerNormForward(x, FromVector({1, 1}, {2}), Tensor(), {3}, 1e-5f),
                   ShapeError, "weight");
  EXPECT_THROW_MSG(LayerNormForward(x, Tensor(), Tensor(), {3}, -1.f), ValueError, "eps");
  EXPECT_THROW_MSG(LayerNormForward(Ints({1, 2}, {2}), Tensor(), Tensor(), {2}, 1e-5f),
                   DTypeError, "LayerNormForward");
}

TEST(TransformerOps, LayerNormRowWithNaNIsNaNOthersNot) {
  const Tensor x = FromVector({1, kNaN, 3, 1, 2, 3}, {2, 3});
  const std::vector<float> y = LayerNormForward(x, Tensor(), Tensor(), {3}, 1e-5f)[0]
                                   .ToVector<float>();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i]));
  for (int i = 3; i < 6; ++i) EXPECT_FALSE(std::isnan(y[i]));
}

TEST(TransformerOps, CumSumExclusiveReverseAndAxes) {
  const Tensor x = FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(CumSum(x, 1).ToVector<float>(), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(CumSum(x, 1, true).ToVector<float>(), (std::vector<float>{0, 1, 3, 0, 4, 9}));
  EXPECT_EQ(CumSum(x, -1, false, true).ToVector<float>(),
            (std::vector<float>{6, 5, 3, 15, 11, 6}));
  EXPECT_EQ(CumSum(x, 1, true, true).ToVector<float>(), (std::vector<float>{5, 3, 0, 11, 6, 0}));
  EXPECT_EQ(CumSum(x, 0).ToVector<float>(), (std::vector<float>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(CumSum(Ints({1, 1, 1}, {3}), 0).ToVector<int>(), (std::vector<int>{1, 2, 3}));
  EXPECT_THROW_MSG(CumSum(x, 2), AxisError, "CumSum");
}

TEST(TransformerOps, GatherElementsAndItsScatterAdd) {
  const Tensor x = FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor idx = Ints({2, 0, -1, 1}, {2, 2});
  EXPECT_EQ(GatherElements(x, idx, 1).ToVector<float>(), (std::vector<float>{3, 1, 6, 5}));
  const Tensor dy = FromVector({1, 1, 1, 1}, {2, 2});
  EXPECT_EQ(GatherElementsBackward(dy, Ints({1, 1, 0, 0}, {2, 2}), 1, {2, 3}).ToVector<float>(),
            (std::vector<float>{0, 2, 0, 2, 0, 0}));
  EXPECT_EQ(GatherElements(x, Ints({1, 0}, {1, 2}), 0).ToVector<float>(),
            (std::vector<float>{4, 2}));
  EXPECT_THROW_MSG(GatherElements(x, Ints({3}, {1, 1}), 1), AxisError, "out of range");
  EXPECT_THROW_MSG(GatherElements(x, Ints({0}, {1}), 1), ShapeError, "rank");
}

TEST(TransformerOps, GatherNDSlicesBatchDimsAndScatterAdd) {
  const Tensor x = FromVector(singa_test::Iota(12), {2, 3, 2});
  // q = 2: whole rows of the last axis
  EXPECT_EQ(GatherND(x, Ints({1, 2, 0, -3}, {2, 2}), 0).ToVector<float>(),
            (std::vector<float>{10, 11, 0, 1}));
  // batch_dims = 1, q = 1
  EXPECT_EQ(GatherND(x, Ints({2, 0}, {2, 1}), 1).ToVector<float>(),
            (std::vector<float>{4, 5, 6, 7}));
  const Tensor dy = FromVector({1, 1, 1, 1}, {2, 2});
  EXPECT_EQ(GatherNDBackward(dy, Ints({0, 1, 0, 1}, {2, 2}), 0, {2, 3, 2}).ToVector<float>(),
            (std::vector<float>{0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_THROW_MSG(GatherND(x, Ints({0, 0, 0, 0}, {1, 4}), 0), ShapeError, "coordinates");
  EXPECT_THROW_MSG(GatherND(x, Ints({5, 0}, {1, 2}), 0), AxisError, "out of range");
}

#ifdef SINGA_USE_DNNL
// oneDNN's layer_normalization (when enabled) against the reference kernel, with and without the
// affine parameters: y, mean, rstd and every gradient.
TEST(TransformerOps, LayerNormOneDnnEqualsReference) {
  auto dev = defaultDevice();
  const Backend old = dev->backend();
  const bool was = dnnl_kernel::LayerNormEnabled();
  dnnl_kernel::SetLayerNormEnabled(true);
  const size_t M = 37, N = 130;
  std::vector<float> xv = singa_test::Iota(M * N, -2.f, 0.013f);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(xv[i] * 3.f) + 0.01f * float(i % 11);
  const Tensor x = FromVector(xv, {M, N}), dy = FromVector(singa_test::Iota(M * N, 1.f, -1e-3f),
                                                          {M, N});
  const Tensor w = FromVector(singa_test::Iota(N, 0.5f, 0.01f), {N});
  const Tensor b = FromVector(singa_test::Iota(N, -0.3f, 0.02f), {N});
  for (bool affine : {true, false}) {
    std::vector<std::vector<float>> got[2];
    for (int k = 0; k < 2; ++k) {
      dev->set_backend(k ? Backend::kCpuDnnl : Backend::kCpuRef);
      auto f = LayerNormForward(x, affine ? w : Tensor(), affine ? b : Tensor(), {N}, 1e-5f);
      auto g = LayerNormBackward(dy, x, affine ? w : Tensor(), f[1], f[2], {N});
      for (const Tensor& t : {f[0], f[1], f[2], g[0], g[1], g[2]})
        got[k].push_back(t.empty() ? std::vector<float>() : t.ToVector<float>());
    }
    for (size_t i = 0; i < got[0].size(); ++i) {
      ASSERT_EQ(got[0][i].size(), got[1][i].size()) << "output " << i;
      for (size_t j = 0; j < got[0][i].size(); ++j)
        EXPECT_NEAR(got[0][i][j], got[1][i][j], 2e-4f * std::max(1.f, std::fabs(got[0][i][j])))
            << "output " << i << " element " << j << (affine ? " (affine)" : "");
    }
  }
  dev->set_backend(old);
  dnnl_kernel::SetLayerNormEnabled(was);
}
#endif

}  // namespace
