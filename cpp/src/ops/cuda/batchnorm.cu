// Batch normalisation over axis 1 on the GPU (backend kCuda), our own kernels. Fronts:
// ../batchnorm.cc; the same definitions as the reference kernels (../cpu/batchnorm.cc): batch
// mean, BIASED batch variance (two passes around the mean), running statistics updated as
// UpdateRunningStats does (unbiased variance), y = x * k[c] + b[c] (+ ReLU), and the backward
// from x, scale, mean and var.
//
// Why not cuDNN: its training forward returns the saved inverse standard deviation (not var),
// updates running_var with its own unbiasing and takes its own saved values in the backward;
// converting back and forth costs as many kernels as the per-channel reductions themselves.
//
// Layout: x viewed as (N, C, S). One block per channel reduces that channel's N * S values
// (float per thread, double across the block), thread 0 then writes the channel's statistics,
// the running-statistics update and the affine coefficients into the Prepared workspace; an
// elementwise kernel applies them. Weak spot: few channels with large N * S give few blocks.
//
// float16 (CUDA only, cuDNN's convention): x, y, dy and dx may be float16, computed in float;
// the per-channel tensors (scale, bias, running and batch statistics, dscale, dbias) stay float32.
#include "../nn_kernels.h"
#include "singa/ops/elementwise_functors.h"
#include "cudnn_common.h"

namespace singa {
namespace cuda {
namespace {

constexpr int kBnThreads = 256;

struct BnGeom {
  size_t N, C, S;
};

// The sum of v over the block (valid in thread 0). All threads must call it.
__device__ double BlockSum(double v) {
  __shared__ double buf[kBnThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBnThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  const double r = buf[0];
  __syncthreads();  // buf is reused by the next call
  return r;
}

// Element j (of N * S) of channel c.
__device__ inline size_t At(const BnGeom& g, size_t c, size_t j) {
  return ((j / g.S) * g.C + c) * g.S + j % g.S;
}

// Per channel (block): mean, biased var, running stats, and k, b with y = x * k + b.
template <typename T>
__global__ void BnTrainStats(BnGeom g, const T* x, const float* scale, const float* bias,
                             float eps, float momentum, float* mean, float* var, float* rmean,
                             float* rvar, float* k, float* b) {
  const size_t c = blockIdx.x, M = g.N * g.S;
  float s = 0.f;
  for (size_t j = threadIdx.x; j < M; j += kBnThreads) s += ToF(x[At(g, c, j)]);
  const double sum = BlockSum(s);
  __shared__ float mu_s;
  if (threadIdx.x == 0) mu_s = float(sum / double(M));
  __syncthreads();
  const float mu = mu_s;
  float q = 0.f;
  for (size_t j = threadIdx.x; j < M; j += kBnThreads) {
    const float d = ToF(x[At(g, c, j)]) - mu;
    q += d * d;
  }
  const double sq = BlockSum(q);
  if (threadIdx.x != 0) return;
  const double v = sq / double(M);
  mean[c] = mu;
  var[c] = float(v);
  const double inv = 1.0 / sqrt(v + double(eps));
  k[c] = float(scale[c] * inv);
  b[c] = float(bias[c] - mu * scale[c] * inv);
  const float m = momentum;
  const double unbias = double(M) / (double(M) - 1.0);
  if (rmean) rmean[c] = (1.f - m) * rmean[c] + m * mu;
  if (rvar) rvar[c] = (1.f - m) * rvar[c] + m * float(double(float(v)) * unbias);
}

__global__ void BnInferCoeffs(size_t C, const float* scale, const float* bias, const float* rm,
                              const float* rv, float eps, float* k, float* b) {
  for (size_t c = blockIdx.x * size_t(blockDim.x) + threadIdx.x; c < C;
       c += size_t(blockDim.x) * gridDim.x) {
    const double q = scale[c] / sqrt(double(rv[c]) + double(eps));
    k[c] = float(q);
    b[c] = float(bias[c] - rm[c] * q);
  }
}

template <typename T>
__global__ void BnAffine(BnGeom g, size_t total, const T* x, const float* k, const float* b,
                         bool relu, T* y) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(blockDim.x) * gridDim.x) {
    const size_t c = (i / g.S) % g.C;
    const float v = ToF(x[i]) * k[c] + b[c];
    y[i] = FromF<T>(relu ? fn::ReLUOp{}(v) : v);  // NaN kept (fmaxf would drop it)
  }
}

// Per channel (block): dscale, dbias and the coefficients of dx = k1 * dy - k2 * x + k3.
template <typename T>
__global__ void BnBackwardSums(BnGeom g, const T* dy, const T* x, const float* scale,
                               const float* mean, const float* var, float eps, float* dscale,
                               float* dbias, float* k1, float* k2, float* k3) {
  const size_t c = blockIdx.x, M = g.N * g.S;
  const float m = mean[c];
  float s1 = 0.f, s2 = 0.f;
  for (size_t j = threadIdx.x; j < M; j += kBnThreads) {
    const size_t i = At(g, c, j);
    const float d = ToF(dy[i]);
    s1 += d;
    s2 += d * (ToF(x[i]) - m);
  }
  const double sdy = BlockSum(s1), sdyx = BlockSum(s2);
  if (threadIdx.x != 0) return;
  const double inv = 1.0 / sqrt(double(var[c]) + double(eps));
  const double ds = sdyx * inv;  // sum(dy * xhat)
  dscale[c] = float(ds);
  dbias[c] = float(sdy);
  const double q = scale[c] * inv, bb = M > 0 ? q * inv * ds / double(M) : 0.0;
  k1[c] = float(q);
  k2[c] = float(bb);
  k3[c] = float(M > 0 ? bb * m - q * sdy / double(M) : 0.0);
}

template <typename T>
__global__ void BnBackwardDx(BnGeom g, size_t total, const T* dy, const T* x, const float* k1,
                             const float* k2, const float* k3, T* dx) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(blockDim.x) * gridDim.x) {
    const size_t c = (i / g.S) % g.C;
    dx[i] = FromF<T>(k1[c] * ToF(dy[i]) - k2[c] * ToF(x[i]) + k3[c]);
  }
}

cudaStream_t StreamOf(const Tensor& t) { return Stream(t.device()->context()); }
float* OptOut(const Tensor& t) { return t.empty() ? nullptr : OutPtr(t); }
template <typename T>
const T* In(const Tensor& t) {
  return static_cast<const T*>(Data(t));
}
template <typename T>
T* Out(const Tensor& t) {
  return static_cast<T*>(MutData(t));
}

// Calls f(T()) with T the element type of the activations x (float or __half).
template <typename F>
void ByActivationType(const Tensor& x, F&& f) {
  if (x.data_type() == kFloat16)
    f(__half());
  else
    f(float());
}

template <typename T>
void Affine(const BnGeom& g, const Tensor& x, const float* k, const float* b, bool relu,
            const Tensor& y) {
  const size_t total = x.Size();
  if (total == 0) return;
  BnAffine<T><<<Blocks(total), kThreads, 0, StreamOf(y)>>>(g, total, In<T>(x), k, b, relu,
                                                            Out<T>(y));
  SINGA_CUDA_CHECK_LAUNCH("BatchNorm: normalising");
}

Prepared<BnTrainArgs> ForwardTraining(const BnTrainArgs& a) {
  Prepared<BnTrainArgs> r;
  r.workspace = 2 * a.C;  // k, b
  r.run = [](const BnTrainArgs& a, float* ws) {
    if (a.C == 0) return;
    const BnGeom g{a.N, a.C, a.S};
    float *k = ws, *b = ws + a.C;
    ByActivationType(a.x, [&](auto t) {
      using T = decltype(t);
      BnTrainStats<T><<<unsigned(a.C), kBnThreads, 0, StreamOf(a.y)>>>(
          g, In<T>(a.x), InPtr(a.scale), InPtr(a.bias), a.eps, a.momentum, OutPtr(a.mean),
          OutPtr(a.var), OptOut(a.running_mean), OptOut(a.running_var), k, b);
      SINGA_CUDA_CHECK_LAUNCH("BatchNormForwardTraining: statistics");
      Affine<T>(g, a.x, k, b, a.relu, a.y);
    });
  };
  return r;
}

Prepared<BnInferArgs> ForwardInference(const BnInferArgs& a) {
  Prepared<BnInferArgs> r;
  r.workspace = 2 * a.C;
  r.run = [](const BnInferArgs& a, float* ws) {
    if (a.C == 0) return;
    float *k = ws, *b = ws + a.C;
    BnInferCoeffs<<<Blocks(a.C), kThreads, 0, StreamOf(a.y)>>>(
        a.C, InPtr(a.scale), InPtr(a.bias), InPtr(a.running_mean), InPtr(a.running_var), a.eps,
        k, b);
    SINGA_CUDA_CHECK_LAUNCH("BatchNormForwardInference: coefficients");
    ByActivationType(a.x, [&](auto t) {
      Affine<decltype(t)>(BnGeom{a.N, a.C, a.S}, a.x, k, b, a.relu, a.y);
    });
  };
  return r;
}

Prepared<BnBwdArgs> Backward(const BnBwdArgs& a) {
  Prepared<BnBwdArgs> r;
  r.workspace = 3 * a.C;  // k1, k2, k3
  r.run = [](const BnBwdArgs& a, float* ws) {
    if (a.C == 0) return;
    const BnGeom g{a.N, a.C, a.S};
    float *k1 = ws, *k2 = ws + a.C, *k3 = ws + 2 * a.C;
    ByActivationType(a.x, [&](auto t) {
      using T = decltype(t);
      BnBackwardSums<T><<<unsigned(a.C), kBnThreads, 0, StreamOf(a.dscale)>>>(
          g, In<T>(a.dy), In<T>(a.x), InPtr(a.scale), InPtr(a.mean), InPtr(a.var), a.eps,
          OutPtr(a.dscale), OutPtr(a.dbias), k1, k2, k3);
      SINGA_CUDA_CHECK_LAUNCH("BatchNormBackward: sums");
      const size_t total = a.N * a.C * a.S;
      if (total == 0) return;
      BnBackwardDx<T><<<Blocks(total), kThreads, 0, StreamOf(a.dx)>>>(
          g, total, In<T>(a.dy), In<T>(a.x), k1, k2, k3, Out<T>(a.dx));
      SINGA_CUDA_CHECK_LAUNCH("BatchNormBackward: dx");
    });
  };
  return r;
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(BatchNormForwardTraining, kCuda, cuda::ForwardTraining);
SINGA_REGISTER_KERNEL(BatchNormForwardInference, kCuda, cuda::ForwardInference);
SINGA_REGISTER_KERNEL(BatchNormBackward, kCuda, cuda::Backward);

}  // namespace singa
