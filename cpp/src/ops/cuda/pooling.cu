// 2-d max / average pooling on the GPU (backend kCuda), our own kernels for every mode.
// Fronts: ../pooling.cc; the same numbers as the reference kernels (../cpu/pooling.cc).
//
// Why not cuDNN: the CPU's semantics are windows clipped to the input (padding never wins a max),
// count_include_pad choosing the divisor, and a max backward that routes each window's gradient
// to its FIRST (row-major) maximum only. cuDNN's max backward routes ties by its own rule, so the
// gradients would differ on inputs with repeated values (ReLU outputs: many zeros). Writing both
// passes ourselves keeps one definition of the window (../pool_window.h, the CPU's too).
//
// Forward: one thread per output. Backward: one thread per input element, gathering from the
// windows that contain it in increasing (oh, ow) order, which is the order the CPU kernel adds
// them in: the sums are bit-identical and no atomics are needed (deterministic replays).
// float32 and float16 (stored half, computed in float).
#include <cuda_fp16.h>

#include "../nn_kernels.h"
#include "../pool_window.h"
#include "cudnn_common.h"

namespace singa {
namespace cuda {
namespace {

// Reads a stored element as float (half or float).
struct ToFloat {
  template <typename T>
  __device__ float operator()(T v) const {
    return ToF(v);
  }
};

template <typename T>
__global__ void PoolForwardKernel(PoolGeom g, size_t total, const T* x, T* y) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(blockDim.x) * gridDim.x) {
    const int ow = int(i % g.PW), oh = int((i / g.PW) % g.PH);
    const size_t plane = i / (size_t(g.PW) * g.PH);
    const T* xp = x + plane * size_t(g.H) * g.W;
    const PoolWindow w = g.WindowOf(oh, ow);
    float v;
    if (g.is_max) {
      v = ToF(xp[FirstMaxOf(xp, g.W, w, ToFloat())]);
    } else {
      float s = 0.f;
      for (int r = w.h0; r < w.h1; ++r)
        for (int c = w.w0; c < w.w1; ++c) s += ToF(xp[r * g.W + c]);
      v = s / g.Divisor(w);
    }
    y[i] = FromF<T>(v);
  }
}

template <typename T>
__global__ void PoolBackwardKernel(PoolGeom g, size_t total, const T* dy, const T* x, T* dx) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(blockDim.x) * gridDim.x) {
    const int c = int(i % g.W), r = int((i / g.W) % g.H);
    const size_t plane = i / (size_t(g.W) * g.H);
    const T* xp = x + plane * size_t(g.H) * g.W;
    const T* dyp = dy + plane * size_t(g.PH) * g.PW;
    const int pos = r * g.W + c;
    int oh0, oh1, ow0, ow1;  // the outputs whose windows hold this row / column
    g.RowsReading(r, &oh0, &oh1);
    g.ColsReading(c, &ow0, &ow1);
    float acc = 0.f;
    for (int oh = oh0; oh <= oh1; ++oh)
      for (int ow = ow0; ow <= ow1; ++ow) {
        const PoolWindow w = g.WindowOf(oh, ow);
        const float grad = ToF(dyp[oh * g.PW + ow]);
        if (g.is_max) {
          if (FirstMaxOf(xp, g.W, w, ToFloat()) == pos) acc += grad;
        } else {
          acc += grad / g.Divisor(w);
        }
      }
    dx[i] = FromF<T>(acc);
  }
}

template <typename T>
void LaunchForward(const PoolFwdArgs& a) {
  const PoolGeom g = PoolGeom::Of(a.h);
  const size_t total = a.y.Size();
  const cudaStream_t s = Stream(a.y.device()->context());
  PoolForwardKernel<T><<<Blocks(total), kThreads, 0, s>>>(
      g, total, static_cast<const T*>(Data(a.x)), static_cast<T*>(MutData(a.y)));
  SINGA_CUDA_CHECK_LAUNCH("Pool2dForward");
}

template <typename T>
void LaunchBackward(const PoolBwdArgs& a) {
  const PoolGeom g = PoolGeom::Of(a.h);
  const size_t total = a.dx.Size();
  const cudaStream_t s = Stream(a.dx.device()->context());
  PoolBackwardKernel<T><<<Blocks(total), kThreads, 0, s>>>(
      g, total, static_cast<const T*>(Data(a.dy)), static_cast<const T*>(Data(a.x)),
      static_cast<T*>(MutData(a.dx)));
  SINGA_CUDA_CHECK_LAUNCH("Pool2dBackward");
}

Prepared<PoolFwdArgs> PoolForward(const PoolFwdArgs&) {
  Prepared<PoolFwdArgs> r;
  r.run = [](const PoolFwdArgs& a, float*) {
    if (a.x.data_type() == kFloat16)
      LaunchForward<__half>(a);
    else
      LaunchForward<float>(a);
  };
  return r;
}

Prepared<PoolBwdArgs> PoolBackward(const PoolBwdArgs&) {
  Prepared<PoolBwdArgs> r;
  r.run = [](const PoolBwdArgs& a, float*) {
    if (a.x.data_type() == kFloat16)
      LaunchBackward<__half>(a);
    else
      LaunchBackward<float>(a);
  };
  return r;
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(Pool2dForward, kCuda, cuda::PoolForward);
SINGA_REGISTER_KERNEL(Pool2dBackward, kCuda, cuda::PoolBackward);

}  // namespace singa
