// CUDA kernels of IndexSelect (gather) and IndexAdd (its backward); fronts: ops/index.cc, CPU
// reference: ops/cpu/index.cc.
//
// The indices stay on the device (a replay may change them): a first kernel checks every one
// (whole number, inside [-A, A)) and records the first failure in the device status word
// (kStatusNotInteger / kStatusIndexOutOfRange; CudaGPU::Sync raises ValueError / AxisError), as
// the CPU kernel checks them all before moving data. The gather and scatter then skip a bad index
// instead of reading or writing outside the tensor.
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

// The wrapped index k in [0, A), or -1 when it is not whole (-2) or out of range (-1).
template <typename I>
__device__ __forceinline__ int64_t IndexAt(const I* idx, int64_t k, int64_t A) {
  const double v = static_cast<double>(idx[k]);
  if (nearbyint(v) != v) return -2;
  if (v < -double(A) || v >= double(A)) return -1;
  return static_cast<int64_t>(v < 0 ? v + double(A) : v);
}

template <typename I>
__global__ void CheckIndices(const I* idx, int64_t K, int64_t A, int* status) {
  SINGA_GRID_STRIDE(k, K) {
    const int64_t a = IndexAt(idx, k, A);
    if (a == -2) ReportDeviceError(status, kStatusNotInteger);
    else if (a < 0) ReportDeviceError(status, kStatusIndexOutOfRange);
  }
}

// y[o, k, i] = x[o, idx[k], i] over the contiguous (outer, K, inner) output.
template <typename T, typename I>
__global__ void Gather(const T* x, const I* idx, T* y, int64_t K, int64_t A, int64_t inner,
                       int64_t n) {
  SINGA_GRID_STRIDE(e, n) {
    const int64_t i = e % inner, k = (e / inner) % K, o = e / (inner * K);
    const int64_t a = IndexAt(idx, k, A);
    if (a >= 0) y[e] = x[(o * A + a) * inner + i];
  }
}

// dx[o, idx[k], i] += dy[o, k, i]; repeated indices meet in atomicAdd.
template <typename T, typename I>
__global__ void ScatterAdd(const T* dy, const I* idx, T* dx, int64_t K, int64_t A,
                           int64_t inner, int64_t n) {
  SINGA_GRID_STRIDE(e, n) {
    const int64_t i = e % inner, k = (e / inner) % K, o = e / (inner * K);
    const int64_t a = IndexAt(idx, k, A);
    if (a >= 0) atomicAdd(dx + (o * A + a) * inner + i, dy[e]);
  }
}

// Calls f(typed index pointer): int32, or float32 holding whole numbers (the front checked).
template <typename F>
void WithIndices(const GatherArgs& g, F&& f) {
  if (g.indices.data_type() == kInt) f(DevPtr<const int32_t>(g.indices));
  else f(DevPtr<const float>(g.indices));
}

template <typename I>
void Check(const I* idx, const GatherArgs& g, Context* ctx, const char* op) {
  const int64_t K = int64_t(g.indices.Size());
  if (K == 0) return;
  CheckIndices<I><<<Blocks(K), kThreads, 0, Stream(ctx)>>>(idx, K, int64_t(g.d.mid),
                                                           StatusPtr(ctx));
  SINGA_CUDA_CHECK_LAUNCH(op);
}

template <typename T>
void GatherLaunch(const Tensor& x, const GatherArgs& g, const Tensor& out, Context* ctx) {
  const int64_t K = int64_t(g.indices.Size()), A = int64_t(g.d.mid), inner = int64_t(g.d.inner);
  const int64_t n = int64_t(g.d.outer) * K * inner;
  WithIndices(g, [&](auto* idx) {
    using I = std::remove_const_t<std::remove_pointer_t<decltype(idx)>>;
    Check(idx, g, ctx, "IndexSelect");
    if (n == 0) return;
    Gather<T, I><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(DevPtr<const T>(x), idx,
                                                          MutDevPtr<T>(out), K, A, inner, n);
    SINGA_CUDA_CHECK_LAUNCH("IndexSelect");
  });
}

void IndexSelect(const Tensor& x, const GatherArgs& g, const Tensor& out, Context* ctx) {
  switch (SizeOf(x.data_type())) {  // elements are moved, not computed: by width
    case 4: return GatherLaunch<uint32_t>(x, g, out, ctx);
    case 2: return GatherLaunch<uint16_t>(x, g, out, ctx);
    default:
      SINGA_THROW(DTypeError, "IndexSelect: dtype " << DataTypeName(x.data_type())
                                                    << " is not supported");
  }
}

template <typename T>
void ScatterLaunch(const Tensor& dy, const GatherArgs& g, const Tensor& dx, Context* ctx) {
  if (dx.Size() > 0)
    SINGA_CUDA_CHECK(cudaMemsetAsync(MutDevPtr<T>(dx), 0, dx.Size() * sizeof(T), Stream(ctx)),
                     "IndexAdd");
  const int64_t K = int64_t(g.indices.Size()), A = int64_t(g.d.mid), inner = int64_t(g.d.inner);
  const int64_t n = int64_t(g.d.outer) * K * inner;
  WithIndices(g, [&](auto* idx) {
    using I = std::remove_const_t<std::remove_pointer_t<decltype(idx)>>;
    Check(idx, g, ctx, "IndexAdd");
    if (n == 0 || dy.Size() == 0) return;
    ScatterAdd<T, I><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(DevPtr<const T>(dy), idx,
                                                              MutDevPtr<T>(dx), K, A, inner, n);
    SINGA_CUDA_CHECK_LAUNCH("IndexAdd");
  });
}

void IndexAdd(const Tensor& dy, const GatherArgs& g, const Tensor& dx, Context* ctx) {
  switch (dx.data_type()) {
    case kFloat32: return ScatterLaunch<float>(dy, g, dx, ctx);
    case kInt: return ScatterLaunch<int>(dy, g, dx, ctx);
    default:
      SINGA_THROW(DTypeError, "IndexAdd: dtype " << DataTypeName(dx.data_type())
                                                 << " is not supported (float32 or int32)");
  }
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(IndexSelect, kCuda, &cuda::IndexSelect);
SINGA_REGISTER_KERNEL(IndexAdd, kCuda, &cuda::IndexAdd);

}  // namespace singa
