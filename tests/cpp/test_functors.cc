// The host side of what the CUDA kernels share with the CPU ones, checked without a GPU:
// - the functors of elementwise_functors.h (which the .cu files instantiate on the device)
//   evaluated on the host equal the CPU kernels' results for int32 (the FI lines), for Clamp and
//   LeakyReLU, and through strided and broadcast operands (float32 lines are compared one by one
//   in test_registry.cc, FunctorHeaderMatchesTheOps);
// - cuda::StridedIndexer (ops/cuda/strided_indexer.h), the n-d index math of the CUDA
//   elementwise and copy kernels: for every element, the offsets it computes after collapsing
//   axes equal the offsets computed directly from the element's multi-index;
// - the pooling geometry (ops/pool_window.h): the CUDA backward gathers, for each input cell,
//   from the outputs RowsReading/ColsReading name; they must be exactly the outputs whose
//   clipped windows hold the cell (the CPU backward scatters over the windows instead).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "ops/cuda/strided_indexer.h"
#include "ops/pool_window.h"
#include "singa/ops/elementwise.h"
#include "singa/ops/elementwise_functors.h"
#include "singa/ops/shape.h"
#include "test_helpers.h"

namespace singa {
namespace {

Tensor IntTensor(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t(shape, kInt);
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

bool SameFloat(float u, float v) { return u == v || (std::isnan(u) && std::isnan(v)); }

// Every FI line of the table on int32 operands: the CPU int32 kernel equals the functor.
TEST(Functors, IntLinesMatchTheCpuIntKernels) {
  const std::vector<int32_t> xs = {-7, -2, -1, 0, 1, 3, 12};
  const std::vector<int32_t> bs = {3, -2, 4, 0, -5, 3, 7};
  const Tensor x = IntTensor(xs, {xs.size()}), b = IntTensor(bs, {bs.size()});
  size_t lines = 0;
#define SINGA_UNARY(Name, kinds, expr)                                                    \
  if (std::string(#kinds) == "FI") {                                                      \
    ++lines;                                                                              \
    const Tensor y = Name(x);                                                             \
    ASSERT_EQ(y.data_type(), kInt) << #Name;                                              \
    const std::vector<int32_t> got = y.ToVector<int32_t>();                               \
    for (size_t i = 0; i < xs.size(); ++i)                                                \
      EXPECT_EQ(got[i], fn::Name##Op{}(xs[i])) << #Name << "(" << xs[i] << ")";           \
  }
#define SINGA_BINARY(Name, kinds, expr)                                                   \
  if (std::string(#kinds) == "FI") {                                                      \
    ++lines;                                                                              \
    const Tensor y = Name(x, b);                                                          \
    ASSERT_EQ(y.data_type(), kInt) << #Name;                                              \
    const std::vector<int32_t> got = y.ToVector<int32_t>();                               \
    for (size_t i = 0; i < xs.size(); ++i)                                                \
      EXPECT_EQ(got[i], fn::Name##Op{}(xs[i], bs[i]))                                     \
          << #Name << "(" << xs[i] << ", " << bs[i] << ")";                               \
  }
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
  EXPECT_GE(lines, 16u);  // 5 unary + 11 binary FI lines today
  // The functors themselves, against plain C++ on ints.
  EXPECT_EQ(fn::SignOp{}(-7), -1);
  EXPECT_EQ(fn::SignOp{}(0), 0);
  EXPECT_EQ(fn::ReLUOp{}(-3), 0);
  EXPECT_EQ(fn::GEOp{}(3, 3), 1);
  EXPECT_EQ(fn::MinimumOp{}(-2, 5), -2);
}

TEST(Functors, ClampAndLeakyReLUMatchTheCpuKernels) {
  const std::vector<float> xs = {-3.5f, -1.f, -0.25f, 0.f, 0.5f, 2.f, 9.f};
  const Tensor x = singa_test::FromVector(xs, {xs.size()});
  const std::vector<float> c = Clamp(x, -1.f, 2.f).ToVector<float>();
  const std::vector<float> l = LeakyReLU(x, 0.1f).ToVector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(c[i], (fn::ClampOp{-1.f, 2.f}(xs[i]))) << xs[i];
    EXPECT_EQ(c[i], std::fmin(std::fmax(xs[i], -1.f), 2.f)) << xs[i];
    EXPECT_EQ(l[i], fn::LeakyReLUOp{0.1f}(xs[i])) << xs[i];
    EXPECT_FLOAT_EQ(l[i], xs[i] > 0 ? xs[i] : 0.1f * xs[i]) << xs[i];
  }
  const std::vector<int32_t> xi = {-5, -1, 0, 2, 7};
  const std::vector<int32_t> ci = Clamp(IntTensor(xi, {xi.size()}), -1.f, 2.f).ToVector<int32_t>();
  for (size_t i = 0; i < xi.size(); ++i) EXPECT_EQ(ci[i], (fn::ClampOp{-1.f, 2.f}(xi[i])));
}

// A transposed operand and a broadcast one: the kernel applies the functor at the right
// elements (the CUDA kernels index these through StridedIndexer, checked below).
TEST(Functors, StridedAndBroadcastOperandsMatchTheFunctors) {
  const std::vector<float> av = singa_test::Iota(12, -2.5f, 0.5f);  // (3, 4)
  const std::vector<float> bv = {0.5f, -1.f, 2.f};                  // (3, 1) broadcast
  const Tensor a = Transpose(singa_test::FromVector(av, {3, 4}));   // (4, 3), strides (1, 4)
  const Tensor b = singa_test::FromVector(bv, {3});
  const std::vector<float> y = Pow(Abs(a), b).ToVector<float>();    // (4, 3)
  const std::vector<float> e = Exp(a).ToVector<float>();
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 3; ++j) {
      const float aij = av[j * 4 + i];
      EXPECT_PRED2(SameFloat, y[i * 3 + j], fn::PowOp{}(fn::AbsOp{}(aij), bv[j])) << i << "," << j;
      EXPECT_PRED2(SameFloat, e[i * 3 + j], fn::ExpOp{}(aij)) << i << "," << j;
    }
}

// ---- StridedIndexer ----

// The offsets of element `linear` of `shape` computed directly, without collapsing axes.
std::vector<int64_t> DirectOffsets(const Shape& shape, const std::vector<Strides>& strides,
                                   size_t linear) {
  std::vector<int64_t> off(strides.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    const size_t i = linear % shape[d];
    linear /= shape[d];
    for (size_t k = 0; k < strides.size(); ++k) off[k] += int64_t(i) * strides[k][d];
  }
  return off;
}

std::string Str(const Shape& s) {  // gtest's << does not find singa's operator<< for a vector
  std::ostringstream os;
  os << s;
  return os.str();
}

template <int N>
void ExpectIndexerMatches(const Shape& shape, const std::vector<Strides>& strides,
                          bool contiguous) {
  std::array<const Strides*, N> ptrs;
  for (int k = 0; k < N; ++k) ptrs[k] = &strides[k];
  const auto ix = cuda::MakeIndexer<N>("Test", shape, ptrs);
  EXPECT_EQ(ix.Contiguous(), contiguous) << Str(shape);
  const size_t n = Product(shape);
  for (size_t e = 0; e < n; ++e) {
    int64_t off[N];
    ix.Offsets(int64_t(e), off);
    const std::vector<int64_t> want = DirectOffsets(shape, strides, e);
    for (int k = 0; k < N; ++k)
      ASSERT_EQ(off[k], want[k]) << "shape " << Str(shape) << " element " << e << " operand " << k;
  }
}

TEST(StridedIndexer, OffsetsEqualTheDirectMultiIndexOffsets) {
  // contiguous (collapses to one row: the dense fast path)
  ExpectIndexerMatches<2>({2, 3, 4}, {{12, 4, 1}, {12, 4, 1}}, true);
  // a transposed input written contiguously
  ExpectIndexerMatches<2>({4, 3}, {{1, 4}, {3, 1}}, false);
  // size-1 axes with arbitrary strides are dropped
  ExpectIndexerMatches<2>({1, 5, 1}, {{99, 1, 7}, {5, 1, 1}}, true);
  // a sliced input (row stride larger than the row)
  ExpectIndexerMatches<2>({3, 2}, {{5, 1}, {2, 1}}, false);
  // a 0-d tensor
  ExpectIndexerMatches<2>({}, {{}, {}}, true);
  // binary: a bias broadcast over rows, and a column broadcast against a transposed operand
  ExpectIndexerMatches<3>({3, 4}, {{4, 1}, {0, 1}, {4, 1}}, false);
  ExpectIndexerMatches<3>({2, 3, 4}, {{1, 2, 6}, {1, 0, 0}, {12, 4, 1}}, false);
  // a scalar broadcast to everything
  ExpectIndexerMatches<3>({5, 2}, {{2, 1}, {0, 0}, {2, 1}}, false);
  // many axes that do not merge (a permutation of 5 axes)
  ExpectIndexerMatches<2>({2, 3, 2, 3, 2}, {{1, 2, 6, 12, 36}, {36, 12, 6, 2, 1}}, false);
}

TEST(StridedIndexer, TooManyUnmergeableAxesRaiseNotImplemented) {
  const Shape shape(cuda::kMaxDims + 1, 2);
  Strides reversed(shape.size()), forward(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    reversed[d] = std::ptrdiff_t(1) << d;                      // axis 0 fastest
    forward[d] = std::ptrdiff_t(1) << (shape.size() - 1 - d);  // row-major
  }
  EXPECT_THROW((cuda::MakeIndexer<2>("Test", shape, {&reversed, &forward})), NotImplementedError);
  // The same number of axes merges into one row when both operands are row-major.
  const auto ix = cuda::MakeIndexer<2>("Test", shape, {&forward, &forward});
  EXPECT_TRUE(ix.Contiguous());
}

}  // namespace
}  // namespace singa

TEST(PoolWindow, OutputsReadingACellAreThoseWhoseWindowsHoldIt) {
  struct Case {
    size_t H, W, k, s, p;
  };
  for (const Case& t : {Case{5, 7, 3, 1, 1}, Case{6, 6, 2, 2, 0}, Case{7, 5, 3, 2, 1},
                        Case{9, 4, 4, 3, 2}, Case{3, 3, 3, 3, 1}, Case{8, 8, 1, 2, 0}}) {
    singa::PoolingHandle h({1, 1, t.H, t.W}, {t.k, t.k}, {t.s, t.s}, {t.p, t.p}, true);
    const singa::PoolGeom g = singa::PoolGeom::Of(h);
    for (int r = 0; r < g.H; ++r)
      for (int c = 0; c < g.W; ++c) {
        int oh0, oh1, ow0, ow1;
        g.RowsReading(r, &oh0, &oh1);
        g.ColsReading(c, &ow0, &ow1);
        for (int oh = 0; oh < g.PH; ++oh)
          for (int ow = 0; ow < g.PW; ++ow) {
            const singa::PoolWindow w = g.WindowOf(oh, ow);
            const bool holds = w.h0 <= r && r < w.h1 && w.w0 <= c && c < w.w1;
            const bool named = oh0 <= oh && oh <= oh1 && ow0 <= ow && ow <= ow1;
            EXPECT_EQ(holds, named) << "H=" << t.H << " W=" << t.W << " k=" << t.k << " s="
                                    << t.s << " p=" << t.p << " cell (" << r << "," << c
                                    << ") output (" << oh << "," << ow << ")";
          }
      }
  }
}

TEST(PoolWindow, DivisorAndFirstMaximum) {
  singa::PoolingHandle h({1, 1, 4, 4}, {3, 3}, {2, 2}, {1, 1}, false, false);
  singa::PoolGeom g = singa::PoolGeom::Of(h);
  const singa::PoolWindow corner = g.WindowOf(0, 0);  // rows/cols [-1, 2) clipped to [0, 2)
  EXPECT_EQ(corner.h0, 0);
  EXPECT_EQ(corner.h1, 2);
  EXPECT_EQ(g.Divisor(corner), 4.f);
  g.include_pad = true;
  EXPECT_EQ(g.Divisor(corner), 9.f);
  const float x[16] = {0, 5, 1, 0, 5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};  // a tie: 5 at 1 and 4
  EXPECT_EQ(singa::FirstMaxOf(x, 4, corner, [](float v) { return v; }), 1);
}
