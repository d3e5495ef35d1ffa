// Batch normalisation over axis 1, the reference CPU kernels (backend kCpuRef).
//
// x is viewed as (N, C, S) with S the product of the axes after the channel (1 for a (N, C)
// input). Statistics are per channel, accumulated in double from float partial sums of each
// contiguous run of S values; the mean comes first, then the variance around it (two passes,
// no cancellation). Channels are split between OpenMP threads in blocks: one channel per task
// for images, 256 neighbouring channels per task for 2-d inputs, so the inner loop stays
// contiguous either way. Normalisation is one fused y = x * a[c] + b[c] pass (+ a graph's fused residual add, + the
// ReLU).
//
// A graph may keep x, y, dy and dx in MemLayout::kChannels16 (singa/core/layout.h: x stored as
// (N, C/16, S, 16)); the kernels then run their *16 twins, which handle 16 channels at once with
// one float partial sum per channel, accumulated along S in the plain kernel's order and added
// to the double totals image by image as it does: both layouts give the same bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../epilogue_cpu.h"
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

// y = x * a[c] + b[c] (+ res, a fused residual add: null when none), then max(0, .) when relu.
void Affine(const Geometry& g, const float* x, const float* a, const float* b, const float* res,
            bool relu, float* y) {
  ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
    const float ac = a[c], bc = b[c];
    const float* r = x + off;
    float* o = y + off;
    if (res) {
      const float* q = res + off;
      if (relu)
        for (size_t i = 0; i < g.S; ++i) o[i] = fn::ReLUOp{}((r[i] * ac + bc) + q[i]);
      else
        for (size_t i = 0; i < g.S; ++i) o[i] = (r[i] * ac + bc) + q[i];
    } else if (relu) {
      for (size_t i = 0; i < g.S; ++i) o[i] = fn::ReLUOp{}(r[i] * ac + bc);  // NaN kept
    } else {
      for (size_t i = 0; i < g.S; ++i) o[i] = r[i] * ac + bc;
    }
  });
}

// The residual of a fused add (Graph: epilogue fusion), or null.
const float* Residual(const Epilogue& e) {
  return e.residual ? static_cast<const float*>(e.residual->data()) : nullptr;
}

// The *16 twins (file comment): body(cb, off) for the run of S * 16 values of one image and
// channels [16 cb, 16 cb + 16) at off, images in order, channel blocks split between threads.
template <typename Body>
void ForEachRun16(const Geometry& g, Body&& body) {
  const size_t CB = g.C / 16;
  const std::ptrdiff_t nb = std::ptrdiff_t(CB);
#pragma omp parallel for schedule(static) if (g.N * g.C * g.S >= kGrain && CB > 1)
  for (std::ptrdiff_t cb = 0; cb < nb; ++cb)
    for (size_t n = 0; n < g.N; ++n) body(size_t(cb), (n * CB + size_t(cb)) * g.S * 16);
}

template <typename F>
void ChannelSums16(const Geometry& g, const float* x, F f, std::vector<double>* out) {
  out->assign(g.C, 0.0);
  double* acc = out->data();
  ForEachRun16(g, [&](size_t cb, size_t off) {
    const float* r = x + off;
    float s[16] = {};
    for (size_t i = 0; i < g.S; ++i)
      for (size_t j = 0; j < 16; ++j) s[j] += f(r[i * 16 + j], cb * 16 + j);
    for (size_t j = 0; j < 16; ++j) acc[cb * 16 + j] += s[j];
  });
}

void Affine16(const Geometry& g, const float* x, const float* a, const float* b,
              const float* res, bool relu, float* y) {
  ForEachRun16(g, [&](size_t cb, size_t off) {
    const float *r = x + off, *q = res ? res + off : nullptr, *ac = a + cb * 16,
                *bc = b + cb * 16;
    float* o = y + off;
    for (size_t i = 0; i < g.S * 16; i += 16)
      for (size_t j = 0; j < 16; ++j) {
        float v = r[i + j] * ac[j] + bc[j];
        if (q) v = v + q[i + j];
        o[i + j] = relu ? fn::ReLUOp{}(v) : v;
      }
  });
}

// The layout the graph chose for x (and so for y, dy, dx: one group, graph/layouts.cc).
bool Blocked(const Tensor& x) { return IsChannels16(x); }
// The operands a graph may keep blocked: reads[0..n_reads) and writes[0].
LayoutHooks Offer(const Tensor& x, uint32_t reads) {
  return OffersChannels16(x) && x.data_type() == kFloat32 ? LayoutHooks{reads, 1u, true}
                                                           : LayoutHooks{};
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
  (Blocked(a.x) ? Affine16 : Affine)(Geometry{a.N, a.C, a.S}, InPtr(a.x), k.data(), b.data(),
                                     Residual(a.epi), a.relu, OutPtr(a.y));
}

Prepared<BnTrainArgs> ForwardTraining(const BnTrainArgs& args) {
  Prepared<BnTrainArgs> r;
  r.layouts = Offer(args.x, 1u);  // reads {x, scale, bias, ...}, writes {y, mean, var, ...}
  r.rerun = [](const BnTrainArgs& a, float*) {
    NormaliseWithBatchStats(a, InPtr(a.mean), InPtr(a.var));
  };
  r.run = [](const BnTrainArgs& a, float*) {
    const Geometry g{a.N, a.C, a.S};
    const float* px = InPtr(a.x);
    const double M = double(g.N * g.S);
    std::vector<double> sum, sq;
    const bool blocked = Blocked(a.x);
    auto sums = [&](auto f, std::vector<double>* out) {
      if (blocked) ChannelSums16(g, px, f, out);
      else ChannelSums(g, px, f, out);
    };
    sums([](float v, size_t) { return v; }, &sum);
    std::vector<float> mu(g.C);
    for (size_t c = 0; c < g.C; ++c) mu[c] = float(sum[c] / M);
    const float* pmu = mu.data();
    sums([pmu](float v, size_t c) { return (v - pmu[c]) * (v - pmu[c]); }, &sq);
    float *pm = OutPtr(a.mean), *pv = OutPtr(a.var);
    for (size_t c = 0; c < g.C; ++c) {
      pm[c] = mu[c];
      pv[c] = float(sq[c] / M);
    }
    NormaliseWithBatchStats(a, pm, pv);
    UpdateRunningStats(a, pm, pv);
  };
  r.epilogue = kEpiAdd;
  return r;
}

Prepared<BnInferArgs> ForwardInference(const BnInferArgs& args) {
  Prepared<BnInferArgs> r;
  r.layouts = Offer(args.x, 1u);  // reads {x, scale, bias, running_mean, running_var}, writes {y}
  r.run = [](const BnInferArgs& a, float*) {
    const Geometry g{a.N, a.C, a.S};
    const float *ps = InPtr(a.scale), *pb = InPtr(a.bias), *pm = InPtr(a.running_mean),
                *pv = InPtr(a.running_var);
    std::vector<float> k(g.C), b(g.C);
    FoldBatchNorm(ps, pb, pm, pv, a.eps, g.C, k.data(), b.data());
    (Blocked(a.x) ? Affine16 : Affine)(g, InPtr(a.x), k.data(), b.data(), Residual(a.epi),
                                       a.relu, OutPtr(a.y));
  };
  r.epilogue = kEpiAdd;
  return r;
}

Prepared<BnBwdArgs> Backward(const BnBwdArgs& args) {
  Prepared<BnBwdArgs> r;
  r.layouts = Offer(args.x, 3u);  // reads {dy, x, scale, mean, var}, writes {dx, dscale, dbias}
  r.run = [](const BnBwdArgs& a, float*) {
    const Geometry g{a.N, a.C, a.S};
    const float eps = a.eps;
    const float *pdy = InPtr(a.dy), *px = InPtr(a.x), *ps = InPtr(a.scale), *pm = InPtr(a.mean),
                *pv = InPtr(a.var);
    float *pds = OutPtr(a.dscale), *pdb = OutPtr(a.dbias);
    // sum(dy) and sum(dy * (x - mean)) per channel, in one pass.
    std::vector<double> s_dy(g.C, 0.0), s_dyx(g.C, 0.0);
    double *a1 = s_dy.data(), *a2 = s_dyx.data();
    const bool blocked = Blocked(a.x);
    if (g.N * g.S > 0 && blocked)
      ForEachRun16(g, [&](size_t cb, size_t off) {
        const float *d = pdy + off, *rr = px + off, *m = pm + cb * 16;
        float s1[16] = {}, s2[16] = {};
        for (size_t i = 0; i < g.S * 16; i += 16)
          for (size_t j = 0; j < 16; ++j) {
            s1[j] += d[i + j];
            s2[j] += d[i + j] * (rr[i + j] - m[j]);
          }
        for (size_t j = 0; j < 16; ++j) {
          a1[cb * 16 + j] += s1[j];
          a2[cb * 16 + j] += s2[j];
        }
      });
    else if (g.N * g.S > 0)
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
    if (blocked)
      return ForEachRun16(g, [&](size_t cb, size_t off) {
        const float *d = pdy + off, *rr = px + off, *q = k1.data() + cb * 16,
                    *b = k2.data() + cb * 16, *k = k3.data() + cb * 16;
        float* o = pdx + off;
        for (size_t i = 0; i < g.S * 16; i += 16)
          for (size_t j = 0; j < 16; ++j) o[i + j] = q[j] * d[i + j] - b[j] * rr[i + j] + k[j];
      });
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
