// 2-d max / average pooling, the reference CPU kernels (backend kCpuRef).
//
// Each (n, c) plane is independent: planes are split between OpenMP threads. Windows are clipped
// to the input, so padding never takes part in a max; the max backward recomputes each window's
// first maximum from x (the same scan as the forward), which needs no index tensor and routes
// the gradient deterministically.
#include <algorithm>
#include <cstring>

#include "../nn_kernels.h"

namespace singa {
namespace cpu {
namespace {

constexpr size_t kGrain = 1 << 14;

// The window of output (oh, ow), clipped to the input: rows [h0, h1), columns [w0, w1).
struct Window {
  size_t h0, h1, w0, w1;
};

inline Window WindowOf(const PoolingHandle& h, size_t oh, size_t ow) {
  const std::ptrdiff_t hs = std::ptrdiff_t(oh * h.stride_h) - std::ptrdiff_t(h.pad_h);
  const std::ptrdiff_t ws = std::ptrdiff_t(ow * h.stride_w) - std::ptrdiff_t(h.pad_w);
  const std::ptrdiff_t he = hs + std::ptrdiff_t(h.kernel_h), we = ws + std::ptrdiff_t(h.kernel_w);
  Window w;
  w.h0 = size_t(std::max<std::ptrdiff_t>(hs, 0));
  w.w0 = size_t(std::max<std::ptrdiff_t>(ws, 0));
  w.h1 = size_t(std::min<std::ptrdiff_t>(he, std::ptrdiff_t(h.height)));
  w.w1 = size_t(std::min<std::ptrdiff_t>(we, std::ptrdiff_t(h.width)));
  return w;
}

inline float Divisor(const PoolingHandle& h, const Window& w) {
  return h.count_include_pad ? float(h.kernel_h * h.kernel_w)
                             : float((w.h1 - w.h0) * (w.w1 - w.w0));
}

// Position (row * W + col) of the first maximum of window w in plane x.
inline size_t ArgmaxOf(const float* x, size_t W, const Window& w) {
  size_t best = w.h0 * W + w.w0;
  float m = x[best];
  for (size_t r = w.h0; r < w.h1; ++r)
    for (size_t c = w.w0; c < w.w1; ++c)
      if (x[r * W + c] > m) {
        m = x[r * W + c];
        best = r * W + c;
      }
  return best;
}

Prepared<PoolFwdArgs> PoolForward(const PoolFwdArgs&) {
  Prepared<PoolFwdArgs> r;
  r.run = [](const PoolFwdArgs& a, float*) {
    const PoolingHandle& h = a.h;
    const size_t N = a.x.shape(0);
    const float* px = InPtr(a.x);
    float* py = OutPtr(a.y);
    const size_t in = h.height * h.width, out = h.pooled_height * h.pooled_width;
    const std::ptrdiff_t planes = std::ptrdiff_t(N * h.channels);
#pragma omp parallel for schedule(static) if (size_t(planes) * in >= kGrain)
    for (std::ptrdiff_t p = 0; p < planes; ++p) {
      const float* xp = px + size_t(p) * in;
      float* yp = py + size_t(p) * out;
      for (size_t oh = 0; oh < h.pooled_height; ++oh) {
        for (size_t ow = 0; ow < h.pooled_width; ++ow) {
          const Window w = WindowOf(h, oh, ow);
          float v;
          if (h.is_max_pooling) {
            v = xp[ArgmaxOf(xp, h.width, w)];
          } else {
            float s = 0.f;
            for (size_t r = w.h0; r < w.h1; ++r)
              for (size_t c = w.w0; c < w.w1; ++c) s += xp[r * h.width + c];
            v = s / Divisor(h, w);
          }
          yp[oh * h.pooled_width + ow] = v;
        }
      }
    }
  };
  return r;
}

Prepared<PoolBwdArgs> PoolBackward(const PoolBwdArgs&) {
  Prepared<PoolBwdArgs> r;
  r.run = [](const PoolBwdArgs& a, float*) {
    const PoolingHandle& h = a.h;
    const size_t N = a.x.shape(0);
    const float* pdy = InPtr(a.dy);
    const float* px = InPtr(a.x);
    float* pdx = OutPtr(a.dx);
    const size_t in = h.height * h.width, out = h.pooled_height * h.pooled_width;
    const std::ptrdiff_t planes = std::ptrdiff_t(N * h.channels);
#pragma omp parallel for schedule(static) if (size_t(planes) * in >= kGrain)
    for (std::ptrdiff_t p = 0; p < planes; ++p) {
      const float* xp = px + size_t(p) * in;
      const float* dyp = pdy + size_t(p) * out;
      float* dxp = pdx + size_t(p) * in;
      std::memset(dxp, 0, in * sizeof(float));
      for (size_t oh = 0; oh < h.pooled_height; ++oh) {
        for (size_t ow = 0; ow < h.pooled_width; ++ow) {
          const Window w = WindowOf(h, oh, ow);
          const float g = dyp[oh * h.pooled_width + ow];
          if (h.is_max_pooling) {
            dxp[ArgmaxOf(xp, h.width, w)] += g;
          } else {
            const float v = g / Divisor(h, w);
            for (size_t r = w.h0; r < w.h1; ++r)
              for (size_t c = w.w0; c < w.w1; ++c) dxp[r * h.width + c] += v;
          }
        }
      }
    }
  };
  return r;
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(Pool2dForward, kCpuRef, cpu::PoolForward);
SINGA_REGISTER_KERNEL(Pool2dBackward, kCpuRef, cpu::PoolBackward);

}  // namespace singa
