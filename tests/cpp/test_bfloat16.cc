// bfloat16: the conversions (round to nearest even, NaN, Inf, overflow), storage and AsType,
// elementwise and matrix products in bf16 against float32, and cpu_features' refusal.
#include <cmath>
#include <cstring>

#include "singa/core/cpu_features.h"
#include "test_helpers.h"

using namespace singa;

namespace {
float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint16_t Bf16Bits(float f) { return FloatToBFloat16(f).bits; }
// Small integers (exact in bf16, and their products' sums exact in float).
Tensor SmallInts(const Shape& shape, int mod) {
  std::vector<float> v(Product(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % mod) - mod / 2);
  return singa_test::FromVector(v, shape);
}
}  // namespace

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(Bf16Bits(1.f), 0x3F80);
  EXPECT_EQ(Bf16Bits(FromBits(0x3F807FFF)), 0x3F80);  // below half a step: down
  EXPECT_EQ(Bf16Bits(FromBits(0x3F808001)), 0x3F81);  // above: up
  EXPECT_EQ(Bf16Bits(FromBits(0x3F808000)), 0x3F80);  // a tie goes to the even neighbour
  EXPECT_EQ(Bf16Bits(FromBits(0x3F818000)), 0x3F82);
  EXPECT_EQ(Bf16Bits(-0.f), 0x8000);
  EXPECT_EQ(BFloat16ToFloat(BFloat16{0x4049}), FromBits(0x40490000));
  EXPECT_EQ(SizeOf(kBFloat16), 2u);
  EXPECT_EQ(DataTypeName(kBFloat16), "bfloat16");
}

TEST(BFloat16, KeepsNaNAndInfAndOverflowsToInf) {
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(FromBits(0x7F800001)))));  // low payload
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(-NAN))));
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(INFINITY)), INFINITY);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(-3.4e38f)), -INFINITY);  // past the largest bf16
}

TEST(BFloat16, AsTypeAndElementwiseComputeInFloat) {
  Tensor x = singa_test::FromVector({0.5f, -1.25f, 3.f, 100.f}, {2, 2});
  Tensor b = x.AsType(kBFloat16);
  EXPECT_EQ(b.data_type(), kBFloat16);
  EXPECT_EQ(b.MemSize(), 8u);
  EXPECT_EQ(b.AsType(kFloat32).ToVector<float>(), x.ToVector<float>());  // exact in bf16
  const std::vector<float> sum = Add(b, b).AsType(kFloat32).ToVector<float>();
  EXPECT_EQ(sum, (std::vector<float>{1.f, -2.5f, 6.f, 200.f}));
  EXPECT_EQ(Add(b, 1.f).data_type(), kBFloat16);
  EXPECT_EQ(Add(b, x).data_type(), kFloat32);  // mixed: promoted
  const std::vector<float> e = Exp(b).AsType(kFloat32).ToVector<float>();
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(e[i], BFloat16ToFloat(FloatToBFloat16(std::exp(x.ToVector<float>()[i]))));
  // summed in float (102.25), rounded once: 8 significant bits give 102
  EXPECT_EQ(ReduceSum(b, {}, false).AsType(kFloat32).ToVector<float>()[0], 102.f);
}

TEST(BFloat16, MatrixProductAccumulatesInFloat) {
  Tensor a = SmallInts({3, 40}, 7), w = SmallInts({40, 5}, 11);
  const std::vector<float> want = Mult(a, w).ToVector<float>();
  auto dev = a.device();
  for (Backend be : {Backend::kCpuRef, Backend::kCpuDnnl}) {
    if (!dev->SupportsBackend(be)) continue;
    if (be == Backend::kCpuDnnl && !CpuHas("avx512_bf16")) continue;
    dev->set_backend(be);
    // exact inputs, sums exact in float32: the result is the float32 one rounded once
    const std::vector<float> got =
        Mult(a.AsType(kBFloat16), w.AsType(kBFloat16)).AsType(kFloat32).ToVector<float>();
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(got[i], BFloat16ToFloat(FloatToBFloat16(want[i]))) << BackendName(be) << i;
  }
  dev->set_backend(dev->SupportsBackend(Backend::kCpuDnnl) ? Backend::kCpuDnnl : Backend::kCpuRef);
}

TEST(CpuFeatures, ListsAndRefuses) {
#if defined(__x86_64__)
  EXPECT_TRUE(CpuHas("sse2"));  // every x86-64 CPU
#endif
  EXPECT_FALSE(CpuHas("no_such_isa"));
  EXPECT_THROW(RequireCpuFeature("Test", "no_such_isa"), NotImplementedError);
  try {
    RequireCpuFeature("Conv2d (bfloat16)", "no_such_isa");
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("Conv2d (bfloat16): needs the no_such_isa"),
              std::string::npos)
        << e.what();
  }
}
