// Neural-network kernels other than convolution (singa/ops/nn.h): pooling, batch norm, losses
// and index ops against naive reference loops, backward passes against central finite
// differences, graph replay against eager runs, and the error paths.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>

#include "nn_test_util.h"
#include "singa/ops/nn.h"
#include "test_helpers.h"

using namespace singa;
using namespace nn_test;
using singa_test::FromVector;
using singa_test::Hold;

namespace {

struct PoolCase {
  size_t N, C, H, W, kh, kw, sh, sw, ph, pw;
};

// Reference pooling; also returns the (first) argmax of each window for max pooling.
std::vector<float> RefPool(const PoolCase& c, const std::vector<float>& x, bool is_max,
                           bool include_pad, std::vector<size_t>* arg, size_t* OH_, size_t* OW_) {
  const size_t OH = (c.H + 2 * c.ph - c.kh) / c.sh + 1, OW = (c.W + 2 * c.pw - c.kw) / c.sw + 1;
  *OH_ = OH;
  *OW_ = OW;
  std::vector<float> y;
  arg->clear();
  for (size_t p = 0; p < c.N * c.C; ++p)
    for (size_t oh = 0; oh < OH; ++oh)
      for (size_t ow = 0; ow < OW; ++ow) {
        float best = -INFINITY, sum = 0.f;
        size_t bi = 0, cnt = 0;
        for (size_t i = 0; i < c.kh; ++i)
          for (size_t j = 0; j < c.kw; ++j) {
            long ih = long(oh * c.sh + i) - long(c.ph), iw = long(ow * c.sw + j) - long(c.pw);
            if (ih < 0 || iw < 0 || ih >= long(c.H) || iw >= long(c.W)) continue;
            size_t xi = (p * c.H + size_t(ih)) * c.W + size_t(iw);
            if (x[xi] > best) {
              best = x[xi];
              bi = xi;
            }
            sum += x[xi];
            ++cnt;
          }
        arg->push_back(bi);
        y.push_back(is_max ? best : sum / float(include_pad ? c.kh * c.kw : cnt));
      }
  return y;
}

const std::vector<PoolCase> kPoolCases = {
    {2, 3, 8, 8, 2, 2, 2, 2, 0, 0},  {2, 2, 7, 9, 3, 3, 2, 2, 1, 1},
    {1, 2, 6, 5, 3, 2, 1, 2, 1, 0},  {3, 2, 5, 5, 5, 5, 1, 1, 2, 2},
    {2, 3, 9, 7, 2, 3, 3, 1, 1, 1},  {4, 16, 20, 20, 3, 3, 2, 2, 1, 1},  // parallel
};

// Values that are distinct within each plane and at least 0.1 apart: no ties, so finite
// differences with eps < 0.05 are exact; small per plane, so float rounding stays small.
std::vector<float> Distinct(size_t planes, size_t plane, unsigned seed) {
  std::vector<float> v(planes * plane);
  std::mt19937 gen(seed);
  for (size_t p = 0; p < planes; ++p) {
    float* q = v.data() + p * plane;
    for (size_t i = 0; i < plane; ++i) q[i] = 0.1f * float(i) - 0.05f * float(plane);
    std::shuffle(q, q + plane, gen);
  }
  return v;
}

}  // namespace

TEST(NnPool, ForwardMatchesReference) {
  ForEachBackend([&] {
    for (const PoolCase& c : kPoolCases)
      for (int mode = 0; mode < 3; ++mode) {  // max, avg excluding pad, avg including pad
        const bool is_max = mode == 0, include = mode == 2;
        SCOPED_TRACE(::testing::Message() << "case " << c.H << "x" << c.W << " k" << c.kh << "x"
                                          << c.kw << " mode " << mode);
        PoolingHandle h({c.N, c.C, c.H, c.W}, {c.kh, c.kw}, {c.sh, c.sw}, {c.ph, c.pw}, is_max,
                        include);
        auto xv = Rand(c.N * c.C * c.H * c.W, 11);
        std::vector<size_t> arg;
        size_t OH, OW;
        auto yr = RefPool(c, xv, is_max, include, &arg, &OH, &OW);
        ASSERT_EQ(h.pooled_height, OH);
        ASSERT_EQ(h.pooled_width, OW);
        Tensor y = Pool2dForward(FromVector(xv, {c.N, c.C, c.H, c.W}), h);
        EXPECT_EQ(y.shape(), (Shape{c.N, c.C, OH, OW}));
        ExpectClose(y.ToVector<float>(), yr, 1e-5f, "y");
      }
  });
}

TEST(NnPool, BackwardMatchesReferenceAndFiniteDifferences) {
  ForEachBackend([&] {
    for (const PoolCase& c : kPoolCases)
      for (int mode = 0; mode < 3; ++mode) {
        const bool is_max = mode == 0, include = mode == 2;
        SCOPED_TRACE(::testing::Message() << "case " << c.H << "x" << c.W << " mode " << mode);
        const Shape xs{c.N, c.C, c.H, c.W};
        PoolingHandle h(xs, {c.kh, c.kw}, {c.sh, c.sw}, {c.ph, c.pw}, is_max, include);
        auto xv = Distinct(c.N * c.C, c.H * c.W, 12);
        Tensor x = FromVector(xv, xs);
        Tensor y = Pool2dForward(x, h);
        auto rv = Rand(y.Size(), 13);
        Tensor dx = Pool2dBackward(FromVector(rv, y.shape()), x, y, h);
        ASSERT_EQ(dx.shape(), xs);
        auto dxv = dx.ToVector<float>();
        // Reference: route each window's gradient.
        std::vector<size_t> arg;
        size_t OH, OW;
        RefPool(c, xv, is_max, include, &arg, &OH, &OW);
        std::vector<float> ref(xv.size(), 0.f);
        if (is_max) {
          for (size_t k = 0; k < rv.size(); ++k) ref[arg[k]] += rv[k];
          ExpectClose(dxv, ref, 1e-5f, "dx");
        }
        auto loss = [&](const std::vector<float>& v) {
          return DotV(Pool2dForward(FromVector(v, xs), h).ToVector<float>(), rv);
        };
        ExpectGradMatches(dxv, NumericGrad(xv, loss, 2e-2f, 200), 2e-3, "dx (numeric)");
      }
  });
}

TEST(NnPool, MaxGradientGoesToTheFirstOfTies) {
  ForEachBackend([&] {
    PoolingHandle h({1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}, true);
    Tensor x({1, 1, 4, 4});
    x.SetValue(3.f);
    Tensor y = Pool2dForward(x, h);
    Tensor dy = FromVector({1, 2, 3, 4}, {1, 1, 2, 2});
    auto dx = Pool2dBackward(dy, x, y, h).ToVector<float>();
    EXPECT_EQ(dx, (std::vector<float>{1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0}));
    // Padding never wins a max, even over negative values.
    PoolingHandle hp({1, 1, 2, 2}, {2, 2}, {1, 1}, {1, 1}, true);
    Tensor neg = FromVector({-5, -6, -7, -8}, {1, 1, 2, 2});
    EXPECT_EQ(Pool2dForward(neg, hp).ToVector<float>(),
              (std::vector<float>{-5, -5, -6, -5, -5, -6, -7, -7, -8}));
  });
}

TEST(NnPool, BadInputsThrow) {
  EXPECT_THROW_MSG(PoolingHandle({2, 3, 8, 8}, {2, 2}, {2, 2}, {2, 0}, true), ValueError,
                   "PoolingHandle: padding 2x0 must be smaller than the kernel 2x2");
  EXPECT_THROW_MSG(PoolingHandle({2, 3, 8}, {2, 2}, {2, 2}, {0, 0}, true), ShapeError,
                   "PoolingHandle: expected a 4-d input");
  EXPECT_THROW_MSG(PoolingHandle({2, 3, 2, 2}, {3, 3}, {1, 1}, {0, 0}, true), ShapeError,
                   "does not fit");
  EXPECT_THROW(PoolingHandle({2, 3, 8, 8}, {2, 2}, {0, 2}, {0, 0}, true), ValueError);
  PoolingHandle h({2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, false);
  Tensor flat({6, 8});
  flat.SetValue(1.f);
  EXPECT_THROW_MSG(Pool2dForward(flat, h), ShapeError, "Pool2d: expected a 4-d input");
  Tensor x({2, 4, 8, 8});
  x.SetValue(1.f);
  EXPECT_THROW_MSG(Pool2dForward(x, h), ShapeError,
                   "Pool2d: the input (2, 4, 8, 8) has 4 channels but the handle expects 3");
  Tensor x3({2, 3, 8, 8}), dy({2, 3, 3, 4});
  x3.SetValue(1.f);
  dy.SetValue(1.f);
  EXPECT_THROW_MSG(Pool2dBackward(dy, x3, Tensor(), h), ShapeError,
                   "Pool2dBackward: dy has shape (2, 3, 3, 4), expected (2, 3, 4, 4)");
}

// ---- batch norm ----------------------------------------------------------------------------

namespace {

struct BnRef {
  std::vector<float> y, mean, var;
};

BnRef RefBatchNorm(const std::vector<float>& x, size_t N, size_t C, size_t S,
                   const std::vector<float>& scale, const std::vector<float>& bias, float eps) {
  BnRef r;
  r.mean.assign(C, 0.f);
  r.var.assign(C, 0.f);
  r.y.resize(x.size());
  for (size_t c = 0; c < C; ++c) {
    double s = 0, q = 0;
    for (size_t n = 0; n < N; ++n)
      for (size_t i = 0; i < S; ++i) s += x[(n * C + c) * S + i];
    const double m = s / double(N * S);
    for (size_t n = 0; n < N; ++n)
      for (size_t i = 0; i < S; ++i) q += std::pow(x[(n * C + c) * S + i] - m, 2);
    const double v = q / double(N * S);
    r.mean[c] = float(m);
    r.var[c] = float(v);
    for (size_t n = 0; n < N; ++n)
      for (size_t i = 0; i < S; ++i) {
        size_t k = (n * C + c) * S + i;
        r.y[k] = float((x[k] - m) / std::sqrt(v + eps) * scale[c] + bias[c]);
      }
  }
  return r;
}

}  // namespace

TEST(NnBatchNorm, TrainingForwardStatsAndRunningUpdates) {
  ForEachBackend([&] {
    for (Shape xs : {Shape{4, 3, 5, 6}, Shape{7, 5}, Shape{16, 300}, Shape{8, 32, 16, 16}}) {
      SCOPED_TRACE(::testing::Message() << Str(xs));
      const size_t N = xs[0], C = xs[1], S = Product(xs, 2);
      auto xv = Rand(Product(xs), 21, -2.f, 3.f), sv = Rand(C, 22, 0.5f, 1.5f), bv = Rand(C, 23);
      auto rm0 = Rand(C, 24), rv0 = Rand(C, 25, 0.5f, 2.f);
      Tensor rm = FromVector(rm0, {C}), rv = FromVector(rv0, {C});
      const float eps = 1e-5f, mom = 0.1f;
      auto out = BatchNormForwardTraining(FromVector(xv, xs), FromVector(sv, {C}),
                                          FromVector(bv, {C}), &rm, &rv, mom, eps);
      ASSERT_EQ(out.size(), 3u);
      BnRef ref = RefBatchNorm(xv, N, C, S, sv, bv, eps);
      EXPECT_EQ(out[0].shape(), xs);
      EXPECT_EQ(out[1].shape(), (Shape{C}));
      ExpectClose(out[0].ToVector<float>(), ref.y, 2e-4f, "y");
      ExpectClose(out[1].ToVector<float>(), ref.mean, 1e-5f, "mean");
      ExpectClose(out[2].ToVector<float>(), ref.var, 1e-5f, "var");
      std::vector<float> rm_want(C), rv_want(C);
      const float M = float(N * S);
      for (size_t c = 0; c < C; ++c) {
        rm_want[c] = (1 - mom) * rm0[c] + mom * ref.mean[c];
        rv_want[c] = (1 - mom) * rv0[c] + mom * ref.var[c] * M / (M - 1);
      }
      ExpectClose(rm.ToVector<float>(), rm_want, 1e-5f, "running_mean");
      ExpectClose(rv.ToVector<float>(), rv_want, 1e-5f, "running_var");
      // Null running stats are allowed (no update).
      auto out2 = BatchNormForwardTraining(FromVector(xv, xs), FromVector(sv, {C}),
                                           FromVector(bv, {C}), nullptr, nullptr, mom, eps);
      ExpectClose(out2[0].ToVector<float>(), ref.y, 2e-4f, "y (no running)");
    }
  });
}

TEST(NnBatchNorm, InferenceUsesRunningStats) {
  ForEachBackend([&] {
    const Shape xs{3, 4, 2, 5};
    auto xv = Rand(Product(xs), 31), sv = Rand(4, 32), bv = Rand(4, 33), mv = Rand(4, 34),
         vv = Rand(4, 35, 0.1f, 2.f);
    Tensor y = BatchNormForwardInference(FromVector(xv, xs), FromVector(sv, {4}),
                                         FromVector(bv, {4}), FromVector(mv, {4}),
                                         FromVector(vv, {4}), 1e-3f);
    std::vector<float> want(xv.size());
    for (size_t k = 0; k < xv.size(); ++k) {
      size_t c = (k / 10) % 4;
      want[k] = (xv[k] - mv[c]) / std::sqrt(vv[c] + 1e-3f) * sv[c] + bv[c];
    }
    ExpectClose(y.ToVector<float>(), want, 1e-5f, "y");
  });
}

TEST(NnBatchNorm, BackwardMatchesFiniteDifferences) {
  ForEachBackend([&] {
    for (Shape xs : {Shape{3, 2, 3, 4}, Shape{6, 4}}) {
      SCOPED_TRACE(::testing::Message() << Str(xs));
      const size_t C = xs[1];
      const float eps = 1e-3f;
      auto xv = Rand(Product(xs), 41, -2.f, 2.f), sv = Rand(C, 42, 0.5f, 1.5f), bv = Rand(C, 43),
           rv = Rand(Product(xs), 44);
      auto loss = [&](const std::vector<float>& x, const std::vector<float>& s,
                      const std::vector<float>& b) {
        auto out = BatchNormForwardTraining(FromVector(x, xs), FromVector(s, {C}),
                                            FromVector(b, {C}), nullptr, nullptr, 0.1f, eps);
        return DotV(out[0].ToVector<float>(), rv);
      };
      auto fwd = BatchNormForwardTraining(FromVector(xv, xs), FromVector(sv, {C}),
                                          FromVector(bv, {C}), nullptr, nullptr, 0.1f, eps);
      auto g = BatchNormBackward(FromVector(rv, xs), FromVector(xv, xs), FromVector(sv, {C}),
                                 fwd[1], fwd[2], eps);
      ASSERT_EQ(g.size(), 3u);
      EXPECT_EQ(g[0].shape(), xs);
      ExpectGradMatches(g[0].ToVector<float>(),
                        NumericGrad(xv, [&](const std::vector<float>& v) { return loss(v, sv, bv); }, 1e-2f),
                        1e-2, "dx");
      ExpectGradMatches(g[1].ToVector<float>(),
                        NumericGrad(sv, [&](const std::vector<float>& v) { return loss(xv, v, bv); }, 1e-2f),
                        1e-2, "dscale");
      ExpectGradMatches(g[2].ToVector<float>(),
                        NumericGrad(bv, [&](const std::vector<float>& v) { return loss(xv, sv, v); }, 1e-2f),
                        1e-2, "dbias");
    }
  });
}

TEST(NnBatchNorm, BadInputsThrow) {
  Tensor x({4, 3, 2, 2}), s3({3}), s4({4}), v({5});
  for (Tensor* t : {&x, &s3, &s4, &v}) t->SetValue(1.f);
  Tensor rm({3}), rv({3});
  rm.SetValue(0.f);
  rv.SetValue(1.f);
  EXPECT_THROW_MSG(BatchNormForwardTraining(x, s4, s3, &rm, &rv, 0.1f, 1e-5f), ShapeError,
                   "BatchNormForwardTraining: scale has shape (4,), expected 3 values");
  EXPECT_THROW_MSG(BatchNormForwardTraining(v, v, v, nullptr, nullptr, 0.1f, 1e-5f), ShapeError,
                   "BatchNormForwardTraining: expected an input (N, C)");
  Tensor bad_rm({4});
  bad_rm.SetValue(0.f);
  EXPECT_THROW_MSG(BatchNormForwardTraining(x, s3, s3, &bad_rm, &rv, 0.1f, 1e-5f), ShapeError,
                   "running_mean has shape (4,)");
  EXPECT_THROW_MSG(BatchNormForwardTraining(x, s3, s3, &rm, &rv, 1.5f, 1e-5f), ValueError,
                   "momentum");
  Tensor one({1, 3});
  one.SetValue(1.f);
  EXPECT_THROW_MSG(BatchNormForwardTraining(one, s3, s3, &rm, &rv, 0.1f, 1e-5f), ValueError,
                   "more than 1 value per channel");
  Tensor xi({4, 3}, kInt);
  xi.SetValue(1);
  EXPECT_THROW_MSG(BatchNormForwardInference(xi, s3, s3, rm, rv, 1e-5f), DTypeError,
                   "BatchNormForwardInference");
  Tensor dy({4, 3, 2, 3});
  dy.SetValue(1.f);
  EXPECT_THROW_MSG(BatchNormBackward(dy, x, s3, rm, rv, 1e-5f), ShapeError,
                   "BatchNormBackward: dy has shape");
}

// ---- losses --------------------------------------------------------------------------------

namespace {

std::vector<float> RefSoftmaxCE(const std::vector<float>& z, const std::vector<float>& t,
                                size_t N, size_t C) {  // t: (N, C) matrix
  std::vector<float> out(N);
  for (size_t i = 0; i < N; ++i) {
    double m = -INFINITY, s = 0;
    for (size_t j = 0; j < C; ++j) m = std::max(m, double(z[i * C + j]));
    for (size_t j = 0; j < C; ++j) s += std::exp(z[i * C + j] - m);
    double lse = m + std::log(s), l = 0;
    for (size_t j = 0; j < C; ++j) l += t[i * C + j] * (lse - z[i * C + j]);
    out[i] = float(l);
  }
  return out;
}

std::vector<float> OneHot(const std::vector<int>& labels, size_t C) {
  std::vector<float> t(labels.size() * C, 0.f);
  for (size_t i = 0; i < labels.size(); ++i) t[i * C + size_t(labels[i])] = 1.f;
  return t;
}

Tensor Labels(const std::vector<int>& l, const Shape& shape) {
  Tensor t(shape, kInt);
  t.CopyDataFromHostPtr(l.data(), l.size());
  return t;
}

}  // namespace

TEST(NnLoss, SoftmaxCrossEntropyForwardAllTargetForms) {
  const size_t N = 5, C = 7;
  auto z = Rand(N * C, 51, -3.f, 3.f);
  std::vector<int> lab{0, 6, 3, 3, 1};
  auto want = RefSoftmaxCE(z, OneHot(lab, C), N, C);
  Tensor logits = FromVector(z, {N, C});
  ExpectClose(SoftmaxCrossEntropyForward(logits, Labels(lab, {N})).ToVector<float>(), want, 1e-5f,
              "int (N,)");
  ExpectClose(SoftmaxCrossEntropyForward(logits, Labels(lab, {N, 1})).ToVector<float>(), want,
              1e-5f, "int (N, 1)");
  std::vector<float> labf(lab.begin(), lab.end());
  ExpectClose(SoftmaxCrossEntropyForward(logits, FromVector(labf, {N})).ToVector<float>(), want,
              1e-5f, "float labels");
  ExpectClose(SoftmaxCrossEntropyForward(logits, FromVector(OneHot(lab, C), {N, C}))
                  .ToVector<float>(),
              want, 1e-5f, "one-hot");
  auto probs = Rand(N * C, 52, 0.f, 1.f);
  for (size_t i = 0; i < N; ++i) {
    float s = 0;
    for (size_t j = 0; j < C; ++j) s += probs[i * C + j];
    for (size_t j = 0; j < C; ++j) probs[i * C + j] /= s;
  }
  ExpectClose(SoftmaxCrossEntropyForward(logits, FromVector(probs, {N, C})).ToVector<float>(),
              RefSoftmaxCE(z, probs, N, C), 1e-5f, "probabilities");
  // Stable for huge logits.
  Tensor big = FromVector({1000.f, 0.f, -1000.f, 500.f, 500.f, 500.f}, {2, 3});
  auto l = SoftmaxCrossEntropyForward(big, Labels({1, 2}, {2})).ToVector<float>();
  EXPECT_NEAR(l[0], 1000.f, 1e-3f);
  EXPECT_NEAR(l[1], std::log(3.f), 1e-4f);  // 500 + log 3 in float32
}

TEST(NnLoss, SoftmaxCrossEntropyBackwardMatchesFiniteDifferences) {
  const size_t N = 4, C = 6;
  auto z = Rand(N * C, 61, -2.f, 2.f);
  std::vector<int> lab{5, 0, 2, 2};
  Tensor tl = Labels(lab, {N});
  auto probs = Rand(N * C, 62, 0.f, 1.f);  // rows not normalised: the exact gradient still holds
  Tensor tp = FromVector(probs, {N, C});
  for (Tensor* t : {&tl, &tp}) {
    auto g = SoftmaxCrossEntropyBackward(FromVector(z, {N, C}), *t).ToVector<float>();
    auto loss = [&](const std::vector<float>& v) {
      auto l = SoftmaxCrossEntropyForward(FromVector(v, {N, C}), *t).ToVector<float>();
      return std::accumulate(l.begin(), l.end(), 0.0);
    };
    ExpectGradMatches(g, NumericGrad(z, loss, 1e-2f), 2e-3, "dlogits");
  }
  // With labels it is exactly softmax - onehot (not divided by N).
  auto g = SoftmaxCrossEntropyBackward(FromVector(z, {N, C}), tl).ToVector<float>();
  auto sm = SoftMax(FromVector(z, {N, C}), -1).ToVector<float>();
  auto oh = OneHot(lab, C);
  for (size_t k = 0; k < g.size(); ++k) EXPECT_NEAR(g[k], sm[k] - oh[k], 1e-6f);
}

TEST(NnLoss, CrossEntropyOnProbabilities) {
  Tensor p = FromVector({0.2f, 0.5f, 0.3f, 0.f, 1.f, 0.f}, {2, 3});
  auto l = CrossEntropyFwd(p, Labels({1, 0}, {2})).ToVector<float>();
  EXPECT_NEAR(l[0], -std::log(0.5f), 1e-6f);
  EXPECT_TRUE(std::isfinite(l[1]));  // p = 0 clamped
  EXPECT_NEAR(l[1], -std::log(FLT_MIN), 1e-2f);
  Tensor oh = FromVector({0, 0, 1, 0, 1, 0}, {2, 3});
  auto l2 = CrossEntropyFwd(p, oh).ToVector<float>();
  EXPECT_NEAR(l2[0], -std::log(0.3f), 1e-6f);
  EXPECT_NEAR(l2[1], 0.f, 1e-6f);
  EXPECT_EQ(SoftmaxCrossEntropyBwd(p, Labels({1, 0}, {2, 1})).ToVector<float>(),
            (std::vector<float>{0.2f, 0.5f - 1.f, 0.3f, -1.f, 1.f, 0.f}));
  auto g = SoftmaxCrossEntropyBwd(p, oh).ToVector<float>();
  EXPECT_EQ(g, (std::vector<float>{0.2f, 0.5f, 0.3f - 1.f, 0.f, 0.f, 0.f}));
}

TEST(NnLoss, BadTargetsThrow) {
  Tensor z({3, 4});
  z.SetValue(0.f);
  EXPECT_THROW_MSG(SoftmaxCrossEntropyForward(z, Labels({0, 4, 1}, {3})), ValueError,
                   "SoftmaxCrossEntropyForward: label 4 of sample 1 is outside [0, 4)");
  EXPECT_THROW_MSG(SoftmaxCrossEntropyBackward(z, Labels({0, -1, 1}, {3})), ValueError,
                   "SoftmaxCrossEntropyBackward: label -1");
  EXPECT_THROW_MSG(SoftmaxCrossEntropyForward(z, Labels({0, 1}, {2})), ShapeError,
                   "SoftmaxCrossEntropyForward: got 2 labels (target shape (2,)) for 3 samples");
  EXPECT_THROW_MSG(CrossEntropyFwd(z, Labels({0, 1, 2, 3}, {4})), ShapeError,
                   "CrossEntropyFwd: got 4 labels");
  EXPECT_THROW_MSG(SoftmaxCrossEntropyBwd(z, FromVector({0.5f, 1, 2}, {3})), ValueError,
                   "not a whole number");
  Tensor t23({2, 3});
  t23.SetValue(0.f);
  EXPECT_THROW_MSG(SoftmaxCrossEntropyForward(z, t23), ShapeError,
                   "SoftmaxCrossEntropyForward: the target has shape (2, 3)");
  Tensor z1({12});
  z1.SetValue(0.f);
  EXPECT_THROW_MSG(SoftmaxCrossEntropyForward(z1, Labels({0}, {1})), ShapeError,
                   "expected 2-d logits");
  Tensor zi({3, 4}, kInt);
  zi.SetValue(0);
  EXPECT_THROW(SoftmaxCrossEntropyForward(zi, Labels({0, 1, 2}, {3})), DTypeError);
}

// ---- index ops -----------------------------------------------------------------------------

TEST(NnIndex, IndexSelectGathersLikeNumpyTake) {
  // Embedding: table (5, 3), ids (2, 2) -> (2, 2, 3).
  auto tv = singa_test::Iota(15);
  Tensor table = FromVector(tv, {5, 3});
  Tensor ids = Labels({4, 0, 2, -1}, {2, 2});
  Tensor e = IndexSelect(table, 0, ids);
  EXPECT_EQ(e.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(e.ToVector<float>(),
            (std::vector<float>{12, 13, 14, 0, 1, 2, 6, 7, 8, 12, 13, 14}));
  // Middle axis, float indices, negative index.
  Tensor x = FromVector(singa_test::Iota(24), {2, 3, 4});
  Tensor m = IndexSelect(x, 1, FromVector({2.f, -3.f}, {2}));
  EXPECT_EQ(m.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(m.ToVector<float>(), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 20, 21, 22, 23,
                                                     12, 13, 14, 15}));
  // Last axis via -1, int32 data, scalar-shaped indices drop the axis.
  Tensor xi = x.AsType(kInt);
  Tensor s = IndexSelect(xi, -1, Labels({3}, {}));
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.ToVector<int32_t>(), (std::vector<int32_t>{3, 7, 11, 15, 19, 23}));
}

TEST(NnIndex, IndexAddIsTheAdjointOfIndexSelect) {
  struct Case {
    Shape xs;
    int axis;
    Shape is;
  };
  for (const Case& c : {Case{{7, 5}, 0, {3, 4}}, Case{{3, 6, 4}, 1, {9}}, Case{{4, 5}, -1, {2, 2}},
                        Case{{1000, 64}, 0, {512}}, Case{{64, 50, 40}, 1, {30}}}) {
    SCOPED_TRACE(::testing::Message() << Str(c.xs) << " axis " << c.axis);
    const size_t ax = NormalizeAxis(c.axis, c.xs.size(), "test");
    std::mt19937 gen(71);
    std::vector<int> idx(Product(c.is));
    for (auto& v : idx) v = int(gen() % c.xs[ax]) - (gen() % 2 ? int(c.xs[ax]) : 0);  // repeats, negatives
    Tensor it = Labels(idx, c.is);
    auto xv = Rand(Product(c.xs), 72);
    Tensor y = IndexSelect(FromVector(xv, c.xs), c.axis, it);
    auto rv = Rand(y.Size(), 73);
    Tensor dx = IndexAdd(FromVector(rv, y.shape()), c.axis, it, c.xs);
    ASSERT_EQ(dx.shape(), c.xs);
    // <IndexSelect(x), r> == <x, IndexAdd(r)>, and a direct reference of the scatter.
    EXPECT_NEAR(DotV(y.ToVector<float>(), rv), DotV(xv, dx.ToVector<float>()), 1e-3);
    const size_t outer = Product(c.xs, 0, ax), A = c.xs[ax], inner = Product(c.xs, ax + 1),
                 K = idx.size();
    std::vector<float> ref(xv.size(), 0.f);
    for (size_t o = 0; o < outer; ++o)
      for (size_t k = 0; k < K; ++k) {
        size_t a = size_t(idx[k] < 0 ? idx[k] + int(A) : idx[k]);
        for (size_t i = 0; i < inner; ++i) ref[(o * A + a) * inner + i] += rv[(o * K + k) * inner + i];
      }
    ExpectClose(dx.ToVector<float>(), ref, 1e-5f, "dx");
  }
}

TEST(NnGraph, BadLabelsThrowAtRunGraph) {
  // Values are only known when the operation runs: in a graph, RunGraph throws.
  auto dev = std::make_shared<CppCPU>();
  Tensor z({2, 3}, dev), lab({2}, dev, kInt);
  z.SetValue(0.f);
  std::vector<int> l{0, 3};
  lab.CopyDataFromHostPtr(l.data(), 2);
  dev->EnableGraph(true);
  Tensor loss = SoftmaxCrossEntropyForward(z, lab);
  Tensor e = IndexSelect(z, 1, lab);
  dev->EnableGraph(false);
  EXPECT_THROW_MSG(dev->RunGraph(true), ValueError, "SoftmaxCrossEntropyForward: label 3");
  dev->ResetGraph();
}

TEST(NnIndex, BadIndicesThrow) {
  Tensor x = FromVector(singa_test::Iota(6), {2, 3});
  EXPECT_THROW_MSG(IndexSelect(x, 1, Labels({0, 3}, {2})), AxisError,
                   "IndexSelect: index 3 is out of range for axis 1 of size 3");
  EXPECT_THROW_MSG(IndexSelect(x, 0, Labels({-3}, {1})), AxisError, "IndexSelect: index -3");
  EXPECT_THROW_MSG(IndexSelect(x, 2, Labels({0}, {1})), AxisError, "IndexSelect");
  EXPECT_THROW_MSG(IndexSelect(x, 0, FromVector({0.5f}, {1})), ValueError, "not a whole number");
  Tensor dy({2, 2});
  dy.SetValue(1.f);
  EXPECT_THROW_MSG(IndexAdd(dy, 0, Labels({0, 5}, {2}), {4, 2}), AxisError, "IndexAdd: index 5");
  EXPECT_THROW_MSG(IndexAdd(dy, 0, Labels({0, 1, 2}, {3}), {4, 2}), ShapeError,
                   "IndexAdd: dy has shape (2, 2), expected (3, 2)");
}

// ---- graph replay --------------------------------------------------------------------------

TEST(NnGraph, ReplayMatchesEager) {
  auto dev = std::make_shared<CppCPU>();
  const Shape xs{4, 3, 8, 8};
  ConvHandle ch(xs, {3, 3}, {1, 1}, {1, 1}, 3, 6, true, 1);
  PoolingHandle ph(ch.OutputShape(4), {2, 2}, {2, 2}, {0, 0}, true);
  auto make = [&](const std::vector<float>& v, const Shape& s) {
    Tensor t(s, dev);
    t.CopyDataFromHostPtr(v.data(), v.size());
    return t;
  };
  Tensor x = make(Rand(Product(xs), 81), xs), W = make(Rand(6 * 27, 82), {6, 3, 3, 3}),
         b = make(Rand(6, 83), {6}), scale = make(Rand(6, 84), {6}), bias = make(Rand(6, 85), {6});
  Tensor lab(Shape{4}, dev, kInt);
  std::vector<int> l{1, 0, 3, 2};
  lab.CopyDataFromHostPtr(l.data(), 4);
  auto step = [&](Tensor* rm, Tensor* rv) {
    Tensor y = Conv2dForward(x, W, b, ch);
    auto bn = BatchNormForwardTraining(y, scale, bias, rm, rv, 0.1f, 1e-5f);
    Tensor p = Pool2dForward(bn[0], ph);
    Tensor logits = Reshape(p, std::vector<int>{4, -1});
    Tensor sel = IndexSelect(logits, 1, lab);  // (4, 4)
    Tensor loss = SoftmaxCrossEntropyForward(sel, lab);
    Tensor dsel = SoftmaxCrossEntropyBackward(sel, lab);
    Tensor dlog = IndexAdd(dsel, 1, lab, logits.shape());
    Tensor dp = Reshape(dlog, p.shape());
    Tensor dbn = Pool2dBackward(dp, bn[0], p, ph);
    auto g = BatchNormBackward(dbn, y, scale, bn[1], bn[2], 1e-5f);
    return std::vector<Tensor>{loss, Conv2dBackwardX(g[0], W, ch), Conv2dBackwardW(g[0], x, ch),
                               Conv2dBackwardB(g[0], ch), g[1]};
  };
  Tensor rm_e({6}, dev), rv_e({6}, dev), rm_g({6}, dev), rv_g({6}, dev);
  for (Tensor* t : {&rm_e, &rm_g}) t->SetValue(0.f);
  for (Tensor* t : {&rv_e, &rv_g}) t->SetValue(1.f);
  auto eager = step(&rm_e, &rv_e);
  dev->EnableGraph(true);
  auto rec = step(&rm_g, &rv_g);
  dev->EnableGraph(false);
  std::vector<std::unique_ptr<Hold>> holds;
  for (const Tensor& t : rec) holds.push_back(std::make_unique<Hold>(t));
  for (int it = 0; it < 3; ++it) {
    dev->RunGraph(it == 2);
    for (size_t k = 0; k < rec.size(); ++k)
      ExpectClose(rec[k].ToVector<float>(), eager[k].ToVector<float>(), 1e-4f,
                  "output " + std::to_string(k));
  }
  // The running stats were updated once per replay.
  auto rmg = rm_g.ToVector<float>(), rme = rm_e.ToVector<float>();
  for (size_t c = 0; c < 6; ++c) {
    float want = rme[c] / 0.1f;  // batch mean
    want = want * (1 - std::pow(0.9f, 3.f));
    EXPECT_NEAR(rmg[c], want, 1e-4f);
  }
  holds.clear();
  dev->ResetGraph();
}
