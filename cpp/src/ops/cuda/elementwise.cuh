// elementwise.cuh (private): the CUDA loops of the elementwise table (singa/ops/elementwise.def),
// templated on the SAME functors as the CPU kernels (singa/ops/elementwise_functors.h). Two
// translation units instantiate them, so that nvcc compiles the table in two parallel jobs:
// elementwise_unary.cu (unary lines, Clamp, the schema's activations) and elementwise_binary.cu.
//
//   Unary<fn::ExpOp, kF>("Exp", fn::ExpOp{}, in, out, ctx);   // float32 or float16
//
// Each op has a dense kernel (every operand one contiguous row after collapsing axes) and a
// strided one (any strides, 0 for broadcast axes: cuda::StridedIndexer). dtypes: float32 and
// float16 (computed in float) for every line; int32 as well for the FI lines.
#pragma once

#include "cuda_kernels.cuh"
#include "singa/ops/elementwise_functors.h"

namespace singa {
namespace cuda {

constexpr bool kF = false, kFI = true;  // does the op have an int32 kernel?

template <typename T, typename Op>
__global__ void UnaryDense(Op op, const T* x, T* y, int64_t n) {
  SINGA_GRID_STRIDE(i, n) { y[i] = ApplyOp(op, x[i]); }
}

template <typename T, typename Op>
__global__ void UnaryStrided(Op op, const T* x, T* y, StridedIndexer<2> ix, int64_t n) {
  SINGA_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.Offsets(i, off);
    y[off[1]] = ApplyOp(op, x[off[0]]);
  }
}

template <typename T, typename Op>
__global__ void BinaryDense(Op op, const T* a, const T* b, T* y, int64_t n) {
  SINGA_GRID_STRIDE(i, n) { y[i] = ApplyOp(op, a[i], b[i]); }
}

template <typename T, typename Op>
__global__ void BinaryStrided(Op op, const T* a, const T* b, T* y, StridedIndexer<3> ix,
                              int64_t n) {
  SINGA_GRID_STRIDE(i, n) {
    int64_t off[3];
    ix.Offsets(i, off);
    y[off[2]] = ApplyOp(op, a[off[0]], b[off[1]]);
  }
}

template <typename S, typename Op>
void UnaryLoop(const char* name, const Op& op, const Tensor& in, const Tensor& out,
               Context* ctx) {
  using T = DevType<S>;
  const int64_t n = static_cast<int64_t>(in.Size());
  if (n == 0) return;
  const auto ix = MakeIndexer<2>(name, in.shape(), {&in.stride(), &out.stride()});
  const T* x = DevPtr<const T>(in);
  T* y = MutDevPtr<T>(out);
  if (ix.Contiguous())
    UnaryDense<T, Op><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(op, x, y, n);
  else
    UnaryStrided<T, Op><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(op, x, y, ix, n);
  SINGA_CUDA_CHECK_LAUNCH(name);
}

/// The front picked the dtype: float32, float16 (CUDA devices only), or int32 where allowed.
template <typename Op, bool kAllowInt>
void Unary(const char* name, const Op& op, const Tensor& in, const Tensor& out, Context* ctx) {
  switch (in.data_type()) {
    case kFloat32: return UnaryLoop<float>(name, op, in, out, ctx);
    case kFloat16: return UnaryLoop<Half>(name, op, in, out, ctx);
    case kBFloat16: return UnaryLoop<BFloat16>(name, op, in, out, ctx);
    case kInt:
      if constexpr (kAllowInt) return UnaryLoop<int32_t>(name, op, in, out, ctx);
      [[fallthrough]];
    default:
      SINGA_THROW(DTypeError, name << ": the CUDA kernel has no " << DataTypeName(in.data_type())
                                   << " variant (float32, float16"
                                   << (kAllowInt ? ", int32" : "") << ")");
  }
}

template <typename S, typename Op>
void BinaryLoop(const char* name, const Op& op, const Tensor& a, const Tensor& b,
                const Tensor& out, Context* ctx) {
  using T = DevType<S>;
  const int64_t n = static_cast<int64_t>(out.Size());
  if (n == 0) return;
  const auto ix =
      MakeIndexer<3>(name, out.shape(), {&a.stride(), &b.stride(), &out.stride()});
  const T* pa = DevPtr<const T>(a);
  const T* pb = DevPtr<const T>(b);
  T* y = MutDevPtr<T>(out);
  if (ix.Contiguous())
    BinaryDense<T, Op><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(op, pa, pb, y, n);
  else
    BinaryStrided<T, Op><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(op, pa, pb, y, ix, n);
  SINGA_CUDA_CHECK_LAUNCH(name);
}

template <typename Op, bool kAllowInt>
void Binary(const char* name, const Op& op, const Tensor& a, const Tensor& b, const Tensor& out,
            Context* ctx) {
  switch (out.data_type()) {
    case kFloat32: return BinaryLoop<float>(name, op, a, b, out, ctx);
    case kFloat16: return BinaryLoop<Half>(name, op, a, b, out, ctx);
    case kBFloat16: return BinaryLoop<BFloat16>(name, op, a, b, out, ctx);
    case kInt:
      if constexpr (kAllowInt) return BinaryLoop<int32_t>(name, op, a, b, out, ctx);
      [[fallthrough]];
    default:
      SINGA_THROW(DTypeError, name << ": the CUDA kernel has no " << DataTypeName(out.data_type())
                                   << " variant (float32, float16"
                                   << (kAllowInt ? ", int32" : "") << ")");
  }
}

}  // namespace cuda
}  // namespace singa
