// 2-d max / average pooling, the reference CPU kernels (backend kCpuRef).
//
// Each (n, c) plane is independent: planes are split between OpenMP threads. The window, the
// divisor and the max's routing are ../pool_window.h's (shared with the CUDA kernels).
#include <cstring>

#include "../nn_kernels.h"
#include "../pool_window.h"

namespace singa {
namespace cpu {
namespace {

constexpr size_t kGrain = 1 << 14;

inline float AsIs(float v) { return v; }

Prepared<PoolFwdArgs> PoolForward(const PoolFwdArgs&) {
  Prepared<PoolFwdArgs> r;
  r.run = [](const PoolFwdArgs& a, float*) {
    const PoolGeom g = PoolGeom::Of(a.h);
    const float* px = InPtr(a.x);
    float* py = OutPtr(a.y);
    const size_t in = size_t(g.H) * g.W, out = size_t(g.PH) * g.PW;
    const std::ptrdiff_t planes = std::ptrdiff_t(a.x.shape(0) * a.h.channels);
#pragma omp parallel for schedule(static) if (size_t(planes) * in >= kGrain)
    for (std::ptrdiff_t p = 0; p < planes; ++p) {
      const float* xp = px + size_t(p) * in;
      float* yp = py + size_t(p) * out;
      for (int oh = 0; oh < g.PH; ++oh) {
        for (int ow = 0; ow < g.PW; ++ow) {
          const PoolWindow w = g.WindowOf(oh, ow);
          float v;
          if (g.is_max) {
            v = xp[FirstMaxOf(xp, g.W, w, AsIs)];
          } else {
            float s = 0.f;
            for (int r = w.h0; r < w.h1; ++r)
              for (int c = w.w0; c < w.w1; ++c) s += xp[r * g.W + c];
            v = s / g.Divisor(w);
          }
          yp[oh * g.PW + ow] = v;
        }
      }
    }
  };
  return r;
}

Prepared<PoolBwdArgs> PoolBackward(const PoolBwdArgs&) {
  Prepared<PoolBwdArgs> r;
  r.run = [](const PoolBwdArgs& a, float*) {
    const PoolGeom g = PoolGeom::Of(a.h);
    const float* pdy = InPtr(a.dy);
    const float* px = InPtr(a.x);
    float* pdx = OutPtr(a.dx);
    const size_t in = size_t(g.H) * g.W, out = size_t(g.PH) * g.PW;
    const std::ptrdiff_t planes = std::ptrdiff_t(a.x.shape(0) * a.h.channels);
#pragma omp parallel for schedule(static) if (size_t(planes) * in >= kGrain)
    for (std::ptrdiff_t p = 0; p < planes; ++p) {
      const float* xp = px + size_t(p) * in;
      const float* dyp = pdy + size_t(p) * out;
      float* dxp = pdx + size_t(p) * in;
      std::memset(dxp, 0, in * sizeof(float));
      for (int oh = 0; oh < g.PH; ++oh) {
        for (int ow = 0; ow < g.PW; ++ow) {
          const PoolWindow w = g.WindowOf(oh, ow);
          const float grad = dyp[oh * g.PW + ow];
          if (g.is_max) {
            dxp[FirstMaxOf(xp, g.W, w, AsIs)] += grad;
          } else {
            const float v = grad / g.Divisor(w);
            for (int r = w.h0; r < w.h1; ++r)
              for (int c = w.w0; c < w.w1; ++c) dxp[r * g.W + c] += v;
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
