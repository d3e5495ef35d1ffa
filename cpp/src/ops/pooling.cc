// 2-d max / average pooling on the CPU (see singa/ops/nn.h).
//
// Each (n, c) plane is independent: planes are split between OpenMP threads. Windows are clipped
// to the input, so padding never takes part in a max; the max backward recomputes each window's
// first maximum from x (the same scan as the forward), which needs no index tensor and routes
// the gradient deterministically.
#include <algorithm>
#include <cstring>

#include "singa/ops/nn.h"

namespace singa {
namespace {

constexpr size_t kGrain = 1 << 14;

void PairOf(const char* op, const char* what, const std::vector<size_t>& v, size_t* h,
            size_t* w) {
  SINGA_CHECK_VALUE(v.size() == 1 || v.size() == 2,
                    op << ": " << what << " needs 1 or 2 values (h, w), got " << v.size());
  *h = v[0];
  *w = v.size() == 2 ? v[1] : v[0];
}

void CheckFloat(const char* op, const char* what, const Tensor& t) {
  SINGA_CHECK(t.block() != nullptr, ValueError, op << ": the " << what << " tensor is empty");
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32,
                    op << ": expects a float32 " << what << ", got " << t.data_type());
}

void CheckImage(const char* op, const char* what, const Tensor& t, const Shape& want) {
  SINGA_CHECK_SHAPE(t.nDim() == 4, op << ": expected a 4-d " << what << " (N, C, H, W), got "
                                      << t.shape());
  SINGA_CHECK_SHAPE(t.shape(1) == want[1] && t.shape(2) == want[2] && t.shape(3) == want[3],
                    op << ": the " << what << " has shape " << t.shape()
                       << " but the handle expects (N, " << want[1] << ", " << want[2] << ", "
                       << want[3] << ")");
}

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

}  // namespace

PoolingHandle::PoolingHandle(const Shape& input_shape, const std::vector<size_t>& kernel_size,
                             const std::vector<size_t>& stride,
                             const std::vector<size_t>& padding, bool is_max,
                             bool count_include_pad_)
    : is_max_pooling(is_max), count_include_pad(count_include_pad_) {
  const char* op = "PoolingHandle";
  SINGA_CHECK_SHAPE(input_shape.size() == 4, op << ": expected a 4-d input (N, C, H, W), got "
                                                << input_shape);
  PairOf(op, "kernel_size", kernel_size, &kernel_h, &kernel_w);
  PairOf(op, "stride", stride, &stride_h, &stride_w);
  PairOf(op, "padding", padding, &pad_h, &pad_w);
  SINGA_CHECK_VALUE(kernel_h > 0 && kernel_w > 0 && stride_h > 0 && stride_w > 0,
                    op << ": kernel " << kernel_h << "x" << kernel_w << " and stride "
                       << stride_h << "x" << stride_w << " must be positive");
  SINGA_CHECK_VALUE(pad_h < kernel_h && pad_w < kernel_w,
                    op << ": padding " << pad_h << "x" << pad_w
                       << " must be smaller than the kernel " << kernel_h << "x" << kernel_w);
  batchsize = input_shape[0];
  channels = input_shape[1];
  height = input_shape[2];
  width = input_shape[3];
  SINGA_CHECK_SHAPE(height + 2 * pad_h >= kernel_h && width + 2 * pad_w >= kernel_w,
                    op << ": the kernel " << kernel_h << "x" << kernel_w
                       << " does not fit the input " << height << "x" << width
                       << " padded by " << pad_h << "x" << pad_w);
  pooled_height = (height + 2 * pad_h - kernel_h) / stride_h + 1;
  pooled_width = (width + 2 * pad_w - kernel_w) / stride_w + 1;
}

Tensor Pool2dForward(const Tensor& x_in, const PoolingHandle& h) {
  const char* op = "Pool2d";
  CheckFloat(op, "input", x_in);
  CheckImage(op, "input", x_in, {0, h.channels, h.height, h.width});
  const size_t N = x_in.shape(0);
  const Tensor x = x_in.Contiguous();
  Tensor y(h.OutputShape(N), x.device(), kFloat32);
  if (y.Size() == 0) return y;
  x.device()->Exec(
      [x, y, h, N](Context*) {
        const float* px = static_cast<const float*>(x.block()->data());
        float* py = static_cast<float*>(y.block()->mutable_data());
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
      },
      {x.block()}, {y.block()}, h.is_max_pooling ? "MaxPool2dForward" : "AvgPool2dForward");
  return y;
}

Tensor Pool2dBackward(const Tensor& dy_in, const Tensor& x_in, const Tensor& y_in,
                      const PoolingHandle& h) {
  const char* op = "Pool2dBackward";
  CheckFloat(op, "gradient dy", dy_in);
  CheckFloat(op, "input x", x_in);
  CheckImage(op, "input x", x_in, {0, h.channels, h.height, h.width});
  const Shape out_shape = h.OutputShape(x_in.shape(0));
  SINGA_CHECK_SHAPE(dy_in.shape() == out_shape, op << ": dy has shape " << dy_in.shape()
                                                   << ", expected " << out_shape
                                                   << " for the input " << x_in.shape());
  if (y_in.block() != nullptr)  // y is not needed (the max is recomputed); checked if given
    SINGA_CHECK_SHAPE(y_in.shape() == out_shape, op << ": y has shape " << y_in.shape()
                                                    << ", expected " << out_shape);
  CheckSameDevice(op, {&dy_in, &x_in});
  const size_t N = x_in.shape(0);
  const Tensor dy = dy_in.Contiguous(), x = x_in.Contiguous();
  Tensor dx(x.shape(), x.device(), kFloat32);
  if (dx.Size() == 0) return dx;
  x.device()->Exec(
      [dy, x, dx, h, N](Context*) {
        const float* pdy = static_cast<const float*>(dy.block()->data());
        const float* px = static_cast<const float*>(x.block()->data());
        float* pdx = static_cast<float*>(dx.block()->mutable_data());
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
      },
      {dy.block(), x.block()}, {dx.block()},
      h.is_max_pooling ? "MaxPool2dBackward" : "AvgPool2dBackward");
  return dx;
}

}  // namespace singa
