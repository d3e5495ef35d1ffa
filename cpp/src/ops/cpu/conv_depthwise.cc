// Depthwise convolution (in_channels == groups) on the CPU: direct loops per plane, no im2col and
// no GEMM, split over (sample, channel) planes between OpenMP threads. Output channel o reads
// input channel o / m (m = out_channels / in_channels).
#include <cstring>
#include <vector>

#include "conv_cpu.h"

namespace singa {
namespace cpu {
namespace {

constexpr size_t kGrain = 1 << 15;  // work (elements x taps) before a loop goes parallel

// y plane (conv_height x conv_width) += conv of one input plane with one kh x kw filter w.
void DepthwisePlane(const ConvHandle& h, const float* x, const float* w, float* y) {
  const size_t OW = h.conv_width, s = h.stride_w;
  ForEachTapRow(h, [&](size_t t, size_t oh, std::ptrdiff_t in, size_t lo, size_t hi) {
    if (in < 0) return;
    const float wt = w[t], *src = x + in;
    float* r = y + oh * OW;
    if (s == 1)
      for (size_t ow = lo; ow < hi; ++ow) r[ow] += wt * src[ow - lo];
    else
      for (size_t ow = lo; ow < hi; ++ow) r[ow] += wt * src[(ow - lo) * s];
  });
}

// dx plane += the adjoint of DepthwisePlane applied to a dy plane.
void DepthwisePlaneBackX(const ConvHandle& h, const float* dy, const float* w, float* dx) {
  const size_t OW = h.conv_width, s = h.stride_w;
  ForEachTapRow(h, [&](size_t t, size_t oh, std::ptrdiff_t in, size_t lo, size_t hi) {
    if (in < 0) return;
    const float wt = w[t], *r = dy + oh * OW;
    float* dst = dx + in;
    if (s == 1)
      for (size_t ow = lo; ow < hi; ++ow) dst[ow - lo] += wt * r[ow];
    else
      for (size_t ow = lo; ow < hi; ++ow) dst[(ow - lo) * s] += wt * r[ow];
  });
}

// dw (kh * kw values) += correlation of a dy plane with an input plane.
void DepthwisePlaneBackW(const ConvHandle& h, const float* dy, const float* x, double* dw) {
  const size_t OW = h.conv_width, s = h.stride_w;
  ForEachTapRow(h, [&](size_t t, size_t oh, std::ptrdiff_t in, size_t lo, size_t hi) {
    if (in < 0) return;
    const float *r = dy + oh * OW, *src = x + in;
    float acc = 0.f;
    if (s == 1)
      for (size_t ow = lo; ow < hi; ++ow) acc += r[ow] * src[ow - lo];
    else
      for (size_t ow = lo; ow < hi; ++ow) acc += r[ow] * src[(ow - lo) * s];
    dw[t] += acc;
  });
}

}  // namespace

Prepared<ConvFwdArgs> DepthwiseForward(const ConvFwdArgs&) {
  Prepared<ConvFwdArgs> p;
  p.run = [](const ConvFwdArgs& a, float*) {
    const ConvHandle& h = a.h;
    const size_t N = a.x.shape(0);
    const bool has_bias = !a.b.empty();
    const float *px = InPtr(a.x), *pw = InPtr(a.W), *pb = has_bias ? InPtr(a.b) : nullptr;
    float* py = OutPtr(a.y);
    const size_t OC = h.num_filters, m = OC / h.channels, T = h.kernel_h * h.kernel_w,
                 P = ColCols(h), in = h.height * h.width;
    const CpuEpilogue epi(a.epi, a.relu, OC, P);
#pragma omp parallel for schedule(static) if (N * OC * P * T >= kGrain)
    for (std::ptrdiff_t q = 0; q < std::ptrdiff_t(N * OC); ++q) {
      const size_t n = size_t(q) / OC, o = size_t(q) % OC;
      float* yp = py + size_t(q) * P;
      std::fill(yp, yp + P, has_bias ? pb[o] : 0.f);
      DepthwisePlane(h, px + (n * h.channels + o / m) * in, pw + o * T, yp);
      if (epi.relu_only() && !epi.empty()) ReluInPlace(yp, P);
      else if (!epi.empty()) epi.Apply(py, size_t(q), size_t(q) + 1, false);
    }
  };
  p.epilogue = kEpiBatchNorm | kEpiAdd;
  return p;
}

Prepared<ConvBwdXArgs> DepthwiseBackwardX(const ConvBwdXArgs&) {
  Prepared<ConvBwdXArgs> p;
  p.run = [](const ConvBwdXArgs& a, float*) {
    const ConvHandle& h = a.h;
    const size_t N = a.dy.shape(0);
    const float *pdy = InPtr(a.dy), *pw = InPtr(a.W);
    float* pdx = OutPtr(a.dx);
    const size_t C = h.channels, OC = h.num_filters, m = OC / C, T = h.kernel_h * h.kernel_w,
                 P = ColCols(h), in = h.height * h.width;
#pragma omp parallel for schedule(static) if (N * OC * P * T >= kGrain)
    for (std::ptrdiff_t q = 0; q < std::ptrdiff_t(N * C); ++q) {
      const size_t n = size_t(q) / C, c = size_t(q) % C;
      float* dxp = pdx + size_t(q) * in;
      std::memset(dxp, 0, in * sizeof(float));
      for (size_t o = c * m; o < (c + 1) * m; ++o)
        DepthwisePlaneBackX(h, pdy + (n * OC + o) * P, pw + o * T, dxp);
    }
  };
  return p;
}

Prepared<ConvBwdWArgs> DepthwiseBackwardW(const ConvBwdWArgs&) {
  Prepared<ConvBwdWArgs> p;
  p.run = [](const ConvBwdWArgs& a, float*) {
    const ConvHandle& h = a.h;
    const size_t N = a.x.shape(0);
    const float *pdy = N ? InPtr(a.dy) : nullptr, *px = N ? InPtr(a.x) : nullptr;
    float* pdw = OutPtr(a.dW);
    const size_t OC = h.num_filters, m = OC / h.channels, T = h.kernel_h * h.kernel_w,
                 P = ColCols(h), in = h.height * h.width;
    std::vector<double> acc(OC * T, 0.0);
    double* pa = acc.data();
#pragma omp parallel for schedule(static) if (N * OC * P * T >= kGrain)
    for (std::ptrdiff_t o = 0; o < std::ptrdiff_t(OC); ++o)
      for (size_t n = 0; n < N; ++n)
        DepthwisePlaneBackW(h, pdy + (n * OC + size_t(o)) * P,
                            px + (n * h.channels + size_t(o) / m) * in, pa + size_t(o) * T);
    for (size_t k = 0; k < OC * T; ++k) pdw[k] = float(acc[k]);
  };
  return p;
}

}  // namespace cpu
}  // namespace singa
