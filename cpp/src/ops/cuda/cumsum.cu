// CumSum on the GPU (kCuda); front: ../cumsum.cc, reference: ../cpu/cumsum.cc (same order of
// additions, so results match it bit for bit). One thread per (outer, inner) line walks the scan
// axis; neighbouring threads take neighbouring inner positions, so reads are coalesced when
// inner > 1. Weak spot: a single long line (inner == outer == 1) runs on one thread.
#include "../transformer_kernels.h"
#include "cuda_kernels.cuh"
#include "singa/ops/elementwise_functors.h"

namespace singa {
namespace cuda {
namespace {

template <typename T>
__global__ void ScanLines(const T* x, T* y, int64_t outer, int64_t mid, int64_t inner,
                          bool exclusive, bool reverse) {
  SINGA_GRID_STRIDE(line, outer * inner) {
    const int64_t base = (line / inner) * mid * inner + line % inner;
    T acc = T(0);
    for (int64_t step = 0; step < mid; ++step) {
      const int64_t at = base + (reverse ? mid - 1 - step : step) * inner;
      const T v = x[at];
      if (exclusive) {
        y[at] = acc;
        acc = fn::WrapAdd(acc, v);  // int32 wraps as numpy's (overflow is UB in int)
      } else {
        acc = fn::WrapAdd(acc, v);
        y[at] = acc;
      }
    }
  }
}

template <typename T>
void Launch(const Tensor& in, const Dims3& d, bool exclusive, bool reverse, const Tensor& out,
            Context* ctx) {
  const int64_t lines = int64_t(d.outer * d.inner);
  if (lines == 0 || d.mid == 0) return;
  ScanLines<T><<<Blocks(lines), kThreads, 0, Stream(ctx)>>>(
      DevPtr<const T>(in), MutDevPtr<T>(out), int64_t(d.outer), int64_t(d.mid), int64_t(d.inner),
      exclusive, reverse);
  SINGA_CUDA_CHECK_LAUNCH("CumSum");
}

void CumSum(const Tensor& in, const Dims3& d, bool exclusive, bool reverse, const Tensor& out,
            Context* ctx) {
  switch (in.data_type()) {
    case kFloat32: return Launch<float>(in, d, exclusive, reverse, out, ctx);
    case kInt: return Launch<int32_t>(in, d, exclusive, reverse, out, ctx);
    default:
      SINGA_THROW(DTypeError, "CumSum: dtype " << DataTypeName(in.data_type())
                                               << " is not supported (float32 or int32)");
  }
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(CumSum, kCuda, &cuda::CumSum);

}  // namespace singa
