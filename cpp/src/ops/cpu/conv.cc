// The reference CPU convolution kernels (backend kCpuRef): depthwise convolutions run direct
// loops (cpu/conv_depthwise.cc), every other one im2col + OpenBLAS sgemm (cpu/conv_im2col.cc).
#include "conv_cpu.h"

namespace singa {
namespace cpu {
namespace {

constexpr size_t kGrain = 1 << 15;

Prepared<ConvFwdArgs> Forward(const ConvFwdArgs& a) {
  return IsDepthwise(a.h) ? DepthwiseForward(a) : GemmForward(a);
}
Prepared<ConvBwdXArgs> BackwardX(const ConvBwdXArgs& a) {
  return IsDepthwise(a.h) ? DepthwiseBackwardX(a) : GemmBackwardX(a);
}
Prepared<ConvBwdWArgs> BackwardW(const ConvBwdWArgs& a) {
  return IsDepthwise(a.h) ? DepthwiseBackwardW(a) : GemmBackwardW(a);
}

// db[o] = sum of dy[:, o, :, :], accumulated in double across samples.
Prepared<ConvBwdBArgs> BackwardB(const ConvBwdBArgs&) {
  Prepared<ConvBwdBArgs> p;
  p.run = [](const ConvBwdBArgs& a, float*) {
    const size_t N = a.dy.shape(0), OC = a.h.num_filters, P = ColCols(a.h);
    const float* pdy = N ? InPtr(a.dy) : nullptr;
    float* pdb = OutPtr(a.db);
#pragma omp parallel for schedule(static) if (N * OC * P >= kGrain)
    for (std::ptrdiff_t o = 0; o < static_cast<std::ptrdiff_t>(OC); ++o) {
      double acc = 0;
      for (size_t n = 0; n < N; ++n) {
        const float* r = pdy + (n * OC + size_t(o)) * P;
        float s = 0.f;
        for (size_t i = 0; i < P; ++i) s += r[i];
        acc += s;
      }
      pdb[o] = static_cast<float>(acc);
    }
  };
  return p;
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(Conv2dForward, kCpuRef, cpu::Forward);
SINGA_REGISTER_KERNEL(Conv2dBackwardX, kCpuRef, cpu::BackwardX);
SINGA_REGISTER_KERNEL(Conv2dBackwardW, kCpuRef, cpu::BackwardW);
SINGA_REGISTER_KERNEL(Conv2dBackwardB, kCpuRef, cpu::BackwardB);
// The bias gradient is one cheap reduction; oneDNN's would need dy in its own primitive call.
SINGA_KERNEL_FALLBACK(Conv2dBackwardB, kCpuDnnl, kCpuRef);

}  // namespace singa
