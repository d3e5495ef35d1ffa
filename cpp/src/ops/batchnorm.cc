// Batch normalisation over axis 1 on the CPU (see singa/ops/nn.h).
//
// x is viewed as (N, C, S) with S the product of the axes after the channel (1 for a (N, C)
// input). Statistics are per channel, accumulated in double from float partial sums of each
// contiguous run of S values; the mean comes first, then the variance around it (two passes,
// no cancellation). Channels are split between OpenMP threads in blocks: one channel per task
// for images, 256 neighbouring channels per task for 2-d inputs, so the inner loop stays
// contiguous either way. Normalisation is one fused y = x * a[c] + b[c] pass.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "singa/ops/nn.h"

namespace singa {
namespace {

constexpr size_t kGrain = 1 << 14;

struct Geometry {
  size_t N, C, S;
  size_t Block() const { return S == 1 ? 256 : 1; }
  size_t NumBlocks() const { return (C + Block() - 1) / Block(); }
  bool Parallel() const { return N * C * S >= kGrain && NumBlocks() > 1; }
};

// Runs body(n, c, row) for every row x[n, c, :] with channels split between threads in blocks
// (a channel is only ever touched by one thread).
template <typename Body>
void ForEachRowByChannel(const Geometry& g, Body&& body) {
  const size_t B = g.Block();
  const std::ptrdiff_t nb = std::ptrdiff_t(g.NumBlocks());
#pragma omp parallel for schedule(static) if (g.Parallel())
  for (std::ptrdiff_t blk = 0; blk < nb; ++blk) {
    const size_t c0 = size_t(blk) * B, c1 = std::min(g.C, c0 + B);
    for (size_t n = 0; n < g.N; ++n)
      for (size_t c = c0; c < c1; ++c) body(n, c, (n * g.C + c) * g.S);
  }
}

// Per-channel sum of f(x) over N and S.
template <typename F>
void ChannelSums(const Geometry& g, const float* x, F f, std::vector<double>* out) {
  out->assign(g.C, 0.0);
  double* acc = out->data();
  ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
    const float* r = x + off;
    float s = 0.f;
    for (size_t i = 0; i < g.S; ++i) s += f(r[i], c);
    acc[c] += s;
  });
}

// y = x * a[c] + b[c].
void Affine(const Geometry& g, const float* x, const float* a, const float* b, float* y) {
  ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
    const float ac = a[c], bc = b[c];
    const float* r = x + off;
    float* o = y + off;
    for (size_t i = 0; i < g.S; ++i) o[i] = r[i] * ac + bc;
  });
}

void CheckFloat(const char* op, const char* what, const Tensor& t) {
  SINGA_CHECK(t.block() != nullptr, ValueError, op << ": the " << what << " tensor is empty");
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32,
                    op << ": expects a float32 " << what << ", got " << t.data_type());
}

Geometry CheckInput(const char* op, const Tensor& x) {
  CheckFloat(op, "input", x);
  SINGA_CHECK_SHAPE(x.nDim() >= 2, op << ": expected an input (N, C) or (N, C, H, W), got "
                                      << x.shape());
  return {x.shape(0), x.shape(1), Product(x.shape(), 2)};
}

// A per-channel parameter: C float32 values on x's device.
void CheckChannelVector(const char* op, const char* what, const Tensor& v, const Tensor& x) {
  CheckFloat(op, what, v);
  SINGA_CHECK_SHAPE(v.Size() == x.shape(1),
                    op << ": " << what << " has shape " << v.shape() << ", expected "
                       << x.shape(1) << " values (one per channel of the input " << x.shape()
                       << ")");
  CheckSameDevice(op, {&x, &v});
}

const float* F(const Tensor& t) { return static_cast<const float*>(t.block()->data()); }
float* MF(const Tensor& t) { return static_cast<float*>(t.block()->mutable_data()); }

}  // namespace

std::vector<Tensor> BatchNormForwardTraining(const Tensor& x_in, const Tensor& scale_in,
                                             const Tensor& bias_in, Tensor* running_mean,
                                             Tensor* running_var, float momentum, float eps) {
  const char* op = "BatchNormForwardTraining";
  const Geometry g = CheckInput(op, x_in);
  CheckChannelVector(op, "scale", scale_in, x_in);
  CheckChannelVector(op, "bias", bias_in, x_in);
  SINGA_CHECK_VALUE(eps >= 0.f, op << ": eps must be >= 0, got " << eps);
  SINGA_CHECK_VALUE(momentum >= 0.f && momentum <= 1.f,
                    op << ": momentum must be in [0, 1], got " << momentum);
  SINGA_CHECK_VALUE(g.N * g.S > 1, op << ": expected more than 1 value per channel when "
                                         "training, got an input of shape "
                                      << x_in.shape());
  Tensor rm, rv;
  const bool upd_mean = running_mean != nullptr, upd_var = running_var != nullptr;
  std::vector<Block*> writes;
  for (auto [ptr, name, dst] : {std::make_tuple(running_mean, "running_mean", &rm),
                                std::make_tuple(running_var, "running_var", &rv)}) {
    if (ptr == nullptr) continue;
    CheckChannelVector(op, name, *ptr, x_in);
    SINGA_CHECK_SHAPE(ptr->IsContiguous(), op << ": " << name
                                              << " is a non-contiguous view; it is updated in "
                                                 "place");
    *dst = *ptr;
    writes.push_back(ptr->block());
  }
  const Tensor x = x_in.Contiguous(), scale = scale_in.Contiguous(), bias = bias_in.Contiguous();
  Tensor y(x.shape(), x.device(), kFloat32), mean(Shape{g.C}, x.device(), kFloat32),
      var(Shape{g.C}, x.device(), kFloat32);
  writes.insert(writes.end(), {y.block(), mean.block(), var.block()});
  std::vector<Block*> reads{x.block(), scale.block(), bias.block()};
  if (upd_mean) reads.push_back(rm.block());
  if (upd_var) reads.push_back(rv.block());
  x.device()->Exec(
      [x, scale, bias, rm, rv, y, mean, var, g, momentum, eps, upd_mean, upd_var](Context*) {
        const float* px = F(x);
        const double M = double(g.N * g.S);
        std::vector<double> sum, sq;
        ChannelSums(g, px, [](float v, size_t) { return v; }, &sum);
        std::vector<float> mu(g.C);
        for (size_t c = 0; c < g.C; ++c) mu[c] = float(sum[c] / M);
        const float* pmu = mu.data();
        ChannelSums(g, px, [pmu](float v, size_t c) { return (v - pmu[c]) * (v - pmu[c]); }, &sq);
        float *pm = MF(mean), *pv = MF(var);
        const float *ps = F(scale), *pb = F(bias);
        std::vector<float> a(g.C), b(g.C);
        for (size_t c = 0; c < g.C; ++c) {
          const double v = sq[c] / M;
          pm[c] = mu[c];
          pv[c] = float(v);
          const double inv = 1.0 / std::sqrt(v + double(eps));
          a[c] = float(ps[c] * inv);
          b[c] = float(pb[c] - mu[c] * ps[c] * inv);
        }
        Affine(g, px, a.data(), b.data(), MF(y));
        if (upd_mean) {
          float* r = MF(rm);
          for (size_t c = 0; c < g.C; ++c) r[c] = (1.f - momentum) * r[c] + momentum * pm[c];
        }
        if (upd_var) {
          float* r = MF(rv);
          const double unbias = M / (M - 1.0);
          for (size_t c = 0; c < g.C; ++c)
            r[c] = (1.f - momentum) * r[c] + momentum * float(sq[c] / M * unbias);
        }
      },
      reads, writes, "BatchNormForwardTraining");
  return {y, mean, var};
}

Tensor BatchNormForwardInference(const Tensor& x_in, const Tensor& scale_in,
                                 const Tensor& bias_in, const Tensor& running_mean_in,
                                 const Tensor& running_var_in, float eps) {
  const char* op = "BatchNormForwardInference";
  const Geometry g = CheckInput(op, x_in);
  CheckChannelVector(op, "scale", scale_in, x_in);
  CheckChannelVector(op, "bias", bias_in, x_in);
  CheckChannelVector(op, "running_mean", running_mean_in, x_in);
  CheckChannelVector(op, "running_var", running_var_in, x_in);
  SINGA_CHECK_VALUE(eps >= 0.f, op << ": eps must be >= 0, got " << eps);
  const Tensor x = x_in.Contiguous(), scale = scale_in.Contiguous(), bias = bias_in.Contiguous(),
               rm = running_mean_in.Contiguous(), rv = running_var_in.Contiguous();
  Tensor y(x.shape(), x.device(), kFloat32);
  if (y.Size() == 0) return y;
  x.device()->Exec(
      [x, scale, bias, rm, rv, y, g, eps](Context*) {
        const float *ps = F(scale), *pb = F(bias), *pm = F(rm), *pv = F(rv);
        std::vector<float> a(g.C), b(g.C);
        for (size_t c = 0; c < g.C; ++c) {
          const double k = ps[c] / std::sqrt(double(pv[c]) + double(eps));
          a[c] = float(k);
          b[c] = float(pb[c] - pm[c] * k);
        }
        Affine(g, F(x), a.data(), b.data(), MF(y));
      },
      {x.block(), scale.block(), bias.block(), rm.block(), rv.block()}, {y.block()},
      "BatchNormForwardInference");
  return y;
}

std::vector<Tensor> BatchNormBackward(const Tensor& dy_in, const Tensor& x_in,
                                      const Tensor& scale_in, const Tensor& mean_in,
                                      const Tensor& var_in, float eps) {
  const char* op = "BatchNormBackward";
  const Geometry g = CheckInput(op, x_in);
  CheckFloat(op, "gradient dy", dy_in);
  SINGA_CHECK_SHAPE(dy_in.shape() == x_in.shape(), op << ": dy has shape " << dy_in.shape()
                                                      << " but x has shape " << x_in.shape());
  CheckSameDevice(op, {&x_in, &dy_in});
  CheckChannelVector(op, "scale", scale_in, x_in);
  CheckChannelVector(op, "batch_mean", mean_in, x_in);
  CheckChannelVector(op, "batch_var", var_in, x_in);
  SINGA_CHECK_VALUE(eps >= 0.f, op << ": eps must be >= 0, got " << eps);
  const Tensor dy = dy_in.Contiguous(), x = x_in.Contiguous(), scale = scale_in.Contiguous(),
               mean = mean_in.Contiguous(), var = var_in.Contiguous();
  Tensor dx(x.shape(), x.device(), kFloat32), dscale(Shape{g.C}, x.device(), kFloat32),
      dbias(Shape{g.C}, x.device(), kFloat32);
  x.device()->Exec(
      [dy, x, scale, mean, var, dx, dscale, dbias, g, eps](Context*) {
        const float *pdy = F(dy), *px = F(x), *ps = F(scale), *pm = F(mean), *pv = F(var);
        float *pds = MF(dscale), *pdb = MF(dbias);
        // sum(dy) and sum(dy * (x - mean)) per channel, in one pass.
        std::vector<double> s_dy(g.C, 0.0), s_dyx(g.C, 0.0);
        double *a1 = s_dy.data(), *a2 = s_dyx.data();
        if (g.N * g.S > 0)
          ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
            const float* d = pdy + off;
            const float* r = px + off;
            const float m = pm[c];
            float s1 = 0.f, s2 = 0.f;
            for (size_t i = 0; i < g.S; ++i) {
              s1 += d[i];
              s2 += d[i] * (r[i] - m);
            }
            a1[c] += s1;
            a2[c] += s2;
          });
        const double M = double(g.N * g.S);
        std::vector<float> k1(g.C), k2(g.C), k3(g.C);
        for (size_t c = 0; c < g.C; ++c) {
          const double inv = 1.0 / std::sqrt(double(pv[c]) + double(eps));
          const double ds = s_dyx[c] * inv;  // sum(dy * xhat)
          pds[c] = float(ds);
          pdb[c] = float(s_dy[c]);
          // dx = k1 * dy - k2 * x + k3, with k1 = scale * inv.
          const double a = ps[c] * inv, b = M > 0 ? a * inv * ds / M : 0.0;
          k1[c] = float(a);
          k2[c] = float(b);
          k3[c] = float(M > 0 ? b * pm[c] - a * s_dy[c] / M : 0.0);
        }
        if (g.N * g.S == 0) return;
        float* pdx = MF(dx);
        ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
          const float a = k1[c], b = k2[c], k = k3[c];
          const float* d = pdy + off;
          const float* r = px + off;
          float* o = pdx + off;
          for (size_t i = 0; i < g.S; ++i) o[i] = a * d[i] - b * r[i] + k;
        });
      },
      {dy.block(), x.block(), scale.block(), mean.block(), var.block()},
      {dx.block(), dscale.block(), dbias.block()}, "BatchNormBackward");
  return {dx, dscale, dbias};
}

}  // namespace singa
