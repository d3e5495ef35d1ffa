// Matrix products (plain, transposed views, batched, vectors), Axpy/Dot/norms, row/column ops.
#include <cmath>

#include "test_helpers.h"

using namespace singa;
using singa_test::FromVector;
using singa_test::Iota;

namespace {
// Reference (m,k)x(k,n) on row-major host data.
std::vector<float> RefMatmul(const std::vector<float>& a, const std::vector<float>& b, size_t m,
                             size_t k, size_t n) {
  std::vector<float> c(m * n, 0.f);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j)
      for (size_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3f * (1 + std::fabs(want[i])));
}
}  // namespace

TEST(Blas, MultMatchesReference) {
  auto a = Iota(12, -3.f, 0.5f), b = Iota(20, 1.f, -0.25f);
  Tensor A = FromVector(a, {3, 4}), B = FromVector(b, {4, 5});
  ExpectNear(Mult(A, B).ToVector<float>(), RefMatmul(a, b, 3, 4, 5));
}

TEST(Blas, MultWithTransposedViews) {
  auto a = Iota(12, -3.f, 0.5f), b = Iota(12, 1.f, -0.25f);
  Tensor At = Transpose(FromVector(a, {4, 3}));  // (3,4) view
  Tensor Bt = Transpose(FromVector(b, {3, 4}));  // (4,3) view
  auto ac = At.Contiguous().ToVector<float>(), bc = Bt.Contiguous().ToVector<float>();
  ExpectNear(Mult(At, Bt).ToVector<float>(), RefMatmul(ac, bc, 3, 4, 3));
}

TEST(Blas, MultScaledAccumulates) {
  Tensor A = FromVector({1, 2, 3, 4}, {2, 2}), B = FromVector({1, 0, 0, 1}, {2, 2});
  Tensor C = FromVector({1, 1, 1, 1}, {2, 2});
  Mult(2.f, A, B, 3.f, &C);
  EXPECT_EQ(C.ToVector<float>(), (std::vector<float>{5, 7, 9, 11}));
}

TEST(Blas, MatrixVectorAndBatched) {
  Tensor A = FromVector(Iota(6), {2, 3});
  Tensor v = FromVector({1, 1, 1}, {3});
  Tensor y = Mult(A, v);
  EXPECT_EQ(y.shape(), (Shape{2}));
  EXPECT_EQ(y.ToVector<float>(), (std::vector<float>{3, 12}));
  Tensor X = FromVector(Iota(24), {2, 3, 4}), W = FromVector(Iota(8, 1.f), {4, 2});
  Tensor Z = Mult(X, W);  // W broadcast over the batch
  EXPECT_EQ(Z.shape(), (Shape{2, 3, 2}));
  auto z = Z.ToVector<float>();
  auto x = Iota(24), w = Iota(8, 1.f);
  for (size_t bi = 0; bi < 2; ++bi) {
    std::vector<float> xb(x.begin() + bi * 12, x.begin() + bi * 12 + 12);
    auto ref = RefMatmul(xb, w, 3, 4, 2);
    for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(z[bi * 6 + i], ref[i], 1e-3);
  }
}

TEST(Blas, MismatchedInnerSizesThrow) {
  Tensor A({2, 3}), B({4, 2});
  A.SetValue(1.f);
  B.SetValue(1.f);
  EXPECT_THROW_MSG(Mult(A, B), ShapeError, "Mult: inner dimensions differ: (2, 3) x (4, 2)");
  Tensor I({2, 3}, kInt);
  EXPECT_THROW(Mult(I, A), DTypeError);
  Tensor C({3, 3});
  EXPECT_THROW(Mult(1.f, A, Transpose(A), 0.f, &C), ShapeError);
}

TEST(Blas, AxpyDotNorms) {
  Tensor x = FromVector({1, 2, 3}, {3}), y = FromVector({1, 1, 1}, {3});
  Axpy(2.f, x, &y);
  EXPECT_EQ(y.ToVector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_FLOAT_EQ(Dot(x, y), 3 + 10 + 21);
  Tensor n = FromVector({3, -4}, {2});
  EXPECT_FLOAT_EQ(n.L1(), 7.f);
  EXPECT_FLOAT_EQ(n.L2(), 5.f);
  Tensor z({4});
  EXPECT_THROW(Axpy(1.f, x, &z), ShapeError);
}

TEST(Blas, AxpyWithATensorScale) {
  Tensor x = FromVector({1, 2, 3, 4}, {2, 2}), y = FromVector({1, 1, 1, 1}, {4});
  Axpy(FromVector({-0.5f}, {1}), x, &y);  // SINGA's overload: alpha stays on the device
  EXPECT_EQ(y.ToVector<float>(), (std::vector<float>{0.5f, 0, -0.5f, -1}));
  EXPECT_EQ(y.shape(), (Shape{4}));
  EXPECT_THROW_MSG(Axpy(FromVector({1, 2}, {2}), x, &y), ShapeError, "one value");
  Tensor ialpha({1}, x.device(), kInt);
  EXPECT_THROW_MSG(Axpy(ialpha, x, &y), DTypeError, "float32");
  Tensor z({3});
  EXPECT_THROW_MSG(Axpy(FromVector({1}, {1}), x, &z), ShapeError, "Axpy");
  EXPECT_EQ(y.ToVector<float>(), (std::vector<float>{0.5f, 0, -0.5f, -1}));  // untouched
}

TEST(Blas, RowAndColumnOps) {
  Tensor M = FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  AddRow(FromVector({10, 20, 30}, {3}), &M);
  EXPECT_EQ(M.ToVector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  SubColumn(FromVector({1, 4}, {2}), &M);
  EXPECT_EQ(M.ToVector<float>(), (std::vector<float>{10, 21, 32, 10, 21, 32}));
  AddColumn(2.f, 0.5f, FromVector({1, 2}, {2}), &M);  // M = 2 v + 0.5 M
  EXPECT_EQ(M.ToVector<float>(), (std::vector<float>{7, 12.5, 18, 9, 14.5, 20}));
  EXPECT_THROW_MSG(AddRow(FromVector({1, 2}, {2}), &M), ShapeError, "AddRow");
}

// Medium products are split between threads by rows or by columns (blas.cc, SplitSgemm): every
// layout and both split directions must match the reference.
TEST(Blas, SplitProductsMatchReference) {
  struct Case { size_t m, k, n; bool ta, tb; };
  for (Case c : {Case{100, 300, 70, false, false}, Case{40, 200, 400, false, false},
                 Case{100, 300, 70, true, false}, Case{40, 200, 400, false, true},
                 Case{97, 131, 61, true, true}}) {
    auto a = Iota(c.m * c.k, -1.f, 0.001f), b = Iota(c.k * c.n, 0.5f, -0.0007f);
    Tensor A = c.ta ? Transpose(FromVector(a, {c.k, c.m})) : FromVector(a, {c.m, c.k});
    Tensor B = c.tb ? Transpose(FromVector(b, {c.n, c.k})) : FromVector(b, {c.k, c.n});
    auto ac = A.Contiguous().ToVector<float>(), bc = B.Contiguous().ToVector<float>();
    ExpectNear(Mult(A, B).ToVector<float>(), RefMatmul(ac, bc, c.m, c.k, c.n));
    Tensor C({c.m, c.n});
    C.SetValue(1.f);
    Mult(0.5f, A, B, 2.f, &C);
    auto ref = RefMatmul(ac, bc, c.m, c.k, c.n);
    for (float& v : ref) v = 0.5f * v + 2.f;
    ExpectNear(C.ToVector<float>(), ref);
  }
}
