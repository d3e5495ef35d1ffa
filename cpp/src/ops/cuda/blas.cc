// The CUDA kernels of the BLAS ops (fronts: ../blas.cc), all through cuBLAS on the device's
// stream. They compute what the CPU kernels (../cpu/blas.cc) compute, from the same arguments.
//
// Row-major through column-major cuBLAS: a row-major (r, c) matrix with leading dimension ld is
// the column-major (c, r) matrix with the same ld, i.e. its transpose. So row-major
// C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the call swaps A and B (and m and n) and
// keeps each operand's own transpose flag.
//
// float16 / bfloat16 operands (a, b and c of one dtype): cublasGemmEx with CUDA_R_16F / 16BF data and float
// accumulation (CUBLAS_COMPUTE_32F), alpha and beta float. Dot / Asum / Nrm2 write their result
// into the one-element device tensor with CUBLAS_POINTER_MODE_DEVICE (no host read, so the call
// can be captured into a CUDA Graph).
#include <vector>

#include "../bf16.h"
#include "../kernel_slots.h"
#include "cudnn_common.h"

namespace singa {
namespace cuda {
namespace {

inline cublasOperation_t Op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// Row-major C(m,n) = alpha op(A) op(B) + beta C at the given element pointers (ldc = n).
void RowMajorGemm(cublasHandle_t h, DataType t, bool ta, bool tb, int m, int n, int k,
                  float alpha, const void* a, int lda, const void* b, int ldb, float beta,
                  void* c, const char* what) {
  if (t == kFloat32) {
    SINGA_CUBLAS_CHECK(cublasSgemm(h, Op(tb), Op(ta), n, m, k, &alpha,
                                   static_cast<const float*>(b), ldb,
                                   static_cast<const float*>(a), lda, &beta,
                                   static_cast<float*>(c), n),
                       what);
    return;
  }
  const cudaDataType_t d = BlasType(t);
  SINGA_CUBLAS_CHECK(cublasGemmEx(h, Op(tb), Op(ta), n, m, k, &alpha, b, d, ldb, a, d, lda,
                                  &beta, c, d, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     what);
}

void CheckSameType(const char* op, const Tensor& a, const Tensor& b, const Tensor& c) {
  SINGA_CHECK_DTYPE(a.data_type() == b.data_type() && a.data_type() == c.data_type(),
                    op << ": the CUDA kernel needs one dtype for A, B and C, got "
                       << a.data_type() << ", " << b.data_type() << " and " << c.data_type());
}

void Gemm(const GemmArgs& g, Context* ctx) {
  if (g.m == 0 || g.n == 0) return;
  CheckSameType("Mult", g.a, g.b, g.c);
  RowMajorGemm(Cublas(ctx), g.c.data_type(), g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha,
               Data(g.a), g.lda, Data(g.b), g.ldb, g.beta, MutData(g.c), "Mult (Gemm)");
}

// The single stride s with offset(i) = i * s for every batch index i (row-major over `batch`),
// if the operand's batch axes collapse to one; axes of length 1 do not count.
bool OneBatchStride(const Shape& batch, const Strides& stride, long long* s) {
  long long inner = 1;
  bool set = false;
  *s = 0;
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    if (!set) {
      *s = stride[d];  // the innermost real axis: inner is 1 here
      set = true;
    } else if (stride[d] != *s * inner) {
      return false;
    }
    inner *= static_cast<long long>(batch[d]);
  }
  return true;
}

// The element offset of batch index i in an operand with these strides (as the CPU kernel).
long long BatchOffset(const Shape& batch, const Strides& stride, size_t i) {
  long long off = 0, rem = static_cast<long long>(i);
  for (size_t d = batch.size(); d-- > 0;) {
    const long long n = static_cast<long long>(batch[d]);
    off += (rem % n) * stride[d];
    rem /= n;
  }
  return off;
}

void BatchedGemm(const BatchedGemmArgs& g, Context* ctx) {
  const size_t nb = Product(g.batch);
  if (g.m == 0 || g.n == 0 || nb == 0) return;
  CheckSameType("Mult", g.a, g.b, g.c);
  const DataType t = g.c.data_type();
  const size_t es = SizeOf(t);
  const cublasHandle_t h = Cublas(ctx);
  const long long mn = static_cast<long long>(g.m) * g.n;
  const float one = 1.f, zero = 0.f;
  long long sa = 0, sb = 0;
  if (nb <= size_t(INT32_MAX) && OneBatchStride(g.batch, g.a.stride(), &sa) &&
      OneBatchStride(g.batch, g.b.stride(), &sb)) {
    // One call: B is the first operand of the swapped column-major product.
    if (t == kFloat32) {
      SINGA_CUBLAS_CHECK(cublasSgemmStridedBatched(
                             h, Op(g.trans_b), Op(g.trans_a), g.n, g.m, g.k, &one,
                             static_cast<const float*>(Data(g.b)), g.ldb, sb,
                             static_cast<const float*>(Data(g.a)), g.lda, sa, &zero,
                             static_cast<float*>(MutData(g.c)), g.n, mn, int(nb)),
                         "Mult (BatchedGemm)");
    } else {
      const cudaDataType_t d = BlasType(t);
      SINGA_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
                             h, Op(g.trans_b), Op(g.trans_a), g.n, g.m, g.k, &one, Data(g.b), d,
                             g.ldb, sb, Data(g.a), d, g.lda, sa, &zero, MutData(g.c), d, g.n, mn,
                             int(nb), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         "Mult (BatchedGemm)");
    }
    return;
  }
  // Batch axes that do not collapse (e.g. a broadcast axis outside a real one): one GEMM per
  // matrix, all enqueued on the stream (offsets depend on the shapes only).
  const char* pa = static_cast<const char*>(Data(g.a));
  const char* pb = static_cast<const char*>(Data(g.b));
  char* pc = static_cast<char*>(MutData(g.c));
  for (size_t i = 0; i < nb; ++i)
    RowMajorGemm(h, t, g.trans_a, g.trans_b, g.m, g.n, g.k, 1.f,
                 pa + BatchOffset(g.batch, g.a.stride(), i) * es, g.lda,
                 pb + BatchOffset(g.batch, g.b.stride(), i) * es, g.ldb, 0.f,
                 pc + static_cast<long long>(i) * mn * es, "Mult (BatchedGemm)");
}

void Axpy(float alpha, const Tensor& x, const Tensor& y, Context* ctx) {
  if (x.Size() == 0) return;
  SINGA_CUBLAS_CHECK(cublasSaxpy(Cublas(ctx), static_cast<int>(x.Size()), &alpha,
                                 static_cast<const float*>(Data(x)), 1,
                                 static_cast<float*>(MutData(y)), 1),
                     "Axpy");
}

// out[0] = 0 for an empty input (cuBLAS would leave it untouched).
bool ZeroIfEmpty(const Tensor& x, const Tensor& out, Context* ctx, const char* what) {
  if (x.Size() != 0) return false;
  SINGA_CUDA_CHECK(cudaMemsetAsync(MutData(out), 0, sizeof(float), Stream(ctx)), what);
  return true;
}

void Dot(const Tensor& a, const Tensor& b, const Tensor& out, Context* ctx) {
  if (ZeroIfEmpty(a, out, ctx, "Dot")) return;
  DevicePointerMode mode(Cublas(ctx));
  SINGA_CUBLAS_CHECK(cublasSdot(Cublas(ctx), static_cast<int>(a.Size()),
                                static_cast<const float*>(Data(a)), 1,
                                static_cast<const float*>(Data(b)), 1,
                                static_cast<float*>(MutData(out))),
                     "Dot");
}

void Asum(const Tensor& x, const Tensor& out, Context* ctx) {
  if (ZeroIfEmpty(x, out, ctx, "L1")) return;
  DevicePointerMode mode(Cublas(ctx));
  SINGA_CUBLAS_CHECK(cublasSasum(Cublas(ctx), static_cast<int>(x.Size()),
                                 static_cast<const float*>(Data(x)), 1,
                                 static_cast<float*>(MutData(out))),
                     "L1 (Asum)");
}

void Nrm2(const Tensor& x, const Tensor& out, Context* ctx) {
  if (ZeroIfEmpty(x, out, ctx, "L2")) return;
  DevicePointerMode mode(Cublas(ctx));
  SINGA_CUBLAS_CHECK(cublasSnrm2(Cublas(ctx), static_cast<int>(x.Size()),
                                 static_cast<const float*>(Data(x)), 1,
                                 static_cast<float*>(MutData(out))),
                     "L2 (Nrm2)");
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(Gemm, kCuda, &cuda::Gemm);
SINGA_REGISTER_KERNEL(BatchedGemm, kCuda, &cuda::BatchedGemm);
SINGA_REGISTER_KERNEL(GemmBf16, kCuda, &cuda::BatchedGemm);
SINGA_REGISTER_KERNEL(Axpy, kCuda, &cuda::Axpy);
SINGA_REGISTER_KERNEL(Dot, kCuda, &cuda::Dot);
SINGA_REGISTER_KERNEL(Asum, kCuda, &cuda::Asum);
SINGA_REGISTER_KERNEL(Nrm2, kCuda, &cuda::Nrm2);

}  // namespace singa
