// 2-d convolution on the CPU: im2col + OpenBLAS sgemm (see singa/ops/nn.h).
//
// Per sample n and group g, with K = C/g * kh * kw and P = conv_height * conv_width:
//   forward   y[n, g] (OC/g, P)  = W[g] (OC/g, K) x col(x[n])[g] (K, P)   (+ bias, via beta = 1)
//   backward  col(dx[n])[g]      = W[g]^T x dy[n, g], then col2im adds the columns back into dx
//             dW[g]             += dy[n, g] x col(x[n])[g]^T
// A 1x1 kernel with stride 1 and no padding needs no im2col: the sample itself is the matrix.
// Depthwise convolutions (in_channels == groups) skip im2col and GEMM: direct loops per plane.
//
// Threads: with at least as many samples as threads, samples are split between OpenMP threads,
// each with its own slice of the scratch tensor (and its own dW accumulator); sgemm inside an
// OpenMP region runs single-threaded (OpenBLAS' OpenMP build), so the cores never oversubscribe.
// With fewer samples (inference on one image), im2col/col2im are split over channels and each
// sgemm uses every thread. The scratch is a Tensor created before Exec and listed as written,
// so the graph's memory planner sees it (and may reuse its bytes after the operation).
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "singa/ops/nn.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace singa {
namespace {

constexpr size_t kGrain = 1 << 15;  // elements before a loop over channels goes parallel

// Data pointers, fetched inside kernels (a replayed graph may move a block between runs).
const float* In(const Tensor& t) { return static_cast<const float*>(t.block()->data()); }
float* Out(const Tensor& t) { return static_cast<float*>(t.block()->mutable_data()); }

int MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int ThreadId() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

void PairOf(const char* op, const char* what, const std::vector<size_t>& v, size_t* h,
            size_t* w) {
  SINGA_CHECK_VALUE(v.size() == 1 || v.size() == 2,
                    op << ": " << what << " needs 1 or 2 values (h, w), got " << v.size());
  *h = v[0];
  *w = v.size() == 2 ? v[1] : v[0];
}

bool Is1x1(const ConvHandle& h) {
  return h.kernel_h == 1 && h.kernel_w == 1 && h.stride_h == 1 && h.stride_w == 1 &&
         h.pad_h == 0 && h.pad_w == 0;
}

// Rows of the column matrix per group, and its number of columns.
size_t ColRows(const ConvHandle& h) { return h.channels / h.group * h.kernel_h * h.kernel_w; }
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

// col rows for channels [c0, c1) of one image x (C, H, W): row (c*kh + i)*kw + j, column
// oh*OW + ow holds x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], or 0 in the padding.
void Im2Col(const float* x, const ConvHandle& h, size_t c0, size_t c1, float* col) {
  const size_t OW = h.conv_width, P = h.conv_height * OW, T = h.kernel_h * h.kernel_w,
               s = h.stride_w;
  for (size_t c = c0; c < c1; ++c) {
    const float* xc = x + c * h.height * h.width;
    ForEachTapRow(h, [&](size_t t, size_t oh, std::ptrdiff_t in, size_t lo, size_t hi) {
      float* r = col + (c * T + t) * P + oh * OW;
      if (in < 0) {
        std::memset(r, 0, OW * sizeof(float));
        return;
      }
      std::memset(r, 0, lo * sizeof(float));
      const float* src = xc + in;
      if (s == 1) std::memcpy(r + lo, src, (hi - lo) * sizeof(float));
      else
        for (size_t ow = lo; ow < hi; ++ow) r[ow] = src[(ow - lo) * s];
      std::memset(r + hi, 0, (OW - hi) * sizeof(float));
    });
  }
}

// The adjoint of Im2Col for channels [c0, c1): adds the column entries into dx (zeroed by the
// caller).
void Col2Im(const float* col, const ConvHandle& h, size_t c0, size_t c1, float* dx) {
  const size_t OW = h.conv_width, P = h.conv_height * OW, T = h.kernel_h * h.kernel_w,
               s = h.stride_w;
  for (size_t c = c0; c < c1; ++c) {
    float* dxc = dx + c * h.height * h.width;
    ForEachTapRow(h, [&](size_t t, size_t oh, std::ptrdiff_t in, size_t lo, size_t hi) {
      if (in < 0) return;
      const float* r = col + (c * T + t) * P + oh * OW;
      float* dst = dxc + in;
      if (s == 1)
        for (size_t ow = lo; ow < hi; ++ow) dst[ow - lo] += r[ow];
      else
        for (size_t ow = lo; ow < hi; ++ow) dst[(ow - lo) * s] += r[ow];
    });
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

// Im2Col / Col2Im of a whole image, split over channels when the image is large.
void Im2ColParallel(const float* x, const ConvHandle& h, float* col) {
  const std::ptrdiff_t C = static_cast<std::ptrdiff_t>(h.channels);
#pragma omp parallel for schedule(static) if (C > 1 && ColRows(h) * h.group * ColCols(h) >= kGrain)
  for (std::ptrdiff_t c = 0; c < C; ++c) Im2Col(x, h, size_t(c), size_t(c) + 1, col);
}

void Col2ImParallel(const float* col, const ConvHandle& h, float* dx) {
  const std::ptrdiff_t C = static_cast<std::ptrdiff_t>(h.channels);
  const size_t plane = h.height * h.width;
#pragma omp parallel for schedule(static) if (C > 1 && h.channels * plane >= kGrain / 4)
  for (std::ptrdiff_t c = 0; c < C; ++c) {
    std::memset(dx + size_t(c) * plane, 0, plane * sizeof(float));
    Col2Im(col, h, size_t(c), size_t(c) + 1, dx);
  }
}

// Threads that take whole samples: 1 means "loop over samples, parallelise inside".
int SampleThreads(size_t n) {
  const int nt = MaxThreads();
  return (nt > 1 && n >= static_cast<size_t>(nt)) ? nt : 1;
}

// Runs body(n, slot) for every sample, samples split between `nt` threads when nt > 1.
template <typename Body>
void ForEachSample(size_t N, int nt, Body&& body) {
  if (nt > 1) {
#pragma omp parallel num_threads(nt)
    {
      const int t = ThreadId();
#pragma omp for schedule(static)
      for (std::ptrdiff_t n = 0; n < static_cast<std::ptrdiff_t>(N); ++n) body(size_t(n), t);
    }
  } else {
    for (size_t n = 0; n < N; ++n) body(n, 0);
  }
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
  const bool direct = Is1x1(h);
  const int nt = SampleThreads(N);
  const size_t K = ColRows(h), P = ColCols(h), colsize = K * h.group * P;
  Tensor scratch = direct ? Tensor() : Tensor(Shape{size_t(nt) * colsize}, x.device(), kFloat32);
  std::vector<Block*> reads{x.block(), W.block()}, writes{y.block()};
  if (has_bias) reads.push_back(b.block());
  if (!direct) writes.push_back(scratch.block());
  x.device()->Exec(
      [x, W, b, y, scratch, h, N, nt, K, P, colsize, has_bias, direct](Context*) {
        const float *px = In(x), *pw = In(W), *pb = has_bias ? In(b) : nullptr;
        float* py = Out(y);
        float* pcol = direct ? nullptr : Out(scratch);
        const size_t OC = h.num_filters, OCg = OC / h.group, in = h.channels * h.height * h.width;
        ForEachSample(N, nt, [&](size_t n, int slot) {
          const float* xn = px + n * in;
          float* yn = py + n * OC * P;
          const float* col = xn;
          if (!direct) {
            float* c = pcol + size_t(slot) * colsize;
            if (nt > 1) Im2Col(xn, h, 0, h.channels, c);
            else Im2ColParallel(xn, h, c);
            col = c;
          }
          if (has_bias)
            for (size_t o = 0; o < OC; ++o) std::fill(yn + o * P, yn + (o + 1) * P, pb[o]);
          for (size_t g = 0; g < h.group; ++g)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(OCg), int(P), int(K), 1.f,
                        pw + g * OCg * K, int(K), col + g * K * P, int(P), has_bias ? 1.f : 0.f,
                        yn + g * OCg * P, int(P));
        });
      },
      reads, writes, "Conv2dForward");
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
  const bool direct = Is1x1(h);
  const int nt = SampleThreads(N);
  const size_t K = ColRows(h), P = ColCols(h), colsize = K * h.group * P;
  Tensor scratch = direct ? Tensor() : Tensor(Shape{size_t(nt) * colsize}, dy.device(), kFloat32);
  std::vector<Block*> writes{dx.block()};
  if (!direct) writes.push_back(scratch.block());
  dy.device()->Exec(
      [dy, W, dx, scratch, h, N, nt, K, P, colsize, direct](Context*) {
        const float *pdy = In(dy), *pw = In(W);
        float* pdx = Out(dx);
        float* pcol = direct ? nullptr : Out(scratch);
        const size_t OCg = h.num_filters / h.group, in = h.channels * h.height * h.width;
        ForEachSample(N, nt, [&](size_t n, int slot) {
          const float* dyn = pdy + n * h.num_filters * P;
          float* dxn = pdx + n * in;
          float* col = direct ? dxn : pcol + size_t(slot) * colsize;
          for (size_t g = 0; g < h.group; ++g)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(K), int(P), int(OCg), 1.f,
                        pw + g * OCg * K, int(K), dyn + g * OCg * P, int(P), 0.f,
                        col + g * K * P, int(P));
          if (direct) return;
          if (nt > 1) {
            std::memset(dxn, 0, in * sizeof(float));
            Col2Im(col, h, 0, h.channels, dxn);
          } else {
            Col2ImParallel(col, h, dxn);
          }
        });
      },
      {dy.block(), W.block()}, writes, "Conv2dBackwardX");
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
  const bool direct = Is1x1(h);
  const int nt = SampleThreads(N);
  const size_t K = ColRows(h), P = ColCols(h), colsize = direct ? 0 : K * h.group * P;
  const size_t wsize = dW.Size();
  // Per thread: an im2col buffer, and (with several threads) a private dW accumulator.
  const size_t slot_size = colsize + (nt > 1 ? wsize : 0);
  Tensor scratch = slot_size == 0 ? Tensor()
                                  : Tensor(Shape{size_t(nt) * slot_size}, x.device(), kFloat32);
  std::vector<Block*> writes{dW.block()};
  if (slot_size) writes.push_back(scratch.block());
  x.device()->Exec(
      [dy, x, dW, scratch, h, N, nt, K, P, colsize, wsize, slot_size, direct](Context*) {
        const float *pdy = In(dy), *px = In(x);
        float* pdw = Out(dW);
        float* ps = slot_size ? Out(scratch) : nullptr;
        const size_t OCg = h.num_filters / h.group, in = h.channels * h.height * h.width;
        std::memset(pdw, 0, wsize * sizeof(float));
        if (nt > 1)
          for (int t = 0; t < nt; ++t)
            std::memset(ps + size_t(t) * slot_size + colsize, 0, wsize * sizeof(float));
        ForEachSample(N, nt, [&](size_t n, int slot) {
          const float* xn = px + n * in;
          const float* dyn = pdy + n * h.num_filters * P;
          float* acc = nt > 1 ? ps + size_t(slot) * slot_size + colsize : pdw;
          const float* col = xn;
          if (!direct) {
            float* c = ps + size_t(slot) * slot_size;
            if (nt > 1) Im2Col(xn, h, 0, h.channels, c);
            else Im2ColParallel(xn, h, c);
            col = c;
          }
          for (size_t g = 0; g < h.group; ++g)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(OCg), int(K), int(P), 1.f,
                        dyn + g * OCg * P, int(P), col + g * K * P, int(P), 1.f,
                        acc + g * OCg * K, int(K));
        });
        if (nt > 1) {
#pragma omp parallel for schedule(static) if (wsize >= kGrain)
          for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(wsize); ++i) {
            float s = 0.f;
            for (int t = 0; t < nt; ++t) s += ps[size_t(t) * slot_size + colsize + size_t(i)];
            pdw[i] = s;
          }
        }
      },
      {dy.block(), x.block()}, writes, "Conv2dBackwardW");
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
