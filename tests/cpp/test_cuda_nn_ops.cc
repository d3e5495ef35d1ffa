// The CUDA kernels of BLAS, convolution, pooling and batch norm (cpp/src/ops/cuda/) against the
// CPU kernels, over odd shapes; float16 against float32 within a half tolerance; a graph replay
// of a small conv net against eager on the GPU. GPU tests skip where no GPU is usable; the
// float16 front checks run everywhere.
#include <cmath>
#include <memory>
#include <vector>

#include "gpu_test_util.h"
#include "nn_test_util.h"
#include "ops/env_flag.h"
#include "singa/ops/nn.h"

namespace {

using singa::ConvHandle;
using singa::PoolingHandle;
using singa::Shape;
using singa::Tensor;
using singa_test::ExpectSameOnGpu;
using singa_test::OnGpu;
using singa_test::RandomTensor;

// cuBLAS / cuDNN sum in another order than OpenBLAS / im2col (and Winograd / FFT algorithms
// round differently): float32 agreement within this.
constexpr float kBlasTol = 1e-4f;
// float32 convolutions take TF32 tensor-op algorithms unless SINGA_CUDNN_TF32=0 (cuda/conv.cc):
// inputs rounded to 10 mantissa bits (2^-11 relative), so a sum of ~100 products of [-1, 1]
// values drifts by ~1e-3 from the CPU's; with FMA math only the order of the sums differs.
// tools/gpu_check.sh runs these tests both ways.
const float kConvTol = singa::EnvFlag("SINGA_CUDNN_TF32", true) ? 1e-2f : 1e-3f;
// float16 results (inputs already half): one half ulp of the output plus accumulation.
constexpr float kHalfTol = 2e-2f;

// A half copy of t and the float32 of those half values (the exact inputs the GPU sees).
struct HalfPair {
  Tensor half, as_float;
};
HalfPair Halved(const Tensor& t) {
  HalfPair p;
  p.half = t.AsType(singa::kFloat16);
  p.as_float = p.half.AsType(singa::kFloat32);
  return p;
}

// ---------------------------------------------------------------- BLAS

TEST(CudaBlas, GemmOddShapesAndTransposedOperands) {
  SINGA_REQUIRE_GPU();
  const std::vector<std::vector<size_t>> mkn = {{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 1, 31}};
  unsigned seed = 1;
  for (const auto& s : mkn) {
    const size_t m = s[0], k = s[1], n = s[2];
    SCOPED_TRACE(testing::Message() << "m " << m << " k " << k << " n " << n);
    const Tensor A = RandomTensor({m, k}, -1, 1, seed++), B = RandomTensor({k, n}, -1, 1, seed++);
    const Tensor At = singa::Transpose(RandomTensor({k, m}, -1, 1, seed++));
    const Tensor Bt = singa::Transpose(RandomTensor({n, k}, -1, 1, seed++));
    ExpectSameOnGpu(singa::Mult(A, B), singa::Mult(OnGpu(A), OnGpu(B)), kBlasTol);
    ExpectSameOnGpu(singa::Mult(At, B),
                    singa::Mult(singa::Transpose(OnGpu(singa::Transpose(At))), OnGpu(B)),
                    kBlasTol);
    ExpectSameOnGpu(singa::Mult(A, Bt),
                    singa::Mult(OnGpu(A), singa::Transpose(OnGpu(singa::Transpose(Bt)))),
                    kBlasTol);
    // alpha / beta form: C = 0.5 A B - 2 C
    Tensor C = RandomTensor({m, n}, -1, 1, seed++), Cg = OnGpu(C);
    singa::Mult(0.5f, A, B, -2.f, &C);
    singa::Mult(0.5f, OnGpu(A), OnGpu(B), -2.f, &Cg);
    ExpectSameOnGpu(C, Cg, kBlasTol);
  }
}

TEST(CudaBlas, BatchedGemmStridedBroadcastAndLoopPaths) {
  SINGA_REQUIRE_GPU();
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 5}, {2, 3, 5, 6}},  // batch axes collapse: one strided-batched call
      {{3, 4, 5}, {5, 6}},           // b broadcast over the batch (stride 0)
      {{2, 1, 4, 5}, {1, 3, 5, 6}},  // broadcast inside: no single stride, one GEMM each
      {{1, 4, 5}, {7, 5, 1}},        // batch of 7, n = 1
  };
  unsigned seed = 11;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "a " << nn_test::Str(c.a) << " b " << nn_test::Str(c.b));
    const Tensor A = RandomTensor(c.a, -1, 1, seed++), B = RandomTensor(c.b, -1, 1, seed++);
    ExpectSameOnGpu(singa::Mult(A, B), singa::Mult(OnGpu(A), OnGpu(B)), kBlasTol);
  }
  // transposed matrices inside a batch: (2, 5, 4)^T x (2, 5, 3)
  const Tensor A = RandomTensor({2, 5, 4}, -1, 1, 21), B = RandomTensor({2, 5, 3}, -1, 1, 22);
  ExpectSameOnGpu(singa::Mult(singa::Transpose(A, {0, 2, 1}), B),
                  singa::Mult(singa::Transpose(OnGpu(A), {0, 2, 1}), OnGpu(B)), kBlasTol);
}

TEST(CudaBlas, AxpyDotAsumNrm2) {
  SINGA_REQUIRE_GPU();
  for (size_t n : {size_t(1), size_t(7), size_t(1000)}) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const Tensor x = RandomTensor({n}, -1, 1, 31), y0 = RandomTensor({n}, -1, 1, 32);
    Tensor y = y0.Clone(), yg = OnGpu(y0);
    singa::Axpy(-1.5f, x, &y);
    singa::Axpy(-1.5f, OnGpu(x), &yg);
    ExpectSameOnGpu(y, yg, kBlasTol);
    const Tensor xg = OnGpu(x), y0g = OnGpu(y0);
    EXPECT_NEAR(singa::Dot(x, y0), singa::Dot(xg, y0g), kBlasTol * n);
    EXPECT_NEAR(x.L1(), xg.L1(), kBlasTol * n);
    EXPECT_NEAR(x.L2(), xg.L2(), kBlasTol * std::sqrt(float(n)));
  }
  const Tensor e(Shape{0});  // empty: the results are 0, written on the device
  const Tensor eg = OnGpu(e);
  EXPECT_EQ(singa::Dot(eg, eg), 0.f);
  EXPECT_EQ(eg.L1(), 0.f);
  EXPECT_EQ(eg.L2(), 0.f);
}

TEST(CudaBlas, HalfGemmMatchesFloatWithinHalfTolerance) {
  SINGA_REQUIRE_GPU();
  const HalfPair A = Halved(RandomTensor({9, 33}, -1, 1, 41));
  const HalfPair B = Halved(RandomTensor({33, 17}, -1, 1, 42));
  const Tensor want = singa::Mult(A.as_float, B.as_float);
  const Tensor got = singa::Mult(OnGpu(A.half), OnGpu(B.half));
  EXPECT_EQ(got.data_type(), singa::kFloat16);
  ExpectSameOnGpu(want, got, kHalfTol);
  // batched, with b broadcast
  const HalfPair A3 = Halved(RandomTensor({3, 9, 33}, -1, 1, 43));
  ExpectSameOnGpu(singa::Mult(A3.as_float, B.as_float),
                  singa::Mult(OnGpu(A3.half), OnGpu(B.half)), kHalfTol);
}

// Runs everywhere: float16 math is a CUDA feature; the CPU keeps its clear DTypeError.
TEST(CudaNnFronts, HalfOperandsOnTheCpuStillThrowDTypeError) {
  const Tensor a = RandomTensor({2, 3}).AsType(singa::kFloat16);
  EXPECT_THROW(singa::Mult(a, a), singa::DTypeError);
  const Tensor x = RandomTensor({1, 2, 4, 4}).AsType(singa::kFloat16);
  const Tensor W = RandomTensor({3, 2, 3, 3}).AsType(singa::kFloat16);
  ConvHandle ch(x.shape(), {3, 3}, {1, 1}, {1, 1}, 2, 3, false);
  EXPECT_THROW(singa::Conv2dForward(x, W, Tensor(), ch), singa::DTypeError);
  PoolingHandle ph(x.shape(), {2, 2}, {2, 2}, {0, 0}, true);
  EXPECT_THROW(singa::Pool2dForward(x, ph), singa::DTypeError);
  const Tensor s = RandomTensor({2});
  EXPECT_THROW(singa::BatchNormForwardTraining(x, s, s, nullptr, nullptr, 0.1f, 1e-5f),
               singa::DTypeError);
}

TEST(CudaNnFronts, MixedHalfAndFloatOnTheGpuThrowDTypeError) {
  SINGA_REQUIRE_GPU();
  const Tensor x = OnGpu(RandomTensor({1, 2, 4, 4}).AsType(singa::kFloat16));
  const Tensor W = OnGpu(RandomTensor({3, 2, 3, 3}));
  ConvHandle ch(x.shape(), {3, 3}, {1, 1}, {1, 1}, 2, 3, false);
  EXPECT_THROW(singa::Conv2dForward(x, W, Tensor(), ch), singa::DTypeError);
  EXPECT_THROW(singa::Mult(OnGpu(RandomTensor({2, 3}).AsType(singa::kFloat16)),
                           OnGpu(RandomTensor({3, 2}))),
               singa::DTypeError);
}

// ---------------------------------------------------------------- convolution

struct ConvCase {
  const char* name;
  Shape x;  // N, C, H, W
  size_t K;
  std::vector<size_t> kernel, stride, pad, dil;
  size_t groups;
};

const std::vector<ConvCase>& ConvCases() {
  static const std::vector<ConvCase> cases = {
      {"3x3 pad 1", {2, 3, 8, 8}, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {"stride 2x1, non-square", {2, 3, 7, 9}, 5, {3, 2}, {2, 1}, {1, 0}, {1, 1}, 1},
      {"dilation 2", {1, 2, 9, 8}, 3, {3, 3}, {1, 1}, {2, 1}, {2, 2}, 1},
      {"groups 2", {2, 4, 6, 6}, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2},
      {"depthwise", {2, 4, 7, 7}, 4, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 4},
      {"1x1", {3, 5, 4, 6}, 7, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},
      {"batch 1, 5x3 stride 3", {1, 3, 11, 10}, 2, {5, 3}, {3, 3}, {2, 1}, {1, 1}, 1},
  };
  return cases;
}

TEST(CudaConv, ForwardBackwardMatchTheCpu) {
  SINGA_REQUIRE_GPU();
  unsigned seed = 100;
  for (const ConvCase& c : ConvCases()) {
    SCOPED_TRACE(c.name);
    ConvHandle h(c.x, c.kernel, c.stride, c.pad, c.x[1], c.K, true, c.groups, c.dil);
    const Tensor x = RandomTensor(c.x, -1, 1, seed++), W = RandomTensor(h.WeightShape(), -1, 1,
                                                                          seed++);
    const Tensor b = RandomTensor({c.K}, -1, 1, seed++);
    const Tensor dy = RandomTensor(h.OutputShape(c.x[0]), -1, 1, seed++);
    const Tensor xg = OnGpu(x), Wg = OnGpu(W), bg = OnGpu(b), dyg = OnGpu(dy);
    ExpectSameOnGpu(singa::Conv2dForward(x, W, b, h), singa::Conv2dForward(xg, Wg, bg, h),
                    kConvTol);
    ExpectSameOnGpu(singa::Conv2dForward(x, W, Tensor(), h),
                    singa::Conv2dForward(xg, Wg, Tensor(), h), kConvTol);
    ExpectSameOnGpu(singa::Conv2dForward(x, W, b, h, true),
                    singa::Conv2dForward(xg, Wg, bg, h, true), kConvTol);
    ExpectSameOnGpu(singa::Conv2dBackwardX(dy, W, h), singa::Conv2dBackwardX(dyg, Wg, h),
                    kConvTol);
    ExpectSameOnGpu(singa::Conv2dBackwardW(dy, x, h), singa::Conv2dBackwardW(dyg, xg, h),
                    kConvTol);
    ExpectSameOnGpu(singa::Conv2dBackwardB(dy, h), singa::Conv2dBackwardB(dyg, h), kConvTol);
  }
}

TEST(CudaConv, HalfMatchesFloatWithinHalfTolerance) {
  SINGA_REQUIRE_GPU();
  for (const ConvCase& c : {ConvCases()[0], ConvCases()[3]}) {
    SCOPED_TRACE(c.name);
    ConvHandle h(c.x, c.kernel, c.stride, c.pad, c.x[1], c.K, true, c.groups, c.dil);
    const HalfPair x = Halved(RandomTensor(c.x, -1, 1, 200));
    const HalfPair W = Halved(RandomTensor(h.WeightShape(), -1, 1, 201));
    const HalfPair b = Halved(RandomTensor({c.K}, -1, 1, 202));
    const HalfPair dy = Halved(RandomTensor(h.OutputShape(c.x[0]), -1, 1, 203));
    const Tensor y = singa::Conv2dForward(OnGpu(x.half), OnGpu(W.half), OnGpu(b.half), h, true);
    EXPECT_EQ(y.data_type(), singa::kFloat16);
    ExpectSameOnGpu(singa::Conv2dForward(x.as_float, W.as_float, b.as_float, h, true), y,
                    kHalfTol);
    ExpectSameOnGpu(singa::Conv2dBackwardX(dy.as_float, W.as_float, h),
                    singa::Conv2dBackwardX(OnGpu(dy.half), OnGpu(W.half), h), kHalfTol);
    // dW sums N * OH * OW products: a looser bound
    ExpectSameOnGpu(singa::Conv2dBackwardW(dy.as_float, x.as_float, h),
                    singa::Conv2dBackwardW(OnGpu(dy.half), OnGpu(x.half), h), 5 * kHalfTol);
    ExpectSameOnGpu(singa::Conv2dBackwardB(dy.as_float, h),
                    singa::Conv2dBackwardB(OnGpu(dy.half), h), 5 * kHalfTol);
  }
}

// Each direction of cuDNN's one prepare path (cuda/conv.cc: ForwardPass, BackwardDataPass,
// BackwardFilterPass) run twice gives the same bits (a cached plan is reused; the backward
// passes pick deterministic algorithms, so replay == eager), and an empty batch gives zero dW
// and db as on the CPU.
TEST(CudaConv, EachDirectionRepeatsBitForBitAndAnEmptyBatchGivesZeroGradients) {
  SINGA_REQUIRE_GPU();
  auto bits = [](Tensor t) {
    t.ToHost();
    return t.ToVector<float>();
  };
  unsigned seed = 300;
  for (const ConvCase& c : ConvCases()) {
    SCOPED_TRACE(c.name);
    ConvHandle h(c.x, c.kernel, c.stride, c.pad, c.x[1], c.K, true, c.groups, c.dil);
    const Tensor x = OnGpu(RandomTensor(c.x, -1, 1, seed++));
    const Tensor W = OnGpu(RandomTensor(h.WeightShape(), -1, 1, seed++));
    const Tensor dy = OnGpu(RandomTensor(h.OutputShape(c.x[0]), -1, 1, seed++));
    EXPECT_EQ(bits(singa::Conv2dForward(x, W, Tensor(), h)),
              bits(singa::Conv2dForward(x, W, Tensor(), h)));
    EXPECT_EQ(bits(singa::Conv2dBackwardX(dy, W, h)), bits(singa::Conv2dBackwardX(dy, W, h)));
    EXPECT_EQ(bits(singa::Conv2dBackwardW(dy, x, h)), bits(singa::Conv2dBackwardW(dy, x, h)));
  }
  const ConvCase& c = ConvCases()[0];
  ConvHandle h(c.x, c.kernel, c.stride, c.pad, c.x[1], c.K, true, c.groups, c.dil);
  const Tensor x0(Shape{0, c.x[1], c.x[2], c.x[3]}), dy0(h.OutputShape(0));
  ExpectSameOnGpu(singa::Conv2dBackwardW(dy0, x0, h),
                  singa::Conv2dBackwardW(OnGpu(dy0), OnGpu(x0), h));
  ExpectSameOnGpu(singa::Conv2dBackwardB(dy0, h), singa::Conv2dBackwardB(OnGpu(dy0), h));
}

// ---------------------------------------------------------------- pooling

// Values on a coarse grid, so that windows hold ties (the first maximum must win, as on the CPU).
Tensor WithTies(const Shape& s, unsigned seed) {
  Tensor t = RandomTensor(s, -2, 2, seed);
  std::vector<float> v = t.ToVector<float>();
  for (float& e : v) e = std::round(e * 2.f) / 2.f;
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

TEST(CudaPool, MaxAndAverageBothPadModesMatchTheCpuExactly) {
  SINGA_REQUIRE_GPU();
  struct Case {
    Shape x;
    std::vector<size_t> k, s, p;
  };
  const std::vector<Case> cases = {
      {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}},
      {{1, 2, 7, 9}, {3, 3}, {2, 2}, {1, 1}},  // floor windows drop the last row / column
      {{2, 1, 6, 5}, {3, 2}, {1, 2}, {1, 0}},  // non-square, overlapping rows
      {{1, 3, 5, 5}, {5, 5}, {1, 1}, {2, 2}},  // windows larger than the stride, heavy padding
  };
  unsigned seed = 300;
  for (const Case& c : cases)
    for (bool is_max : {true, false})
      for (bool include_pad : {false, true}) {
        SCOPED_TRACE(testing::Message() << nn_test::Str(c.x) << (is_max ? " max" : " avg")
                                        << (include_pad ? " include_pad" : ""));
        PoolingHandle h(c.x, c.k, c.s, c.p, is_max, include_pad);
        const Tensor x = WithTies(c.x, seed++);
        const Tensor dy = RandomTensor(h.OutputShape(c.x[0]), -1, 1, seed++);
        const Tensor y = singa::Pool2dForward(x, h);
        const Tensor xg = OnGpu(x), yg = singa::Pool2dForward(xg, h);
        ExpectSameOnGpu(y, yg, 1e-6f);
        ExpectSameOnGpu(singa::Pool2dBackward(dy, x, y, h),
                        singa::Pool2dBackward(OnGpu(dy), xg, yg, h), 1e-6f);
      }
}

TEST(CudaPool, HalfMatchesFloat) {
  SINGA_REQUIRE_GPU();
  PoolingHandle h(Shape{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1}, false);
  const HalfPair x = Halved(RandomTensor({2, 3, 7, 7}, -1, 1, 400));
  const HalfPair dy = Halved(RandomTensor(h.OutputShape(2), -1, 1, 401));
  ExpectSameOnGpu(singa::Pool2dForward(x.as_float, h), singa::Pool2dForward(OnGpu(x.half), h),
                  kHalfTol);
  ExpectSameOnGpu(singa::Pool2dBackward(dy.as_float, x.as_float, Tensor(), h),
                  singa::Pool2dBackward(OnGpu(dy.half), OnGpu(x.half), Tensor(), h), kHalfTol);
}

// ---------------------------------------------------------------- batch norm

TEST(CudaBatchNorm, TrainingInferenceBackwardMatchTheCpu) {
  SINGA_REQUIRE_GPU();
  unsigned seed = 500;
  for (const Shape& s : {Shape{4, 3, 5, 7}, Shape{1, 2, 3, 3}, Shape{9, 6}, Shape{3, 300, 2}})
    for (bool relu : {false, true}) {
      SCOPED_TRACE(testing::Message() << nn_test::Str(s) << (relu ? " relu" : ""));
      const size_t C = s[1];
      const Tensor x = RandomTensor(s, -2, 3, seed++), scale = RandomTensor({C}, 0.5, 2, seed++);
      const Tensor bias = RandomTensor({C}, -1, 1, seed++), dy = RandomTensor(s, -1, 1, seed++);
      Tensor rm = RandomTensor({C}, -1, 1, seed++), rv = RandomTensor({C}, 0.5, 2, seed++);
      Tensor rmg = OnGpu(rm), rvg = OnGpu(rv);
      const auto cpu = singa::BatchNormForwardTraining(x, scale, bias, &rm, &rv, 0.1f, 1e-5f, relu);
      const Tensor xg = OnGpu(x), sg = OnGpu(scale), bg = OnGpu(bias);
      const auto gpu =
          singa::BatchNormForwardTraining(xg, sg, bg, &rmg, &rvg, 0.1f, 1e-5f, relu);
      for (size_t i = 0; i < 3; ++i) ExpectSameOnGpu(cpu[i], gpu[i], kBlasTol);
      ExpectSameOnGpu(rm, rmg, kBlasTol);
      ExpectSameOnGpu(rv, rvg, kBlasTol);
      ExpectSameOnGpu(singa::BatchNormForwardInference(x, scale, bias, rm, rv, 1e-3f, relu),
                      singa::BatchNormForwardInference(xg, sg, bg, rmg, rvg, 1e-3f, relu),
                      kBlasTol);
      const auto cb = singa::BatchNormBackward(dy, x, scale, cpu[1], cpu[2], 1e-5f);
      const auto gb = singa::BatchNormBackward(OnGpu(dy), xg, sg, gpu[1], gpu[2], 1e-5f);
      for (size_t i = 0; i < 3; ++i) ExpectSameOnGpu(cb[i], gb[i], kBlasTol);
    }
}

TEST(CudaBatchNorm, HalfActivationsMatchFloat) {
  SINGA_REQUIRE_GPU();
  const Shape s{4, 3, 5, 5};
  const HalfPair x = Halved(RandomTensor(s, -2, 3, 550)), dy = Halved(RandomTensor(s, -1, 1, 551));
  const Tensor scale = RandomTensor({3}, 0.5, 2, 552), bias = RandomTensor({3}, -1, 1, 553);
  Tensor rm = RandomTensor({3}, -1, 1, 554), rv = RandomTensor({3}, 0.5, 2, 555);
  Tensor rmg = OnGpu(rm), rvg = OnGpu(rv);
  const Tensor sg = OnGpu(scale), bg = OnGpu(bias), xg = OnGpu(x.half);
  const auto cpu = singa::BatchNormForwardTraining(x.as_float, scale, bias, &rm, &rv, 0.1f, 1e-5f);
  const auto gpu = singa::BatchNormForwardTraining(xg, sg, bg, &rmg, &rvg, 0.1f, 1e-5f);
  EXPECT_EQ(gpu[0].data_type(), singa::kFloat16);
  EXPECT_EQ(gpu[1].data_type(), singa::kFloat32);  // statistics stay float32
  for (size_t i = 0; i < 3; ++i) ExpectSameOnGpu(cpu[i], gpu[i], kHalfTol);
  ExpectSameOnGpu(rv, rvg, kHalfTol);
  ExpectSameOnGpu(singa::BatchNormForwardInference(x.as_float, scale, bias, rm, rv, 1e-5f, true),
                  singa::BatchNormForwardInference(xg, sg, bg, rmg, rvg, 1e-5f, true), kHalfTol);
  const auto cb = singa::BatchNormBackward(dy.as_float, x.as_float, scale, cpu[1], cpu[2], 1e-5f);
  const auto gb = singa::BatchNormBackward(OnGpu(dy.half), xg, sg, gpu[1], gpu[2], 1e-5f);
  EXPECT_EQ(gb[0].data_type(), singa::kFloat16);
  for (size_t i = 0; i < 3; ++i) ExpectSameOnGpu(cb[i], gb[i], 5 * kHalfTol);
}

// ---------------------------------------------------------------- graph replay

// Conv-BN-ReLU-Pool-Gemm forward and backward; returns {out, dx, dW1, db1, dscale, dbias, dW2}.
std::vector<Tensor> SmallNet(const std::vector<Tensor>& p) {
  const Tensor &x = p[0], &W1 = p[1], &b1 = p[2], &scale = p[3], &bias = p[4], &W2 = p[5],
               &dout = p[6];
  ConvHandle ch(x.shape(), {3, 3}, {1, 1}, {1, 1}, 3, 4, true);
  const Tensor c = singa::Conv2dForward(x, W1, b1, ch);
  const auto bn = singa::BatchNormForwardTraining(c, scale, bias, nullptr, nullptr, 0.1f, 1e-5f);
  const Tensor r = singa::ReLU(bn[0]);
  PoolingHandle ph(r.shape(), {2, 2}, {2, 2}, {0, 0}, true);
  const Tensor pool = singa::Pool2dForward(r, ph);
  const Tensor flat = singa::Reshape(pool, Shape{x.shape(0), 4 * 4 * 4});
  const Tensor out = singa::Mult(flat, W2);
  const Tensor dW2 = singa::Mult(singa::Transpose(flat), dout);
  const Tensor dflat = singa::Mult(dout, singa::Transpose(W2));
  const Tensor dpool = singa::Reshape(dflat, pool.shape());
  const Tensor dr = singa::Pool2dBackward(dpool, r, pool, ph);
  const Tensor dbn = singa::ReLUBackward(dr, bn[0]);
  const auto g = singa::BatchNormBackward(dbn, c, scale, bn[1], bn[2], 1e-5f);
  return {out,
          singa::Conv2dBackwardX(g[0], W1, ch),
          singa::Conv2dBackwardW(g[0], x, ch),
          singa::Conv2dBackwardB(g[0], ch),
          g[1],
          g[2],
          dW2};
}

TEST(CudaGraph, SmallConvNetReplayEqualsEager) {
  SINGA_REQUIRE_GPU();
  auto gpu = singa_test::Gpu();
  const std::vector<Tensor> params = {
      OnGpu(RandomTensor({2, 3, 8, 8}, -1, 1, 600)), OnGpu(RandomTensor({4, 3, 3, 3}, -1, 1, 601)),
      OnGpu(RandomTensor({4}, -1, 1, 602)),          OnGpu(RandomTensor({4}, 0.5, 2, 603)),
      OnGpu(RandomTensor({4}, -1, 1, 604)),          OnGpu(RandomTensor({64, 5}, -1, 1, 605)),
      OnGpu(RandomTensor({2, 5}, -1, 1, 606))};
  const std::vector<Tensor> eager = SmallNet(params);
  // the same net on the CPU, to anchor the eager GPU numbers too
  std::vector<Tensor> host;
  for (const Tensor& t : params) {
    Tensor h = t.Clone();
    h.ToHost();
    host.push_back(h);
  }
  const std::vector<Tensor> cpu = SmallNet(host);
  for (size_t i = 0; i < cpu.size(); ++i) ExpectSameOnGpu(cpu[i], eager[i], kConvTol);

  gpu->EnableGraph(true);
  const std::vector<Tensor> graph = SmallNet(params);
  gpu->EnableGraph(false);
  std::vector<std::unique_ptr<singa_test::Hold>> held;  // the graph must keep the results
  for (const Tensor& t : graph) held.push_back(std::make_unique<singa_test::Hold>(t));
  for (int run = 0; run < 3; ++run) {  // op by op, then captured, then the captured graph again
    SCOPED_TRACE(testing::Message() << "replay " << run);
    gpu->RunGraph();
    for (size_t i = 0; i < eager.size(); ++i) {
      Tensor e = eager[i].Clone();
      e.ToHost();
      ExpectSameOnGpu(e, graph[i], 1e-6f);
    }
  }
  held.clear();
  gpu->ResetGraph();
}

}  // namespace
