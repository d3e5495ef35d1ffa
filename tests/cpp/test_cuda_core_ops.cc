// The CUDA kernels of the core ops (cpp/src/ops/cuda/) against the CPU kernels of the same ops:
// every elementwise line (dense, strided and broadcast operands; float32, int32 for the FI
// lines, float16), the copies and conversions, reductions and softmax, concat/slice/repeat,
// the index ops and their device-side errors, the losses and their label errors, SGD and the
// random fills (statistics: cuRAND's numbers differ from the CPU's mt19937). Odd shapes
// throughout. Every test skips where no GPU is usable (SINGA_REQUIRE_GPU).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "singa/ops/elementwise.h"
#include "singa/ops/nn.h"
#include "singa/ops/optim.h"
#include "singa/ops/random.h"
#include "singa/ops/reduce.h"
#include "singa/ops/shape.h"

namespace singa {
namespace {

using singa_test::ExpectSameOnGpu;
using singa_test::Gpu;
using singa_test::OnGpu;
using singa_test::RandomTensor;

// The input range where a unary line is finite (NaN never equals NaN in ExpectSameOnGpu).
void DomainOf(const std::string& op, float* lo, float* hi) {
  *lo = -0.95f;
  *hi = 0.95f;
  if (op == "Log" || op == "Sqrt") *lo = 0.05f, *hi = 3.f;
  if (op == "Acosh") *lo = 1.05f, *hi = 3.f;
}

// x (CPU, float32) rounded to float16 and back: the values a float16 GPU tensor holds.
Tensor RoundToHalf(const Tensor& x) { return x.AsType(kFloat16).AsType(kFloat32); }

// A float16 result against the CPU's float32 result of the same (half-rounded) inputs, rounded
// once to half: equal up to one half ulp-step from float's last-bit differences.
void ExpectSameHalf(const Tensor& cpu_f32, const Tensor& gpu_f16) {
  ASSERT_EQ(gpu_f16.data_type(), kFloat16);
  ExpectSameOnGpu(RoundToHalf(cpu_f32), gpu_f16.AsType(kFloat32), 2e-3f);
}

TEST(CudaCoreOps, EveryUnaryLineDenseStridedIntAndHalf) {
  SINGA_REQUIRE_GPU();
#define SINGA_BINARY(Name, kinds, expr)
#define SINGA_UNARY(Name, kinds, expr)                                                        \
  {                                                                                           \
    SCOPED_TRACE(#Name);                                                                      \
    float lo, hi;                                                                             \
    DomainOf(#Name, &lo, &hi);                                                                \
    const Tensor x = RandomTensor({7, 13}, lo, hi, 11);                                       \
    ExpectSameOnGpu(Name(x), Name(OnGpu(x)));                                                 \
    ExpectSameOnGpu(Name(Transpose(x)), Name(Transpose(OnGpu(x))));                           \
    const Tensor xh = RoundToHalf(x);                                                         \
    ExpectSameHalf(Name(xh), Name(OnGpu(xh).AsType(kFloat16)));                               \
    if (std::string(#kinds) == "FI") {                                                        \
      const Tensor xi = (x * 9.f).AsType(kInt);                                               \
      const Tensor yi = Name(OnGpu(xi));                                                      \
      EXPECT_EQ(yi.data_type(), kInt);                                                        \
      ExpectSameOnGpu(Name(xi), yi, 0.f);                                                     \
    }                                                                                         \
  }
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
}

TEST(CudaCoreOps, EveryBinaryLineDenseBroadcastTransposedIntAndHalf) {
  SINGA_REQUIRE_GPU();
  const Tensor a = RandomTensor({7, 13}, 0.1f, 2.f, 3);
  const Tensor b = RandomTensor({7, 13}, -1.5f, 1.5f, 4);
  const Tensor row = RandomTensor({13}, -1.5f, 1.5f, 5);    // broadcast over rows
  const Tensor col = RandomTensor({7, 1}, -1.5f, 1.5f, 6);  // broadcast over columns
  const Tensor bt = Transpose(RandomTensor({13, 7}, -1.5f, 1.5f, 8));  // strided (7, 13)
#define SINGA_UNARY(Name, kinds, expr)
#define SINGA_BINARY(Name, kinds, expr)                                                       \
  {                                                                                           \
    SCOPED_TRACE(#Name);                                                                      \
    ExpectSameOnGpu(Name(a, b), Name(OnGpu(a), OnGpu(b)));                                    \
    ExpectSameOnGpu(Name(a, row), Name(OnGpu(a), OnGpu(row)));                                \
    ExpectSameOnGpu(Name(a, col), Name(OnGpu(a), OnGpu(col)));                                \
    ExpectSameOnGpu(Name(a, bt), Name(OnGpu(a), Transpose(OnGpu(Transpose(bt)))));            \
    ExpectSameOnGpu(Name(a, 0.75f), Name(OnGpu(a), 0.75f));                                   \
    const Tensor ah = RoundToHalf(a), bh = RoundToHalf(row);                                  \
    ExpectSameHalf(Name(ah, bh),                                                              \
                   Name(OnGpu(ah).AsType(kFloat16), OnGpu(bh).AsType(kFloat16)));             \
    if (std::string(#kinds) == "FI") {                                                        \
      const Tensor ai = (a * 5.f).AsType(kInt), bi = (b * 5.f).AsType(kInt);                  \
      const Tensor yi = Name(OnGpu(ai), OnGpu(bi));                                           \
      EXPECT_EQ(yi.data_type(), kInt);                                                        \
      ExpectSameOnGpu(Name(ai, bi), yi, 0.f);                                                 \
    }                                                                                         \
  }
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
}

TEST(CudaCoreOps, ClampAndLeakyReLU) {
  SINGA_REQUIRE_GPU();
  const Tensor x = RandomTensor({5, 11}, -2.f, 2.f, 9);
  ExpectSameOnGpu(Clamp(x, -0.5f, 0.7f), Clamp(OnGpu(x), -0.5f, 0.7f));
  ExpectSameOnGpu(LeakyReLU(x, 0.2f), LeakyReLU(OnGpu(x), 0.2f));
  ExpectSameOnGpu(LeakyReLU(Transpose(x), 0.2f), LeakyReLU(Transpose(OnGpu(x)), 0.2f));
  const Tensor xi = (x * 4.f).AsType(kInt);
  ExpectSameOnGpu(Clamp(xi, -3.f, 2.f), Clamp(OnGpu(xi), -3.f, 2.f), 0.f);
  const Tensor xh = RoundToHalf(x);
  ExpectSameHalf(LeakyReLU(xh, 0.2f), LeakyReLU(OnGpu(xh).AsType(kFloat16), 0.2f));
}

TEST(CudaCoreOps, ConversionsBetweenEveryStorageTypeDenseAndStrided) {
  SINGA_REQUIRE_GPU();
  const Tensor x = RandomTensor({9, 5}, -40.f, 40.f, 12);
  for (DataType from : {kFloat32, kInt, kFloat16})
    for (DataType to : {kFloat32, kInt, kFloat16}) {
      SCOPED_TRACE(DataTypeName(from) + " -> " + DataTypeName(to));
      const Tensor src = x.AsType(from);
      ExpectSameOnGpu(src.AsType(to), OnGpu(src).AsType(to), 0.f);
      // a transposed view made contiguous, then converted (strided source)
      ExpectSameOnGpu(Transpose(src).Contiguous().AsType(to),
                      Transpose(OnGpu(src)).Contiguous().AsType(to), 0.f);
      ExpectSameOnGpu(Transpose(src).AsType(to), Transpose(OnGpu(src)).AsType(to), 0.f);
    }
}

TEST(CudaCoreOps, FillAndOverlappingCopyBytes) {
  SINGA_REQUIRE_GPU();
  for (DataType dt : {kFloat32, kInt, kFloat16}) {
    Tensor c(Shape{7, 3}, dt), g(Shape{7, 3}, Gpu(), dt);
    c.SetValue(-2.5f);
    g.SetValue(-2.5f);
    ExpectSameOnGpu(c, g, 0.f);
  }
  // memmove semantics inside one tensor, both directions, short and long distances
  const std::vector<std::array<size_t, 3>> cases = {{40, 3, 0}, {40, 0, 3}, {30, 1, 0},
                                                    {21, 0, 29}, {10, 5, 6}};
  for (const auto& [num, dst, src] : cases) {
    Tensor c = RandomTensor({50}, -1.f, 1.f, 21);
    Tensor g = OnGpu(c);
    CopyDataToFrom(&c, c, num, dst, src);
    CopyDataToFrom(&g, g, num, dst, src);
    ExpectSameOnGpu(c, g, 0.f);
  }
}

TEST(CudaCoreOps, ReductionsOverEveryLayoutFloatAndInt) {
  SINGA_REQUIRE_GPU();
  const Tensor x = RandomTensor({5, 37, 3}, -3.f, 3.f, 13);
  const Tensor wide = RandomTensor({3, 301}, -3.f, 3.f, 14);  // the one-block-per-row kernel
  // long reduced axes over columns: the column-strip kernel (32 lanes split the rows), with a
  // partial last strip and, for tall3's axis 1, several outer slabs
  const Tensor tall = RandomTensor({300, 70}, -3.f, 3.f, 20);
  const Tensor tall3 = RandomTensor({2, 130, 45}, -3.f, 3.f, 22);
  for (const Tensor& t : {x, wide, tall, tall3}) {
    for (int axis = 0; axis < int(t.shape().size()); ++axis) {
      SCOPED_TRACE("axis " + std::to_string(axis) + " of " + std::to_string(t.shape().size()));
      const Tensor g = OnGpu(t);
      ExpectSameOnGpu(ReduceSum(t, {axis}), ReduceSum(g, {axis}));
      ExpectSameOnGpu(ReduceMean(t, {axis}), ReduceMean(g, {axis}));
      ExpectSameOnGpu(ReduceMax(t, {axis}), ReduceMax(g, {axis}), 0.f);
      ExpectSameOnGpu(ReduceMin(t, {axis}), ReduceMin(g, {axis}), 0.f);
      // int32 data with many ties: the first extreme index wins on both
      const Tensor ti = (t * 1.f).AsType(kInt);
      ExpectSameOnGpu(Argmax(ti, axis), Argmax(OnGpu(ti), axis), 0.f);
      ExpectSameOnGpu(Argmin(ti, axis), Argmin(OnGpu(ti), axis), 0.f);
      ExpectSameOnGpu(ReduceSum(ti, {axis}), ReduceSum(OnGpu(ti), {axis}), 0.f);
      ExpectSameOnGpu(Argmax(t, axis), Argmax(g, axis), 0.f);
    }
    ExpectSameOnGpu(ReduceSum(t, {0, 1}), ReduceSum(OnGpu(t), {0, 1}), 1e-5f);
  }
}

// NaN in a column strip: max / min / argmax / argmin take it (the first NaN's index) whichever
// lane read it, and sums propagate it, as on the CPU.
TEST(CudaCoreOps, ColumnStripReductionsPropagateNaN) {
  SINGA_REQUIRE_GPU();
  std::vector<float> v = RandomTensor({300, 70}, -3.f, 3.f, 23).ToVector<float>();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t at : {17 * 70 + 5, 250 * 70 + 5, 40 * 70 + 69, 299 * 70 + 0}) v[at] = nan;
  Tensor t(Shape{300, 70});
  t.CopyDataFromHostPtr(v.data(), v.size());
  const Tensor g = OnGpu(t);
  ExpectSameOnGpu(ReduceSum(t, {0}), ReduceSum(g, {0}));
  ExpectSameOnGpu(ReduceMax(t, {0}), ReduceMax(g, {0}), 0.f);
  ExpectSameOnGpu(ReduceMin(t, {0}), ReduceMin(g, {0}), 0.f);
  ExpectSameOnGpu(Argmax(t, 0), Argmax(g, 0), 0.f);
  ExpectSameOnGpu(Argmin(t, 0), Argmin(g, 0), 0.f);
}

TEST(CudaCoreOps, SoftMaxFamilyAlongEveryAxis) {
  SINGA_REQUIRE_GPU();
  const Tensor x = RandomTensor({4, 9, 5}, -20.f, 20.f, 15);  // large logits: max-subtracted
  const Tensor wide = RandomTensor({3, 257}, -20.f, 20.f, 16);
  const Tensor dy3 = RandomTensor({4, 9, 5}, -1.f, 1.f, 17);
  const Tensor dyw = RandomTensor({3, 257}, -1.f, 1.f, 18);
  for (int axis : {0, 1, 2, -1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const Tensor y = SoftMax(x, axis);
    ExpectSameOnGpu(y, SoftMax(OnGpu(x), axis));
    ExpectSameOnGpu(LogSoftMax(x, axis), LogSoftMax(OnGpu(x), axis));
    ExpectSameOnGpu(SoftMaxBackward(dy3, y, axis),
                    SoftMaxBackward(OnGpu(dy3), OnGpu(y), axis));
  }
  const Tensor yw = SoftMax(wide);
  ExpectSameOnGpu(yw, SoftMax(OnGpu(wide)));
  ExpectSameOnGpu(LogSoftMax(wide), LogSoftMax(OnGpu(wide)));
  ExpectSameOnGpu(SoftMaxBackward(dyw, yw), SoftMaxBackward(OnGpu(dyw), OnGpu(yw)));
}

// float16 reductions and softmax compute in float and round once: the CPU's float32 result of
// the same half-rounded data, rounded to half.
TEST(CudaCoreOps, Float16ReductionsAndSoftMax) {
  SINGA_REQUIRE_GPU();
  for (const Shape& shape : {Shape{5, 37, 3}, Shape{3, 301}, Shape{300, 70}}) {
    const Tensor x = RoundToHalf(RandomTensor(shape, -3.f, 3.f, 19));
    const Tensor xh = OnGpu(x).AsType(kFloat16);
    for (int axis = 0; axis < int(shape.size()); ++axis) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      ExpectSameHalf(ReduceSum(x, {axis}), ReduceSum(xh, {axis}));
      ExpectSameHalf(ReduceMean(x, {axis}), ReduceMean(xh, {axis}));
      ExpectSameHalf(ReduceMax(x, {axis}), ReduceMax(xh, {axis}));
      ExpectSameHalf(ReduceMin(x, {axis}), ReduceMin(xh, {axis}));
      ExpectSameHalf(SoftMax(x, axis), SoftMax(xh, axis));
      ExpectSameHalf(LogSoftMax(x, axis), LogSoftMax(xh, axis));
      const Tensor y = RoundToHalf(SoftMax(x, axis)), dy = RoundToHalf(RandomTensor(shape));
      ExpectSameHalf(SoftMaxBackward(dy, y, axis),
                     SoftMaxBackward(OnGpu(dy).AsType(kFloat16), OnGpu(y).AsType(kFloat16), axis));
      const Tensor am = Argmax(xh, axis);
      EXPECT_EQ(am.data_type(), kInt);
      ExpectSameOnGpu(Argmax(x, axis), am, 0.f);
      ExpectSameOnGpu(Argmin(x, axis), Argmin(xh, axis), 0.f);
    }
  }
}

TEST(CudaCoreOps, ConcatSliceRepeatOnEveryStorageType) {
  SINGA_REQUIRE_GPU();
  for (DataType dt : {kFloat32, kInt, kFloat16}) {
    SCOPED_TRACE(DataTypeName(dt));
    const Tensor a = (RandomTensor({3, 5}, -9.f, 9.f, 31)).AsType(dt);
    const Tensor b = (RandomTensor({2, 5}, -9.f, 9.f, 32)).AsType(dt);
    const Tensor c = Transpose((RandomTensor({5, 4}, -9.f, 9.f, 33)).AsType(dt));  // (4, 5)
    ExpectSameOnGpu(ConcatOn({a, b, c}, 0), ConcatOn({OnGpu(a), OnGpu(b), OnGpu(c)}, 0), 0.f);
    const Tensor d = (RandomTensor({3, 2}, -9.f, 9.f, 34)).AsType(dt);
    ExpectSameOnGpu(ConcatOn({a, d}, 1), ConcatOn({OnGpu(a), OnGpu(d)}, 1), 0.f);
    ExpectSameOnGpu(SliceOn(a, 1, 4, 1), SliceOn(OnGpu(a), 1, 4, 1), 0.f);
    ExpectSameOnGpu(SliceOn(c, 1, 3, 0), SliceOn(OnGpu(c), 1, 3, 0), 0.f);
    ExpectSameOnGpu(a.Repeat({3}, 1), OnGpu(a).Repeat({3}, 1), 0.f);       // uniform
    ExpectSameOnGpu(a.Repeat({2, 0, 1}, 0), OnGpu(a).Repeat({2, 0, 1}, 0), 0.f);
    // more distinct counts than the kernel's parameter table: one launch per slot
    const Tensor big = (RandomTensor({300}, -9.f, 9.f, 35)).AsType(dt);
    std::vector<size_t> reps(300);
    for (size_t i = 0; i < reps.size(); ++i) reps[i] = i % 4;
    ExpectSameOnGpu(big.Repeat(reps, 0), OnGpu(big).Repeat(reps, 0), 0.f);
    std::vector<size_t> reps15(15);
    for (size_t i = 0; i < reps15.size(); ++i) reps15[i] = (i * 7) % 3;
    ExpectSameOnGpu(a.Repeat(reps15, 9999), OnGpu(a).Repeat(reps15, 9999), 0.f);
  }
}

Tensor Indices(const std::vector<float>& v, DataType dt) {
  Tensor t(Shape{v.size()});
  t.CopyDataFromHostPtr(v.data(), v.size());
  return dt == kFloat32 ? t : t.AsType(dt);
}

TEST(CudaCoreOps, IndexSelectAndIndexAddWithNegativeAndRepeatedIndices) {
  SINGA_REQUIRE_GPU();
  const Tensor x = RandomTensor({4, 7, 3}, -1.f, 1.f, 41);
  for (DataType idt : {kInt, kFloat32}) {
    const Tensor idx = Indices({6.f, -1.f, 0.f, 2.f, 2.f}, idt);
    for (int axis : {0, 1}) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      const Tensor idx_a = axis == 0 ? Indices({3.f, -4.f, 1.f, 1.f}, idt) : idx;
      const Tensor y = IndexSelect(x, axis, idx_a);
      ExpectSameOnGpu(y, IndexSelect(OnGpu(x), axis, OnGpu(idx_a)), 0.f);
      const Tensor dy = RandomTensor(y.shape(), -1.f, 1.f, 42);
      ExpectSameOnGpu(IndexAdd(dy, axis, idx_a, x.shape()),
                      IndexAdd(OnGpu(dy), axis, OnGpu(idx_a), x.shape()));
    }
  }
  const Tensor xh = x.AsType(kFloat16);  // a float16 table (moved, not computed)
  const Tensor idx = Indices({6.f, -1.f, 0.f}, kInt);
  ExpectSameOnGpu(IndexSelect(xh, 1, idx), IndexSelect(OnGpu(xh), 1, OnGpu(idx)), 0.f);
}

TEST(CudaCoreOps, BadIndicesRaiseAtSync) {
  SINGA_REQUIRE_GPU();
  const Tensor x = OnGpu(RandomTensor({4, 7}, -1.f, 1.f, 43));
  EXPECT_THROW(
      {
        Tensor y = IndexSelect(x, 1, OnGpu(Indices({1.f, 7.f}, kInt)));
        Gpu()->Sync();
      },
      AxisError);
  EXPECT_THROW(
      {
        Tensor y = IndexSelect(x, 0, OnGpu(Indices({0.f, -5.f}, kInt)));
        Gpu()->Sync();
      },
      AxisError);
  EXPECT_THROW(
      {
        Tensor y = IndexSelect(x, 1, OnGpu(Indices({1.5f}, kFloat32)));
        Gpu()->Sync();
      },
      ValueError);
  EXPECT_THROW(
      {
        Tensor y = IndexAdd(OnGpu(RandomTensor({4, 1})), 1, OnGpu(Indices({9.f}, kInt)), {4, 7});
        Gpu()->Sync();
      },
      AxisError);
  // the device is usable afterwards
  ExpectSameOnGpu(IndexSelect(RandomTensor({4, 7}, -1.f, 1.f, 43), 1, Indices({2.f}, kInt)),
                  IndexSelect(x, 1, OnGpu(Indices({2.f}, kInt))), 0.f);
}

TEST(CudaCoreOps, LossesWithLabelsAndTargetMatrices) {
  SINGA_REQUIRE_GPU();
  for (size_t C : {size_t(5), size_t(301)}) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const Tensor z = RandomTensor({9, C}, -5.f, 5.f, 51);
    const Tensor p = SoftMax(z);
    std::vector<float> lv(9);
    for (size_t i = 0; i < lv.size(); ++i) lv[i] = float((i * 3 + 1) % C);
    const Tensor tm = SoftMax(RandomTensor({9, C}, -2.f, 2.f, 52));  // soft targets
    for (DataType ldt : {kInt, kFloat32}) {
      const Tensor lab = Indices(lv, ldt);
      ExpectSameOnGpu(SoftmaxCrossEntropyForward(z, lab),
                      SoftmaxCrossEntropyForward(OnGpu(z), OnGpu(lab)));
      ExpectSameOnGpu(SoftmaxCrossEntropyBackward(z, lab),
                      SoftmaxCrossEntropyBackward(OnGpu(z), OnGpu(lab)));
      ExpectSameOnGpu(CrossEntropyFwd(p, lab), CrossEntropyFwd(OnGpu(p), OnGpu(lab)));
      ExpectSameOnGpu(SoftmaxCrossEntropyBwd(p, lab), SoftmaxCrossEntropyBwd(OnGpu(p), OnGpu(lab)));
    }
    ExpectSameOnGpu(SoftmaxCrossEntropyForward(z, tm),
                    SoftmaxCrossEntropyForward(OnGpu(z), OnGpu(tm)));
    ExpectSameOnGpu(SoftmaxCrossEntropyBackward(z, tm),
                    SoftmaxCrossEntropyBackward(OnGpu(z), OnGpu(tm)));
    ExpectSameOnGpu(CrossEntropyFwd(p, tm), CrossEntropyFwd(OnGpu(p), OnGpu(tm)));
    ExpectSameOnGpu(SoftmaxCrossEntropyBwd(p, tm), SoftmaxCrossEntropyBwd(OnGpu(p), OnGpu(tm)));
  }
}

TEST(CudaCoreOps, Float16Losses) {
  SINGA_REQUIRE_GPU();
  const Tensor z = RoundToHalf(RandomTensor({9, 7}, -4.f, 4.f, 54));
  const Tensor p = RoundToHalf(SoftMax(z));
  const Tensor tm = RoundToHalf(SoftMax(RandomTensor({9, 7}, -2.f, 2.f, 55)));
  const Tensor zh = OnGpu(z).AsType(kFloat16), ph = OnGpu(p).AsType(kFloat16);
  const Tensor lab = Indices({0.f, 6.f, 3.f, 1.f, 1.f, 2.f, 5.f, 4.f, 0.f}, kInt);
  for (const Tensor& t : {lab, tm}) {
    const Tensor tg = t.data_type() == kInt ? OnGpu(t) : OnGpu(t).AsType(kFloat16);
    ExpectSameHalf(SoftmaxCrossEntropyForward(z, t), SoftmaxCrossEntropyForward(zh, tg));
    ExpectSameHalf(SoftmaxCrossEntropyBackward(z, t), SoftmaxCrossEntropyBackward(zh, tg));
    ExpectSameHalf(CrossEntropyFwd(p, t), CrossEntropyFwd(ph, tg));
    ExpectSameHalf(SoftmaxCrossEntropyBwd(p, t), SoftmaxCrossEntropyBwd(ph, tg));
  }
  // a float32 target matrix with float16 logits is converted to float16
  ExpectSameHalf(SoftmaxCrossEntropyForward(z, tm), SoftmaxCrossEntropyForward(zh, OnGpu(tm)));
}

TEST(CudaCoreOps, BadLabelsRaiseAtSync) {
  SINGA_REQUIRE_GPU();
  const Tensor z = OnGpu(RandomTensor({3, 4}, -1.f, 1.f, 53));
  EXPECT_THROW(
      {
        Tensor y = SoftmaxCrossEntropyForward(z, OnGpu(Indices({0.f, 4.f, 1.f}, kInt)));
        Gpu()->Sync();
      },
      ValueError);
  EXPECT_THROW(
      {
        Tensor y = CrossEntropyFwd(z, OnGpu(Indices({0.f, 0.5f, 1.f}, kFloat32)));
        Gpu()->Sync();
      },
      ValueError);
  EXPECT_THROW(
      {
        Tensor y = SoftmaxCrossEntropyBackward(z, OnGpu(Indices({-1.f, 0.f, 1.f}, kInt)));
        Gpu()->Sync();
      },
      ValueError);
}

Tensor Scalar(float v, bool gpu) {
  Tensor t(Shape{1});
  t.SetValue(v);
  return gpu ? OnGpu(t) : t;
}

TEST(CudaCoreOps, SGDUpdateEveryVariant) {
  SINGA_REQUIRE_GPU();
  for (int variant = 0; variant < 3; ++variant) {  // plain, momentum, nesterov
    SCOPED_TRACE("variant " + std::to_string(variant));
    Tensor pc = RandomTensor({17, 3}, -1.f, 1.f, 61), gc = RandomTensor({17, 3}, -1.f, 1.f, 62);
    Tensor bc = RandomTensor({17, 3}, -1.f, 1.f, 63);
    Tensor pg = OnGpu(pc), gg = OnGpu(gc), bg = OnGpu(bc);
    const float mom = variant == 0 ? 0.f : 0.9f, damp = variant == 1 ? 0.1f : 0.f;
    for (int step = 0; step < 3; ++step) {  // the buffer carries over between steps
      SGDUpdate(&pc, gc, variant == 0 ? nullptr : &bc, Scalar(0.05f, false),
                Scalar(mom, false), Scalar(damp, false), Scalar(1e-3f, false), variant == 2);
      SGDUpdate(&pg, gg, variant == 0 ? nullptr : &bg, Scalar(0.05f, true), Scalar(mom, true),
                Scalar(damp, true), Scalar(1e-3f, true), variant == 2);
    }
    ExpectSameOnGpu(pc, pg);
    if (variant > 0) ExpectSameOnGpu(bc, bg);
  }
}

TEST(CudaCoreOps, SGDUpdateFloat16) {
  SINGA_REQUIRE_GPU();
  // One step from half-rounded values: the CPU's float32 update, rounded once, is the GPU's.
  const Tensor p = RoundToHalf(RandomTensor({17, 3}, -1.f, 1.f, 64));
  const Tensor g = RoundToHalf(RandomTensor({17, 3}, -1.f, 1.f, 65));
  const Tensor b = RoundToHalf(RandomTensor({17, 3}, -1.f, 1.f, 66));
  Tensor pc = p.Clone(), bc = b.Clone();
  Tensor ph = OnGpu(p).AsType(kFloat16), bh = OnGpu(b).AsType(kFloat16);
  SGDUpdate(&pc, g, &bc, Scalar(0.05f, false), Scalar(0.9f, false), Scalar(0.f, false),
            Scalar(1e-3f, false), true);
  SGDUpdate(&ph, OnGpu(g).AsType(kFloat16), &bh, Scalar(0.05f, true), Scalar(0.9f, true),
            Scalar(0.f, true), Scalar(1e-3f, true), true);
  ExpectSameHalf(pc, ph);
  ExpectSameHalf(bc, bh);
}

std::vector<float> Draw(void (*fill)(float, float, Tensor*), float a, float b, size_t n) {
  Tensor t(Shape{n}, Gpu());
  fill(a, b, &t);
  t.ToHost();
  return t.ToVector<float>();
}

TEST(CudaCoreOps, RandomFillsHaveTheirDistributions) {
  SINGA_REQUIRE_GPU();
  const size_t n = 200001;  // odd: the last Gaussian value has no cuRAND pair
  const std::vector<float> u = Draw(&Uniform, -2.f, 3.f, n);
  double mean = 0;
  for (float v : u) {
    ASSERT_GE(v, -2.f);
    ASSERT_LT(v, 3.f);
    mean += v / double(n);
  }
  EXPECT_NEAR(mean, 0.5, 0.02);
  const std::vector<float> g = Draw(&Gaussian, 1.f, 2.f, n);
  double gm = 0, gv = 0;
  for (float v : g) {
    ASSERT_TRUE(std::isfinite(v));
    gm += v / double(n);
  }
  for (float v : g) gv += (v - gm) * (v - gm) / double(n);
  EXPECT_NEAR(gm, 1.0, 0.03);
  EXPECT_NEAR(std::sqrt(gv), 2.0, 0.03);
  EXPECT_TRUE(std::isfinite(Draw(&Gaussian, 0.f, 1.f, 1)[0]));
  auto bernoulli = [](float p, float, Tensor* t) { Bernoulli(p, t); };
  for (float p : {0.f, 0.3f, 1.f}) {
    const std::vector<float> bv = Draw(+bernoulli, p, 0.f, 10001);
    double m = 0;
    for (float v : bv) {
      ASSERT_TRUE(v == 0.f || v == 1.f);
      m += v / double(bv.size());
    }
    EXPECT_NEAR(m, p, 0.02) << "p " << p;
  }
}

}  // namespace
}  // namespace singa
