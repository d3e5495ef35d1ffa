// The oneDNN kernels (backend kCpuDnnl) against the reference kernels (kCpuRef), which
// test_conv.cc / test_nn.cc check against plain loops and finite differences: odd shapes, every
// mode, forward and backward, the fused ReLU; and the primitive cache (a replay creates none).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "nn_test_util.h"
#include "singa/core/device.h"
#include "singa/ops/nn.h"

#ifdef SINGA_USE_DNNL
#include "ops/dnnl/common.h"
#endif

namespace singa {
namespace {

using nn_test::ExpectClose;
using nn_test::Rand;
using singa_test::FromVector;

#ifdef SINGA_USE_DNNL

// Runs f on the default device with backend b, restoring the device's backend afterwards.
std::vector<std::vector<float>> RunWith(Backend b, const std::function<std::vector<Tensor>()>& f) {
  auto dev = defaultDevice();
  const Backend old = dev->backend();
  dev->set_backend(b);
  std::vector<std::vector<float>> out;
  try {
    for (const Tensor& t : f()) out.push_back(t.ToVector<float>());
  } catch (...) {
    dev->set_backend(old);
    throw;
  }
  dev->set_backend(old);
  return out;
}

// f's outputs under oneDNN match the reference kernels' within tol (relative to 1 + |ref|).
void ExpectSameAsReference(const std::string& what, const std::function<std::vector<Tensor>()>& f,
                           float tol = 1e-4f) {
  const auto ref = RunWith(Backend::kCpuRef, f), got = RunWith(Backend::kCpuDnnl, f);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i)
    ExpectClose(got[i], ref[i], tol, what + " output " + std::to_string(i));
}

struct ConvCase {
  Shape x;  // (N, C, H, W)
  size_t oc, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias;
};

std::string Name(const ConvCase& c) {
  return "conv x" + nn_test::Str(c.x) + " oc " + std::to_string(c.oc) + " k " +
         std::to_string(c.kh) + "x" + std::to_string(c.kw) + " s " + std::to_string(c.sh) + "x" +
         std::to_string(c.sw) + " p " + std::to_string(c.ph) + "x" + std::to_string(c.pw) +
         " d " + std::to_string(c.dh) + "x" + std::to_string(c.dw) + " g " +
         std::to_string(c.groups);
}

const std::vector<ConvCase> kConvCases = {
    {{2, 3, 8, 8}, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},      // plain 3x3
    {{1, 5, 7, 9}, 6, 3, 2, 2, 1, 1, 0, 1, 1, 1, true},      // batch 1, non-square, odd sizes
    {{3, 4, 11, 10}, 8, 3, 3, 2, 3, 2, 1, 2, 1, 1, false},   // stride, padding, dilation
    {{2, 6, 9, 9}, 9, 3, 3, 1, 1, 1, 1, 1, 1, 3, true},      // groups
    {{2, 8, 10, 7}, 8, 3, 3, 2, 2, 1, 1, 1, 1, 8, true},     // depthwise, strided
    {{2, 4, 6, 6}, 8, 5, 5, 1, 1, 2, 2, 1, 1, 4, false},     // depthwise, multiplier 2
    {{4, 16, 5, 5}, 12, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},    // 1x1
    {{2, 16, 9, 9}, 8, 1, 1, 2, 2, 0, 0, 1, 1, 1, false},    // 1x1 strided (ResNet shortcut)
    {{2, 3, 7, 7}, 5, 3, 3, 2, 2, 0, 0, 1, 1, 1, true},      // floor drops the last column
    {{33, 32, 4, 4}, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},   // wide, narrow images
};

TEST(Dnnl, BackendIsTheDefaultAndSwitches) {
  CppCPU dev;
  EXPECT_TRUE(dev.SupportsBackend(Backend::kCpuDnnl));
  EXPECT_EQ(dev.backend(), Backend::kCpuDnnl);
  dev.set_backend(Backend::kCpuRef);
  EXPECT_EQ(dev.backend(), Backend::kCpuRef);
}

TEST(Dnnl, ConvolutionMatchesReference) {
  unsigned seed = 1;
  for (const ConvCase& c : kConvCases) {
    ConvHandle h(c.x, {c.kh, c.kw}, {c.sh, c.sw}, {c.ph, c.pw}, c.x[1], c.oc, c.bias, c.groups,
                 {c.dh, c.dw});
    const Shape ys = h.OutputShape(c.x[0]);
    const auto xv = Rand(Product(c.x), seed++), wv = Rand(Product(h.WeightShape()), seed++),
               bv = Rand(c.oc, seed++), dyv = Rand(Product(ys), seed++);
    for (bool relu : {false, true})
      ExpectSameAsReference(Name(c) + (relu ? " relu" : ""), [&] {
        Tensor b = c.bias ? FromVector(bv, {c.oc}) : Tensor();
        return std::vector<Tensor>{
            Conv2dForward(FromVector(xv, c.x), FromVector(wv, h.WeightShape()), b, h, relu)};
      });
    ExpectSameAsReference(Name(c) + " backward", [&] {
      Tensor dy = FromVector(dyv, ys);
      return std::vector<Tensor>{Conv2dBackwardX(dy, FromVector(wv, h.WeightShape()), h),
                                 Conv2dBackwardW(dy, FromVector(xv, c.x), h),
                                 Conv2dBackwardB(dy, h)};
    });
  }
}

TEST(Dnnl, ConvolutionPlainLayoutMatchesReference) {
  // The same kernels computing on our NCHW / OIHW tensors directly (no blocked reorders).
  dnnl_kernel::SetConvBlockedLayout(false);
  unsigned seed = 100;
  for (const ConvCase& c : {kConvCases[2], kConvCases[3], kConvCases[6]}) {
    ConvHandle h(c.x, {c.kh, c.kw}, {c.sh, c.sw}, {c.ph, c.pw}, c.x[1], c.oc, c.bias, c.groups,
                 {c.dh, c.dw});
    const auto xv = Rand(Product(c.x), seed++), wv = Rand(Product(h.WeightShape()), seed++),
               dyv = Rand(Product(h.OutputShape(c.x[0])), seed++);
    ExpectSameAsReference(Name(c) + " plain", [&] {
      Tensor x = FromVector(xv, c.x), W = FromVector(wv, h.WeightShape()),
             dy = FromVector(dyv, h.OutputShape(c.x[0]));
      return std::vector<Tensor>{Conv2dForward(x, W, Tensor(), h, true),
                                 Conv2dBackwardX(dy, W, h), Conv2dBackwardW(dy, x, h)};
    });
  }
  dnnl_kernel::SetConvBlockedLayout(true);
}

TEST(Dnnl, PoolingMatchesReference) {
  struct Case {
    Shape x;
    size_t kh, kw, sh, sw, ph, pw;
  };
  const std::vector<Case> cases = {
      {{2, 3, 8, 8}, 2, 2, 2, 2, 0, 0},    // ResNet-style
      {{1, 4, 7, 9}, 3, 2, 2, 1, 1, 1},    // batch 1, non-square, floor drops a row
      {{3, 2, 10, 10}, 3, 3, 2, 2, 1, 1},  // overlapping windows with padding
      {{2, 5, 5, 6}, 3, 3, 1, 1, 2, 1},    // padding near the kernel size
      {{2, 3, 4, 4}, 4, 4, 1, 1, 0, 0},    // global
  };
  unsigned seed = 200;
  for (const Case& c : cases)
    for (int mode = 0; mode < 3; ++mode) {  // max, avg excluding padding, avg including it
      PoolingHandle h(c.x, {c.kh, c.kw}, {c.sh, c.sw}, {c.ph, c.pw}, mode == 0, mode == 2);
      // Distinct values: no ties, so every maximum is unique and both kernels route alike.
      auto xv = Rand(Product(c.x), seed++);
      for (size_t i = 0; i < xv.size(); ++i) xv[i] += float(i) * 1e-3f;
      const auto dyv = Rand(Product(h.OutputShape(c.x[0])), seed++);
      ExpectSameAsReference("pool x" + nn_test::Str(c.x) + " mode " + std::to_string(mode), [&] {
        Tensor x = FromVector(xv, c.x);
        Tensor y = Pool2dForward(x, h);
        return std::vector<Tensor>{y, Pool2dBackward(FromVector(dyv, y.shape()), x, y, h)};
      });
    }
}

// Switches oneDNN's batch norm on for a test (it defaults to the reference kernel, see common.h).
struct BatchNormOn {
  BatchNormOn() { dnnl_kernel::SetBatchNormEnabled(true); }
  ~BatchNormOn() { dnnl_kernel::SetBatchNormEnabled(false); }
};

TEST(Dnnl, BatchNormMatchesReference) {
  BatchNormOn on;
  unsigned seed = 300;
  for (Shape xs : {Shape{4, 3, 5, 7}, Shape{1, 6, 3, 3}, Shape{7, 5}, Shape{2, 4, 9}}) {
    const size_t C = xs[1];
    const auto xv = Rand(Product(xs), seed++, -2.f, 3.f), sv = Rand(C, seed++, 0.5f, 1.5f),
               bv = Rand(C, seed++), dyv = Rand(Product(xs), seed++);
    auto rmv = Rand(C, seed++), rvv = Rand(C, seed++, 0.5f, 2.f);
    for (bool relu : {false, true}) {
      const std::string what = "bn x" + nn_test::Str(xs) + (relu ? " relu" : "");
      ExpectSameAsReference(what + " training", [&] {
        Tensor rm = FromVector(rmv, {C}), rv = FromVector(rvv, {C});
        auto r = BatchNormForwardTraining(FromVector(xv, xs), FromVector(sv, {C}),
                                          FromVector(bv, {C}), &rm, &rv, 0.1f, 1e-5f, relu);
        return std::vector<Tensor>{r[0], r[1], r[2], rm, rv};
      });
      ExpectSameAsReference(what + " inference", [&] {
        return std::vector<Tensor>{BatchNormForwardInference(
            FromVector(xv, xs), FromVector(sv, {C}), FromVector(bv, {C}), FromVector(rmv, {C}),
            FromVector(rvv, {C}), 1e-5f, relu)};
      });
    }
    ExpectSameAsReference("bn x" + nn_test::Str(xs) + " backward", [&] {
      Tensor x = FromVector(xv, xs), s = FromVector(sv, {C});
      auto f = BatchNormForwardTraining(x, s, FromVector(bv, {C}), nullptr, nullptr, 0.1f, 1e-5f);
      return BatchNormBackward(FromVector(dyv, xs), x, s, f[1], f[2], 1e-5f);
    }, 1e-3f);
  }
}

TEST(Dnnl, FusedReluIsReluOfTheUnfusedOutput) {
  // Checked on oneDNN alone too: the post-op is max(0, .) of exactly the unfused result.
  ConvHandle h({2, 4, 6, 6}, {3, 3}, {1, 1}, {1, 1}, 4, 5, true);
  Tensor x = FromVector(Rand(2 * 4 * 36, 400), {2, 4, 6, 6}), W = FromVector(Rand(180, 401),
                                                                            h.WeightShape()),
         b = FromVector(Rand(5, 402), {5});
  auto plain = Conv2dForward(x, W, b, h).ToVector<float>();
  auto fused = Conv2dForward(x, W, b, h, true).ToVector<float>();
  size_t zeros = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_FLOAT_EQ(fused[i], std::max(plain[i], 0.f)) << i;
    zeros += fused[i] == 0.f;
  }
  EXPECT_GT(zeros, plain.size() / 10);  // the ReLU did something
}

TEST(Dnnl, ReplayCreatesNoPrimitiveAndMatchesEager) {
  BatchNormOn on;
  auto dev = std::make_shared<CppCPU>();
  ASSERT_EQ(dev->backend(), Backend::kCpuDnnl);
  const Shape xs{3, 4, 9, 9};
  ConvHandle ch(xs, {3, 3}, {2, 2}, {1, 1}, 4, 6, true);
  PoolingHandle ph(ch.OutputShape(3), {2, 2}, {2, 2}, {0, 0}, true);
  auto make = [&](const std::vector<float>& v, const Shape& s) {
    Tensor t(s, dev);
    t.CopyDataFromHostPtr(v.data(), v.size());
    return t;
  };
  Tensor x = make(Rand(Product(xs), 500), xs), W = make(Rand(6 * 36, 501), ch.WeightShape()),
         b = make(Rand(6, 502), {6}), s = make(Rand(6, 503, 0.5f, 1.5f), {6}),
         t = make(Rand(6, 504), {6});
  auto step = [&] {
    Tensor y = Conv2dForward(x, W, b, ch, true);
    auto bn = BatchNormForwardTraining(y, s, t, nullptr, nullptr, 0.1f, 1e-5f, true);
    Tensor p = Pool2dForward(bn[0], ph);
    Tensor dp = Pool2dBackward(p, bn[0], p, ph);
    auto g = BatchNormBackward(dp, y, s, bn[1], bn[2], 1e-5f);
    return std::vector<Tensor>{p, Conv2dBackwardX(g[0], W, ch), Conv2dBackwardW(g[0], x, ch)};
  };
  std::vector<std::vector<float>> eager;
  for (const Tensor& r : step()) eager.push_back(r.ToVector<float>());
  dev->EnableGraph(true);
  auto outs = step();
  std::vector<std::unique_ptr<singa_test::Hold>> held;
  for (const Tensor& r : outs) held.emplace_back(new singa_test::Hold(r));
  dev->EnableGraph(false);
  const size_t before = dnnl_kernel::PrimitiveCreations();
  for (int rep = 0; rep < 3; ++rep) {
    dev->RunGraph(false);
    for (size_t i = 0; i < outs.size(); ++i)
      ExpectClose(outs[i].ToVector<float>(), eager[i], 1e-5f, "replay " + std::to_string(i));
  }
  EXPECT_EQ(dnnl_kernel::PrimitiveCreations(), before);
  dev->ResetGraph();
  // Eager calls with shapes seen before reuse the cached primitives as well.
  step();
  EXPECT_EQ(dnnl_kernel::PrimitiveCreations(), before);
}

TEST(Dnnl, EveryKernelIsRegisteredOrFallsBackExplicitly) {
  int seen = 0;
  for (const KernelInfo& r : ListKernels()) {
    if (r.backend != Backend::kCpuDnnl) continue;
    for (const char* op : {"Conv2dForward", "Conv2dBackwardX", "Conv2dBackwardW", "Pool2dForward",
                           "Pool2dBackward", "BatchNormForwardTraining",
                           "BatchNormForwardInference", "BatchNormBackward"})
      if (r.op == op) {
        EXPECT_TRUE(r.has_kernel) << op;
        ++seen;
      }
    if (r.op == "Conv2dBackwardB") {
      EXPECT_TRUE(r.has_fallback && r.fallback == Backend::kCpuRef);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 9);
}

TEST(Dnnl, NewShapesCreatePrimitivesForEveryOp) {
  // Each op below runs oneDNN (it creates primitives for a shape never seen), not a fallback.
  BatchNormOn on;
  const Shape xs{5, 3, 7, 5};
  Tensor x = FromVector(Rand(Product(xs), 700), xs), s = FromVector(Rand(3, 701), {3}),
         t = FromVector(Rand(3, 702), {3});
  PoolingHandle ph(xs, {2, 2}, {2, 2}, {0, 0}, true);
  size_t n = dnnl_kernel::PrimitiveCreations();
  Tensor p = Pool2dForward(x, ph);
  EXPECT_GT(dnnl_kernel::PrimitiveCreations(), n);
  n = dnnl_kernel::PrimitiveCreations();
  Pool2dBackward(p, x, p, ph);
  EXPECT_GT(dnnl_kernel::PrimitiveCreations(), n);
  n = dnnl_kernel::PrimitiveCreations();
  auto f = BatchNormForwardTraining(x, s, t, nullptr, nullptr, 0.1f, 1e-5f);
  EXPECT_GT(dnnl_kernel::PrimitiveCreations(), n);
  n = dnnl_kernel::PrimitiveCreations();
  BatchNormForwardInference(x, s, t, f[1], f[2], 1e-5f);
  EXPECT_GT(dnnl_kernel::PrimitiveCreations(), n);
  n = dnnl_kernel::PrimitiveCreations();
  BatchNormBackward(x, x, s, f[1], f[2], 1e-5f);
  EXPECT_GT(dnnl_kernel::PrimitiveCreations(), n);
}

TEST(Dnnl, BatchNormDefaultsToTheReferenceKernel) {
  // Measured faster (common.h): without the switch, batch norm creates no oneDNN primitive.
  const Shape xs{3, 5, 4, 6};
  Tensor x = FromVector(Rand(Product(xs), 800), xs), s = FromVector(Rand(5, 801), {5}),
         t = FromVector(Rand(5, 802), {5});
  const size_t n = dnnl_kernel::PrimitiveCreations();
  auto f = BatchNormForwardTraining(x, s, t, nullptr, nullptr, 0.1f, 1e-5f, true);
  BatchNormBackward(x, x, s, f[1], f[2], 1e-5f);
  EXPECT_EQ(dnnl_kernel::PrimitiveCreations(), n);
}

TEST(Dnnl, OtherBatchSizeCreatesItsOwnPrimitives) {
  ConvHandle h({2, 3, 5, 5}, {3, 3}, {1, 1}, {1, 1}, 3, 4, false);
  Tensor W = FromVector(Rand(108, 600), h.WeightShape());
  Conv2dForward(FromVector(Rand(75 * 2, 601), {2, 3, 5, 5}), W, Tensor(), h);
  const size_t before = dnnl_kernel::PrimitiveCreations();
  Conv2dForward(FromVector(Rand(75 * 2, 602), {2, 3, 5, 5}), W, Tensor(), h);
  EXPECT_EQ(dnnl_kernel::PrimitiveCreations(), before);
  Conv2dForward(FromVector(Rand(75 * 3, 603), {3, 3, 5, 5}), W, Tensor(), h);
  EXPECT_GT(dnnl_kernel::PrimitiveCreations(), before);
}

#else

TEST(Dnnl, Skipped) {
  GTEST_SKIP() << "built without oneDNN (USE_DNNL=OFF): no kCpuDnnl kernels to compare";
}

#endif

}  // namespace
}  // namespace singa
