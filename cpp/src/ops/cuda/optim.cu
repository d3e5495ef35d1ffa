// CUDA kernel of the fused SGD update (front: ops/optim.cc; CPU reference: ops/cpu/optim.cc).
// The hyper-parameters are one-element device tensors read inside the kernel, so a replayed
// graph (or a captured CUDA Graph) uses their current values.
#include "../adam_step.h"
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

struct SGDHyper {
  const float *lr, *momentum, *dampening, *weight_decay;
};

// T: float, or __half (parameter, gradient and buffer in float16 on the GPU, computed in float
// and rounded once per stored value).
template <typename T>
__global__ void SGDKernel(T* p, const T* g, T* buf, SGDHyper h, bool nesterov, int64_t n) {
  const float rate = *h.lr, mom = *h.momentum, wd = *h.weight_decay;
  const float one_minus_damp = 1.f - *h.dampening;
  SINGA_GRID_STRIDE(i, n) {
    const float pi = Convert<float>(p[i]);
    const float d = Convert<float>(g[i]) + pi * wd;
    if (buf == nullptr) {
      p[i] = Convert<T>(pi - d * rate);
    } else {
      const float v = Convert<float>(buf[i]) * mom + d * one_minus_damp;
      buf[i] = Convert<T>(v);
      p[i] = Convert<T>(pi - (nesterov ? d + v * mom : v) * rate);
    }
  }
}

template <typename T>
void SGDLaunch(const SGDArgs& a, Context* ctx) {
  const int64_t n = int64_t(a.param.Size());
  if (n == 0) return;
  const SGDHyper h{DevPtr<const float>(a.lr), DevPtr<const float>(a.momentum),
                   DevPtr<const float>(a.dampening), DevPtr<const float>(a.weight_decay)};
  T* buf = a.has_buf ? MutDevPtr<T>(a.buf) : nullptr;
  SGDKernel<T><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(MutDevPtr<T>(a.param),
                                                        DevPtr<const T>(a.grad), buf, h,
                                                        a.nesterov, n);
  SINGA_CUDA_CHECK_LAUNCH("SGDUpdate");
}

void SGDUpdate(const SGDArgs& a, Context* ctx) {
  if (a.param.data_type() == kFloat16) return SGDLaunch<__half>(a, ctx);
  SGDLaunch<float>(a, ctx);
}

struct AdamHyper {
  const float *lr, *beta1, *beta2, *epsilon, *weight_decay, *step;
};

__global__ void AdamKernel(float* p, const float* g, float* m, float* v, AdamHyper h, bool decay,
                           int64_t n) {
  const AdamScalars s =
      AdamScalarsOf(*h.lr, *h.beta1, *h.beta2, *h.epsilon, *h.weight_decay, *h.step, decay);
  SINGA_GRID_STRIDE(i, n) { AdamElement(p[i], g[i], m[i], v[i], s); }
}

void AdamUpdate(const AdamArgs& a, Context* ctx) {
  const int64_t n = int64_t(a.param.Size());
  if (n == 0) return;
  const AdamHyper h{DevPtr<const float>(a.lr),      DevPtr<const float>(a.beta1),
                    DevPtr<const float>(a.beta2),   DevPtr<const float>(a.epsilon),
                    DevPtr<const float>(a.weight_decay), DevPtr<const float>(a.step)};
  AdamKernel<<<Blocks(n), kThreads, 0, Stream(ctx)>>>(
      MutDevPtr<float>(a.param), DevPtr<const float>(a.grad), MutDevPtr<float>(a.m),
      MutDevPtr<float>(a.v), h, a.decay, n);
  SINGA_CUDA_CHECK_LAUNCH("AdamUpdate");
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(SGDUpdate, kCuda, &cuda::SGDUpdate);
SINGA_REGISTER_KERNEL(AdamUpdate, kCuda, &cuda::AdamUpdate);

}  // namespace singa
