// GatherElements / GatherND and their scatter-add backwards on the GPU (kCuda); fronts:
// ../gather.cc, reference: ../cpu/gather.cc.
//
// One thread per output element (per dy element in the backwards) reads its index, checks it
// (whole number inside [-A, A)) and records the first failure in the device status word
// (kStatusNotInteger / kStatusIndexOutOfRange: CudaGPU::Sync raises ValueError / AxisError),
// skipping that element instead of touching memory outside the tensor. Repeated indices meet in
// atomicAdd in the backwards (so float sums may differ from the CPU's in the last bits).
#include "../transformer_kernels.h"
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

constexpr int kMaxRank = 8;

// The wrapped index, or -2 (not whole) / -1 (out of range), reported to the status word.
template <typename I>
__device__ __forceinline__ int64_t Wrapped(const I* idx, int64_t k, int64_t A, int* status) {
  const double v = static_cast<double>(idx[k]);
  if (nearbyint(v) != v) {
    ReportDeviceError(status, kStatusNotInteger);
    return -2;
  }
  if (v < -double(A) || v >= double(A)) {
    ReportDeviceError(status, kStatusIndexOutOfRange);
    return -1;
  }
  return static_cast<int64_t>(v < 0 ? v + double(A) : v);
}

struct ElemGeom {
  int rank, axis;
  int64_t idx_shape[kMaxRank], x_shape[kMaxRank], x_stride[kMaxRank];
};

// The offset in x of indices element e, or -1 for a bad index.
template <typename I>
__device__ int64_t ElemOffset(const ElemGeom& g, const I* idx, int64_t e, int* status) {
  int64_t rest = e, off = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    int64_t c = rest % g.idx_shape[d];
    rest /= g.idx_shape[d];
    if (d == g.axis) {
      c = Wrapped(idx, e, g.x_shape[d], status);
      if (c < 0) return -1;
    }
    off += c * g.x_stride[d];
  }
  return off;
}

template <typename T, typename I>
__global__ void GatherElems(const T* x, const I* idx, T* y, ElemGeom g, int64_t n, int* status) {
  SINGA_GRID_STRIDE(e, n) {
    const int64_t o = ElemOffset(g, idx, e, status);
    if (o >= 0) y[e] = x[o];
  }
}

template <typename T, typename I>
__global__ void ScatterElems(const T* dy, const I* idx, T* dx, ElemGeom g, int64_t n,
                             int* status) {
  SINGA_GRID_STRIDE(e, n) {
    const int64_t o = ElemOffset(g, idx, e, status);
    if (o >= 0) atomicAdd(dx + o, dy[e]);
  }
}

struct NdGeom {
  int q;
  int64_t per_batch, slice, batch_elems, x_dims[kMaxRank];
};

// The offset in x of the slice of (batch, k) pair bk, or -1 for a bad index.
template <typename I>
__device__ int64_t SliceOffset(const NdGeom& g, const I* idx, int64_t bk, int* status) {
  int64_t pos = 0;
  for (int j = 0; j < g.q; ++j) {
    const int64_t c = Wrapped(idx, bk * g.q + j, g.x_dims[j], status);
    if (c < 0) return -1;
    pos = pos * g.x_dims[j] + c;
  }
  return (bk / g.per_batch) * g.batch_elems + pos * g.slice;
}

template <typename T, typename I>
__global__ void GatherSlices(const T* x, const I* idx, T* y, NdGeom g, int64_t n, int* status) {
  SINGA_GRID_STRIDE(e, n) {
    const int64_t o = SliceOffset(g, idx, e / g.slice, status);
    if (o >= 0) y[e] = x[o + e % g.slice];
  }
}

template <typename T, typename I>
__global__ void ScatterSlices(const T* dy, const I* idx, T* dx, NdGeom g, int64_t n,
                              int* status) {
  SINGA_GRID_STRIDE(e, n) {
    const int64_t o = SliceOffset(g, idx, e / g.slice, status);
    if (o >= 0) atomicAdd(dx + o + e % g.slice, dy[e]);
  }
}

ElemGeom MakeElemGeom(const ElementsArgs& a) {
  SINGA_CHECK_SHAPE(a.x_shape.size() <= size_t(kMaxRank),
                    "GatherElements: the CUDA kernel takes at most " << kMaxRank << " axes, got "
                                                                   << a.x_shape);
  ElemGeom g{};
  g.rank = int(a.x_shape.size());
  g.axis = int(a.axis);
  int64_t s = 1;
  for (int d = g.rank - 1; d >= 0; --d) {
    g.idx_shape[d] = int64_t(a.idx_shape[d]);
    g.x_shape[d] = int64_t(a.x_shape[d]);
    g.x_stride[d] = s;
    s *= g.x_shape[d];
  }
  return g;
}

NdGeom MakeNdGeom(const NdArgs& a) {
  SINGA_CHECK_SHAPE(a.x_dims.size() <= size_t(kMaxRank),
                    "GatherND: the CUDA kernel takes at most " << kMaxRank
                                                             << " coordinates per index");
  NdGeom g{};
  g.q = int(a.x_dims.size());
  g.per_batch = int64_t(a.per_batch == 0 ? 1 : a.per_batch);
  g.slice = int64_t(a.slice);
  int64_t e = int64_t(a.slice);
  for (int j = 0; j < g.q; ++j) {
    g.x_dims[j] = int64_t(a.x_dims[j]);
    e *= g.x_dims[j];
  }
  g.batch_elems = e;
  return g;
}

// Calls f(typed index pointer): int32, or float32 holding whole numbers.
template <typename F>
void WithIndexType(const Tensor& indices, F&& f) {
  if (indices.data_type() == kInt) f(DevPtr<const int32_t>(indices));
  else f(DevPtr<const float>(indices));
}

// Calls f(T{}) with T the element type moved (by width) or added (float / int).
template <typename F>
void ByWidth(const char* op, DataType dt, F&& f) {
  switch (SizeOf(dt)) {
    case 4: return f(uint32_t{});
    case 2: return f(uint16_t{});
    default: SINGA_THROW(DTypeError, op << ": dtype " << DataTypeName(dt) << " is not supported");
  }
}
template <typename F>
void ByAddType(const char* op, DataType dt, F&& f) {
  if (dt == kFloat32) return f(float{});
  if (dt == kInt) return f(int{});
  SINGA_THROW(DTypeError, op << ": dtype " << DataTypeName(dt) << " is not supported");
}

void ZeroFill(const Tensor& t, Context* ctx, const char* op) {
  if (t.Size() > 0)
    SINGA_CUDA_CHECK(cudaMemsetAsync(t.block()->mutable_data(), 0, t.Size() * SizeOf(t.data_type()),
                                     Stream(ctx)),
                     op);
}

void GatherElementsCuda(const Tensor& x, const ElementsArgs& a, const Tensor& out, Context* ctx) {
  const int64_t n = int64_t(out.Size());
  if (n == 0) return;
  const ElemGeom g = MakeElemGeom(a);
  ByWidth("GatherElements", x.data_type(), [&](auto zero) {
    using T = decltype(zero);
    WithIndexType(a.indices, [&](auto* idx) {
      using I = std::remove_const_t<std::remove_pointer_t<decltype(idx)>>;
      GatherElems<T, I><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(
          DevPtr<const T>(x), idx, MutDevPtr<T>(out), g, n, StatusPtr(ctx));
    });
  });
  SINGA_CUDA_CHECK_LAUNCH("GatherElements");
}

void GatherElementsBackwardCuda(const Tensor& dy, const ElementsArgs& a, const Tensor& dx,
                                Context* ctx) {
  const char* op = "GatherElementsBackward";
  ZeroFill(dx, ctx, op);
  const int64_t n = int64_t(dy.Size());
  if (n == 0) return;
  const ElemGeom g = MakeElemGeom(a);
  ByAddType(op, dx.data_type(), [&](auto zero) {
    using T = decltype(zero);
    WithIndexType(a.indices, [&](auto* idx) {
      using I = std::remove_const_t<std::remove_pointer_t<decltype(idx)>>;
      ScatterElems<T, I><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(
          DevPtr<const T>(dy), idx, MutDevPtr<T>(dx), g, n, StatusPtr(ctx));
    });
  });
  SINGA_CUDA_CHECK_LAUNCH(op);
}

void GatherNDCuda(const Tensor& x, const NdArgs& a, const Tensor& out, Context* ctx) {
  const int64_t n = int64_t(out.Size());
  if (n == 0) return;
  const NdGeom g = MakeNdGeom(a);
  ByWidth("GatherND", x.data_type(), [&](auto zero) {
    using T = decltype(zero);
    WithIndexType(a.indices, [&](auto* idx) {
      using I = std::remove_const_t<std::remove_pointer_t<decltype(idx)>>;
      GatherSlices<T, I><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(
          DevPtr<const T>(x), idx, MutDevPtr<T>(out), g, n, StatusPtr(ctx));
    });
  });
  SINGA_CUDA_CHECK_LAUNCH("GatherND");
}

void GatherNDBackwardCuda(const Tensor& dy, const NdArgs& a, const Tensor& dx, Context* ctx) {
  const char* op = "GatherNDBackward";
  ZeroFill(dx, ctx, op);
  const int64_t n = int64_t(dy.Size());
  if (n == 0) return;
  const NdGeom g = MakeNdGeom(a);
  ByAddType(op, dx.data_type(), [&](auto zero) {
    using T = decltype(zero);
    WithIndexType(a.indices, [&](auto* idx) {
      using I = std::remove_const_t<std::remove_pointer_t<decltype(idx)>>;
      ScatterSlices<T, I><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(
          DevPtr<const T>(dy), idx, MutDevPtr<T>(dx), g, n, StatusPtr(ctx));
    });
  });
  SINGA_CUDA_CHECK_LAUNCH(op);
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(GatherElements, kCuda, &cuda::GatherElementsCuda);
SINGA_REGISTER_KERNEL(GatherElementsBackward, kCuda, &cuda::GatherElementsBackwardCuda);
SINGA_REGISTER_KERNEL(GatherND, kCuda, &cuda::GatherNDCuda);
SINGA_REGISTER_KERNEL(GatherNDBackward, kCuda, &cuda::GatherNDBackwardCuda);

}  // namespace singa
