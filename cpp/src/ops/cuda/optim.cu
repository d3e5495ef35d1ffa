// CUDA kernel of the fused SGD update (front: ops/optim.cc; CPU reference: ops/cpu/optim.cc).
// The hyper-parameters are one-element device tensors read inside the kernel, so a replayed
// graph (or a captured CUDA Graph) uses their current values.
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

struct SGDHyper {
  const float *lr, *momentum, *dampening, *weight_decay;
};

__global__ void SGDKernel(float* p, const float* g, float* buf, SGDHyper h, bool nesterov,
                          int64_t n) {
  const float rate = *h.lr, mom = *h.momentum, wd = *h.weight_decay;
  const float one_minus_damp = 1.f - *h.dampening;
  SINGA_GRID_STRIDE(i, n) {
    const float d = g[i] + p[i] * wd;
    if (buf == nullptr) {
      p[i] = p[i] - d * rate;
    } else {
      const float v = buf[i] * mom + d * one_minus_damp;
      buf[i] = v;
      p[i] = p[i] - (nesterov ? d + v * mom : v) * rate;
    }
  }
}

void SGDUpdate(const SGDArgs& a, Context* ctx) {
  const int64_t n = int64_t(a.param.Size());
  if (n == 0) return;
  const SGDHyper h{DevPtr<const float>(a.lr), DevPtr<const float>(a.momentum),
                   DevPtr<const float>(a.dampening), DevPtr<const float>(a.weight_decay)};
  float* buf = a.has_buf ? MutDevPtr<float>(a.buf) : nullptr;
  SGDKernel<<<Blocks(n), kThreads, 0, Stream(ctx)>>>(MutDevPtr<float>(a.param),
                                                     DevPtr<const float>(a.grad), buf, h,
                                                     a.nesterov, n);
  SINGA_CUDA_CHECK_LAUNCH("SGDUpdate");
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(SGDUpdate, kCuda, &cuda::SGDUpdate);

}  // namespace singa
