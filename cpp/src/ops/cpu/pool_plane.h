// One (n, c) plane of 2-d pooling on the host: the reference kernels (cpu/pooling.cc) run these
// on every plane; the oneDNN kernels (dnnl/pooling.cc) rerun them on the planes that hold a NaN,
// which oneDNN's max pooling skips (it returned 3 for the window [[nan, 1], [2, 3]]).
//
//   for each plane p:  PoolPlaneForward(g, x + p * H * W, y + p * PH * PW);
//   if (PlaneHasNaN(xp, H * W)) PoolPlaneBackward(g, xp, dyp, dxp);
#pragma once

#include <cstddef>
#include <cstring>

#include "../pool_window.h"

namespace singa {
namespace cpu {

inline float AsIs(float v) { return v; }

/// Whether any of the n values is NaN (one pass without early exit, vectorised by omp simd).
inline bool PlaneHasNaN(const float* x, size_t n) {
  int nan = 0;
#pragma omp simd reduction(| : nan)
  for (size_t i = 0; i < n; ++i) nan |= x[i] != x[i];
  return nan != 0;
}

/// y (PH x PW) from x (H x W): the max (NaN if the window holds one) or the average.
inline void PoolPlaneForward(const PoolGeom& g, const float* xp, float* yp) {
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

/// dx (H x W, overwritten) given dy (PH x PW) and the forward input x.
inline void PoolPlaneBackward(const PoolGeom& g, const float* xp, const float* dyp, float* dxp) {
  std::memset(dxp, 0, size_t(g.H) * g.W * sizeof(float));
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

}  // namespace cpu
}  // namespace singa
