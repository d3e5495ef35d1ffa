// The geometry of 2-d pooling, one definition for the CPU (cpu/pooling.cc) and CUDA
// (cuda/pooling.cu) kernels: which input cells an output reads, what average pooling divides by,
// which cell a max routes its gradient to, and which outputs read a given input cell.
//
//   const PoolGeom g = PoolGeom::Of(handle);
//   const PoolWindow w = g.WindowOf(oh, ow);         // rows [w.h0, w.h1), columns [w.w0, w.w1)
//   float avg = sum_over_window / g.Divisor(w);
//   int at = FirstMaxOf(plane, g.W, w, [](float v) { return v; });   // row * W + col
//
// Windows are clipped to the input, so padding never takes part in a max; count_include_pad
// chooses whether the average divides by the full kernel or by the cells inside the input. The
// max routes each window's gradient to its FIRST (row-major) maximum: recomputed from x in the
// backward (no index tensor) and deterministic on ties (ReLU outputs hold many zeros). A window
// holding NaN pools to NaN (its first NaN), as in numpy and PyTorch.
// int arithmetic: a plane's sides fit in int, and int is what a GPU thread indexes fastest.
#pragma once

#include "singa/core/host_device.h"
#include "singa/ops/nn.h"

namespace singa {

/// Rows [h0, h1) and columns [w0, w1) of one output's window, clipped to the input.
struct PoolWindow {
  int h0, h1, w0, w1;
};

struct PoolGeom {
  int H, W, PH, PW, kh, kw, sh, sw, ph, pw;
  bool is_max, include_pad;

  static PoolGeom Of(const PoolingHandle& h) {
    return {int(h.height),   int(h.width),    int(h.pooled_height), int(h.pooled_width),
            int(h.kernel_h), int(h.kernel_w), int(h.stride_h),      int(h.stride_w),
            int(h.pad_h),    int(h.pad_w),    h.is_max_pooling,     h.count_include_pad};
  }

  SINGA_HOST_DEVICE PoolWindow WindowOf(int oh, int ow) const {
    const int hs = oh * sh - ph, ws = ow * sw - pw;
    return {hs > 0 ? hs : 0, hs + kh < H ? hs + kh : H, ws > 0 ? ws : 0,
            ws + kw < W ? ws + kw : W};
  }

  SINGA_HOST_DEVICE float Divisor(const PoolWindow& w) const {
    return include_pad ? float(kh * kw) : float((w.h1 - w.h0) * (w.w1 - w.w0));
  }

  /// The outputs whose windows hold input row r: [*o0, *o1] (empty when o0 > o1). Output o
  /// reads rows [o * sh - ph, o * sh - ph + kh), before clipping.
  SINGA_HOST_DEVICE void RowsReading(int r, int* o0, int* o1) const {
    Covering(r, kh, sh, ph, PH, o0, o1);
  }
  SINGA_HOST_DEVICE void ColsReading(int c, int* o0, int* o1) const {
    Covering(c, kw, sw, pw, PW, o0, o1);
  }

 private:
  SINGA_HOST_DEVICE static void Covering(int i, int k, int s, int p, int n, int* o0, int* o1) {
    const int lo = i + p - k + 1, hi = (i + p) / s;
    *o0 = lo <= 0 ? 0 : (lo + s - 1) / s;
    *o1 = hi < n - 1 ? hi : n - 1;
  }
};

/// Position (row * W + col) of the first maximum of window w in plane x, or of its first NaN
/// when it holds one (numpy's max and PyTorch's max pooling propagate NaN, and the gradient
/// goes to the NaN); to_float reads an element as float (identity for float, __half2float for
/// half).
template <typename T, typename ToFloat>
SINGA_HOST_DEVICE inline int FirstMaxOf(const T* x, int W, const PoolWindow& w, ToFloat to_float) {
  int best = w.h0 * W + w.w0;
  float m = to_float(x[best]);
  if (m != m) return best;
  for (int r = w.h0; r < w.h1; ++r)
    for (int c = w.w0; c < w.w1; ++c) {
      const float v = to_float(x[r * W + c]);
      if (!(v <= m)) {  // v > m, or v is NaN (m never is here)
        best = r * W + c;
        if (v != v) return best;
        m = v;
      }
    }
  return best;
}

}  // namespace singa
