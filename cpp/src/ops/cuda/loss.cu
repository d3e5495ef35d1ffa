// CUDA kernels of the cross-entropy losses (fronts and shape checks: ops/loss.cc; CPU reference:
// ops/cpu/loss.cc). One block per sample row; the row's max and sums are block trees.
//
// Labels stay on the device: each row checks its own (whole number in [0, C)) and records a bad
// one in the device status word (kStatusNotInteger / kStatusLabelOutOfRange: CudaGPU::Sync
// raises ValueError); such a row writes nothing instead of reading outside x.
#include <cfloat>

#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

enum class Kind { kSoftmaxFwd, kSoftmaxBwd, kProbFwd, kProbBwd };

// The label of row i, or -1 after recording why it is unusable.
template <typename L>
__device__ int64_t LabelOf(const L* t, int64_t i, int64_t C, int* status) {
  const double v = static_cast<double>(t[i]);
  if (nearbyint(v) != v) {
    ReportDeviceError(status, kStatusNotInteger);
    return -1;
  }
  if (v < 0 || v >= double(C)) {
    ReportDeviceError(status, kStatusLabelOutOfRange);
    return -1;
  }
  return static_cast<int64_t>(v);
}

// log(sum(exp(z - max))) + max of one row, shared by the block.
__device__ float RowLogSumExp(const float* z, int64_t C, float* smem) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) mx = MaxMerge{}(mx, z[j]);
  mx = BlockReduce(mx, MaxMerge{}, smem);
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += expf(z[j] - mx);
  s = BlockReduce(s, SumMerge{}, smem);
  return mx + logf(s);
}

// t is `L*` labels when kLabels, else a float (N, C) matrix.
template <Kind kind, bool kLabels, typename L>
__global__ void LossRows(const float* x, const L* t, float* y, int64_t N, int64_t C,
                         int* status) {
  __shared__ float smem[kThreads];
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const float* z = x + i * C;
    const float* ti = kLabels ? nullptr : reinterpret_cast<const float*>(t) + i * C;
    int64_t lab = 0;
    if (kLabels) {
      lab = LabelOf(t, i, C, status);
      if (lab < 0) continue;  // uniform across the block: every thread reads the same label
    }
    if constexpr (kind == Kind::kSoftmaxFwd) {
      const float lse = RowLogSumExp(z, C, smem);
      if (kLabels) {
        if (threadIdx.x == 0) y[i] = lse - z[lab];
      } else {
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += ti[j] * (lse - z[j]);
        s = BlockReduce(s, SumMerge{}, smem);
        if (threadIdx.x == 0) y[i] = s;
      }
    } else if constexpr (kind == Kind::kSoftmaxBwd) {
      const float lse = RowLogSumExp(z, C, smem);
      float tsum = 1.f;
      if (!kLabels) {
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += ti[j];
        tsum = BlockReduce(s, SumMerge{}, smem);
      }
      float* g = y + i * C;
      for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
        float v = expf(z[j] - lse) * tsum;
        if (kLabels) v -= j == lab ? 1.f : 0.f;
        else v -= ti[j];
        g[j] = v;
      }
    } else if constexpr (kind == Kind::kProbFwd) {
      if (kLabels) {
        if (threadIdx.x == 0) y[i] = -logf(fmaxf(z[lab], FLT_MIN));
      } else {
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
          if (ti[j] != 0.f) s -= ti[j] * logf(fmaxf(z[j], FLT_MIN));
        s = BlockReduce(s, SumMerge{}, smem);
        if (threadIdx.x == 0) y[i] = s;
      }
    } else {
      float* g = y + i * C;
      for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
        g[j] = kLabels ? z[j] - (j == lab ? 1.f : 0.f) : z[j] - ti[j];
    }
  }
}

template <Kind kind>
void Loss(const Tensor& x, const Tensor& t, bool labels, const Tensor& out, Context* ctx) {
  const int64_t N = int64_t(x.shape(0)), C = int64_t(x.shape(1));
  if (N == 0) return;
  const float* px = DevPtr<const float>(x);
  float* py = MutDevPtr<float>(out);
  const unsigned blocks = unsigned(N < 65535 * 8 ? N : 65535 * 8);
  cudaStream_t s = Stream(ctx);
  if (!labels)
    LossRows<kind, false, float><<<blocks, kThreads, 0, s>>>(px, DevPtr<const float>(t), py, N,
                                                             C, StatusPtr(ctx));
  else if (t.data_type() == kInt)
    LossRows<kind, true, int32_t><<<blocks, kThreads, 0, s>>>(px, DevPtr<const int32_t>(t), py,
                                                              N, C, StatusPtr(ctx));
  else
    LossRows<kind, true, float><<<blocks, kThreads, 0, s>>>(px, DevPtr<const float>(t), py, N, C,
                                                            StatusPtr(ctx));
  SINGA_CUDA_CHECK_LAUNCH("cross-entropy loss");
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(SoftmaxCrossEntropyForward, kCuda, &cuda::Loss<cuda::Kind::kSoftmaxFwd>);
SINGA_REGISTER_KERNEL(SoftmaxCrossEntropyBackward, kCuda, &cuda::Loss<cuda::Kind::kSoftmaxBwd>);
SINGA_REGISTER_KERNEL(CrossEntropyFwd, kCuda, &cuda::Loss<cuda::Kind::kProbFwd>);
SINGA_REGISTER_KERNEL(SoftmaxCrossEntropyBwd, kCuda, &cuda::Loss<cuda::Kind::kProbBwd>);

}  // namespace singa
