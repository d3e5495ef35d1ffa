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

// log(sum(exp(z - max))) of one row, shared by the block, with the max in *max_out: kept apart
// as on the CPU (cpu/loss.cc), since max + log_s loses log_s when |max| is large.
template <typename T>
__device__ float RowLogSumExp(const T* z, int64_t C, float* smem, float* max_out) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) mx = MaxMerge{}(mx, Convert<float>(z[j]));
  mx = BlockReduce(mx, MaxMerge{}, smem);
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += expf(Convert<float>(z[j]) - mx);
  s = BlockReduce(s, SumMerge{}, smem);
  *max_out = mx;
  return logf(s);
}

// x, y (and t when it is a matrix) hold T: float, or __half computed in float. t is `L*`
// labels when kLabels, else an (N, C) matrix of T.
template <Kind kind, bool kLabels, typename L, typename T>
__global__ void LossRows(const T* x_, const L* t, T* y_, int64_t N, int64_t C, int* status) {
  __shared__ float smem[kThreads];
  // Element access in float whatever T is.
  auto z_at = [x_](int64_t k) { return Convert<float>(x_[k]); };
  auto t_at = [t](int64_t k) { return Convert<float>(reinterpret_cast<const T*>(t)[k]); };
  auto put = [y_](int64_t k, float v) { y_[k] = Convert<T>(v); };
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const int64_t zi = i * C;  // row i of x (and of t when it is a matrix)
    int64_t lab = 0;
    if (kLabels) {
      lab = LabelOf(t, i, C, status);
      if (lab < 0) continue;  // uniform across the block: every thread reads the same label
    }
    if constexpr (kind == Kind::kSoftmaxFwd) {
      float mx;
      const float log_s = RowLogSumExp(x_ + zi, C, smem, &mx);
      if (kLabels) {
        if (threadIdx.x == 0) put(i, log_s - (z_at(zi + lab) - mx));
      } else {
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
          const float tj = t_at(zi + j);  // target 0 adds nothing (0 * inf at a -inf logit)
          if (tj != 0.f) s += tj * (log_s - (z_at(zi + j) - mx));
        }
        s = BlockReduce(s, SumMerge{}, smem);
        if (threadIdx.x == 0) put(i, s);
      }
    } else if constexpr (kind == Kind::kSoftmaxBwd) {
      float mx;
      const float log_s = RowLogSumExp(x_ + zi, C, smem, &mx);
      float tsum = 1.f;
      if (!kLabels) {
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += t_at(zi + j);
        tsum = BlockReduce(s, SumMerge{}, smem);
      }
      for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
        float v = expf((z_at(zi + j) - mx) - log_s) * tsum;
        if (kLabels) v -= j == lab ? 1.f : 0.f;
        else v -= t_at(zi + j);
        put(zi + j, v);
      }
    } else if constexpr (kind == Kind::kProbFwd) {
      if (kLabels) {
        // MaxMerge, as the CPU's std::max: a NaN probability stays NaN (fmaxf would drop it).
        if (threadIdx.x == 0) put(i, -logf(MaxMerge{}(z_at(zi + lab), FLT_MIN)));
      } else {
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
          const float tj = t_at(zi + j);
          if (tj != 0.f) s -= tj * logf(MaxMerge{}(z_at(zi + j), FLT_MIN));
        }
        s = BlockReduce(s, SumMerge{}, smem);
        if (threadIdx.x == 0) put(i, s);
      }
    } else {
      for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
        put(zi + j, kLabels ? z_at(zi + j) - (j == lab ? 1.f : 0.f) : z_at(zi + j) - t_at(zi + j));
    }
  }
}

template <Kind kind, typename T>
void LossLaunch(const Tensor& x, const Tensor& t, bool labels, const Tensor& out, Context* ctx) {
  const int64_t N = int64_t(x.shape(0)), C = int64_t(x.shape(1));
  if (N == 0) return;
  const T* px = DevPtr<const T>(x);
  T* py = MutDevPtr<T>(out);
  const unsigned blocks = UnitBlocks(N);  // a block per row
  cudaStream_t s = Stream(ctx);
  if (!labels)
    LossRows<kind, false, T, T><<<blocks, kThreads, 0, s>>>(px, DevPtr<const T>(t), py, N, C,
                                                            StatusPtr(ctx));
  else if (t.data_type() == kInt)
    LossRows<kind, true, int32_t, T><<<blocks, kThreads, 0, s>>>(px, DevPtr<const int32_t>(t), py,
                                                                 N, C, StatusPtr(ctx));
  else
    LossRows<kind, true, float, T><<<blocks, kThreads, 0, s>>>(px, DevPtr<const float>(t), py, N,
                                                               C, StatusPtr(ctx));
  SINGA_CUDA_CHECK_LAUNCH("cross-entropy loss");
}

// x (and out, and a target matrix) float32, or float16 (the front allows it on CUDA devices).
template <Kind kind>
void Loss(const Tensor& x, const Tensor& t, bool labels, const Tensor& out, Context* ctx) {
  if (x.data_type() == kFloat16) return LossLaunch<kind, __half>(x, t, labels, out, ctx);
  LossLaunch<kind, float>(x, t, labels, out, ctx);
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(SoftmaxCrossEntropyForward, kCuda, &cuda::Loss<cuda::Kind::kSoftmaxFwd>);
SINGA_REGISTER_KERNEL(SoftmaxCrossEntropyBackward, kCuda, &cuda::Loss<cuda::Kind::kSoftmaxBwd>);
SINGA_REGISTER_KERNEL(CrossEntropyFwd, kCuda, &cuda::Loss<cuda::Kind::kProbFwd>);
SINGA_REGISTER_KERNEL(SoftmaxCrossEntropyBwd, kCuda, &cuda::Loss<cuda::Kind::kProbBwd>);

}  // namespace singa
