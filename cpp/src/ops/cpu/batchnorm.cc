// Batch normalisation over axis 1, the reference CPU kernels (backend kCpuRef).
//
// x is viewed as (N, C, S) with S the product of the axes after the channel (1 for a (N, C)
// input). Statistics are per channel, accumulated in double from float partial sums of each
// contiguous run of S values; the mean comes first, then the variance around it (two passes,
// no cancellation). Channels are split between OpenMP threads in blocks: one channel per task
// for images, 256 neighbouring channels per task for 2-d inputs, so the inner loop stays
// contiguous either way. Normalisation is one fused y = x * a[c] + b[c] pass (+ the ReLU).
#include <algorithm>
#include <cmath>
#include <vector>

#include "../nn_kernels.h"
#include "singa/ops/elementwise_functors.h"

namespace singa {
namespace cpu {
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

// y = x * a[c] + b[c], or max(0, that) when relu.
void Affine(const Geometry& g, const float* x, const float* a, const float* b, bool relu,
            float* y) {
  ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
    const float ac = a[c], bc = b[c];
    const float* r = x + off;
    float* o = y + off;
    if (relu)
      for (size_t i = 0; i < g.S; ++i) o[i] = fn::ReLUOp{}(r[i] * ac + bc);  // NaN kept
    else
      for (size_t i = 0; i < g.S; ++i) o[i] = r[i] * ac + bc;
  });
}

// y = x * k[c] + b[c] from the batch statistics as stored (float32): the training forward and
// its rerun under a memory budget (nn_kernels.h: RerunOf) both normalise through this, so a
// recomputed y has the forward's bits without recomputing the statistics.
void NormaliseWithBatchStats(const BnTrainArgs& a, const float* mean, const float* var) {
  const float *ps = InPtr(a.scale), *pb = InPtr(a.bias);
  std::vector<float> k(a.C), b(a.C);
  for (size_t c = 0; c < a.C; ++c) {
    const double inv = 1.0 / std::sqrt(double(var[c]) + double(a.eps));
    k[c] = float(ps[c] * inv);
    b[c] = float(pb[c] - mean[c] * ps[c] * inv);
  }
  Affine(Geometry{a.N, a.C, a.S}, InPtr(a.x), k.data(), b.data(), a.relu, OutPtr(a.y));
}

Prepared<BnTrainArgs> ForwardTraining(const BnTrainArgs&) {
  Prepared<BnTrainArgs> r;
  r.rerun = [](const BnTrainArgs& a, float*) {
    NormaliseWithBatchStats(a, InPtr(a.mean), InPtr(a.var));
  };
  r.run = [](const BnTrainArgs& a, float*) {
    const Geometry g{a.N, a.C, a.S};
    const float* px = InPtr(a.x);
    const double M = double(g.N * g.S);
    std::vector<double> sum, sq;
    ChannelSums(g, px, [](float v, size_t) { return v; }, &sum);
    std::vector<float> mu(g.C);
    for (size_t c = 0; c < g.C; ++c) mu[c] = float(sum[c] / M);
    const float* pmu = mu.data();
    ChannelSums(g, px, [pmu](float v, size_t c) { return (v - pmu[c]) * (v - pmu[c]); }, &sq);
    float *pm = OutPtr(a.mean), *pv = OutPtr(a.var);
    for (size_t c = 0; c < g.C; ++c) {
      pm[c] = mu[c];
      pv[c] = float(sq[c] / M);
    }
    NormaliseWithBatchStats(a, pm, pv);
    UpdateRunningStats(a, pm, pv);
  };
  return r;
}

Prepared<BnInferArgs> ForwardInference(const BnInferArgs&) {
  Prepared<BnInferArgs> r;
  r.run = [](const BnInferArgs& a, float*) {
    const Geometry g{a.N, a.C, a.S};
    const float *ps = InPtr(a.scale), *pb = InPtr(a.bias), *pm = InPtr(a.running_mean),
                *pv = InPtr(a.running_var);
    std::vector<float> k(g.C), b(g.C);
    for (size_t c = 0; c < g.C; ++c) {
      const double q = ps[c] / std::sqrt(double(pv[c]) + double(a.eps));
      k[c] = float(q);
      b[c] = float(pb[c] - pm[c] * q);
    }
    Affine(g, InPtr(a.x), k.data(), b.data(), a.relu, OutPtr(a.y));
  };
  return r;
}

Prepared<BnBwdArgs> Backward(const BnBwdArgs&) {
  Prepared<BnBwdArgs> r;
  r.run = [](const BnBwdArgs& a, float*) {
    const Geometry g{a.N, a.C, a.S};
    const float eps = a.eps;
    const float *pdy = InPtr(a.dy), *px = InPtr(a.x), *ps = InPtr(a.scale), *pm = InPtr(a.mean),
                *pv = InPtr(a.var);
    float *pds = OutPtr(a.dscale), *pdb = OutPtr(a.dbias);
    // sum(dy) and sum(dy * (x - mean)) per channel, in one pass.
    std::vector<double> s_dy(g.C, 0.0), s_dyx(g.C, 0.0);
    double *a1 = s_dy.data(), *a2 = s_dyx.data();
    if (g.N * g.S > 0)
      ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
        const float* d = pdy + off;
        const float* rr = px + off;
        const float m = pm[c];
        float s1 = 0.f, s2 = 0.f;
        for (size_t i = 0; i < g.S; ++i) {
          s1 += d[i];
          s2 += d[i] * (rr[i] - m);
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
      const double q = ps[c] * inv, b = M > 0 ? q * inv * ds / M : 0.0;
      k1[c] = float(q);
      k2[c] = float(b);
      k3[c] = float(M > 0 ? b * pm[c] - q * s_dy[c] / M : 0.0);
    }
    if (g.N * g.S == 0) return;
    float* pdx = OutPtr(a.dx);
    ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
      const float q = k1[c], b = k2[c], k = k3[c];
      const float* d = pdy + off;
      const float* rr = px + off;
      float* o = pdx + off;
      for (size_t i = 0; i < g.S; ++i) o[i] = q * d[i] - b * rr[i] + k;
    });
  };
  return r;
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(BatchNormForwardTraining, kCpuRef, cpu::ForwardTraining);
SINGA_REGISTER_KERNEL(BatchNormForwardInference, kCpuRef, cpu::ForwardInference);
SINGA_REGISTER_KERNEL(BatchNormBackward, kCpuRef, cpu::Backward);

}  // namespace singa
