// cuda_kernels.cuh (private, .cu files only): what the CUDA kernels of the core ops share —
// storage <-> device element types, float16 <-> float conversions, grid-stride loops, a block
// reduction, and the strided copy that StridedCopy, Concat and Slice all use.
//
//   using D = cuda::DevType<Half>;                   // __half
//   float x = cuda::Convert<float>(h);               // half -> float, as ConvertElement does
//   SINGA_GRID_STRIDE(i, n) { y[i] = x[i]; }         // inside a __global__ function
//   cuda::StridedCopy(src, 0, out, window_start, src.shape(), Stream(ctx), "Concat");
//
// float16 math: singa::Half is a uint16 struct; on the device it is reinterpreted as __half, and
// every op computes in float and rounds once to half (round to nearest even, as FloatToHalf).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../../cuda/cuda_common.h"
#include "../kernel_slots.h"
#include "strided_indexer.h"

/// for (int64_t i = first index of this thread; i < n; i += all threads of the grid)
#define SINGA_GRID_STRIDE(i, n)                                                      \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < int64_t(n); \
       i += int64_t(blockDim.x) * gridDim.x)

namespace singa {
namespace cuda {

/// The device element type of a storage type (Half -> __half; float, int32_t unchanged).
template <typename T>
struct DevTypeOf {
  using type = T;
};
template <>
struct DevTypeOf<Half> {
  using type = __half;
};
template <>
struct DevTypeOf<BFloat16> {
  using type = __nv_bfloat16;
};
template <typename T>
using DevType = typename DevTypeOf<T>::type;

template <typename T>
inline T* DevPtr(const Tensor& t) {  // the block start, as the CPU kernels read it
  return static_cast<T*>(const_cast<void*>(t.block()->data()));
}
template <typename T>
inline T* MutDevPtr(const Tensor& t) {
  return static_cast<T*>(t.block()->mutable_data());
}

/// ConvertElement on the device: half goes through float; other pairs are static_cast.
template <typename D, typename S>
__device__ __forceinline__ D Convert(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (std::is_same_v<S, __half>) {
    return Convert<D>(__half2float(x));
  } else if constexpr (std::is_same_v<S, __nv_bfloat16>) {
    return Convert<D>(__bfloat162float(x));
  } else if constexpr (std::is_same_v<D, __half>) {
    return __float2half_rn(static_cast<float>(x));
  } else if constexpr (std::is_same_v<D, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(x));
  } else {
    return static_cast<D>(x);
  }
}

/// The type a functor computes in: float for __half, else the element type.
template <typename T>
using MathType =
    std::conditional_t<std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, float, T>;

/// y = op(x) computed in MathType<T> (one rounding for half).
template <typename T, typename Op>
__device__ __forceinline__ T ApplyOp(const Op& op, T x) {
  return Convert<T>(op(Convert<MathType<T>>(x)));
}
template <typename T, typename Op>
__device__ __forceinline__ T ApplyOp(const Op& op, T a, T b) {
  return Convert<T>(op(Convert<MathType<T>>(a), Convert<MathType<T>>(b)));
}

/// Calls f(T{}) with T the device type of a float32 or float16 tensor (the front checked).
template <typename F>
void WithFloatType(const char* op, DataType dt, F&& f) {
  if (dt == kFloat32) return f(float{});
  if (dt == kFloat16) return f(__half{});
  SINGA_THROW(DTypeError, op << ": dtype " << DataTypeName(dt)
                             << " is not supported (float32, or float16 on the GPU)");
}

/// The NaN test for any element type (integers are never NaN).
template <typename T>
__device__ __forceinline__ bool IsNaN(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

/// Tree reduction of one value per thread over the block (blockDim.x a power of two <= kThreads):
/// every thread returns merge(...) of all values. `smem` holds blockDim.x states.
template <typename S, typename Merge>
__device__ S BlockReduce(S v, const Merge& merge, S* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] = merge(smem[threadIdx.x], smem[threadIdx.x + s]);
    __syncthreads();
  }
  const S r = smem[0];
  __syncthreads();  // smem may be reused by the caller's next reduction
  return r;
}

/// Column strips, for sums down the columns of a (rows, cols) layout: a block of
/// dim3(kStripCols, kStripLanes) threads takes kStripCols neighbouring columns (a warp reads
/// neighbouring addresses), lane threadIdx.y the rows y, y + kStripLanes, ... StripReduce then
/// merges each column's lane states through `smem` (kStripLanes * kStripCols states) in a fixed
/// tree, so the result does not depend on timing. Every thread of the block calls it; each gets
/// its column's merged state. One thread per column walking every row (what this replaces) left
/// a 4096-row, 256-column bias gradient on 256 threads: 0.75 ms on an H200.
constexpr unsigned kStripCols = 32, kStripLanes = 32;

template <typename S, typename Merge>
__device__ S StripReduce(S v, const Merge& merge, S* smem) {
  const unsigned at = threadIdx.y * kStripCols + threadIdx.x;
  smem[at] = v;
  __syncthreads();
  for (unsigned s = kStripLanes / 2; s > 0; s >>= 1) {
    if (threadIdx.y < s) smem[at] = merge(smem[at], smem[at + s * kStripCols]);
    __syncthreads();
  }
  const S r = smem[threadIdx.x];
  __syncthreads();  // smem may be reused by the caller's next strip
  return r;
}

/// A grid of one block per unit of work (a row, a strip), capped as Blocks() caps; the kernels
/// loop over the rest.
inline unsigned UnitBlocks(int64_t units) {
  return unsigned(units <= 0 ? 1 : units < 65535 * 8 ? units : 65535 * 8);
}

/// The number of kStripCols-wide strips over `cols` columns.
__host__ __device__ inline int64_t Strips(int64_t cols) {
  return (cols + kStripCols - 1) / kStripCols;
}

struct SumMerge {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
/// Two sums at once.
struct Float2Sum {
  __device__ float2 operator()(float2 a, float2 b) const { return {a.x + b.x, a.y + b.y}; }
};
/// std::max(a, b) as the CPU kernels use it: NaN in b is ignored, NaN in a kept.
struct MaxMerge {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};

/// out[out_off + ...] = convert(in[in_off + ...]) over `shape`, each read with its own tensor's
/// strides from its block start plus the offset (in elements). Any pair of storage types; used
/// by StridedCopy (offsets 0), Slice (in_off) and Concat (out_off). Defined in copy.cu.
void StridedCopy(const Tensor& in, std::ptrdiff_t in_off, const Tensor& out,
                 std::ptrdiff_t out_off, const Shape& shape, cudaStream_t stream, const char* op);

}  // namespace cuda
}  // namespace singa
