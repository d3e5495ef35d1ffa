// Matrix products and vector kernels on the CPU through OpenBLAS' cblas interface.
#include "singa/ops/blas.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "singa/ops/elementwise.h"
#include "singa/ops/shape.h"

namespace singa {
namespace {

// How a 2-d operand reaches BLAS: row-major with leading dimension ld, possibly transposed.
struct MatView {
  Tensor t;  // a tensor whose layout BLAS can read directly
  bool trans = false;
  int ld = 0;
};

MatView AsBlasMatrix(const Tensor& m) {
  const size_t r = m.shape(0), c = m.shape(1);
  const auto s0 = m.stride()[0], s1 = m.stride()[1];
  if ((s1 == 1 || c == 1) && s0 >= static_cast<std::ptrdiff_t>(std::max<size_t>(c, 1)))
    return {m, false, static_cast<int>(s0)};
  if ((s0 == 1 || r == 1) && s1 >= static_cast<std::ptrdiff_t>(std::max<size_t>(r, 1)))
    return {m, true, static_cast<int>(s1)};
  Tensor c2 = m.Contiguous();
  return {c2, false, static_cast<int>(std::max<size_t>(c, 1))};
}

// The per-matrix layout of an n-d tensor's last two axes.
MatView LastTwo(const Tensor& t) {
  const size_t nd = t.nDim();
  Tensor m(t.block_ptr(), {t.shape(nd - 2), t.shape(nd - 1)},
           {t.stride()[nd - 2], t.stride()[nd - 1]}, t.device(), t.data_type());
  return AsBlasMatrix(m);
}

// t itself if BLAS can read each of its matrices in place, else a contiguous copy.
Tensor BlasFriendly(const Tensor& t) {
  return LastTwo(t).t.block() == t.block() ? t : t.Contiguous();
}

void CheckFloatOperands(const char* op, const Tensor& A, const Tensor& B) {
  SINGA_CHECK(!A.empty() || A.Size() == 0, ValueError, op << ": the first operand is empty");
  SINGA_CHECK(A.block() != nullptr && B.block() != nullptr, ValueError,
              op << ": an operand has no data");
  SINGA_CHECK_DTYPE(A.data_type() == kFloat32 && B.data_type() == kFloat32,
                    op << ": expects float32 operands, got " << A.data_type() << " and "
                       << B.data_type());
  CheckSameDevice(op, {&A, &B});
}

// Row-major C(m,n) = alpha op(A) op(B) + beta C. Medium products (an MLP layer: 64x784x100)
// run slower on OpenBLAS' own threads than on one (measured here: 154 us on two threads, 56 us
// on one, for 784x64x100 with A transposed), so below kSplitMacs we split the larger of m and n
// between the OpenMP threads ourselves and each runs a single-threaded sgemm (OpenBLAS' OpenMP
// build stays on one thread inside a parallel region). Large products keep OpenBLAS' threading.
constexpr double kSplitMacs = 1 << 23, kTinyMacs = 1 << 18;  // tiny: not worth a fork
void SplitSgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* pa, int lda,
                const float* pb, int ldb, float beta, float* pc, int ldc) {
  const CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  const int threads = omp_get_max_threads();
  const double macs = double(m) * n * k;
  const bool split = threads > 1 && macs <= kSplitMacs && macs >= kTinyMacs && std::max(m, n) >= 32;
  if (!split) {
    cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc);
    return;
  }
  const bool by_rows = m >= n;
  const int total = by_rows ? m : n;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    // chunks rounded to 8 so that each thread's block stays vector-aligned
    const int per = ((total + nt - 1) / nt + 7) / 8 * 8;
    const int lo = std::min(total, t * per), hi = std::min(total, lo + per);
    if (hi > lo) {
      if (by_rows) {  // rows of op(A) and of C
        const float* a0 = ta ? pa + lo : pa + static_cast<size_t>(lo) * lda;
        cblas_sgemm(CblasRowMajor, TA, TB, hi - lo, n, k, alpha, a0, lda, pb, ldb, beta,
                    pc + static_cast<size_t>(lo) * ldc, ldc);
      } else {  // columns of op(B) and of C
        const float* b0 = tb ? pb + static_cast<size_t>(lo) * ldb : pb + lo;
        cblas_sgemm(CblasRowMajor, TA, TB, m, hi - lo, k, alpha, pa, lda, b0, ldb, beta,
                    pc + lo, ldc);
      }
    }
  }
}

// C(m,n) = alpha * A(m,k) B(k,n) + beta * C, C contiguous.
void Gemm(float alpha, const Tensor& A, const Tensor& B, float beta, const Tensor& C) {
  MatView a = AsBlasMatrix(A), b = AsBlasMatrix(B);
  const int m = static_cast<int>(A.shape(0)), k = static_cast<int>(A.shape(1)),
            n = static_cast<int>(B.shape(1));
  C.device()->Exec(
      [a, b, C, m, n, k, alpha, beta](Context*) {
        const float* pa = static_cast<const float*>(a.t.block()->data());
        const float* pb = static_cast<const float*>(b.t.block()->data());
        float* pc = static_cast<float*>(C.block()->mutable_data());
        if (m == 0 || n == 0) return;
        SplitSgemm(a.trans, b.trans, m, n, k, alpha, pa, a.ld, pb, b.ld, beta, pc, n);
      },
      {a.t.block(), b.t.block(), C.block()}, {C.block()}, "Mult");
}

}  // namespace

void Mult(float alpha, const Tensor& A, const Tensor& B, float beta, Tensor* C) {
  CheckFloatOperands("Mult", A, B);
  SINGA_CHECK_SHAPE(A.nDim() == 2 && B.nDim() == 2,
                    "Mult: alpha/beta form expects 2-d operands, got " << A.shape() << " and "
                                                                       << B.shape());
  SINGA_CHECK_SHAPE(A.shape(1) == B.shape(0), "Mult: inner dimensions differ: "
                                                  << A.shape() << " x " << B.shape());
  const Shape cs{A.shape(0), B.shape(1)};
  SINGA_CHECK_SHAPE(C->shape() == cs, "Mult: the output has shape " << C->shape()
                                                                    << " but A x B has shape "
                                                                    << cs);
  SINGA_CHECK_DTYPE(C->data_type() == kFloat32, "Mult: the output must be float32");
  if (!C->IsContiguous()) {
    Tensor tmp = C->Clone();
    Gemm(alpha, A, B, beta, tmp);
    C->CopyData(tmp);
    return;
  }
  Gemm(alpha, A, B, beta, *C);
}

Tensor Mult(const Tensor& A, const Tensor& B) {
  CheckFloatOperands("Mult", A, B);
  SINGA_CHECK_SHAPE(A.nDim() >= 1 && B.nDim() >= 1,
                    "Mult: operands must have at least one dimension, got " << A.shape()
                                                                            << " and "
                                                                            << B.shape());
  // numpy.matmul semantics: 1-d operands are promoted to matrices and the extra axis removed.
  Tensor a = A.nDim() == 1 ? Reshape(A, Shape{1, A.shape(0)}) : A;
  Tensor b = B.nDim() == 1 ? Reshape(B, Shape{B.shape(0), 1}) : B;
  const size_t m = a.shape(a.nDim() - 2), k = a.shape(a.nDim() - 1);
  const size_t k2 = b.shape(b.nDim() - 2), n = b.shape(b.nDim() - 1);
  SINGA_CHECK_SHAPE(k == k2, "Mult: inner dimensions differ: " << A.shape() << " x " << B.shape()
                                                               << " (" << k << " != " << k2
                                                               << ")");
  Shape out_shape;
  if (a.nDim() == 2 && b.nDim() == 2) {
    Tensor C(Shape{m, n}, A.device(), kFloat32);
    Gemm(1.f, a, b, 0.f, C);
    out_shape = {m, n};
    if (A.nDim() == 1) out_shape = {n};
    if (B.nDim() == 1) out_shape = A.nDim() == 1 ? Shape{} : Shape{m};
    return Reshape(C, out_shape);
  }
  // Batched: broadcast the batch axes, then one GEMM per matrix inside a single operation.
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = BroadcastShapes(ab, bb, "Mult");
  Shape as = batch, bs = batch;
  as.insert(as.end(), {m, k});
  bs.insert(bs.end(), {k, n});
  Tensor ax = BlasFriendly(Broadcast(a, as)), bx = BlasFriendly(Broadcast(b, bs));
  out_shape = batch;
  out_shape.insert(out_shape.end(), {m, n});
  Tensor C(out_shape, A.device(), kFloat32);
  C.device()->Exec(
      [ax, bx, C, batch, m, n, k](Context*) {
        MatView va = LastTwo(ax), vb = LastTwo(bx);
        const float* pa = static_cast<const float*>(ax.block()->data());
        const float* pb = static_cast<const float*>(bx.block()->data());
        float* pc = static_cast<float*>(C.block()->mutable_data());
        const size_t nb = Product(batch);
        if (m == 0 || n == 0) return;
        for (size_t i = 0; i < nb; ++i) {
          std::ptrdiff_t oa = 0, ob = 0, rem = static_cast<std::ptrdiff_t>(i);
          for (size_t d = batch.size(); d-- > 0;) {
            std::ptrdiff_t idx = rem % static_cast<std::ptrdiff_t>(batch[d]);
            rem /= static_cast<std::ptrdiff_t>(batch[d]);
            oa += idx * ax.stride()[d];
            ob += idx * bx.stride()[d];
          }
          cblas_sgemm(CblasRowMajor, va.trans ? CblasTrans : CblasNoTrans,
                      vb.trans ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), 1.f, pa + oa,
                      va.ld, pb + ob, vb.ld, 0.f, pc + i * m * n, int(n));
        }
      },
      {ax.block(), bx.block()}, {C.block()}, "Mult");
  if (A.nDim() == 1) out_shape.erase(out_shape.end() - 2);
  if (B.nDim() == 1) out_shape.erase(out_shape.end() - 1);
  return Reshape(C, out_shape);
}

void Mult(const Tensor& A, const Tensor& B, Tensor* C) {
  Tensor r = Mult(A, B);
  SINGA_CHECK_SHAPE(C->shape() == r.shape(), "Mult: the output has shape "
                                                 << C->shape() << " but A x B has shape "
                                                 << r.shape());
  C->CopyData(r);
}

void Axpy(float alpha, const Tensor& x, Tensor* y) {
  CheckFloatOperands("Axpy", x, *y);
  SINGA_CHECK_SHAPE(x.Size() == y->Size(), "Axpy: x has shape " << x.shape() << " but y has "
                                                                 << y->shape());
  SINGA_CHECK_SHAPE(y->IsContiguous(), "Axpy: y is a non-contiguous view");
  Tensor xc = x.Contiguous(), yc = *y;
  y->device()->Exec(
      [xc, yc, alpha](Context*) {
        cblas_saxpy(static_cast<int>(xc.Size()), alpha,
                    static_cast<const float*>(xc.block()->data()), 1,
                    static_cast<float*>(yc.block()->mutable_data()), 1);
      },
      {xc.block(), yc.block()}, {yc.block()}, "Axpy");
}

float Dot(const Tensor& a, const Tensor& b) {
  CheckFloatOperands("Dot", a, b);
  SINGA_CHECK_SHAPE(a.Size() == b.Size(), "Dot: sizes differ: " << a.shape() << " and "
                                                                << b.shape());
  Tensor ac = a.Contiguous(), bc = b.Contiguous();
  ac.device()->Sync();
  return cblas_sdot(static_cast<int>(ac.Size()), ac.data<float>(), 1, bc.data<float>(), 1);
}

float Tensor::L1() const {
  SINGA_CHECK_DTYPE(dtype_ == kFloat32, "L1: expects float32, got " << dtype_);
  Tensor c = Contiguous().ToHost();
  return cblas_sasum(static_cast<int>(c.Size()), c.data<float>(), 1);
}

float Tensor::L2() const {
  SINGA_CHECK_DTYPE(dtype_ == kFloat32, "L2: expects float32, got " << dtype_);
  Tensor c = Contiguous().ToHost();
  return cblas_snrm2(static_cast<int>(c.Size()), c.data<float>(), 1);
}

// Row and column helpers: a vector viewed as one row (1, n) or one column (m, 1), then broadcast.
namespace {
Tensor AsRow(const char* op, const Tensor& v, const Tensor& M) {
  SINGA_CHECK_SHAPE(M.nDim() == 2 && v.Size() == M.shape(1),
                    op << ": expects a matrix and a vector of its " << "column count, got "
                       << M.shape() << " and " << v.shape());
  return Reshape(v.Contiguous(), Shape{1, v.Size()});
}
Tensor AsColumn(const char* op, const Tensor& v, const Tensor& M) {
  SINGA_CHECK_SHAPE(M.nDim() == 2 && v.Size() == M.shape(0),
                    op << ": expects a matrix and a vector of its row count, got " << M.shape()
                       << " and " << v.shape());
  return Reshape(v.Contiguous(), Shape{v.Size(), 1});
}
}  // namespace

void AddColumn(const Tensor& v, Tensor* M) { Add(*M, AsColumn("AddColumn", v, *M), M); }
void AddRow(const Tensor& v, Tensor* M) { Add(*M, AsRow("AddRow", v, *M), M); }
void AddColumn(float alpha, float beta, const Tensor& v, Tensor* M) {
  Tensor col = AsColumn("AddColumn", v, *M);
  if (beta != 1.f) EltwiseMult(*M, beta, M);
  Add(*M, alpha == 1.f ? col : EltwiseMult(col, alpha), M);
}
void AddRow(float alpha, float beta, const Tensor& v, Tensor* M) {
  Tensor row = AsRow("AddRow", v, *M);
  if (beta != 1.f) EltwiseMult(*M, beta, M);
  Add(*M, alpha == 1.f ? row : EltwiseMult(row, alpha), M);
}
void SubColumn(const Tensor& v, Tensor* M) { Sub(*M, AsColumn("SubColumn", v, *M), M); }
void SubRow(const Tensor& v, Tensor* M) { Sub(*M, AsRow("SubRow", v, *M), M); }
void MultColumn(const Tensor& v, Tensor* M) { EltwiseMult(*M, AsColumn("MultColumn", v, *M), M); }
void MultRow(const Tensor& v, Tensor* M) { EltwiseMult(*M, AsRow("MultRow", v, *M), M); }
void DivColumn(const Tensor& v, Tensor* M) { Div(*M, AsColumn("DivColumn", v, *M), M); }
void DivRow(const Tensor& v, Tensor* M) { Div(*M, AsRow("DivRow", v, *M), M); }

}  // namespace singa
