// Batch normalisation over axis 1, the reference CPU kernels (backend kCpuRef).
//
// x is viewed as (N, C, S) with S the product of the axes after the channel (1 for a (N, C)
// input). Statistics are per channel, accumulated in double from float partial sums of each
// contiguous run of S values (in lanes: RowSum); the mean comes first, then the variance around it (two passes,
// no cancellation). Channels are split between OpenMP threads in blocks: one channel per task
// for images, 256 neighbouring channels per task for 2-d inputs, so the inner loop stays
// contiguous either way. Normalisation is one fused y = x * a[c] + b[c] pass (+ a graph's fused residual add, + the
// ReLU).
//
// bfloat16 activations (x, dy, y, dx, the residual) are read into float and rounded once on
// store (elem_io.h): the bits of the float32 kernel between two conversions. A fused residual
// add rounds the batch norm's value to bfloat16 first, as the unfused Add reads it, so a
// graph's fused step equals the eager one bit for bit.
//
// A graph may keep x, y, dy and dx in MemLayout::kChannels16 (singa/core/layout.h: x stored as
// (N, C/16, S, 16)); the kernels then run their *16 twins, which handle 16 channels at once and
// give each channel the plain kernel's lanes, in its order (the lanes, their sum, the tail):
// both layouts give the same bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../epilogue_cpu.h"
#include "../nn_kernels.h"
#include "elem_io.h"
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

// Row sums in kLanes independent float accumulators: one accumulator makes the loop wait on
// each add's latency, lanes let it vectorise (about 4x on a batch norm's statistics). The
// order is fixed (lane by lane, the lanes in turn, then the tail), so the sums are
// deterministic and the same for float and bfloat16 rows.
constexpr size_t kLanes = 16;

template <typename T, typename F>
float RowSum(const T* r, size_t n, F f) {
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (size_t l = 0; l < kLanes; ++l) acc[l] += f(Ld(r, i + l));
  float s = 0.f;
  for (size_t l = 0; l < kLanes; ++l) s += acc[l];
  for (; i < n; ++i) s += f(Ld(r, i));
  return s;
}

// sum(d) and sum(d * (x - m)) over a row, as RowSum does each.
template <typename T>
void RowSums2(const T* d, const T* x, size_t n, float m, float* s1, float* s2) {
  float a1[kLanes] = {}, a2[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (size_t l = 0; l < kLanes; ++l) {
      const float di = Ld(d, i + l);
      a1[l] += di;
      a2[l] += di * (Ld(x, i + l) - m);
    }
  float t1 = 0.f, t2 = 0.f;
  for (size_t l = 0; l < kLanes; ++l) {
    t1 += a1[l];
    t2 += a2[l];
  }
  for (; i < n; ++i) {
    const float di = Ld(d, i);
    t1 += di;
    t2 += di * (Ld(x, i) - m);
  }
  *s1 = t1;
  *s2 = t2;
}

// Per-channel sum of f(x) over N and S.
template <typename T, typename F>
void ChannelSums(const Geometry& g, const T* x, F f, std::vector<double>* out) {
  out->assign(g.C, 0.0);
  double* acc = out->data();
  ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
    acc[c] += RowSum(x + off, g.S, [&](float v) { return f(v, c); });
  });
}

// y = x * a[c] + b[c] (+ res, a fused residual add: null when none), then max(0, .) when relu.
template <typename T>
void Affine(const Geometry& g, const T* x, const float* a, const float* b, const T* res,
            bool relu, T* y) {
  ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
    const float ac = a[c], bc = b[c];
    const T* r = x + off;
    T* o = y + off;
    if (res) {
      const T* q = res + off;
      if (relu)
        for (size_t i = 0; i < g.S; ++i)
          St(o, i, fn::ReLUOp{}(Rounded(Ld(r, i) * ac + bc, o) + Ld(q, i)));
      else
        for (size_t i = 0; i < g.S; ++i) St(o, i, Rounded(Ld(r, i) * ac + bc, o) + Ld(q, i));
    } else if (relu) {
      for (size_t i = 0; i < g.S; ++i) St(o, i, fn::ReLUOp{}(Ld(r, i) * ac + bc));  // NaN kept
    } else {
      for (size_t i = 0; i < g.S; ++i) St(o, i, Ld(r, i) * ac + bc);
    }
  });
}

// The residual of a fused add (Graph: epilogue fusion), or null.
template <typename T>
const T* Residual(const Epilogue& e) {
  return e.residual ? static_cast<const T*>(e.residual->data()) : nullptr;
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

// RowSum of each of the 16 channels of a run: f(v, j) for channel j of the block.
template <typename T, typename F>
void RunSums16(const T* r, size_t S, F f, float* out) {
  float acc[kLanes][16] = {};
  size_t i = 0;
  for (; i + kLanes <= S; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l)
#pragma omp simd
      for (size_t j = 0; j < 16; ++j) acc[l][j] += f(Ld(r, (i + l) * 16 + j), j);
  for (size_t j = 0; j < 16; ++j) {
    float s = 0.f;
    for (size_t l = 0; l < kLanes; ++l) s += acc[l][j];
    for (size_t k = i; k < S; ++k) s += f(Ld(r, k * 16 + j), j);
    out[j] = s;
  }
}

template <typename T, typename F>
void ChannelSums16(const Geometry& g, const T* x, F f, std::vector<double>* out) {
  out->assign(g.C, 0.0);
  double* acc = out->data();
  ForEachRun16(g, [&](size_t cb, size_t off) {
    float s[16];
    RunSums16(x + off, g.S, [&](float v, size_t j) { return f(v, cb * 16 + j); }, s);
    for (size_t j = 0; j < 16; ++j) acc[cb * 16 + j] += s[j];
  });
}

// RowSums2 of each of the 16 channels of a run (m: their means).
template <typename T>
void RunSums2x16(const T* d, const T* x, size_t S, const float* m, float* s1, float* s2) {
  float a1[kLanes][16] = {}, a2[kLanes][16] = {};
  size_t i = 0;
  for (; i + kLanes <= S; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l)
#pragma omp simd
      for (size_t j = 0; j < 16; ++j) {
        const size_t e = (i + l) * 16 + j;
        const float di = Ld(d, e);
        a1[l][j] += di;
        a2[l][j] += di * (Ld(x, e) - m[j]);
      }
  for (size_t j = 0; j < 16; ++j) {
    float t1 = 0.f, t2 = 0.f;
    for (size_t l = 0; l < kLanes; ++l) {
      t1 += a1[l][j];
      t2 += a2[l][j];
    }
    for (size_t k = i; k < S; ++k) {
      const float di = Ld(d, k * 16 + j);
      t1 += di;
      t2 += di * (Ld(x, k * 16 + j) - m[j]);
    }
    s1[j] = t1;
    s2[j] = t2;
  }
}

template <typename T>
void Affine16(const Geometry& g, const T* x, const float* a, const float* b, const T* res,
              bool relu, T* y) {
  ForEachRun16(g, [&](size_t cb, size_t off) {
    const float *ac = a + cb * 16, *bc = b + cb * 16;
    const T *r = x + off, *q = res ? res + off : nullptr;
    T* o = y + off;
    const size_t n = g.S * 16;
    // the plain kernel's four loops (Affine), each element with its channel's factors
    if (q && relu) {
      for (size_t i = 0; i < n; i += 16)
        for (size_t j = 0; j < 16; ++j)
          St(o, i + j,
             fn::ReLUOp{}(Rounded(Ld(r, i + j) * ac[j] + bc[j], o) + Ld(q, i + j)));
    } else if (q) {
      for (size_t i = 0; i < n; i += 16)
        for (size_t j = 0; j < 16; ++j)
          St(o, i + j, Rounded(Ld(r, i + j) * ac[j] + bc[j], o) + Ld(q, i + j));
    } else if (relu) {
      for (size_t i = 0; i < n; i += 16)
        for (size_t j = 0; j < 16; ++j) St(o, i + j, fn::ReLUOp{}(Ld(r, i + j) * ac[j] + bc[j]));
    } else {
      for (size_t i = 0; i < n; i += 16)
        for (size_t j = 0; j < 16; ++j) St(o, i + j, Ld(r, i + j) * ac[j] + bc[j]);
    }
  });
}

// The layout the graph chose for x (and so for y, dy, dx: one group, graph/layouts.cc).
bool Blocked(const Tensor& x) { return IsChannels16(x); }
// The operands a graph may keep blocked: reads[0..n) by mask, writes[0].
LayoutHooks Offer(const Tensor& x, uint32_t reads) {
  return OffersChannels16(x) ? LayoutHooks{reads, 1u, true} : LayoutHooks{};
}

// y = x * k[c] + b[c] from the batch statistics as stored (float32): the training forward and
// its rerun under a memory budget (nn_kernels.h: RerunOf) both normalise through this, so a
// recomputed y has the forward's bits without recomputing the statistics.
template <typename T>
void NormaliseWithBatchStats(const BnTrainArgs& a, const float* mean, const float* var) {
  const float *ps = InPtr(a.scale), *pb = InPtr(a.bias);
  std::vector<float> k(a.C), b(a.C);
  for (size_t c = 0; c < a.C; ++c) {
    const double inv = 1.0 / std::sqrt(double(var[c]) + double(a.eps));
    k[c] = float(ps[c] * inv);
    b[c] = float(pb[c] - mean[c] * ps[c] * inv);
  }
  (Blocked(a.x) ? Affine16<T> : Affine<T>)(Geometry{a.N, a.C, a.S}, In<T>(a.x), k.data(),
                                           b.data(), Residual<T>(a.epi), a.relu, Out<T>(a.y));
}

template <typename T>
void RunTraining(const BnTrainArgs& a) {
  const Geometry g{a.N, a.C, a.S};
  const T* px = In<T>(a.x);
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
  NormaliseWithBatchStats<T>(a, pm, pv);
  UpdateRunningStats(a, pm, pv);
}

Prepared<BnTrainArgs> ForwardTraining(const BnTrainArgs& args) {
  Prepared<BnTrainArgs> r;
  r.layouts = Offer(args.x, 1u);  // reads {x, scale, bias, ...}, writes {y, mean, var, ...}
  r.rerun = [](const BnTrainArgs& a, float*) {
    ByElemType(a.x, [&](auto t) {
      NormaliseWithBatchStats<decltype(t)>(a, InPtr(a.mean), InPtr(a.var));
    });
  };
  r.run = [](const BnTrainArgs& a, float*) {
    ByElemType(a.x, [&](auto t) { RunTraining<decltype(t)>(a); });
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
    ByElemType(a.x, [&](auto t) {
      using T = decltype(t);
      (Blocked(a.x) ? Affine16<T> : Affine<T>)(g, In<T>(a.x), k.data(), b.data(),
                                               Residual<T>(a.epi), a.relu, Out<T>(a.y));
    });
  };
  r.epilogue = kEpiAdd;
  return r;
}

template <typename T>
void RunBackward(const BnBwdArgs& a) {
  const Geometry g{a.N, a.C, a.S};
  const float eps = a.eps;
  const T *pdy = In<T>(a.dy), *px = In<T>(a.x);
  const float *ps = InPtr(a.scale), *pm = InPtr(a.mean), *pv = InPtr(a.var);
  float *pds = OutPtr(a.dscale), *pdb = OutPtr(a.dbias);
  // sum(dy) and sum(dy * (x - mean)) per channel, in one pass.
  std::vector<double> s_dy(g.C, 0.0), s_dyx(g.C, 0.0);
  double *a1 = s_dy.data(), *a2 = s_dyx.data();
  const bool blocked = Blocked(a.x);
  if (g.N * g.S > 0 && blocked)
    ForEachRun16(g, [&](size_t cb, size_t off) {
      float s1[16], s2[16];
      RunSums2x16(pdy + off, px + off, g.S, pm + cb * 16, s1, s2);
      for (size_t j = 0; j < 16; ++j) {
        a1[cb * 16 + j] += s1[j];
        a2[cb * 16 + j] += s2[j];
      }
    });
  else if (g.N * g.S > 0)
    ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
      float s1, s2;
      RowSums2(pdy + off, px + off, g.S, pm[c], &s1, &s2);
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
  T* pdx = Out<T>(a.dx);
  if (blocked)
    return ForEachRun16(g, [&](size_t cb, size_t off) {
      const float *q = k1.data() + cb * 16, *b = k2.data() + cb * 16, *k = k3.data() + cb * 16;
      const T *d = pdy + off, *rr = px + off;
      T* o = pdx + off;
      for (size_t i = 0; i < g.S * 16; i += 16)
        for (size_t j = 0; j < 16; ++j)
          St(o, i + j, q[j] * Ld(d, i + j) - b[j] * Ld(rr, i + j) + k[j]);
    });
  ForEachRowByChannel(g, [&](size_t, size_t c, size_t off) {
    const float q = k1[c], b = k2[c], k = k3[c];
    const T* d = pdy + off;
    const T* rr = px + off;
    T* o = pdx + off;
    for (size_t i = 0; i < g.S; ++i) St(o, i, q * Ld(d, i) - b * Ld(rr, i) + k);
  });
}

Prepared<BnBwdArgs> Backward(const BnBwdArgs& args) {
  Prepared<BnBwdArgs> r;
  r.layouts = Offer(args.x, 3u);  // reads {dy, x, scale, mean, var}, writes {dx, dscale, dbias}
  r.run = [](const BnBwdArgs& a, float*) {
    ByElemType(a.x, [&](auto t) { RunBackward<decltype(t)>(a); });
  };
  return r;
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(BatchNormForwardTraining, kCpuRef, cpu::ForwardTraining);
SINGA_REGISTER_KERNEL(BatchNormForwardInference, kCpuRef, cpu::ForwardInference);
SINGA_REGISTER_KERNEL(BatchNormBackward, kCpuRef, cpu::Backward);

}  // namespace singa
