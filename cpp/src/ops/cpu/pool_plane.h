// One (n, c) plane of 2-d pooling on the host: the reference kernels (cpu/pooling.cc) run these
// on every plane; the oneDNN kernels (dnnl/pooling.cc) rerun them on the planes that hold a NaN,
// which oneDNN's max pooling skips (it returned 3 for the window [[nan, 1], [2, 3]]).
//
//   for each plane p:  PoolPlaneForward(g, x + p * H * W, y + p * PH * PW);
//   if (PlaneHasNaN(xp, H * W)) PoolPlaneBackward(g, xp, dyp, dxp);
//
// T is float or BFloat16 (elem_io.h: computed in float, each output rounded once; a bfloat16
// backward sums the overlapping windows' gradients in float before rounding).
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../pool_window.h"
#include "elem_io.h"

namespace singa {
namespace cpu {

/// Whether any of the n values is NaN (one pass without early exit, vectorised by omp simd).
template <typename T>
bool PlaneHasNaN(const T* x, size_t n) {
  int nan = 0;
#pragma omp simd reduction(| : nan)
  for (size_t i = 0; i < n; ++i) nan |= Ld(x, i) != Ld(x, i);
  return nan != 0;
}

/// y (PH x PW) from x (H x W): the max (NaN if the window holds one) or the average.
template <typename T>
void PoolPlaneForward(const PoolGeom& g, const T* xp, T* yp) {
  for (int oh = 0; oh < g.PH; ++oh) {
    for (int ow = 0; ow < g.PW; ++ow) {
      const PoolWindow w = g.WindowOf(oh, ow);
      float v;
      if (g.is_max) {
        v = ToF(xp[FirstMaxOf(xp, g.W, w, [](T e) { return ToF(e); })]);
      } else {
        float s = 0.f;
        for (int r = w.h0; r < w.h1; ++r)
          for (int c = w.w0; c < w.w1; ++c) s += ToF(xp[r * g.W + c]);
        v = s / g.Divisor(w);
      }
      St(yp, size_t(oh) * g.PW + ow, v);
    }
  }
}

/// dx (H x W float, overwritten) given dy (PH x PW) and the forward input x.
template <typename T>
void PoolPlaneBackwardF(const PoolGeom& g, const T* xp, const T* dyp, float* dxp) {
  std::memset(dxp, 0, size_t(g.H) * g.W * sizeof(float));
  for (int oh = 0; oh < g.PH; ++oh) {
    for (int ow = 0; ow < g.PW; ++ow) {
      const PoolWindow w = g.WindowOf(oh, ow);
      const float grad = ToF(dyp[oh * g.PW + ow]);
      if (g.is_max) {
        dxp[FirstMaxOf(xp, g.W, w, [](T e) { return ToF(e); })] += grad;
      } else {
        const float v = grad / g.Divisor(w);
        for (int r = w.h0; r < w.h1; ++r)
          for (int c = w.w0; c < w.w1; ++c) dxp[r * g.W + c] += v;
      }
    }
  }
}

/// dx (H x W, overwritten) given dy (PH x PW) and the forward input x.
template <typename T>
void PoolPlaneBackward(const PoolGeom& g, const T* xp, const T* dyp, T* dxp) {
  if constexpr (std::is_same_v<T, float>) {
    PoolPlaneBackwardF(g, xp, dyp, dxp);
  } else {
    const size_t n = size_t(g.H) * g.W;
    thread_local std::vector<float> acc;
    acc.resize(n);
    PoolPlaneBackwardF(g, xp, dyp, acc.data());
    for (size_t i = 0; i < n; ++i) St(dxp, i, acc[i]);
  }
}

}  // namespace cpu
}  // namespace singa
