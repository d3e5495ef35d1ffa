// Tests of singa/ops/reduce.h against reference loops in double precision: every axis subset,
// keepdims, negative axes, non-contiguous inputs, the multi-threaded split paths, int32, softmax
// and every error path.
#include "singa/ops/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "singa/core/error.h"
#include "singa/ops/shape.h"

#include "test_helpers.h"

namespace {

using singa::Shape;
using singa::Tensor;
using singa::operator<<;  // Shape is a std::vector: ADL does not look in singa

// Expects `stmt` to throw exactly-or-derived `Ex` with a message containing `needle`.

std::vector<float> RandomValues(size_t n, unsigned seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

Tensor FromVector(const Shape& shape, const std::vector<float>& v) {
  Tensor t(shape);
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

Tensor FromIntVector(const Shape& shape, const std::vector<int32_t>& v) {
  Tensor t(shape, singa::kInt);
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

enum class Ref { kSum, kMean, kMax, kMin, kArgmax, kArgmin };

// Straightforward reference: walks every element, maps it to its output slot.
std::vector<double> Reference(const Shape& shape, const std::vector<float>& x,
                              std::vector<bool> reduced, Ref kind) {
  const size_t nd = shape.size();
  size_t nout = 1, red = 1;
  for (size_t d = 0; d < nd; ++d) (reduced[d] ? red : nout) *= shape[d];
  std::vector<double> acc(nout, 0.0), best(nout, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> idx(nout, -1);
  std::vector<size_t> rcount(nout, 0);
  for (size_t flat = 0; flat < x.size(); ++flat) {
    size_t rem = flat, o = 0, omul = 1, r = 0, rmul = 1;
    for (size_t d = nd; d-- > 0;) {
      const size_t i = rem % shape[d];
      rem /= shape[d];
      if (reduced[d]) { r += i * rmul; rmul *= shape[d]; }
      else { o += i * omul; omul *= shape[d]; }
    }
    const double v = x[flat];
    acc[o] += v;
    const bool first = rcount[o]++ == 0;
    const bool better = kind == Ref::kMax || kind == Ref::kArgmax ? v > best[o] : v < best[o];
    if (first || better) { best[o] = v; idx[o] = static_cast<double>(r); }
  }
  for (size_t o = 0; o < nout; ++o) {
    switch (kind) {
      case Ref::kSum: break;
      case Ref::kMean: acc[o] /= static_cast<double>(red); break;
      case Ref::kMax: case Ref::kMin: acc[o] = best[o]; break;
      case Ref::kArgmax: case Ref::kArgmin: acc[o] = idx[o]; break;
    }
  }
  return acc;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " at " << i;
}

Shape OutShape(const Shape& shape, const std::vector<bool>& reduced, bool keepdims) {
  Shape s;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) s.push_back(shape[d]);
    else if (keepdims) s.push_back(1);
  }
  return s;
}

// Every subset of the axes of a 4-d tensor, with positive and negative spellings and keepdims,
// on a contiguous tensor and on permuted views (reduced in place or copied, depending on the
// axes).
TEST(OpsReduce, AllAxisSubsetsMatchReference) {
  const Tensor base = FromVector({2, 3, 4, 5}, RandomValues(120, 1));
  const std::vector<Tensor> inputs{base, singa::Transpose(base, {1, 3, 0, 2}),
                                   singa::Transpose(base, {3, 2, 1, 0})};
  for (const Tensor& x : inputs) {
    const Shape shape = x.shape();
    const auto v = x.ToVector<float>();
    for (unsigned mask = 0; mask < 16; ++mask) {
      std::vector<int> axes, neg_axes;
      std::vector<bool> reduced(4, mask == 0);
      for (int d = 0; d < 4; ++d)
        if (mask & (1u << d)) { axes.push_back(d); neg_axes.push_back(d - 4); reduced[d] = true; }
      for (bool keep : {false, true}) {
        std::ostringstream os;
        os << "shape " << shape << " mask " << mask << " keep " << keep;
        const std::string what = os.str();
        const Shape want_shape = OutShape(shape, reduced, keep);
        Tensor s = singa::ReduceSum(x, axes, keep), sn = singa::ReduceSum(x, neg_axes, keep);
        Tensor m = singa::ReduceMean(x, axes, keep), mx = singa::ReduceMax(x, neg_axes, keep);
        Tensor mn = singa::ReduceMin(x, axes, keep);
        for (const Tensor* t : {&s, &sn, &m, &mx, &mn}) EXPECT_EQ(t->shape(), want_shape) << what;
        const auto sum = Reference(shape, v, reduced, Ref::kSum);
        ExpectNear(s.ToVector<float>(), sum, 1e-5, 1e-5, what);
        ExpectNear(sn.ToVector<float>(), sum, 1e-5, 1e-5, what);
        ExpectNear(m.ToVector<float>(), Reference(shape, v, reduced, Ref::kMean), 1e-5, 1e-6,
                   what);
        ExpectNear(mx.ToVector<float>(), Reference(shape, v, reduced, Ref::kMax), 0, 0, what);
        ExpectNear(mn.ToVector<float>(), Reference(shape, v, reduced, Ref::kMin), 0, 0, what);
      }
    }
    for (int axis = 0; axis < 4; ++axis) {
      std::vector<bool> reduced(4, false);
      reduced[axis] = true;
      const auto am = singa::Argmax(x, axis).AsType(singa::kFloat32).ToVector<float>();
      ExpectNear(am, Reference(shape, v, reduced, Ref::kArgmax), 0, 0, "argmax");
    }
  }
}

TEST(OpsReduce, NonContiguousInputs) {
  const auto v = RandomValues(60, 2);
  const Tensor x = FromVector({3, 4, 5}, v);
  const Tensor t = singa::Transpose(x, {2, 0, 1});  // shape (5, 3, 4), a strided view
  ASSERT_FALSE(t.IsContiguous());
  const auto tv = t.ToVector<float>();
  for (int axis : {0, 1, 2, -1}) {
    std::vector<bool> reduced(3, false);
    reduced[(axis + 3) % 3] = true;
    ExpectNear(singa::ReduceSum(t, {axis}).ToVector<float>(),
               Reference({5, 3, 4}, tv, reduced, Ref::kSum), 1e-5, 1e-5, "transposed sum");
    ExpectNear(singa::ReduceMax(t, {axis}).ToVector<float>(),
               Reference({5, 3, 4}, tv, reduced, Ref::kMax), 0, 0, "transposed max");
    const auto am = singa::Argmin(t, axis).AsType(singa::kFloat32).ToVector<float>();
    ExpectNear(am, Reference({5, 3, 4}, tv, reduced, Ref::kArgmin), 0, 0, "transposed argmin");
  }
  // A row broadcast to 6 rows (stride 0): the column sums are 6 times the row.
  const auto rv = RandomValues(4, 3);
  const Tensor b = singa::Broadcast(FromVector({1, 4}, rv), {6, 4});
  const auto cs = singa::ReduceSum(b, {0}).ToVector<float>();
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(cs[i], 6.0 * rv[i], 1e-5);
  const auto rs = singa::SumColumns(b).ToVector<float>();
  double row = 0;
  for (float f : rv) row += f;
  for (float f : rs) EXPECT_NEAR(f, row, 1e-5);
}

// Large inputs take the threaded paths, including splitting one long reduction between threads;
// sums must stay accurate to a float64 reference.
TEST(OpsReduce, LargeSumsAreAccurate) {
  const size_t n = 1 << 21;
  const auto v = RandomValues(n, 4, 0.f, 1.f);
  double ref = 0;
  for (float f : v) ref += f;
  const Tensor x = FromVector({n}, v);
  EXPECT_NEAR(singa::SumAll(x), ref, 1e-6 * ref);
  EXPECT_NEAR(singa::ReduceMean(x, {}).ToVector<float>()[0], ref / n, 1e-6);
  // (1, n/4, 4) over axis 1: one task of 4 columns, split along the long axis.
  const Tensor y = FromVector({1, n / 4, 4}, v);
  ExpectNear(singa::ReduceSum(y, {1}).ToVector<float>(),
             Reference({1, n / 4, 4}, v, {false, true, false}, Ref::kSum), 1e-6, 0, "columns");
  // Many rows: the outputs are split between threads.
  const Tensor z = FromVector({n / 16, 16}, v);
  ExpectNear(singa::SumColumns(z).ToVector<float>(),
             Reference({n / 16, 16}, v, {false, true}, Ref::kSum), 1e-6, 1e-6, "rows");
  ExpectNear(singa::SumRows(z).ToVector<float>(),
             Reference({n / 16, 16}, v, {true, false}, Ref::kSum), 1e-6, 0, "sum rows");
}

TEST(OpsReduce, ArgmaxTakesFirstOfTiesAcrossThreadChunks) {
  const size_t n = 1 << 20;
  std::vector<float> v(n, 0.f);
  v[100] = 5.f;
  v[n - 10] = 5.f;  // same value, later: must lose
  v[7] = -3.f;
  v[n / 2] = -3.f;
  const Tensor x = FromVector({n}, v);
  Tensor am = singa::Argmax(x, 0);
  EXPECT_EQ(am.data_type(), singa::kInt);
  EXPECT_EQ(am.shape(), Shape{});
  EXPECT_EQ(am.ToVector<int32_t>()[0], 100);
  EXPECT_EQ(singa::Argmin(x, -1, true).ToVector<int32_t>(), std::vector<int32_t>{7});
  EXPECT_EQ(singa::Argmin(x, -1, true).shape(), Shape{1});
  EXPECT_EQ(singa::ReduceMax(x, {0}).ToVector<float>()[0], 5.f);
  EXPECT_EQ(singa::ReduceMin(x, {0}).ToVector<float>()[0], -3.f);
}

TEST(OpsReduce, ArgmaxPerAxisWithKeepdims) {
  const Tensor x = FromVector({2, 3}, {1, 9, 9, 4, 2, 4});
  EXPECT_EQ(singa::Argmax(x, 1).ToVector<int32_t>(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(singa::Argmax(x, 0).ToVector<int32_t>(), (std::vector<int32_t>{1, 0, 0}));
  EXPECT_EQ(singa::Argmin(x, -1).ToVector<int32_t>(), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(singa::Argmax(x, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(singa::RowMax(x).ToVector<float>(), (std::vector<float>{9, 4}));
}

TEST(OpsReduce, NaNPropagatesThroughMaxAndArgmax) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = FromVector({5}, {1, nan, 7, nan, 2});
  EXPECT_TRUE(std::isnan(singa::ReduceMax(x, {}).ToVector<float>()[0]));
  EXPECT_TRUE(std::isnan(singa::ReduceMin(x, {}).ToVector<float>()[0]));
  EXPECT_EQ(singa::Argmax(x, 0).ToVector<int32_t>()[0], 1);
}

TEST(OpsReduce, Int32) {
  const std::vector<int32_t> v{3, -1, 4, 1, -5, 9};
  const Tensor x = FromIntVector({2, 3}, v);
  Tensor s = singa::ReduceSum(x, {1});
  EXPECT_EQ(s.data_type(), singa::kInt);
  EXPECT_EQ(s.ToVector<int32_t>(), (std::vector<int32_t>{6, 5}));
  EXPECT_EQ(singa::ReduceMax(x, {0}).ToVector<int32_t>(), (std::vector<int32_t>{3, -1, 9}));
  EXPECT_EQ(singa::ReduceMin(x, {}).ToVector<int32_t>(), (std::vector<int32_t>{-5}));
  EXPECT_EQ(singa::Argmax(x, 1).ToVector<int32_t>(), (std::vector<int32_t>{2, 2}));
  Tensor m = singa::ReduceMean(x, {1});  // like numpy: the mean of integers is a float
  EXPECT_EQ(m.data_type(), singa::kFloat32);
  ExpectNear(m.ToVector<float>(), {2.0, 5.0 / 3.0}, 1e-6, 0, "int mean");
  EXPECT_FLOAT_EQ(singa::SumAll(x), 11.f);
  EXPECT_EQ(singa::Sum(singa::Transpose(x), 0).ToVector<int32_t>(), (std::vector<int32_t>{6, 5}));
}

TEST(OpsReduce, SingaNames) {
  const auto v = RandomValues(12, 5);
  const Tensor x = FromVector({3, 4}, v);
  EXPECT_EQ(singa::Sum(x, 0).shape(), Shape{4});
  ExpectNear(singa::Sum(x, -1).ToVector<float>(),
             Reference({3, 4}, v, {false, true}, Ref::kSum), 1e-6, 1e-6, "Sum");
  ExpectNear(singa::Average(x, 0).ToVector<float>(),
             Reference({3, 4}, v, {true, false}, Ref::kMean), 1e-6, 1e-6, "Average");
  ExpectNear(singa::SumRows(x).ToVector<float>(),
             Reference({3, 4}, v, {true, false}, Ref::kSum), 1e-6, 1e-6, "SumRows");
  ExpectNear(singa::SumColumns(x).ToVector<float>(),
             Reference({3, 4}, v, {false, true}, Ref::kSum), 1e-6, 1e-6, "SumColumns");
  ExpectNear(singa::RowMax(x).ToVector<float>(),
             Reference({3, 4}, v, {false, true}, Ref::kMax), 0, 0, "RowMax");
  // On a transposed matrix, rows and columns swap.
  const Tensor t = singa::Transpose(x);
  ExpectNear(singa::SumRows(t).ToVector<float>(),
             Reference({3, 4}, v, {false, true}, Ref::kSum), 1e-6, 1e-6, "SumRows^T");
  ExpectNear(singa::RowMax(t).ToVector<float>(),
             Reference({3, 4}, v, {true, false}, Ref::kMax), 0, 0, "RowMax^T");
}

TEST(OpsReduce, EmptyAndScalarTensors) {
  Tensor e({3, 0});
  Tensor s = singa::ReduceSum(e, {1});
  EXPECT_EQ(s.shape(), Shape{3});
  EXPECT_EQ(s.ToVector<float>(), (std::vector<float>{0, 0, 0}));
  for (float f : singa::ReduceMean(e, {1}).ToVector<float>()) EXPECT_TRUE(std::isnan(f));
  EXPECT_EQ(singa::ReduceMax(Tensor({0, 3}), {1}).shape(), Shape{0});  // nothing to reduce
  EXPECT_EQ(singa::Argmax(Tensor({0, 3}), 1).shape(), Shape{0});
  EXPECT_EQ(singa::SumAll(Tensor({0})), 0.f);
  Tensor scalar(Shape{});
  scalar.SetValue(2.5f);
  Tensor r = singa::ReduceSum(scalar, {});
  EXPECT_EQ(r.shape(), Shape{});
  EXPECT_EQ(r.ToVector<float>()[0], 2.5f);
  EXPECT_EQ(singa::ReduceMax(scalar, {}, true).shape(), Shape{});
  // Size-1 axes anywhere do not disturb the layout planning.
  const auto v = RandomValues(6, 6);
  const Tensor x = FromVector({1, 2, 1, 3, 1}, v);
  ExpectNear(singa::ReduceSum(x, {0, 2, 3}).ToVector<float>(),
             Reference({1, 2, 1, 3, 1}, v, {true, false, true, true, false}, Ref::kSum), 1e-6,
             1e-6, "size-1 axes");
}

// Reference softmax along `axis` of a contiguous 3-d (a, b, c) tensor, in double.
std::vector<double> RefSoftMax(const Shape& shape, const std::vector<float>& x, size_t axis,
                               bool log) {
  size_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const size_t dim = shape[axis];
  std::vector<double> y(x.size());
  for (size_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < inner; ++i) {
      double mx = -INFINITY, s = 0;
      for (size_t d = 0; d < dim; ++d) mx = std::max<double>(mx, x[(o * dim + d) * inner + i]);
      for (size_t d = 0; d < dim; ++d) s += std::exp(x[(o * dim + d) * inner + i] - mx);
      for (size_t d = 0; d < dim; ++d) {
        const double z = x[(o * dim + d) * inner + i] - mx;
        y[(o * dim + d) * inner + i] = log ? z - std::log(s) : std::exp(z) / s;
      }
    }
  return y;
}

TEST(OpsReduce, SoftMaxAndLogSoftMax) {
  const Shape shape{3, 4, 5};
  auto v = RandomValues(60, 7, -5.f, 5.f);
  v[0] = 1000.f;  // would overflow exp() without subtracting the maximum
  v[1] = -1000.f;
  const Tensor x = FromVector(shape, v);
  for (int axis : {0, 1, 2, -1, -3}) {
    const size_t a = static_cast<size_t>((axis + 3) % 3);
    const std::string what = "axis " + std::to_string(axis);
    ExpectNear(singa::SoftMax(x, axis).ToVector<float>(), RefSoftMax(shape, v, a, false), 1e-5,
               1e-7, "softmax " + what);
    ExpectNear(singa::LogSoftMax(x, axis).ToVector<float>(), RefSoftMax(shape, v, a, true), 1e-5,
               1e-5, "logsoftmax " + what);
  }
  // Default axis is the last; a transposed input gives the softmax of the transposed values.
  ExpectNear(singa::SoftMax(x).ToVector<float>(), RefSoftMax(shape, v, 2, false), 1e-5, 1e-7,
             "default axis");
  const Tensor t = singa::Transpose(x);  // (5, 4, 3)
  const auto tv = t.ToVector<float>();
  ExpectNear(singa::SoftMax(t, 1).ToVector<float>(), RefSoftMax({5, 4, 3}, tv, 1, false), 1e-5,
             1e-7, "transposed");
  // Many rows: the threaded path.
  const auto big = RandomValues(1 << 16, 8);
  ExpectNear(singa::SoftMax(FromVector({1 << 12, 16}, big)).ToVector<float>(),
             RefSoftMax({1 << 12, 16}, big, 1, false), 1e-5, 1e-7, "large");
}

TEST(OpsReduce, SoftMaxBackward) {
  const Shape shape{2, 3, 4};
  const auto xv = RandomValues(24, 9), dyv = RandomValues(24, 10);
  const Tensor dy = FromVector(shape, dyv);
  for (int axis : {0, 1, -1}) {
    const size_t a = static_cast<size_t>((axis + 3) % 3);
    const auto yd = RefSoftMax(shape, xv, a, false);
    std::vector<float> yv(yd.begin(), yd.end());
    const Tensor y = FromVector(shape, yv);
    // Reference: dx = y * (dy - sum_axis(dy * y)).
    size_t outer = 1, inner = 1;
    for (size_t d = 0; d < a; ++d) outer *= shape[d];
    for (size_t d = a + 1; d < 3; ++d) inner *= shape[d];
    std::vector<double> want(24);
    for (size_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < inner; ++i) {
        double dot = 0;
        for (size_t d = 0; d < shape[a]; ++d) {
          const size_t k = (o * shape[a] + d) * inner + i;
          dot += double(dyv[k]) * yv[k];
        }
        for (size_t d = 0; d < shape[a]; ++d) {
          const size_t k = (o * shape[a] + d) * inner + i;
          want[k] = yv[k] * (dyv[k] - dot);
        }
      }
    ExpectNear(singa::SoftMaxBackward(dy, y, axis).ToVector<float>(), want, 1e-5, 1e-6,
               "axis " + std::to_string(axis));
  }
}

TEST(OpsReduce, Errors) {
  const Tensor x = FromVector({2, 3}, RandomValues(6, 11));
  EXPECT_THROW_MSG(singa::ReduceSum(x, {2}), singa::AxisError, "ReduceSum");
  EXPECT_THROW_MSG(singa::ReduceMean(x, {-3}), singa::AxisError, "ReduceMean");
  EXPECT_THROW_MSG(singa::ReduceMax(x, {1, -1}), singa::AxisError, "repeated");
  EXPECT_THROW_MSG(singa::ReduceMin(x, {0, 0}), singa::AxisError, "ReduceMin");
  EXPECT_THROW_MSG(singa::Argmax(x, 5), singa::AxisError, "Argmax");
  EXPECT_THROW_MSG(singa::Argmin(x, -3), singa::AxisError, "Argmin");
  EXPECT_THROW_MSG(singa::Sum(x, 2), singa::AxisError, "Sum");
  EXPECT_THROW_MSG(singa::Average(x, 2), singa::AxisError, "Average");
  EXPECT_THROW_MSG(singa::ReduceSum(Tensor(Shape{}), {0}), singa::AxisError, "ReduceSum");
  // No identity for max/min/argmax over nothing.
  EXPECT_THROW_MSG(singa::ReduceMax(Tensor({3, 0}), {1}), singa::ValueError, "ReduceMax");
  EXPECT_THROW_MSG(singa::ReduceMin(Tensor({0}), {}), singa::ValueError, "ReduceMin");
  EXPECT_THROW_MSG(singa::Argmax(Tensor({2, 0}), 1), singa::ValueError, "Argmax");
  EXPECT_THROW_MSG(singa::Argmin(Tensor({0, 2}), 0), singa::ValueError, "Argmin");
  EXPECT_THROW_MSG(singa::RowMax(Tensor({2, 0})), singa::ValueError, "RowMax");
  // Unsupported dtypes and empty handles.
  const Tensor half = x.AsType(singa::kFloat16);
  EXPECT_THROW_MSG(singa::ReduceSum(half, {}), singa::DTypeError, "ReduceSum");
  EXPECT_THROW_MSG(singa::Argmax(half, 0), singa::DTypeError, "Argmax");
  EXPECT_THROW_MSG(singa::SoftMax(x.AsType(singa::kInt)), singa::DTypeError, "SoftMax");
  EXPECT_THROW_MSG(singa::LogSoftMax(half), singa::DTypeError, "LogSoftMax");
  EXPECT_THROW_MSG(singa::SumAll(Tensor()), singa::ValueError, "SumAll");
  EXPECT_THROW_MSG(singa::SoftMax(Tensor()), singa::ValueError, "SoftMax");
  // Matrix-only names.
  EXPECT_THROW_MSG(singa::SumRows(Tensor({2, 3, 4})), singa::ShapeError, "SumRows");
  EXPECT_THROW_MSG(singa::SumColumns(Tensor({4})), singa::ShapeError, "SumColumns");
  EXPECT_THROW_MSG(singa::RowMax(Tensor({4})), singa::ShapeError, "RowMax");
  // Softmax axes and the backward pass's operands.
  EXPECT_THROW_MSG(singa::SoftMax(x, 2), singa::AxisError, "SoftMax");
  EXPECT_THROW_MSG(singa::LogSoftMax(x, -3), singa::AxisError, "LogSoftMax");
  EXPECT_THROW_MSG(singa::SoftMax(Tensor(Shape{})), singa::AxisError, "SoftMax");
  EXPECT_THROW_MSG(singa::SoftMaxBackward(x, Tensor({3, 2})), singa::ShapeError,
                   "SoftMaxBackward");
  EXPECT_THROW_MSG(singa::SoftMaxBackward(x, x, 3), singa::AxisError, "SoftMaxBackward");
  EXPECT_THROW_MSG(singa::SoftMaxBackward(x, x.AsType(singa::kInt)), singa::DTypeError,
                   "SoftMaxBackward");
  auto other = std::make_shared<singa::CppCPU>(7);
  EXPECT_THROW_MSG(singa::SoftMaxBackward(x, Tensor({2, 3}, other)), singa::DeviceError,
                   "SoftMaxBackward");
}

}  // namespace
