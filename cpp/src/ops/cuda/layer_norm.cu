// Layer normalisation on the GPU (kCuda); fronts: ../layer_norm.cc, the same definitions as the
// reference kernels (../cpu/layer_norm.cc): two-pass mean and biased variance per row, rstd =
// 1 / sqrt(var + eps), and the backward from the saved mean and rstd.
//
// Layout: x is (M, N). One block per row (grid-stride over rows) reduces the row in shared
// memory; dweight / dbias are column sums over the rows, in column strips whose lanes split the
// rows (cuda_kernels.cuh). Weak spot: few columns (a strip per 32) with very many rows still
// leave much of the GPU idle in that last kernel.
//
// dtypes: x, y, weight, bias, dy, dx, dweight, dbias float32 or float16 (computed in float);
// mean and rstd float32.
#include "../transformer_kernels.h"
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

template <typename T>
__global__ void LnForward(const T* x, const T* w, const T* b, T* y, float* mean, float* rstd,
                          int64_t M, int64_t N, float eps) {
  __shared__ float smem[kThreads];
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const T* xr = x + m * N;
    T* yr = y + m * N;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += Convert<float>(xr[i]);
    const float mu = BlockReduce(s, SumMerge{}, smem) / float(N);
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const float d = Convert<float>(xr[i]) - mu;
      q += d * d;
    }
    const float rs = 1.f / sqrtf(BlockReduce(q, SumMerge{}, smem) / float(N) + eps);
    if (threadIdx.x == 0) {
      mean[m] = mu;
      rstd[m] = rs;
    }
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      float v = (Convert<float>(xr[i]) - mu) * rs;
      if (w) v *= Convert<float>(w[i]);
      if (b) v += Convert<float>(b[i]);
      yr[i] = Convert<T>(v);
    }
  }
}

template <typename T>
__global__ void LnBackwardX(const T* dy, const T* x, const T* w, const float* mean,
                            const float* rstd, T* dx, int64_t M, int64_t N) {
  __shared__ float smem[kThreads];
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const T *dyr = dy + m * N, *xr = x + m * N;
    T* dxr = dx + m * N;
    const float mu = mean[m], rs = rstd[m];
    float sg = 0.f, sgx = 0.f;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const float g = Convert<float>(dyr[i]) * (w ? Convert<float>(w[i]) : 1.f);
      sg += g;
      sgx += g * (Convert<float>(xr[i]) - mu) * rs;
    }
    const float c1 = BlockReduce(sg, SumMerge{}, smem) / float(N);
    const float c2 = BlockReduce(sgx, SumMerge{}, smem) / float(N);
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const float g = Convert<float>(dyr[i]) * (w ? Convert<float>(w[i]) : 1.f);
      const float xh = (Convert<float>(xr[i]) - mu) * rs;
      dxr[i] = Convert<T>(rs * (g - c1 - xh * c2));
    }
  }
}

// dweight and dbias: column sums over the M rows, a strip block per kStripCols columns.
template <typename T>
__global__ void __launch_bounds__(kStripCols * kStripLanes)
    LnBackwardParams(const T* dy, const T* x, const float* mean, const float* rstd, T* dw, T* db,
                     int64_t M, int64_t N) {
  __shared__ float2 smem[kStripLanes * kStripCols];
  for (int64_t s = blockIdx.x; s < Strips(N); s += gridDim.x) {  // the same for the block
    const int64_t j = s * kStripCols + threadIdx.x;
    float2 acc = {0.f, 0.f};  // (dweight, dbias)
    if (j < N)
      for (int64_t m = threadIdx.y; m < M; m += kStripLanes) {
        const float d = Convert<float>(dy[m * N + j]);
        acc.x += d * (Convert<float>(x[m * N + j]) - mean[m]) * rstd[m];
        acc.y += d;
      }
    acc = StripReduce(acc, Float2Sum{}, smem);
    if (threadIdx.y == 0 && j < N) {
      dw[j] = Convert<T>(acc.x);
      db[j] = Convert<T>(acc.y);
    }
  }
}

template <typename T>
const T* OptPtr(const Tensor& t) {
  return t.empty() ? nullptr : DevPtr<const T>(t);
}

Prepared<LnFwdArgs> PrepareForward(const LnFwdArgs&) {
  Prepared<LnFwdArgs> r;
  r.run = [](const LnFwdArgs& a, float*) {
    cudaStream_t s = Stream(a.x.device()->context());
    WithFloatType("LayerNormForward", a.x.data_type(), [&](auto zero) {
      using T = decltype(zero);
      LnForward<T><<<UnitBlocks(int64_t(a.M)), kThreads, 0, s>>>(
          DevPtr<const T>(a.x), OptPtr<T>(a.weight), OptPtr<T>(a.bias), MutDevPtr<T>(a.y),
          MutDevPtr<float>(a.mean), MutDevPtr<float>(a.rstd), int64_t(a.M), int64_t(a.N), a.eps);
      SINGA_CUDA_CHECK_LAUNCH("LayerNormForward");
    });
  };
  return r;
}

Prepared<LnBwdArgs> PrepareBackward(const LnBwdArgs&) {
  Prepared<LnBwdArgs> r;
  r.run = [](const LnBwdArgs& a, float*) {
    cudaStream_t s = Stream(a.x.device()->context());
    WithFloatType("LayerNormBackward", a.x.data_type(), [&](auto zero) {
      using T = decltype(zero);
      const T *dy = DevPtr<const T>(a.dy), *x = DevPtr<const T>(a.x);
      const float *mean = DevPtr<const float>(a.mean), *rstd = DevPtr<const float>(a.rstd);
      LnBackwardX<T><<<UnitBlocks(int64_t(a.M)), kThreads, 0, s>>>(
          dy, x, OptPtr<T>(a.weight), mean, rstd, MutDevPtr<T>(a.dx), int64_t(a.M), int64_t(a.N));
      SINGA_CUDA_CHECK_LAUNCH("LayerNormBackward");
      if (a.dweight.empty()) return;
      LnBackwardParams<T><<<UnitBlocks(Strips(int64_t(a.N))), dim3(kStripCols, kStripLanes), 0,
                            s>>>(
          dy, x, mean, rstd, MutDevPtr<T>(a.dweight), MutDevPtr<T>(a.dbias), int64_t(a.M),
          int64_t(a.N));
      SINGA_CUDA_CHECK_LAUNCH("LayerNormBackward");
    });
  };
  return r;
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(LayerNormForward, kCuda, cuda::PrepareForward);
SINGA_REGISTER_KERNEL(LayerNormBackward, kCuda, cuda::PrepareBackward);

}  // namespace singa
