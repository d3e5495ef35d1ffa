// Matrix products and vector ops: the fronts (see singa/ops/blas.h). They check the operands,
// work out how each matrix reaches BLAS (row-major, transposed, leading dimension) and submit one
// kernel; the CPU kernels (OpenBLAS) are in cpu/blas.cc.
#include "singa/ops/blas.h"

#include <algorithm>
#include <vector>

#include "bf16.h"
#include "kernel_slots.h"

#include "singa/ops/elementwise.h"
#include "singa/ops/shape.h"

namespace singa {

SINGA_KERNEL_SLOT(Gemm, void(const GemmArgs&, Context*));
SINGA_KERNEL_SLOT(BatchedGemm, void(const BatchedGemmArgs&, Context*));
SINGA_KERNEL_SLOT(Axpy, void(float, const Tensor&, const Tensor&, Context*));
SINGA_KERNEL_SLOT(Dot, void(const Tensor&, const Tensor&, const Tensor&, Context*));
SINGA_KERNEL_SLOT(Asum, void(const Tensor&, const Tensor&, Context*));
SINGA_KERNEL_SLOT(Nrm2, void(const Tensor&, const Tensor&, Context*));

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

// float32 operands; with half_on_cuda, float16 ones too on a CUDA device (cublasGemmEx), both
// of one dtype.
void CheckFloatOperands(const char* op, const Tensor& A, const Tensor& B,
                        bool half_on_cuda = false) {
  SINGA_CHECK(!A.empty() || A.Size() == 0, ValueError, op << ": the first operand is empty");
  SINGA_CHECK(A.block() != nullptr && B.block() != nullptr, ValueError,
              op << ": an operand has no data");
  const bool half = half_on_cuda && A.data_type() == kFloat16 && B.data_type() == kFloat16 &&
                    A.device()->backend() == Backend::kCuda;
  const bool bf16 = half_on_cuda && A.data_type() == kBFloat16 && B.data_type() == kBFloat16;
  SINGA_CHECK_DTYPE(half || bf16 || (A.data_type() == kFloat32 && B.data_type() == kFloat32),
                    op << ": expects float32 operands"
                       << (half_on_cuda ? " (or two bfloat16 ones, or float16 ones on a CUDA "
                                          "device)" : "")
                       << ", got " << A.data_type() << " and " << B.data_type());
  CheckSameDevice(op, {&A, &B});
}

// C(m,n) = alpha * A(m,k) B(k,n) + beta * C, C contiguous.
void Gemm(float alpha, const Tensor& A, const Tensor& B, float beta, const Tensor& C) {
  const MatView a = AsBlasMatrix(A), b = AsBlasMatrix(B);
  GemmArgs g;
  g.a = a.t;
  g.b = b.t;
  g.c = C;
  g.trans_a = a.trans;
  g.trans_b = b.trans;
  g.lda = a.ld;
  g.ldb = b.ld;
  g.m = static_cast<int>(A.shape(0));
  g.k = static_cast<int>(A.shape(1));
  g.n = static_cast<int>(B.shape(1));
  g.alpha = alpha;
  g.beta = beta;
  auto* k = GemmKernel().For(*C.device());
  // C is read only when beta != 0 (BLAS ignores C's values for beta == 0). Listing it as a read
  // otherwise would make every product's output a graph input, which the planner never recycles.
  std::vector<Block*> reads{g.a.block(), g.b.block()};
  if (beta != 0.f) reads.push_back(C.block());
  C.device()->Exec({.id = OpId::kMult,
                    .reads = std::move(reads),
                    .writes = {C.block()},
                    .flops = 2.0 * g.m * g.n * g.k},
                   [k, g](Context* ctx) { k(g, ctx); });
}

// A one-element float32 result computed on the device, read back (the caller wants a number).
template <typename Launch>
float ScalarResult(const Tensor& like, OpId id, std::vector<Block*> reads, Launch launch) {
  const char* name = OpName(id);
  SINGA_CHECK(!like.device()->graph_enabled(), Error,
              name << ": reading tensor memory while operations are buffered into a graph");
  Tensor out(Shape{1}, like.device(), kFloat32);
  like.device()->Exec({.id = id, .reads = std::move(reads), .writes = {out.block()}},
                      [launch, out](Context* ctx) { launch(out, ctx); });
  return out.ToVector<float>()[0];
}

}  // namespace

void Mult(float alpha, const Tensor& A, const Tensor& B, float beta, Tensor* C) {
  CheckFloatOperands("Mult", A, B, true);
  SINGA_CHECK_SHAPE(A.nDim() == 2 && B.nDim() == 2,
                    "Mult: alpha/beta form expects 2-d operands, got " << A.shape() << " and "
                                                                       << B.shape());
  SINGA_CHECK_SHAPE(A.shape(1) == B.shape(0), "Mult: inner dimensions differ: "
                                                  << A.shape() << " x " << B.shape());
  const Shape cs{A.shape(0), B.shape(1)};
  SINGA_CHECK_SHAPE(C->shape() == cs, "Mult: the output has shape " << C->shape()
                                                                    << " but A x B has shape "
                                                                    << cs);
  SINGA_CHECK_DTYPE(C->data_type() == A.data_type(),
                    "Mult: the output must be " << A.data_type() << " like the operands, got "
                                                << C->data_type());
  if (A.data_type() == kBFloat16) {  // the product rounded to bf16, then alpha and beta
    Tensor r = Mult(A, B);
    if (alpha != 1.f) r = EltwiseMult(r, alpha);
    if (beta != 0.f) r = Add(r, EltwiseMult(*C, beta));
    C->CopyData(r);
    return;
  }
  if (!C->IsContiguous()) {
    Tensor tmp = C->Clone();
    Gemm(alpha, A, B, beta, tmp);
    C->CopyData(tmp);
    return;
  }
  Gemm(alpha, A, B, beta, *C);
}

Tensor Mult(const Tensor& A, const Tensor& B) {
  CheckFloatOperands("Mult", A, B, true);
  SINGA_CHECK_SHAPE(A.nDim() >= 1 && B.nDim() >= 1,
                    "Mult: operands must have at least one dimension, got " << A.shape()
                                                                            << " and "
                                                                            << B.shape());
  // bfloat16: the batched path (batch may be empty) with the GemmBf16 kernel (oneDNN, cuBLAS,
  // or the reference one through float32); Bf16Native refuses a CPU without avx512_bf16.
  const bool bf16 = A.data_type() == kBFloat16;
  if (bf16) Bf16Native("Mult", *A.device());
  // numpy.matmul semantics: 1-d operands are promoted to matrices and the extra axis removed.
  Tensor a = A.nDim() == 1 ? Reshape(A, Shape{1, A.shape(0)}) : A;
  Tensor b = B.nDim() == 1 ? Reshape(B, Shape{B.shape(0), 1}) : B;
  const size_t m = a.shape(a.nDim() - 2), k = a.shape(a.nDim() - 1);
  const size_t k2 = b.shape(b.nDim() - 2), n = b.shape(b.nDim() - 1);
  SINGA_CHECK_SHAPE(k == k2, "Mult: inner dimensions differ: " << A.shape() << " x " << B.shape()
                                                               << " (" << k << " != " << k2
                                                               << ")");
  Shape out_shape;
  if (a.nDim() == 2 && b.nDim() == 2 && !bf16) {
    Tensor C(Shape{m, n}, A.device(), A.data_type());
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
  Tensor C(out_shape, A.device(), A.data_type());
  const MatView va = LastTwo(ax), vb = LastTwo(bx);
  BatchedGemmArgs g;
  g.a = ax;
  g.b = bx;
  g.c = C;
  g.batch = batch;
  g.trans_a = va.trans;
  g.trans_b = vb.trans;
  g.lda = va.ld;
  g.ldb = vb.ld;
  g.m = static_cast<int>(m);
  g.n = static_cast<int>(n);
  g.k = static_cast<int>(k);
  auto* kern = (bf16 ? GemmBf16Kernel() : BatchedGemmKernel()).For(*C.device());
  C.device()->Exec({.id = OpId::kMult,
                    .reads = {ax.block(), bx.block()},
                    .writes = {C.block()},
                    .flops = 2.0 * Product(batch) * m * n * k},
                   [kern, g](Context* ctx) { kern(g, ctx); });
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
  auto* k = AxpyKernel().For(*y->device());
  y->device()->Exec({.id = OpId::kAxpy, .reads = {xc.block(), yc.block()}, .writes = {yc.block()}},
                    [k, alpha, xc, yc](Context* ctx) { k(alpha, xc, yc, ctx); });
}

void Axpy(const Tensor& alpha, const Tensor& x, Tensor* y) {
  CheckFloatOperands("Axpy", x, *y);
  SINGA_CHECK(alpha.block() != nullptr, ValueError, "Axpy: alpha is an empty tensor");
  SINGA_CHECK_SHAPE(alpha.Size() == 1, "Axpy: alpha must hold one value, got shape "
                                           << alpha.shape());
  SINGA_CHECK_DTYPE(alpha.data_type() == kFloat32,
                    "Axpy: alpha must be float32, got " << DataTypeName(alpha.data_type()));
  CheckSameDevice("Axpy", {&alpha, y});
  SINGA_CHECK_SHAPE(x.Size() == y->Size(), "Axpy: x has shape " << x.shape() << " but y has "
                                                                 << y->shape());
  // Two elementwise kernels (alpha broadcast from a 0-d view) instead of a BLAS call with a
  // device pointer: every backend has them, and they record into a graph like any other op.
  const Tensor scaled = EltwiseMult(Reshape(x, y->shape()), Reshape(alpha, Shape{}));
  Add(*y, scaled, y);
}

float Dot(const Tensor& a, const Tensor& b) {
  CheckFloatOperands("Dot", a, b);
  SINGA_CHECK_SHAPE(a.Size() == b.Size(), "Dot: sizes differ: " << a.shape() << " and "
                                                                << b.shape());
  const Tensor ac = a.Contiguous(), bc = b.Contiguous();
  auto* k = DotKernel().For(*ac.device());
  return ScalarResult(ac, OpId::kDot, {ac.block(), bc.block()},
                      [k, ac, bc](const Tensor& out, Context* ctx) { k(ac, bc, out, ctx); });
}

float Tensor::L1() const {
  SINGA_CHECK_DTYPE(dtype_ == kFloat32, "L1: expects float32, got " << dtype_);
  SINGA_CHECK(block_ != nullptr, ValueError, "L1: the tensor is empty (no memory)");
  const Tensor c = Contiguous();
  auto* k = AsumKernel().For(*device_);
  return ScalarResult(c, OpId::kL1, {c.block()},
                      [k, c](const Tensor& out, Context* ctx) { k(c, out, ctx); });
}

float Tensor::L2() const {
  SINGA_CHECK_DTYPE(dtype_ == kFloat32, "L2: expects float32, got " << dtype_);
  SINGA_CHECK(block_ != nullptr, ValueError, "L2: the tensor is empty (no memory)");
  const Tensor c = Contiguous();
  auto* k = Nrm2Kernel().For(*device_);
  return ScalarResult(c, OpId::kL2, {c.block()},
                      [k, c](const Tensor& out, Context* ctx) { k(c, out, ctx); });
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
