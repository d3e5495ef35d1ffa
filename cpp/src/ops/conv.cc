// 2-d convolution on the CPU (see singa/ops/nn.h): the handle, the checks, and the depthwise
// loops. Every other convolution is im2col + OpenBLAS sgemm, in conv_im2col.cc; this file owns
// Im2Col / Col2Im because they share the tap walk (ForEachTapRow) with the depthwise loops.
//
// Depthwise convolutions (in_channels == groups) skip im2col and GEMM: direct loops per plane,
// split over (sample, channel) planes between OpenMP threads.
#include <algorithm>
#include <cstring>

#include "singa/ops/nn.h"

namespace singa {
namespace {

constexpr size_t kGrain = 1 << 15;  // work (elements x taps) before a depthwise loop goes parallel

// Data pointers, fetched inside kernels (a replayed graph may move a block between runs).
const float* In(const Tensor& t) { return static_cast<const float*>(t.block()->data()); }
float* Out(const Tensor& t) { return static_cast<float*>(t.block()->mutable_data()); }

void PairOf(const char* op, const char* what, const std::vector<size_t>& v, size_t* h,
            size_t* w) {
  SINGA_CHECK_VALUE(v.size() == 1 || v.size() == 2,
                    op << ": " << what << " needs 1 or 2 values (h, w), got " << v.size());
  *h = v[0];
  *w = v.size() == 2 ? v[1] : v[0];
}

// Output positions per sample and channel.
size_t ColCols(const ConvHandle& h) { return h.conv_height * h.conv_width; }

// The range [lo, hi) of output columns ow whose input column ow * s + off lies in [0, W).
void ValidRange(std::ptrdiff_t off, size_t s, size_t W, size_t OW, size_t* lo, size_t* hi) {
  const std::ptrdiff_t S = static_cast<std::ptrdiff_t>(s), Wi = static_cast<std::ptrdiff_t>(W);
  std::ptrdiff_t l = off >= 0 ? 0 : (-off + S - 1) / S;
  std::ptrdiff_t r = Wi - 1 - off < 0 ? 0 : (Wi - 1 - off) / S + 1;
  l = std::min<std::ptrdiff_t>(l, static_cast<std::ptrdiff_t>(OW));
  r = std::min<std::ptrdiff_t>(std::max(r, l), static_cast<std::ptrdiff_t>(OW));
  *lo = static_cast<size_t>(l);
  *hi = static_cast<size_t>(r);
}

// The walk shared by every kernel below: for each kernel tap t = i * kw + j and output row oh,
// calls f(t, oh, in, lo, hi) where output columns [lo, hi) of that row read the input plane at
// in + (ow - lo) * stride_w; in < 0 marks a row that lies wholly in the padding.
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

// ---- depthwise (one input channel per group): direct loops, no im2col, no GEMM ----
// Output channel o reads input channel o / m (m = out_channels / in_channels).
bool IsDepthwise(const ConvHandle& h) { return h.channels == h.group; }

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

void CheckFloat(const char* op, const char* what, const Tensor& t) {
  SINGA_CHECK(t.block() != nullptr, ValueError, op << ": the " << what << " tensor is empty");
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32,
                    op << ": expects a float32 " << what << ", got " << t.data_type());
}

// x (or dy) must be 4-d with the handle's C, H, W (or out_channels, conv_height, conv_width).
void CheckImage(const char* op, const char* what, const Tensor& t, size_t c, size_t hh,
                size_t ww) {
  SINGA_CHECK_SHAPE(t.nDim() == 4, op << ": expected a 4-d " << what << " (N, C, H, W), got "
                                      << t.shape());
  SINGA_CHECK_SHAPE(t.shape(1) == c, op << ": the " << what << " " << t.shape() << " has "
                                        << t.shape(1) << " channels but the handle expects "
                                        << c);
  SINGA_CHECK_SHAPE(t.shape(2) == hh && t.shape(3) == ww,
                    op << ": the " << what << " " << t.shape() << " has spatial size "
                       << t.shape(2) << "x" << t.shape(3) << " but the handle expects " << hh
                       << "x" << ww);
}

void CheckWeight(const char* op, const Tensor& W, const ConvHandle& h) {
  CheckFloat(op, "weight", W);
  SINGA_CHECK_SHAPE(W.shape() == h.WeightShape(),
                    op << ": the weight has shape " << W.shape() << ", expected "
                       << h.WeightShape() << " (out_channels, in_channels / groups, kh, kw)");
}

}  // namespace

namespace conv_detail {

// col rows for channels [c0, c1) of one image x (C, H, W): row (c*kh + i)*kw + j (stored at
// col + row * ld), column oh*OW + ow holds x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], or 0 in
// the padding. ld is OH*OW for one sample's matrix, S*OH*OW when S samples sit side by side.
void Im2Col(const float* x, const ConvHandle& h, size_t c0, size_t c1, float* col, size_t ld) {
  const size_t OW = h.conv_width, T = h.kernel_h * h.kernel_w, s = h.stride_w;
  for (size_t c = c0; c < c1; ++c) {
    const float* xc = x + c * h.height * h.width;
    ForEachTapRow(h, [&](size_t t, size_t oh, std::ptrdiff_t in, size_t lo, size_t hi) {
      float* r = col + (c * T + t) * ld + oh * OW;
      if (in < 0) {
        std::memset(r, 0, OW * sizeof(float));
        return;
      }
      std::memset(r, 0, lo * sizeof(float));
      const float* src = xc + in;
      float* dst = r + lo;
      const size_t n = hi - lo;
      // Local copies and a constant stride 2 (ResNet's downsampling) keep the strided copy in
      // registers; through the lambda's captures GCC reloaded the stride every element.
      if (s == 1) std::memcpy(dst, src, n * sizeof(float));
      else if (s == 2)
        for (size_t k = 0; k < n; ++k) dst[k] = src[2 * k];
      else
        for (size_t k = 0, st = s; k < n; ++k) dst[k] = src[k * st];
      std::memset(r + hi, 0, (OW - hi) * sizeof(float));
    });
  }
}

// The adjoint of Im2Col for channels [c0, c1): adds the column entries into dx (zeroed by the
// caller).
void Col2Im(const float* col, const ConvHandle& h, size_t c0, size_t c1, float* dx, size_t ld) {
  const size_t OW = h.conv_width, T = h.kernel_h * h.kernel_w, s = h.stride_w;
  for (size_t c = c0; c < c1; ++c) {
    float* dxc = dx + c * h.height * h.width;
    ForEachTapRow(h, [&](size_t t, size_t oh, std::ptrdiff_t in, size_t lo, size_t hi) {
      if (in < 0) return;
      const float* src = col + (c * T + t) * ld + oh * OW + lo;
      float* dst = dxc + in;
      const size_t n = hi - lo;  // local copies, as in Im2Col
      if (s == 1)
        for (size_t k = 0; k < n; ++k) dst[k] += src[k];
      else if (s == 2)
        for (size_t k = 0; k < n; ++k) dst[2 * k] += src[k];
      else
        for (size_t k = 0, st = s; k < n; ++k) dst[k * st] += src[k];
    });
  }
}

// Defined in conv_im2col.cc. Inputs checked and contiguous, output allocated and non-empty,
// the convolution not depthwise.
void GemmForward(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& y,
                 const ConvHandle& h);
void GemmBackwardX(const Tensor& dy, const Tensor& W, const Tensor& dx, const ConvHandle& h);
void GemmBackwardW(const Tensor& dy, const Tensor& x, const Tensor& dW, const ConvHandle& h);

}  // namespace conv_detail

ConvHandle::ConvHandle(const Shape& input_shape, const std::vector<size_t>& kernel_size,
                       const std::vector<size_t>& stride, const std::vector<size_t>& padding,
                       size_t in_channels, size_t out_channels, bool bias, size_t groups,
                       const std::vector<size_t>& dilation) {
  const char* op = "ConvHandle";
  SINGA_CHECK_SHAPE(input_shape.size() == 4, op << ": expected a 4-d input (N, C, H, W), got "
                                                << input_shape);
  PairOf(op, "kernel_size", kernel_size, &kernel_h, &kernel_w);
  PairOf(op, "stride", stride, &stride_h, &stride_w);
  PairOf(op, "padding", padding, &pad_h, &pad_w);
  PairOf(op, "dilation", dilation, &dilation_h, &dilation_w);
  SINGA_CHECK_VALUE(kernel_h > 0 && kernel_w > 0 && stride_h > 0 && stride_w > 0 &&
                        dilation_h > 0 && dilation_w > 0,
                    op << ": kernel " << kernel_h << "x" << kernel_w << ", stride " << stride_h
                       << "x" << stride_w << " and dilation " << dilation_h << "x" << dilation_w
                       << " must all be positive");
  batchsize = input_shape[0];
  channels = input_shape[1];
  height = input_shape[2];
  width = input_shape[3];
  SINGA_CHECK_SHAPE(in_channels == channels, op << ": in_channels is " << in_channels
                                                << " but the input " << input_shape << " has "
                                                << channels << " channels");
  SINGA_CHECK_VALUE(groups > 0 && in_channels > 0 && out_channels > 0,
                    op << ": in_channels (" << in_channels << "), out_channels ("
                       << out_channels << ") and groups (" << groups
                       << ") must be positive");
  SINGA_CHECK_VALUE(in_channels % groups == 0 && out_channels % groups == 0,
                    op << ": in_channels (" << in_channels << ") and out_channels ("
                       << out_channels << ") must be divisible by groups (" << groups << ")");
  const size_t eh = dilation_h * (kernel_h - 1) + 1, ew = dilation_w * (kernel_w - 1) + 1;
  SINGA_CHECK_SHAPE(height + 2 * pad_h >= eh && width + 2 * pad_w >= ew,
                    op << ": the kernel " << kernel_h << "x" << kernel_w << " (dilation "
                       << dilation_h << "x" << dilation_w << ", extent " << eh << "x" << ew
                       << ") does not fit the input " << height << "x" << width
                       << " padded by " << pad_h << "x" << pad_w);
  num_filters = out_channels;
  group = groups;
  bias_term = bias;
  conv_height = (height + 2 * pad_h - eh) / stride_h + 1;
  conv_width = (width + 2 * pad_w - ew) / stride_w + 1;
}

Tensor Conv2dForward(const Tensor& x_in, const Tensor& W_in, const Tensor& b_in,
                     const ConvHandle& h) {
  const char* op = "Conv2d";
  CheckFloat(op, "input", x_in);
  CheckImage(op, "input", x_in, h.channels, h.height, h.width);
  CheckWeight(op, W_in, h);
  const bool has_bias = !b_in.empty();
  if (has_bias) {
    CheckFloat(op, "bias", b_in);
    SINGA_CHECK_SHAPE(b_in.Size() == h.num_filters, op << ": the bias has shape " << b_in.shape()
                                                       << ", expected (" << h.num_filters
                                                       << ",)");
    CheckSameDevice(op, {&x_in, &W_in, &b_in});
  } else {
    CheckSameDevice(op, {&x_in, &W_in});
  }
  const size_t N = x_in.shape(0);
  const Tensor x = x_in.Contiguous(), W = W_in.Contiguous();
  const Tensor b = has_bias ? b_in.Contiguous() : Tensor();
  Tensor y(h.OutputShape(N), x.device(), kFloat32);
  if (y.Size() == 0) return y;
  if (IsDepthwise(h)) {
    std::vector<Block*> reads{x.block(), W.block()};
    if (has_bias) reads.push_back(b.block());
    x.device()->Exec(
        [x, W, b, y, h, N, has_bias](Context*) {
          const float *px = In(x), *pw = In(W), *pb = has_bias ? In(b) : nullptr;
          float* py = Out(y);
          const size_t OC = h.num_filters, m = OC / h.channels, T = h.kernel_h * h.kernel_w,
                       P = ColCols(h), in = h.height * h.width;
#pragma omp parallel for schedule(static) if (N * OC * P * T >= kGrain)
          for (std::ptrdiff_t p = 0; p < std::ptrdiff_t(N * OC); ++p) {
            const size_t n = size_t(p) / OC, o = size_t(p) % OC;
            float* yp = py + size_t(p) * P;
            std::fill(yp, yp + P, has_bias ? pb[o] : 0.f);
            DepthwisePlane(h, px + (n * h.channels + o / m) * in, pw + o * T, yp);
          }
        },
        reads, {y.block()}, "Conv2dForward");
    return y;
  }
  conv_detail::GemmForward(x, W, b, y, h);
  return y;
}

Tensor Conv2dBackwardX(const Tensor& dy_in, const Tensor& W_in, const ConvHandle& h) {
  const char* op = "Conv2dBackwardX";
  CheckFloat(op, "gradient dy", dy_in);
  CheckImage(op, "gradient dy", dy_in, h.num_filters, h.conv_height, h.conv_width);
  CheckWeight(op, W_in, h);
  CheckSameDevice(op, {&dy_in, &W_in});
  const size_t N = dy_in.shape(0);
  const Tensor dy = dy_in.Contiguous(), W = W_in.Contiguous();
  Tensor dx(Shape{N, h.channels, h.height, h.width}, dy.device(), kFloat32);
  if (dx.Size() == 0) return dx;
  if (IsDepthwise(h)) {
    dy.device()->Exec(
        [dy, W, dx, h, N](Context*) {
          const float *pdy = In(dy), *pw = In(W);
          float* pdx = Out(dx);
          const size_t C = h.channels, OC = h.num_filters, m = OC / C,
                       T = h.kernel_h * h.kernel_w, P = ColCols(h), in = h.height * h.width;
#pragma omp parallel for schedule(static) if (N * OC * P * T >= kGrain)
          for (std::ptrdiff_t p = 0; p < std::ptrdiff_t(N * C); ++p) {
            const size_t n = size_t(p) / C, c = size_t(p) % C;
            float* dxp = pdx + size_t(p) * in;
            std::memset(dxp, 0, in * sizeof(float));
            for (size_t o = c * m; o < (c + 1) * m; ++o)
              DepthwisePlaneBackX(h, pdy + (n * OC + o) * P, pw + o * T, dxp);
          }
        },
        {dy.block(), W.block()}, {dx.block()}, "Conv2dBackwardX");
    return dx;
  }
  conv_detail::GemmBackwardX(dy, W, dx, h);
  return dx;
}

Tensor Conv2dBackwardW(const Tensor& dy_in, const Tensor& x_in, const ConvHandle& h) {
  const char* op = "Conv2dBackwardW";
  CheckFloat(op, "gradient dy", dy_in);
  CheckFloat(op, "input", x_in);
  CheckImage(op, "gradient dy", dy_in, h.num_filters, h.conv_height, h.conv_width);
  CheckImage(op, "input", x_in, h.channels, h.height, h.width);
  SINGA_CHECK_SHAPE(dy_in.shape(0) == x_in.shape(0),
                    op << ": dy " << dy_in.shape() << " and x " << x_in.shape()
                       << " have different batch sizes");
  CheckSameDevice(op, {&dy_in, &x_in});
  const size_t N = x_in.shape(0);
  const Tensor dy = dy_in.Contiguous(), x = x_in.Contiguous();
  Tensor dW(h.WeightShape(), x.device(), kFloat32);
  if (IsDepthwise(h)) {
    x.device()->Exec(
        [dy, x, dW, h, N](Context*) {
          const float *pdy = N ? In(dy) : nullptr, *px = N ? In(x) : nullptr;
          float* pdw = Out(dW);
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
        },
        {dy.block(), x.block()}, {dW.block()}, "Conv2dBackwardW");
    return dW;
  }
  conv_detail::GemmBackwardW(dy, x, dW, h);
  return dW;
}

Tensor Conv2dBackwardB(const Tensor& dy_in, const ConvHandle& h) {
  const char* op = "Conv2dBackwardB";
  CheckFloat(op, "gradient dy", dy_in);
  CheckImage(op, "gradient dy", dy_in, h.num_filters, h.conv_height, h.conv_width);
  const size_t N = dy_in.shape(0), OC = h.num_filters, P = ColCols(h);
  const Tensor dy = dy_in.Contiguous();
  Tensor db(Shape{OC}, dy.device(), kFloat32);
  dy.device()->Exec(
      [dy, db, N, OC, P](Context*) {
        const float* pdy = N ? In(dy) : nullptr;
        float* pdb = Out(db);
#pragma omp parallel for schedule(static) if (N * OC * P >= kGrain)
        for (std::ptrdiff_t o = 0; o < static_cast<std::ptrdiff_t>(OC); ++o) {
          double acc = 0;
          for (size_t n = 0; n < N; ++n) {
            const float* r = pdy + (n * OC + size_t(o)) * P;
            float s = 0.f;
            for (size_t i = 0; i < P; ++i) s += r[i];
            acc += s;
          }
          pdb[o] = static_cast<float>(acc);
        }
      },
      {dy.block()}, {db.block()}, "Conv2dBackwardB");
  return db;
}

}  // namespace singa
