// CUDA kernels of the random fills (front: ops/random.cc): cuRAND on the device's generator
// (Curand(ctx), bound to the device's stream), then a small kernel maps the draws.
//
// The CPU draws from mt19937 as SINGA's CppCPU does; GPU numbers come from cuRAND and differ from
// them (as in SINGA, whose CudaGPU uses cuRAND too): only their distributions agree.
// curandGenerateUniform draws from (0, 1]; 1 - u is in [0, 1), the CPU's half-open interval.
#include <cfloat>

#include "../random_kernel.h"
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

// Uniform in [low, high): low + (1 - u) * (high - low), kept below high after rounding.
__global__ void UniformMap(float* p, float low, float high, int64_t n) {
  SINGA_GRID_STRIDE(i, n) {
    float v = low + (1.f - p[i]) * (high - low);
    if (v >= high && high > low) v = nextafterf(high, low);
    p[i] = v;
  }
}

// 1 when a uniform draw in [0, 1) is below p, else 0 (p = 0: never, p = 1: always).
__global__ void BernoulliMap(float* q, float p, int64_t n) {
  SINGA_GRID_STRIDE(i, n) { q[i] = (1.f - q[i]) < p ? 1.f : 0.f; }
}

// One normal value from one uniform u in (0, 1] by the inverse normal CDF (the odd last element:
// cuRAND's Box-Muller normals come in pairs).
__global__ void NormalFromUniform(float* p, float mean, float stddev) {
  const float u = fminf(p[0], 1.f - FLT_EPSILON);
  p[0] = mean + stddev * normcdfinvf(u);
}

void UniformFill(float low, float high, float* out, size_t n, Context* ctx) {
  if (n == 0) return;
  SINGA_CURAND_CHECK(curandGenerateUniform(Curand(ctx), out, n), "Uniform");
  UniformMap<<<Blocks(n), kThreads, 0, Stream(ctx)>>>(out, low, high, int64_t(n));
  SINGA_CUDA_CHECK_LAUNCH("Uniform");
}

void GaussianFill(float mean, float stddev, float* out, size_t n, Context* ctx) {
  const size_t even = n & ~size_t(1);
  if (even > 0)
    SINGA_CURAND_CHECK(curandGenerateNormal(Curand(ctx), out, even, mean, stddev), "Gaussian");
  if (n % 2 == 1) {
    SINGA_CURAND_CHECK(curandGenerateUniform(Curand(ctx), out + even, 1), "Gaussian");
    NormalFromUniform<<<1, 1, 0, Stream(ctx)>>>(out + even, mean, stddev);
    SINGA_CUDA_CHECK_LAUNCH("Gaussian");
  }
}

void BernoulliFill(float p, float /*unused*/, float* out, size_t n, Context* ctx) {
  if (n == 0) return;
  SINGA_CURAND_CHECK(curandGenerateUniform(Curand(ctx), out, n), "Bernoulli");
  BernoulliMap<<<Blocks(n), kThreads, 0, Stream(ctx)>>>(out, p, int64_t(n));
  SINGA_CUDA_CHECK_LAUNCH("Bernoulli");
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(UniformFill, kCuda, cuda::UniformFill);
SINGA_REGISTER_KERNEL(GaussianFill, kCuda, cuda::GaussianFill);
SINGA_REGISTER_KERNEL(BernoulliFill, kCuda, cuda::BernoulliFill);

}  // namespace singa
