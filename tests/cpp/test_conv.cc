// Convolution (singa/ops/nn.h): the handle, forward and backward passes against a direct
// reference loop and central finite differences, every GEMM path (per sample, grouped samples,
// 1x1, depthwise) at several thread counts, graph replay, and the error paths.
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
// ---- convolution reference -----------------------------------------------------------------

struct ConvCase {
  size_t N, C, H, W, OC, kh, kw, sh, sw, ph, pw, dh, dw, g;
  bool bias;
};

std::ostream& operator<<(std::ostream& os, const ConvCase& c) {
  return os << "N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " OC" << c.OC << " k"
            << c.kh << "x" << c.kw << " s" << c.sh << "x" << c.sw << " p" << c.ph << "x" << c.pw
            << " d" << c.dh << "x" << c.dw << " g" << c.g << (c.bias ? " bias" : "");
}

struct ConvRef {
  ConvCase c;
  size_t OH, OW, Cg, OCg;
  explicit ConvRef(const ConvCase& cc) : c(cc) {
    OH = (c.H + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
    OW = (c.W + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
    Cg = c.C / c.g;
    OCg = c.OC / c.g;
  }
  // Visits every (y index, x index, w index) triple that contributes x * w to y.
  template <typename F>
  void Visit(F f) const {
    for (size_t n = 0; n < c.N; ++n)
      for (size_t o = 0; o < c.OC; ++o) {
        const size_t grp = o / OCg;
        for (size_t oh = 0; oh < OH; ++oh)
          for (size_t ow = 0; ow < OW; ++ow)
            for (size_t ci = 0; ci < Cg; ++ci)
              for (size_t i = 0; i < c.kh; ++i)
                for (size_t j = 0; j < c.kw; ++j) {
                  long ih = long(oh * c.sh + i * c.dh) - long(c.ph);
                  long iw = long(ow * c.sw + j * c.dw) - long(c.pw);
                  if (ih < 0 || iw < 0 || ih >= long(c.H) || iw >= long(c.W)) continue;
                  const size_t cin = grp * Cg + ci;
                  f(((n * c.OC + o) * OH + oh) * OW + ow,
                    ((n * c.C + cin) * c.H + size_t(ih)) * c.W + size_t(iw),
                    ((o * Cg + ci) * c.kh + i) * c.kw + j);
                }
      }
  }
  std::vector<float> Forward(const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& b) const {
    std::vector<double> y(c.N * c.OC * OH * OW, 0.0);
    Visit([&](size_t yi, size_t xi, size_t wi) { y[yi] += double(x[xi]) * w[wi]; });
    std::vector<float> out(y.size());
    for (size_t k = 0; k < y.size(); ++k)
      out[k] = float(y[k] + (c.bias ? b[(k / (OH * OW)) % c.OC] : 0.f));
    return out;
  }
  std::vector<float> BackX(const std::vector<float>& dy, const std::vector<float>& w) const {
    std::vector<double> dx(c.N * c.C * c.H * c.W, 0.0);
    Visit([&](size_t yi, size_t xi, size_t wi) { dx[xi] += double(dy[yi]) * w[wi]; });
    return std::vector<float>(dx.begin(), dx.end());
  }
  std::vector<float> BackW(const std::vector<float>& dy, const std::vector<float>& x) const {
    std::vector<double> dw(c.OC * Cg * c.kh * c.kw, 0.0);
    Visit([&](size_t yi, size_t xi, size_t wi) { dw[wi] += double(dy[yi]) * x[xi]; });
    return std::vector<float>(dw.begin(), dw.end());
  }
};

ConvHandle HandleOf(const ConvCase& c) {
  return ConvHandle({c.N, c.C, c.H, c.W}, {c.kh, c.kw}, {c.sh, c.sw}, {c.ph, c.pw}, c.C, c.OC,
                    c.bias, c.g, {c.dh, c.dw});
}

const std::vector<ConvCase> kConvCases = {
    // N  C  H  W  OC kh kw sh sw ph pw dh dw g  bias
    {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},    // the common 3x3 "same" conv
    {1, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},   // N=1: the serial path
    {5, 2, 9, 8, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, true},    // stride 2, more samples than threads
    {3, 2, 8, 7, 2, 3, 2, 2, 1, 1, 0, 1, 1, 1, true},    // non-square kernel / stride / pad
    {2, 2, 9, 9, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, true},    // dilation 2
    {2, 3, 6, 5, 2, 2, 3, 1, 2, 0, 1, 2, 1, 1, false},   // dilation in h only, stride in w
    {3, 4, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, true},    // groups 2
    {3, 4, 7, 7, 8, 3, 3, 2, 2, 1, 1, 1, 1, 4, true},    // depthwise, multiplier 2
    {2, 3, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, false},   // depthwise, multiplier 1
    {3, 5, 4, 6, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},    // 1x1: no im2col
    {1, 4, 4, 6, 4, 1, 1, 1, 1, 0, 0, 1, 1, 2, true},    // 1x1 grouped, N=1
    {2, 3, 7, 7, 2, 1, 1, 2, 2, 0, 0, 1, 1, 1, false},   // 1x1 stride 2: im2col again
    {2, 2, 3, 3, 2, 5, 5, 1, 1, 2, 2, 1, 1, 1, true},    // kernel larger than the input
    {4, 16, 12, 12, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, // big enough for parallel loops
    {2, 2, 9, 8, 2, 3, 3, 1, 2, 2, 1, 2, 1, 2, true},    // depthwise, dilated, strided
    {4, 32, 16, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, true},  // depthwise, parallel loops
};

}  // namespace

TEST(NnConv, HandleComputesOutputShape) {
  ConvHandle h({8, 3, 32, 30}, {5, 3}, {2, 1}, {2, 0}, 3, 16, true, 1, {1, 2});
  EXPECT_EQ(h.conv_height, 16u);  // (32 + 4 - 5) / 2 + 1
  EXPECT_EQ(h.conv_width, 26u);   // (30 - 5) / 1 + 1
  EXPECT_EQ(h.OutputShape(8), (Shape{8, 16, 16, 26}));
  EXPECT_EQ(h.WeightShape(), (Shape{16, 3, 5, 3}));
  ConvHandle one({1, 4, 5, 5}, {3}, {1}, {1}, 4, 4, false, 4);  // single values mean both
  EXPECT_EQ(one.kernel_w, 3u);
  EXPECT_EQ(one.pad_w, 1u);
  EXPECT_EQ(one.WeightShape(), (Shape{4, 1, 3, 3}));
  ConvHandle copy = h;  // plain and copyable
  EXPECT_EQ(copy.conv_width, 26u);
}

TEST(NnConv, ForwardAndBackwardMatchReference) {
  ForEachBackend([&] {
    for (size_t k = 0; k < kConvCases.size(); ++k) {
      const ConvCase& c = kConvCases[k];
      SCOPED_TRACE(::testing::Message() << c);
      ConvRef ref(c);
      ConvHandle h = HandleOf(c);
      ASSERT_EQ(h.conv_height, ref.OH);
      ASSERT_EQ(h.conv_width, ref.OW);
      auto xv = Rand(c.N * c.C * c.H * c.W, 1 + k), wv = Rand(c.OC * ref.Cg * c.kh * c.kw, 100 + k),
           bv = Rand(c.OC, 200 + k), dyv = Rand(c.N * c.OC * ref.OH * ref.OW, 300 + k);
      Tensor x = FromVector(xv, {c.N, c.C, c.H, c.W});
      Tensor W = FromVector(wv, h.WeightShape());
      Tensor b = c.bias ? FromVector(bv, {c.OC}) : Tensor();
      Tensor dy = FromVector(dyv, h.OutputShape(c.N));
      Tensor y = Conv2dForward(x, W, b, h);
      ASSERT_EQ(y.shape(), h.OutputShape(c.N));
      ExpectClose(y.ToVector<float>(), ref.Forward(xv, wv, bv), 1e-4f, "y");
      Tensor dx = Conv2dBackwardX(dy, W, h);
      ASSERT_EQ(dx.shape(), x.shape());
      ExpectClose(dx.ToVector<float>(), ref.BackX(dyv, wv), 1e-4f, "dx");
      Tensor dW = Conv2dBackwardW(dy, x, h);
      ASSERT_EQ(dW.shape(), W.shape());
      ExpectClose(dW.ToVector<float>(), ref.BackW(dyv, xv), 1e-4f, "dW");
      Tensor db = Conv2dBackwardB(dy, h);
      std::vector<float> dbr(c.OC, 0.f);
      for (size_t i = 0; i < dyv.size(); ++i) dbr[(i / (ref.OH * ref.OW)) % c.OC] += dyv[i];
      ExpectClose(db.ToVector<float>(), dbr, 1e-4f, "db");
    }
  });
}

TEST(NnConv, BackwardMatchesFiniteDifferences) {
  ForEachBackend([&] {
    // L = sum(conv(x, W, b) * R): dL/dx = BackwardX(R), dL/dW = BackwardW(R, x), dL/db = BackwardB(R).
    for (size_t k : {0, 4, 7, 11}) {
      const ConvCase& c = kConvCases[k];
      SCOPED_TRACE(::testing::Message() << c);
      ConvHandle h = HandleOf(c);
      const Shape xs{c.N, c.C, c.H, c.W}, ws = h.WeightShape(), ys = h.OutputShape(c.N);
      auto xv = Rand(Product(xs), 7), wv = Rand(Product(ws), 8), bv = Rand(c.OC, 9),
           rv = Rand(Product(ys), 10);
      Tensor R = FromVector(rv, ys);
      auto loss = [&](const std::vector<float>& x, const std::vector<float>& w,
                      const std::vector<float>& b) {
        Tensor y = Conv2dForward(FromVector(x, xs), FromVector(w, ws),
                                 c.bias ? FromVector(b, {c.OC}) : Tensor(), h);
        return DotV(y.ToVector<float>(), rv);
      };
      const float eps = 1e-2f;
      ExpectGradMatches(Conv2dBackwardX(R, FromVector(wv, ws), h).ToVector<float>(),
                        NumericGrad(xv, [&](const std::vector<float>& v) { return loss(v, wv, bv); }, eps),
                        2e-3, "dx");
      ExpectGradMatches(Conv2dBackwardW(R, FromVector(xv, xs), h).ToVector<float>(),
                        NumericGrad(wv, [&](const std::vector<float>& v) { return loss(xv, v, bv); }, eps),
                        2e-3, "dW");
      if (c.bias)
        ExpectGradMatches(Conv2dBackwardB(R, h).ToVector<float>(),
                          NumericGrad(bv, [&](const std::vector<float>& v) { return loss(xv, wv, v); }, eps),
                          2e-3, "db");
    }
  });
}

TEST(NnConv, BatchSizeMayDifferFromTheHandle) {
  ForEachBackend([&] {
    ConvCase c = kConvCases[0];
    ConvHandle h = HandleOf(c);  // built for N = 2
    c.N = 3;
    ConvRef ref(c);
    auto xv = Rand(3 * c.C * c.H * c.W, 5), wv = Rand(c.OC * c.C * 9, 6), bv = Rand(c.OC, 7);
    Tensor y = Conv2dForward(FromVector(xv, {3, c.C, c.H, c.W}), FromVector(wv, h.WeightShape()),
                             FromVector(bv, {c.OC}), h);
    EXPECT_EQ(y.shape(), h.OutputShape(3));
    ExpectClose(y.ToVector<float>(), ref.Forward(xv, wv, bv), 1e-4f, "y");
  });
}

TEST(NnConv, TransposedInputIsMadeContiguous) {
  ForEachBackend([&] {
    const ConvCase& c = kConvCases[0];
    ConvRef ref(c);
    ConvHandle h = HandleOf(c);
    auto xv = Rand(c.N * c.C * c.H * c.W, 3), wv = Rand(c.OC * c.C * 9, 4), bv = Rand(c.OC, 5);
    // x stored as (N, C, W, H) and viewed as (N, C, H, W).
    std::vector<float> xt(xv.size());
    for (size_t p = 0; p < c.N * c.C; ++p)
      for (size_t i = 0; i < c.H; ++i)
        for (size_t j = 0; j < c.W; ++j) xt[(p * c.W + j) * c.H + i] = xv[(p * c.H + i) * c.W + j];
    Tensor xview = Transpose(FromVector(xt, {c.N, c.C, c.W, c.H}), {0, 1, 3, 2});
    ASSERT_FALSE(xview.IsContiguous());
    Tensor y = Conv2dForward(xview, FromVector(wv, h.WeightShape()), FromVector(bv, {c.OC}), h);
    ExpectClose(y.ToVector<float>(), ref.Forward(xv, wv, bv), 1e-4f, "y");
  });
}

TEST(NnConv, BadInputsThrow) {
  using singa_test::Hold;
  ConvHandle h({2, 3, 8, 8}, {3, 3}, {1, 1}, {1, 1}, 3, 4, true);
  Tensor W({4, 3, 3, 3}), b({4}), x({2, 3, 8, 8});
  W.SetValue(1.f);
  b.SetValue(0.f);
  x.SetValue(1.f);
  Tensor flat({3, 4});
  flat.SetValue(1.f);
  EXPECT_THROW_MSG(Conv2dForward(flat, W, b, h), ShapeError,
                   "Conv2d: expected a 4-d input (N, C, H, W), got (3, 4)");
  Tensor x4({2, 4, 8, 8});
  x4.SetValue(1.f);
  EXPECT_THROW_MSG(Conv2dForward(x4, W, b, h), ShapeError, "Conv2d: the input (2, 4, 8, 8) has 4 channels");
  Tensor x9({2, 3, 9, 8});
  x9.SetValue(1.f);
  EXPECT_THROW_MSG(Conv2dForward(x9, W, b, h), ShapeError, "spatial size 9x8");
  Tensor W2({4, 3, 2, 2});
  W2.SetValue(1.f);
  EXPECT_THROW_MSG(Conv2dForward(x, W2, b, h), ShapeError, "Conv2d: the weight has shape (4, 3, 2, 2)");
  Tensor b5({5});
  b5.SetValue(1.f);
  EXPECT_THROW_MSG(Conv2dForward(x, W, b5, h), ShapeError, "Conv2d: the bias");
  Tensor xi({2, 3, 8, 8}, kInt);
  xi.SetValue(1);
  EXPECT_THROW_MSG(Conv2dForward(xi, W, b, h), DTypeError, "Conv2d");
  Tensor dy({2, 5, 8, 8});
  dy.SetValue(1.f);
  EXPECT_THROW_MSG(Conv2dBackwardX(dy, W, h), ShapeError, "Conv2dBackwardX");
  EXPECT_THROW_MSG(Conv2dBackwardW(dy, x, h), ShapeError, "Conv2dBackwardW");
  EXPECT_THROW_MSG(Conv2dBackwardB(dy, h), ShapeError, "Conv2dBackwardB");
  Tensor dy1({1, 4, 8, 8});
  dy1.SetValue(1.f);
  EXPECT_THROW_MSG(Conv2dBackwardW(dy1, x, h), ShapeError, "different batch sizes");
  // Handle construction.
  EXPECT_THROW_MSG(ConvHandle({2, 3, 8}, {3, 3}, {1, 1}, {0, 0}, 3, 4, true), ShapeError,
                   "ConvHandle: expected a 4-d input");
  EXPECT_THROW_MSG(ConvHandle({2, 3, 8, 8}, {3, 3}, {1, 1}, {0, 0}, 4, 4, true), ShapeError,
                   "ConvHandle: in_channels is 4 but the input (2, 3, 8, 8) has 3 channels");
  EXPECT_THROW_MSG(ConvHandle({2, 3, 4, 4}, {5, 5}, {1, 1}, {0, 0}, 3, 4, true), ShapeError,
                   "does not fit the input 4x4");
  EXPECT_THROW_MSG(ConvHandle({2, 3, 5, 5}, {3, 3}, {1, 1}, {0, 0}, 3, 4, true, 1, {3, 3}),
                   ShapeError, "dilation 3x3");
  EXPECT_THROW_MSG(ConvHandle({2, 3, 8, 8}, {3, 3}, {1, 1}, {0, 0}, 3, 4, true, 2), ValueError,
                   "divisible by groups");
  EXPECT_THROW_MSG(ConvHandle({2, 3, 8, 8}, {3, 3}, {0, 1}, {0, 0}, 3, 4, true), ValueError,
                   "must all be positive");
  EXPECT_THROW_MSG(ConvHandle({2, 3, 8, 8}, {3, 3, 3}, {1, 1}, {0, 0}, 3, 4, true), ValueError,
                   "kernel_size needs 1 or 2 values");
}

// ---- convolution: GEMM paths (samples grouped per GEMM, or one GEMM per sample) -------------

namespace {

// The GEMM paths (conv_im2col.cc) put S samples side by side in one GEMM when a sample has fewer
// than 128 output positions (S about 256 / positions), else one GEMM per sample; threads take
// whole groups for y and dx, while dW runs one multithreaded GEMM per group. The cases cover
// both, at batch sizes that are not multiples of S, with a last group of one sample, S == N, and
// groups, strides, dilation and 1x1 kernels inside a group.
const std::vector<ConvCase> kConvGemmPathCases = {
    // N  C  H  W  OC kh kw sh sw ph pw dh dw g  bias
    {5, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},     // P = 36: groups of 3 and 2
    {2, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},    // S == N (dW; y and dx on 1 thread)
    {33, 2, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},    // P = 16: S = 16, a last group of 1
    {7, 3, 9, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, true},     // stride 2, P = 25
    {5, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, true},     // groups 2 inside a sample group
    {6, 6, 7, 6, 9, 3, 2, 2, 1, 1, 0, 1, 1, 3, false},    // groups 3, non-square, stride in h
    {4, 2, 9, 9, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, true},     // dilation 2
    {5, 6, 4, 4, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},     // 1x1: copied into the group buffer
    {5, 4, 4, 3, 4, 1, 1, 1, 1, 0, 0, 1, 1, 2, false},    // 1x1 grouped
    {3, 3, 9, 9, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1, true},     // 1x1 stride 2
    {3, 3, 12, 12, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},   // P = 144: per sample, x is the matrix
    {3, 2, 16, 12, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, false},  // P = 192: per sample, im2col
    {1, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},     // one sample: per sample
};

// Restores the thread count on scope exit.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : before_(GetNumThreads()) { SetNumThreads(n); }
  ~ThreadCount() { SetNumThreads(before_); }

 private:
  int before_;
};

void ExpectConvMatchesReference(const ConvCase& c, unsigned seed) {
  ConvRef ref(c);
  ConvHandle h = HandleOf(c);
  auto xv = Rand(c.N * c.C * c.H * c.W, seed), wv = Rand(c.OC * ref.Cg * c.kh * c.kw, seed + 1),
       bv = Rand(c.OC, seed + 2), dyv = Rand(c.N * c.OC * ref.OH * ref.OW, seed + 3);
  Tensor x = FromVector(xv, {c.N, c.C, c.H, c.W}), W = FromVector(wv, h.WeightShape());
  Tensor b = c.bias ? FromVector(bv, {c.OC}) : Tensor(), dy = FromVector(dyv, h.OutputShape(c.N));
  ExpectClose(Conv2dForward(x, W, b, h).ToVector<float>(), ref.Forward(xv, wv, bv), 1e-4f, "y");
  ExpectClose(Conv2dBackwardX(dy, W, h).ToVector<float>(), ref.BackX(dyv, wv), 1e-4f, "dx");
  ExpectClose(Conv2dBackwardW(dy, x, h).ToVector<float>(), ref.BackW(dyv, xv), 1e-4f, "dW");
}

}  // namespace

TEST(NnConv, GemmPathsMatchReferenceForAnyThreadCount) {
  // The plan depends on the thread count: 1 (groups in turn, multithreaded loops), 2, and 3
  // (groups rounded up to a multiple of the threads).
  for (int threads : {1, 2, 3}) {
    ThreadCount tc(threads);
    for (size_t k = 0; k < kConvGemmPathCases.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << kConvGemmPathCases[k] << ", " << threads << " threads");
      ExpectConvMatchesReference(kConvGemmPathCases[k], unsigned(10 * k + 1));
    }
  }
}

TEST(NnConv, GroupedBackwardMatchesFiniteDifferences) {
  ForEachBackend([&] {
    // L = sum(conv(x, W) * R) for a case with groups of samples, conv groups and stride 2.
    const ConvCase c{5, 4, 7, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2, false};
    ConvHandle h = HandleOf(c);
    const Shape xs{c.N, c.C, c.H, c.W}, ws = h.WeightShape(), ys = h.OutputShape(c.N);
    auto xv = Rand(Product(xs), 17), wv = Rand(Product(ws), 18), rv = Rand(Product(ys), 19);
    Tensor R = FromVector(rv, ys);
    auto loss = [&](const std::vector<float>& x, const std::vector<float>& w) {
      return DotV(Conv2dForward(FromVector(x, xs), FromVector(w, ws), Tensor(), h).ToVector<float>(),
                  rv);
    };
    const float eps = 1e-2f;
    ExpectGradMatches(Conv2dBackwardX(R, FromVector(wv, ws), h).ToVector<float>(),
                      NumericGrad(xv, [&](const std::vector<float>& v) { return loss(v, wv); }, eps),
                      2e-3, "dx");
    ExpectGradMatches(Conv2dBackwardW(R, FromVector(xv, xs), h).ToVector<float>(),
                      NumericGrad(wv, [&](const std::vector<float>& v) { return loss(xv, v); }, eps),
                      2e-3, "dW");
  });
}

TEST(NnConv, EmptyBatchGivesZeroWeightGradient) {
  ForEachBackend([&] {
    ConvHandle h({0, 3, 6, 6}, {3, 3}, {1, 1}, {1, 1}, 3, 4, false);
    Tensor dy(h.OutputShape(0)), x(Shape{0, 3, 6, 6});
    EXPECT_EQ(Conv2dForward(x, FromVector(Rand(4 * 27, 1), h.WeightShape()), Tensor(), h).shape(),
              h.OutputShape(0));
    std::vector<float> dw = Conv2dBackwardW(dy, x, h).ToVector<float>();
    EXPECT_EQ(dw, std::vector<float>(4 * 27, 0.f));
  });
}

TEST(NnGraph, GroupedConvReplayMatchesEager) {
  // Grouped GEMM paths inside a graph: the scratch tensors are planned (and may share bytes with
  // other recyclable blocks); replays must still give the eager results.
  auto dev = std::make_shared<CppCPU>();
  const ConvCase c{7, 4, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, true};
  ConvHandle h = HandleOf(c);
  ConvHandle h2({c.N, c.OC, 6, 6}, {3, 3}, {2, 2}, {1, 1}, c.OC, 8, false);
  auto make = [&](const std::vector<float>& v, const Shape& s) {
    Tensor t(s, dev);
    t.CopyDataFromHostPtr(v.data(), v.size());
    return t;
  };
  Tensor x = make(Rand(c.N * c.C * 36, 91), {c.N, c.C, 6, 6});
  Tensor W = make(Rand(Product(h.WeightShape()), 92), h.WeightShape());
  Tensor b = make(Rand(c.OC, 93), {c.OC});
  Tensor W2 = make(Rand(Product(h2.WeightShape()), 94), h2.WeightShape());
  Tensor dz = make(Rand(Product(h2.OutputShape(c.N)), 95), h2.OutputShape(c.N));
  auto step = [&]() {
    Tensor y = Conv2dForward(x, W, b, h);
    Tensor z = Conv2dForward(y, W2, Tensor(), h2);
    Tensor dy = Conv2dBackwardX(dz, W2, h2);
    return std::vector<Tensor>{z, Conv2dBackwardW(dz, y, h2), Conv2dBackwardX(dy, W, h),
                               Conv2dBackwardW(dy, x, h)};
  };
  auto eager = step();
  dev->EnableGraph(true);
  auto rec = step();
  dev->EnableGraph(false);
  std::vector<std::unique_ptr<Hold>> holds;
  for (const Tensor& t : rec) holds.push_back(std::make_unique<Hold>(t));
  for (int it = 0; it < 3; ++it) {
    dev->RunGraph(it == 2);
    for (size_t k = 0; k < rec.size(); ++k)
      ExpectClose(rec[k].ToVector<float>(), eager[k].ToVector<float>(), 1e-4f,
                  "output " + std::to_string(k));
  }
  holds.clear();
  dev->ResetGraph();
}

// ---- pooling -------------------------------------------------------------------------------
