// conv_cpu.h (private): the reference CPU convolution kernels' shared pieces: the tap walk used
// by im2col and the depthwise loops, and the entry points cpu/conv.cc registers.
#pragma once

#include <algorithm>
#include <cstddef>

#include "../epilogue_cpu.h"
#include "../nn_kernels.h"
#include "singa/ops/elementwise_functors.h"

namespace singa {
namespace cpu {

// Output positions per sample and channel.
inline size_t ColCols(const ConvHandle& h) { return h.conv_height * h.conv_width; }
// One input channel per group: direct loops, no im2col, no GEMM.
inline bool IsDepthwise(const ConvHandle& h) { return h.channels == h.group; }

// The range [lo, hi) of output columns ow whose input column ow * s + off lies in [0, W).
inline void ValidRange(std::ptrdiff_t off, size_t s, size_t W, size_t OW, size_t* lo,
                       size_t* hi) {
  const std::ptrdiff_t S = static_cast<std::ptrdiff_t>(s), Wi = static_cast<std::ptrdiff_t>(W);
  std::ptrdiff_t l = off >= 0 ? 0 : (-off + S - 1) / S;
  std::ptrdiff_t r = Wi - 1 - off < 0 ? 0 : (Wi - 1 - off) / S + 1;
  l = std::min<std::ptrdiff_t>(l, static_cast<std::ptrdiff_t>(OW));
  r = std::min<std::ptrdiff_t>(std::max(r, l), static_cast<std::ptrdiff_t>(OW));
  *lo = static_cast<size_t>(l);
  *hi = static_cast<size_t>(r);
}

// The walk shared by im2col and the depthwise loops: for each kernel tap t = i * kw + j and
// output row oh, calls f(t, oh, in, lo, hi) where output columns [lo, hi) of that row read the
// input plane at in + (ow - lo) * stride_w; in < 0 marks a row that lies wholly in the padding.
template <typename F>
inline void ForEachTapRow(const ConvHandle& h, F&& f) {
  for (size_t i = 0; i < h.kernel_h; ++i)
    for (size_t j = 0; j < h.kernel_w; ++j) {
      const std::ptrdiff_t offw = std::ptrdiff_t(j * h.dilation_w) - std::ptrdiff_t(h.pad_w);
      size_t lo, hi;
      ValidRange(offw, h.stride_w, h.width, h.conv_width, &lo, &hi);
      for (size_t oh = 0; oh < h.conv_height; ++oh) {
        const std::ptrdiff_t ih =
            std::ptrdiff_t(oh * h.stride_h + i * h.dilation_h) - std::ptrdiff_t(h.pad_h);
        const bool in = ih >= 0 && ih < std::ptrdiff_t(h.height) && lo < hi;
        f(i * h.kernel_w + j, oh,
          in ? ih * std::ptrdiff_t(h.width) + std::ptrdiff_t(lo * h.stride_w) + offw : -1, lo, hi);
      }
    }
}

// y = max(0, y) over n values (the fused ReLU of Conv2dForward), NaN kept (the table's ReLU).
inline void ReluInPlace(float* y, size_t n) {
  const fn::ReLUOp relu;
  for (size_t i = 0; i < n; ++i) y[i] = relu(y[i]);
}

// cpu/conv_im2col.cc: im2col + OpenBLAS sgemm (every convolution but depthwise).
void Im2Col(const float* x, const ConvHandle& h, size_t c0, size_t c1, float* col, size_t ld);
void Col2Im(const float* col, const ConvHandle& h, size_t c0, size_t c1, float* dx, size_t ld);
Prepared<ConvFwdArgs> GemmForward(const ConvFwdArgs& a);
Prepared<ConvBwdXArgs> GemmBackwardX(const ConvBwdXArgs& a);
Prepared<ConvBwdWArgs> GemmBackwardW(const ConvBwdWArgs& a);
// cpu/conv_depthwise.cc: direct loops per (sample, channel) plane.
Prepared<ConvFwdArgs> DepthwiseForward(const ConvFwdArgs& a);
Prepared<ConvBwdXArgs> DepthwiseBackwardX(const ConvBwdXArgs& a);
Prepared<ConvBwdWArgs> DepthwiseBackwardW(const ConvBwdWArgs& a);

}  // namespace cpu
}  // namespace singa
