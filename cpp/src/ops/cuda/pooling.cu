// 2-d max / average pooling on the GPU (backend kCuda), our own kernels for every mode.
// Fronts: ../pooling.cc; the same numbers as the reference kernels (../cpu/pooling.cc).
//
// Why not cuDNN: the CPU's semantics are windows clipped to the input (padding never wins a max),
// count_include_pad choosing the divisor, and a max backward that routes each window's gradient
// to its FIRST (row-major) maximum only. cuDNN's max backward routes ties by its own rule, so the
// gradients would differ on inputs with repeated values (ReLU outputs: many zeros). Writing both
// passes ourselves keeps one definition of the window (WindowOf below, the CPU's).
//
// Forward: one thread per output. Backward: one thread per input element, gathering from the
// windows that contain it in increasing (oh, ow) order, which is the order the CPU kernel adds
// them in: the sums are bit-identical and no atomics are needed (deterministic replays).
// float32 and float16 (stored half, computed in float).
#include <cuda_fp16.h>

#include "../nn_kernels.h"
#include "cudnn_common.h"

namespace singa {
namespace cuda {
namespace {

struct PoolGeom {
  int H, W, PH, PW, kh, kw, sh, sw, ph, pw;
  bool is_max, include_pad;
};

PoolGeom GeomOf(const PoolingHandle& h) {
  return {int(h.height),  int(h.width),    int(h.pooled_height), int(h.pooled_width),
          int(h.kernel_h), int(h.kernel_w), int(h.stride_h),      int(h.stride_w),
          int(h.pad_h),    int(h.pad_w),    h.is_max_pooling,     h.count_include_pad};
}

// The window of output (oh, ow), clipped to the input: rows [h0, h1), columns [w0, w1).
struct Win {
  int h0, h1, w0, w1;
};
__device__ inline Win WindowOf(const PoolGeom& g, int oh, int ow) {
  const int hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
  return {max(hs, 0), min(hs + g.kh, g.H), max(ws, 0), min(ws + g.kw, g.W)};
}
__device__ inline float Divisor(const PoolGeom& g, const Win& w) {
  return g.include_pad ? float(g.kh * g.kw) : float((w.h1 - w.h0) * (w.w1 - w.w0));
}
// Position (row * W + col) of the first maximum of window w in plane x.
template <typename T>
__device__ inline int ArgmaxOf(const T* x, int W, const Win& w) {
  int best = w.h0 * W + w.w0;
  float m = ToF(x[best]);
  for (int r = w.h0; r < w.h1; ++r)
    for (int c = w.w0; c < w.w1; ++c) {
      const float v = ToF(x[r * W + c]);
      if (v > m) {
        m = v;
        best = r * W + c;
      }
    }
  return best;
}

template <typename T>
__global__ void PoolForwardKernel(PoolGeom g, size_t total, const T* x, T* y) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(blockDim.x) * gridDim.x) {
    const int ow = int(i % g.PW), oh = int((i / g.PW) % g.PH);
    const size_t plane = i / (size_t(g.PW) * g.PH);
    const T* xp = x + plane * size_t(g.H) * g.W;
    const Win w = WindowOf(g, oh, ow);
    float v;
    if (g.is_max) {
      v = ToF(xp[ArgmaxOf(xp, g.W, w)]);
    } else {
      float s = 0.f;
      for (int r = w.h0; r < w.h1; ++r)
        for (int c = w.w0; c < w.w1; ++c) s += ToF(xp[r * g.W + c]);
      v = s / Divisor(g, w);
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
    // Outputs whose window [o * s - p, o * s - p + k) holds this row / column.
    const int lh = r + g.ph - g.kh + 1, lw = c + g.pw - g.kw + 1;
    const int oh0 = lh <= 0 ? 0 : (lh + g.sh - 1) / g.sh, oh1 = min((r + g.ph) / g.sh, g.PH - 1);
    const int ow0 = lw <= 0 ? 0 : (lw + g.sw - 1) / g.sw, ow1 = min((c + g.pw) / g.sw, g.PW - 1);
    float acc = 0.f;
    for (int oh = oh0; oh <= oh1; ++oh)
      for (int ow = ow0; ow <= ow1; ++ow) {
        const Win w = WindowOf(g, oh, ow);
        const float grad = ToF(dyp[oh * g.PW + ow]);
        if (g.is_max) {
          if (ArgmaxOf(xp, g.W, w) == pos) acc += grad;
        } else {
          acc += grad / Divisor(g, w);
        }
      }
    dx[i] = FromF<T>(acc);
  }
}

template <typename T>
void LaunchForward(const PoolFwdArgs& a) {
  const PoolGeom g = GeomOf(a.h);
  const size_t total = a.y.Size();
  const cudaStream_t s = Stream(a.y.device()->context());
  PoolForwardKernel<T><<<Blocks(total), kThreads, 0, s>>>(
      g, total, static_cast<const T*>(Data(a.x)), static_cast<T*>(MutData(a.y)));
  SINGA_CUDA_CHECK_LAUNCH("Pool2dForward");
}

template <typename T>
void LaunchBackward(const PoolBwdArgs& a) {
  const PoolGeom g = GeomOf(a.h);
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
