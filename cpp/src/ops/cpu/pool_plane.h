// One (n, c) plane of 2-d pooling on the host: the reference kernels (cpu/pooling.cc) run these
// on every plane; the oneDNN kernels (dnnl/pooling.cc) rerun them on the planes that hold a NaN,
// which oneDNN's max pooling skips (it returned 3 for the window [[nan, 1], [2, 3]]).
//
//   for each plane p:  PoolPlaneForward(g, x + p * H * W, y + p * PH * PW);
//   if (PlaneHasNaN(xp, H * W)) PoolPlaneBackward(g, xp, dyp, dxp);
//   ForEachNaNPlane(layout, N, C, H * W, x, [&](size_t n, size_t c) {   // any MemLayout
//     Gather(x, PlaneOf(layout, C, H * W, n, c), H * W, plane);  ...  });
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
#include "singa/core/layout.h"

namespace singa {
namespace cpu {

/// Where plane (n, c) of an (N, C, P-pixel) block stored in layout l lies: its pixel k at
/// base + k * step (singa/core/layout.h).
struct PlaneAt {
  size_t base, step;
};
inline PlaneAt PlaneOf(MemLayout l, size_t C, size_t P, size_t n, size_t c) {
  if (l == MemLayout::kChannels16) return {(n * C + c / 16 * 16) * P + c % 16, 16};
  if (l == MemLayout::kChannelsLast) return {n * P * C + c, C};
  return {(n * C + c) * P, 1};
}
/// The plane at `at` as P contiguous values, and back.
template <typename T>
void Gather(const T* x, PlaneAt at, size_t P, T* plane) {
  for (size_t k = 0; k < P; ++k) plane[k] = x[at.base + k * at.step];
}
template <typename T>
void Scatter(const T* plane, PlaneAt at, size_t P, T* x) {
  for (size_t k = 0; k < P; ++k) x[at.base + k * at.step] = plane[k];
}

/// Whether any of the n values is NaN (one pass without early exit, vectorised by omp simd).
template <typename T>
bool PlaneHasNaN(const T* x, size_t n) {
  int nan = 0;
#pragma omp simd reduction(| : nan)
  for (size_t i = 0; i < n; ++i) nan |= Ld(x, i) != Ld(x, i);
  return nan != 0;
}

/// fix(n, c) for each plane of x (N images of C planes of P pixels, in layout l) holding a NaN:
/// one contiguous scan per image (an image is contiguous in every layout), then plane by plane
/// only in an image that has one. Images are split between threads.
template <typename T, typename Fix>
void ForEachNaNPlane(MemLayout l, size_t N, size_t C, size_t P, const T* x, Fix fix) {
  const std::ptrdiff_t images = std::ptrdiff_t(N);
#pragma omp parallel for schedule(static) if (N > 1 && N * C * P >= (1 << 14))
  for (std::ptrdiff_t n = 0; n < images; ++n) {
    if (!PlaneHasNaN(x + size_t(n) * C * P, C * P)) continue;
    for (size_t c = 0; c < C; ++c) {
      const PlaneAt at = PlaneOf(l, C, P, size_t(n), c);
      bool nan = false;
      for (size_t k = 0; k < P && !nan; ++k) {
        const float v = Ld(x, at.base + k * at.step);
        nan = v != v;
      }
      if (nan) fix(size_t(n), c);
    }
  }
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
