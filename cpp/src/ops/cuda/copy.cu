// CUDA kernels of Tensor's copies and conversions (fronts: core/tensor.cc, ops/shape.cc):
// StridedCopy (any pair of storage types, float16 <-> float32 included), CopyBytes and Fill,
// plus cuda::StridedCopy, the strided converting copy that Slice and Concat (shape.cu) reuse.
#include <cstring>

#include "../../core/dispatch.h"
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

template <typename D, typename S>
__global__ void ConvertDense(const S* x, D* y, int64_t n) {
  SINGA_GRID_STRIDE(i, n) { y[i] = Convert<D>(x[i]); }
}

template <typename D, typename S>
__global__ void ConvertStrided(const S* x, D* y, StridedIndexer<2> ix, int64_t n) {
  SINGA_GRID_STRIDE(i, n) {
    int64_t off[2];
    ix.Offsets(i, off);
    y[off[1]] = Convert<D>(x[off[0]]);
  }
}

template <typename D, typename S>
void ConvertLaunch(const S* x, const Strides& xs, D* y, const Strides& ys, const Shape& shape,
                   cudaStream_t stream, const char* op) {
  const int64_t n = static_cast<int64_t>(Product(shape));
  if (n == 0) return;
  const auto ix = MakeIndexer<2>(op, shape, {&xs, &ys});
  if (ix.Contiguous()) {
    if constexpr (std::is_same_v<D, S>) {
      SINGA_CUDA_CHECK(cudaMemcpyAsync(y, x, size_t(n) * sizeof(S), cudaMemcpyDeviceToDevice,
                                       stream), op);
      return;
    } else {
      ConvertDense<D, S><<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
    }
  } else {
    ConvertStrided<D, S><<<Blocks(n), kThreads, 0, stream>>>(x, y, ix, n);
  }
  SINGA_CUDA_CHECK_LAUNCH(op);
}

// Elements of equal types are moved as raw bits (float32 and int32 share one instantiation).
template <size_t kBytes>
struct BitsOf;
template <>
struct BitsOf<4> {
  using type = uint32_t;
};
template <>
struct BitsOf<2> {
  using type = uint16_t;
};

template <typename T>
__global__ void FillKernel(T* p, T v, int64_t n) {
  SINGA_GRID_STRIDE(i, n) { p[i] = v; }
}

// Overlapping ranges, copied in chunks no longer than the distance between them, in the order
// memmove uses: each chunk's source is not yet overwritten when it is read. One block, so that
// __syncthreads orders the chunks.
__global__ void MoveOverlapping(const char* src, char* dst, size_t nbytes, size_t dist,
                                bool forward) {
  const size_t chunks = (nbytes + dist - 1) / dist;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t k = forward ? c : chunks - 1 - c;
    const size_t begin = k * dist, end = begin + dist < nbytes ? begin + dist : nbytes;
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) dst[i] = src[i];
    __syncthreads();
  }
}

void StridedCopyKernel(const Tensor& in, const Tensor& out, Context* ctx) {
  StridedCopy(in, 0, out, 0, in.shape(), Stream(ctx), "StridedCopy");
}

void CopyBytes(const Tensor& from, size_t from_off, const Tensor& to, size_t to_off,
               size_t nbytes, Context* ctx) {
  if (nbytes == 0) return;
  const char* s = DevPtr<const char>(from) + from_off;
  char* d = MutDevPtr<char>(to) + to_off;
  if (s == d) return;
  const size_t dist = s < d ? size_t(d - s) : size_t(s - d);
  if (dist >= nbytes) {  // disjoint (different blocks, or far enough apart)
    SINGA_CUDA_CHECK(cudaMemcpyAsync(d, s, nbytes, cudaMemcpyDeviceToDevice, Stream(ctx)),
                     "CopyBytes");
    return;
  }
  // cudaMemcpy leaves overlapping ranges undefined; memmove semantics by chunks.
  MoveOverlapping<<<1, kThreads, 0, Stream(ctx)>>>(s, d, nbytes, dist, d < s);
  SINGA_CUDA_CHECK_LAUNCH("CopyBytes");
}

void Fill(const Tensor& t, double value, Context* ctx) {
  const int64_t n = static_cast<int64_t>(t.Size());
  if (n == 0) return;
  // The value converted on the host exactly as the CPU kernel converts it, then stored as bits.
  auto launch = [&](auto bits) {
    using B = decltype(bits);
    FillKernel<B><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(MutDevPtr<B>(t), bits, n);
    SINGA_CUDA_CHECK_LAUNCH("Fill");
  };
  switch (t.data_type()) {
    case kFloat32: {
      const float v = static_cast<float>(value);
      uint32_t b;
      std::memcpy(&b, &v, 4);
      return launch(b);
    }
    case kInt: {
      const int32_t v = static_cast<int32_t>(value);
      uint32_t b;
      std::memcpy(&b, &v, 4);
      return launch(b);
    }
    case kFloat16:
      return launch(uint16_t(FloatToHalf(static_cast<float>(value)).bits));
    case kBFloat16:
      return launch(uint16_t(FloatToBFloat16(static_cast<float>(value)).bits));
    default:
      SINGA_THROW(DTypeError, "Fill: dtype " << DataTypeName(t.data_type())
                                             << " is not supported (float32, int32 or float16)");
  }
}

}  // namespace

void StridedCopy(const Tensor& in, std::ptrdiff_t in_off, const Tensor& out,
                 std::ptrdiff_t out_off, const Shape& shape, cudaStream_t stream, const char* op) {
  if (Product(shape) == 0) return;
  const DataType st = in.data_type(), dt = out.data_type();
  if (st == dt) {
    auto same = [&](auto bits) {
      using B = decltype(bits);
      ConvertLaunch<B, B>(DevPtr<const B>(in) + in_off, in.stride(), MutDevPtr<B>(out) + out_off,
                          out.stride(), shape, stream, op);
    };
    switch (SizeOf(st)) {
      case 4: return same(uint32_t{});
      case 2: return same(uint16_t{});
      default: break;
    }
  }
  SINGA_DISPATCH_STORAGE(st, op, S, {
    SINGA_DISPATCH_STORAGE(dt, op, D, {
      ConvertLaunch<DevType<D>, DevType<S>>(DevPtr<const DevType<S>>(in) + in_off, in.stride(),
                                            MutDevPtr<DevType<D>>(out) + out_off, out.stride(),
                                            shape, stream, op);
    });
  });
}

}  // namespace cuda

SINGA_REGISTER_KERNEL(StridedCopy, kCuda, &cuda::StridedCopyKernel);
SINGA_REGISTER_KERNEL(CopyBytes, kCuda, &cuda::CopyBytes);
SINGA_REGISTER_KERNEL(Fill, kCuda, &cuda::Fill);

}  // namespace singa
