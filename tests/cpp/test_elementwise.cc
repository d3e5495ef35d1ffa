// The elementwise table: every operator against a scalar reference, broadcasting, dtypes, errors.
#include <cmath>
#include <functional>
#include <map>

#include "test_helpers.h"

using namespace singa;
using singa_test::FromVector;

namespace {

std::vector<float> Inputs() { return {-2.5f, -1.f, -0.3f, 0.f, 0.2f, 0.7f, 1.f, 3.5f}; }

// Reference definitions in plain C++, checked on inputs inside each op's domain.
struct UnaryCase {
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  float lo, hi;  // domain
};

std::map<std::string, UnaryCase> UnaryCases() {
  return {
      {"Abs", {[](const Tensor& t) { return Abs(t); }, [](double x) { return std::fabs(x); }, -9, 9}},
      {"Negative", {[](const Tensor& t) { return Negative(t); }, [](double x) { return -x; }, -9, 9}},
      {"Sign", {[](const Tensor& t) { return Sign(t); }, [](double x) { return double((x > 0) - (x < 0)); }, -9, 9}},
      {"Square", {[](const Tensor& t) { return Square(t); }, [](double x) { return x * x; }, -9, 9}},
      {"ReLU", {[](const Tensor& t) { return ReLU(t); }, [](double x) { return x > 0 ? x : 0; }, -9, 9}},
      {"Exp", {[](const Tensor& t) { return Exp(t); }, [](double x) { return std::exp(x); }, -9, 9}},
      {"Log", {[](const Tensor& t) { return Log(t); }, [](double x) { return std::log(x); }, 0.01f, 9}},
      {"Sqrt", {[](const Tensor& t) { return Sqrt(t); }, [](double x) { return std::sqrt(x); }, 0, 9}},
      {"Sigmoid", {[](const Tensor& t) { return Sigmoid(t); }, [](double x) { return 1 / (1 + std::exp(-x)); }, -9, 9}},
      {"Tanh", {[](const Tensor& t) { return Tanh(t); }, [](double x) { return std::tanh(x); }, -9, 9}},
      {"SoftPlus", {[](const Tensor& t) { return SoftPlus(t); }, [](double x) { return std::log1p(std::exp(x)); }, -9, 9}},
      {"SoftSign", {[](const Tensor& t) { return SoftSign(t); }, [](double x) { return x / (1 + std::fabs(x)); }, -9, 9}},
      {"Reciprocal", {[](const Tensor& t) { return Reciprocal(t); }, [](double x) { return 1 / x; }, 0.1f, 9}},
      {"Atanh", {[](const Tensor& t) { return Atanh(t); }, [](double x) { return std::atanh(x); }, -0.9f, 0.9f}},
      {"Erf", {[](const Tensor& t) { return Erf(t); }, [](double x) { return std::erf(x); }, -3, 3}},
      {"Floor", {[](const Tensor& t) { return Floor(t); }, [](double x) { return std::floor(x); }, -9, 9}},
      {"Ceil", {[](const Tensor& t) { return Ceil(t); }, [](double x) { return std::ceil(x); }, -9, 9}},
      {"Round", {[](const Tensor& t) { return Round(t); }, [](double x) { return std::round(x); }, -9, 9}},
      {"RoundE", {[](const Tensor& t) { return RoundE(t); }, [](double x) { return std::nearbyint(x); }, -9, 9}},
      {"Sin", {[](const Tensor& t) { return Sin(t); }, [](double x) { return std::sin(x); }, -9, 9}},
      {"Cos", {[](const Tensor& t) { return Cos(t); }, [](double x) { return std::cos(x); }, -9, 9}},
      {"Tan", {[](const Tensor& t) { return Tan(t); }, [](double x) { return std::tan(x); }, -1.5f, 1.5f}},
      {"Asin", {[](const Tensor& t) { return Asin(t); }, [](double x) { return std::asin(x); }, -1, 1}},
      {"Acos", {[](const Tensor& t) { return Acos(t); }, [](double x) { return std::acos(x); }, -1, 1}},
      {"Atan", {[](const Tensor& t) { return Atan(t); }, [](double x) { return std::atan(x); }, -9, 9}},
      {"Sinh", {[](const Tensor& t) { return Sinh(t); }, [](double x) { return std::sinh(x); }, -9, 9}},
      {"Cosh", {[](const Tensor& t) { return Cosh(t); }, [](double x) { return std::cosh(x); }, -9, 9}},
      {"Asinh", {[](const Tensor& t) { return Asinh(t); }, [](double x) { return std::asinh(x); }, -9, 9}},
      {"Acosh", {[](const Tensor& t) { return Acosh(t); }, [](double x) { return std::acosh(x); }, 1, 9}},
  };
}

}  // namespace

TEST(Elementwise, UnaryMatchesReference) {
  for (auto& [name, c] : UnaryCases()) {
    std::vector<float> in;
    for (float x : Inputs())
      if (x >= c.lo && x <= c.hi) in.push_back(x);
    Tensor t = FromVector(in, {in.size()});
    auto out = c.op(t).ToVector<float>();
    for (size_t i = 0; i < in.size(); ++i)
      EXPECT_NEAR(out[i], c.ref(in[i]), 1e-5 * (1 + std::fabs(c.ref(in[i])))) << name << "(" << in[i] << ")";
  }
}

TEST(Elementwise, LargeContiguousAndStridedAgree) {
  // Large enough to take the OpenMP path.
  const size_t r = 300, c = 257;
  std::vector<float> v(r * c);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i));
  Tensor t = FromVector(v, {r, c});
  auto direct = Exp(t).ToVector<float>();
  for (size_t i = 0; i < v.size(); i += 997) EXPECT_NEAR(direct[i], std::exp(v[i]), 1e-5);
  auto via_t = Transpose(Exp(Transpose(t))).Contiguous().ToVector<float>();
  EXPECT_EQ(direct, via_t);
}

TEST(Elementwise, BinaryBroadcasting) {
  Tensor a = FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = FromVector({10, 20, 30}, {3});
  Tensor col = FromVector({100, 200}, {2, 1});
  EXPECT_EQ(Add(a, row).ToVector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(Sub(a, col).ToVector<float>(), (std::vector<float>{-99, -98, -97, -196, -195, -194}));
  Tensor outer = EltwiseMult(col, row);  // (2,1) x (3,) -> (2,3)
  EXPECT_EQ(outer.shape(), (Shape{2, 3}));
  EXPECT_EQ(outer.ToVector<float>(), (std::vector<float>{1000, 2000, 3000, 2000, 4000, 6000}));
  EXPECT_EQ(Div(a, 2.f).ToVector<float>(), (std::vector<float>{0.5, 1, 1.5, 2, 2.5, 3}));
  EXPECT_EQ(Sub(1.f, a).ToVector<float>(), (std::vector<float>{0, -1, -2, -3, -4, -5}));
  EXPECT_EQ(Pow(a, 2.f).ToVector<float>(), (std::vector<float>{1, 4, 9, 16, 25, 36}));
  EXPECT_EQ(Maximum(a, 3.5f).ToVector<float>(), (std::vector<float>{3.5, 3.5, 3.5, 4, 5, 6}));
  EXPECT_EQ(Minimum(a, row).ToVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(Minimum(3.5f, a).ToVector<float>(), (std::vector<float>{1, 2, 3, 3.5, 3.5, 3.5}));
}

// C's fmod, exact where a / b passes float32's 2^24 (the building block of Tensor.__mod__).
TEST(Elementwise, FmodIsExact) {
  Tensor a = FromVector({5.5f, -5.5f, 1e20f, 2.f}, {4});
  Tensor b = FromVector({2.f, 2.f, 3.f, INFINITY}, {4});
  const std::vector<float> got = Fmod(a, b).ToVector<float>();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], std::fmod(a.ToVector<float>()[i], b.ToVector<float>()[i])) << i;
  EXPECT_TRUE(std::isnan(Fmod(a, 0.f).ToVector<float>()[0]));
}

TEST(Elementwise, ComparisonsGiveZeroOne) {
  Tensor a = FromVector({1, 2, 3}, {3});
  Tensor b = FromVector({3, 2, 1}, {3});
  EXPECT_EQ(LT(a, b).ToVector<float>(), (std::vector<float>{1, 0, 0}));
  EXPECT_EQ(LE(a, b).ToVector<float>(), (std::vector<float>{1, 1, 0}));
  EXPECT_EQ(GT(a, 2.f).ToVector<float>(), (std::vector<float>{0, 0, 1}));
  EXPECT_EQ(GE(a, 2.f).ToVector<float>(), (std::vector<float>{0, 1, 1}));
  EXPECT_EQ(EQ(a, b).ToVector<float>(), (std::vector<float>{0, 1, 0}));
  EXPECT_EQ(NE(a, b).ToVector<float>(), (std::vector<float>{1, 0, 1}));
}

// int32 arithmetic wraps modulo 2^32 as numpy's (two's complement), with no undefined
// behaviour for the sanitizers to stop on: the reference computes in int64 and keeps the low
// 32 bits.
TEST(Elementwise, Int32ArithmeticWrapsAround) {
  const std::vector<int32_t> v{INT32_MAX, INT32_MIN, 1467168163, -46341, 7};
  Tensor a({v.size()}, kInt);
  a.CopyDataFromHostPtr(v.data(), v.size());
  auto low32 = [](int64_t x) { return static_cast<int32_t>(static_cast<uint32_t>(x)); };
  std::vector<int32_t> sq, sum, diff, neg, abs;
  for (int32_t x : v) {
    sq.push_back(low32(int64_t(x) * x));
    sum.push_back(low32(int64_t(x) + x));
    diff.push_back(low32(int64_t(x) - INT32_MAX));
    neg.push_back(low32(-int64_t(x)));
    abs.push_back(low32(x < 0 ? -int64_t(x) : x));
  }
  EXPECT_EQ(Square(a).ToVector<int32_t>(), sq);
  EXPECT_EQ(EltwiseMult(a, a).ToVector<int32_t>(), sq);
  EXPECT_EQ(Add(a, a).ToVector<int32_t>(), sum);
  Tensor m({v.size()}, kInt);
  std::vector<int32_t> maxes(v.size(), INT32_MAX);
  m.CopyDataFromHostPtr(maxes.data(), maxes.size());
  EXPECT_EQ(Sub(a, m).ToVector<int32_t>(), diff);
  EXPECT_EQ(Negative(a).ToVector<int32_t>(), neg);
  EXPECT_EQ(Abs(a).ToVector<int32_t>(), abs);  // abs(INT32_MIN) is INT32_MIN, as numpy's
}

// Python's // and %: the reference floors the quotient in int64, where nothing overflows; a zero
// divisor gives 0 and INT32_MIN // -1 wraps, as numpy's. A scalar operand is exact past 2^24.
TEST(Elementwise, Int32FloorDivAndModAreExact) {
  const std::vector<int32_t> v{INT32_MAX, INT32_MIN, 16777217, -16777217, 7, -7, 0, 1, -1, 3};
  std::vector<int32_t> as, bs, q, r;
  for (int32_t x : v)
    for (int32_t y : v) {
      as.push_back(x);
      bs.push_back(y);
      int64_t fq = 0, fr = 0;
      if (y != 0) {
        fq = int64_t(x) / y;
        if (int64_t(x) % y != 0 && ((x < 0) != (y < 0))) fq -= 1;
        fr = int64_t(x) - fq * y;
      }
      q.push_back(static_cast<int32_t>(static_cast<uint32_t>(fq)));
      r.push_back(static_cast<int32_t>(fr));
    }
  Tensor a({as.size()}, kInt), b({bs.size()}, kInt);
  a.CopyDataFromHostPtr(as.data(), as.size());
  b.CopyDataFromHostPtr(bs.data(), bs.size());
  EXPECT_EQ(FloorDiv(a, b).data_type(), kInt);
  EXPECT_EQ(FloorDiv(a, b).ToVector<int32_t>(), q);
  EXPECT_EQ(Mod(a, b).ToVector<int32_t>(), r);
  // scalars arrive as doubles: 16777217 was 16777216 as a float
  Tensor s({v.size()}, kInt);
  s.CopyDataFromHostPtr(v.data(), v.size());
  EXPECT_EQ(FloorDiv(s, 16777217.0).ToVector<int32_t>()[2], 1);
  EXPECT_EQ(Add(s, 16777217.0).ToVector<int32_t>()[6], 16777217);
  EXPECT_EQ(Mod(1000000007.0, s).ToVector<int32_t>()[4], 1000000007 % 7);
}

// int32 Pow: repeated squaring in uint32, compared with a loop of wrapping multiplications in
// int64 (low 32 bits kept); a negative exponent gives 1, +-1 or 0 (PyTorch's integer pow).
TEST(Elementwise, Int32PowIsExact) {
  const std::vector<int32_t> base{5, 3, -3, 7, 2, 0, -1, 46341, 1, -1, 2};
  const std::vector<int32_t> expo{13, 21, 21, 11, 31, 0, 7, 2, -5, -3, -1};
  std::vector<int32_t> want;
  for (size_t i = 0; i < base.size(); ++i) {
    int64_t r = 1;
    for (int32_t k = 0; k < expo[i]; ++k) r = int64_t(int32_t(uint32_t(r * base[i])));
    if (expo[i] < 0) r = base[i] == 1 ? 1 : base[i] == -1 ? ((expo[i] & 1) ? -1 : 1) : 0;
    want.push_back(static_cast<int32_t>(r));
  }
  Tensor a({base.size()}, kInt), b({expo.size()}, kInt);
  a.CopyDataFromHostPtr(base.data(), base.size());
  b.CopyDataFromHostPtr(expo.data(), expo.size());
  EXPECT_EQ(Pow(a, b).data_type(), kInt);
  EXPECT_EQ(Pow(a, b).ToVector<int32_t>(), want);
  EXPECT_EQ(Pow(a, 0.5).data_type(), kFloat32);
}

// Floats: the remainder has the divisor's sign and a == q * b + r up to rounding, q integral;
// checked against those properties (in double) rather than against the same formula.
TEST(Elementwise, FloatFloorDivAndModFollowPython) {
  const std::vector<float> v{7.5f, -7.5f, 1.f, -1.f, 0.1f, -0.1f, 3.f, 1e30f, -2.5e-3f, 2.f};
  std::vector<float> as, bs;
  for (float x : v)
    for (float y : v) as.push_back(x), bs.push_back(y);
  Tensor a = FromVector(as, {as.size()}), b = FromVector(bs, {bs.size()});
  auto q = FloorDiv(a, b).ToVector<float>(), r = Mod(a, b).ToVector<float>();
  for (size_t i = 0; i < as.size(); ++i) {
    SCOPED_TRACE(std::to_string(as[i]) + " // " + std::to_string(bs[i]));
    EXPECT_EQ(q[i], std::floor(q[i]));
    EXPECT_TRUE(r[i] == 0.f || (r[i] < 0.f) == (bs[i] < 0.f));
    EXPECT_LT(std::fabs(r[i]), std::fabs(bs[i]) * (1 + 1e-6));
    const double err = std::fabs(double(q[i]) * bs[i] + r[i] - as[i]);
    EXPECT_LE(err, 1e-6 * std::fabs(double(as[i])) + 1e-7 * std::fabs(double(q[i] * bs[i])));
  }
  Tensor one = FromVector({1.f}, {1}), tenth = FromVector({0.1f}, {1});
  EXPECT_EQ(FloorDiv(one, tenth).ToVector<float>()[0], 9.f);  // Python: 1 // 0.1 == 9.0
  Tensor z = FromVector({1.f, -1.f, 0.f}, {3});
  auto dz = FloorDiv(z, 0.0).ToVector<float>(), mz = Mod(z, 0.0).ToVector<float>();
  EXPECT_TRUE(std::isinf(dz[0]) && dz[0] > 0 && std::isinf(dz[1]) && dz[1] < 0);
  EXPECT_TRUE(std::isnan(dz[2]) && std::isnan(mz[0]) && std::isnan(mz[2]));
  EXPECT_EQ(Mod(FromVector({-1.f}, {1}), INFINITY).ToVector<float>()[0], INFINITY);
}

TEST(Elementwise, IntAndPromotion) {
  Tensor i({3}, kInt);
  std::vector<int32_t> v{-2, 0, 5};
  i.CopyDataFromHostPtr(v.data(), 3);
  Tensor s = Add(i, i);
  EXPECT_EQ(s.data_type(), kInt);
  EXPECT_EQ(s.ToVector<int32_t>(), (std::vector<int32_t>{-4, 0, 10}));
  EXPECT_EQ(Add(i, 1.f).data_type(), kInt);             // integral scalar keeps int
  EXPECT_EQ(Add(i, 0.5f).data_type(), kFloat32);        // fractional scalar promotes
  Tensor f = FromVector({0.5f, 0.5f, 0.5f}, {3});
  Tensor m = Add(i, f);
  EXPECT_EQ(m.data_type(), kFloat32);
  EXPECT_EQ(m.ToVector<float>(), (std::vector<float>{-1.5f, 0.5f, 5.5f}));
  EXPECT_EQ(Exp(i).data_type(), kFloat32);              // float-only ops promote
  EXPECT_EQ(Div(i, i).data_type(), kFloat32);
}

TEST(Elementwise, ClampAndLeakyReLU) {
  Tensor a = FromVector({-2, -0.5, 0.5, 2}, {4});
  EXPECT_EQ(Clamp(a, -1, 1).ToVector<float>(), (std::vector<float>{-1, -0.5, 0.5, 1}));
  EXPECT_THROW(Clamp(a, 1, -1), ValueError);
  auto l = LeakyReLU(a, 0.1f).ToVector<float>();
  EXPECT_FLOAT_EQ(l[0], -0.2f);
  EXPECT_FLOAT_EQ(l[3], 2.f);
  Tensor dy = FromVector({1, 1, 1, 1}, {4});
  EXPECT_EQ(ReLUBackward(dy, a).ToVector<float>(), (std::vector<float>{0, 0, 1, 1}));
}

TEST(Elementwise, ErrorsNameTheOpAndShapes) {
  Tensor a({2, 3}), b({3, 2});
  a.SetValue(1.f);
  b.SetValue(1.f);
  EXPECT_THROW_MSG(Add(a, b), ShapeError, "Add: shapes (2, 3) and (3, 2)");
  Tensor h = a.AsType(kFloat16);
  EXPECT_THROW_MSG(Exp(h), DTypeError, "Exp");
  Tensor out({3, 3});
  EXPECT_THROW_MSG(Add(a, a, &out), ShapeError, "output has shape (3, 3)");
  Tensor iout({2, 3}, kInt);
  EXPECT_THROW_MSG(Add(a, a, &iout), DTypeError, "Add");
}
