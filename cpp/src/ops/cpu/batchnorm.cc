// Batch normalisation over axis 1, the reference CPU kernels (backend kCpuRef).
//
// x is viewed as (N, C, S) with S the product of the axes after the channel (1 for a (N, C)
// input). Statistics are per channel, accumulated in double from float partial sums of each
// contiguous run of S values (in lanes: RowSum); the mean comes first, then the variance around
// it (two passes, no cancellation). Channels are split between OpenMP threads in blocks of
// neighbouring channels, about 256 values of each image per task (one channel of a 16x16
// image, 16 of a 4x4 one, 256 of a 2-d input: Geometry::Block), so each image's part of a task
// is contiguous. Normalisation is one fused y = x * a[c] + b[c] pass (+ a graph's fused
// residual add, + the ReLU). The backward may read its dy through a ReLU backward's mask
// instead (a graph's kEpiReLUGrad: MaskedGrad), in both of its passes.
//
// bfloat16 activations (x, dy, y, dx, the residual) are read into float and rounded once on
// store (elem_io.h): the bits of the float32 kernel between two conversions. A fused residual
// add rounds the batch norm's value to bfloat16 first, as the unfused Add reads it, so a
// graph's fused step equals the eager one bit for bit.
//
// A graph may keep x, y, dy and dx in MemLayout::kChannels16 (singa/core/layout.h: x stored as
// (N, C/16, S, 16)) or kChannelsLast ((N, S, C)). One set of loops serves the three layouts: x
// is a set of runs, each holding W channels (1 plain, 16 kept) of one image at S positions a
// stride apart (1, 16 or C; Geometry), and every channel gets the same lanes in the same order
// (the lanes, their sum, the tail) whatever the layout: all three give the same bits.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "../epilogue_cpu.h"
#include "../nn_kernels.h"
#include "elem_io.h"
#include "singa/core/cpu_features.h"
#include "singa/ops/elementwise_functors.h"

// batchnorm_avx512.cc compiles this file again with SINGA_BN_AVX512 (GCC on x86-64): everything
// defined below is then AVX-512 code, run only on a CPU that has it (the library's baseline is
// x86-64-v2).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SINGA_BN_HAS_AVX512 1
#else
#define SINGA_BN_HAS_AVX512 0
#endif
#ifdef SINGA_BN_AVX512
#pragma GCC target("arch=x86-64-v4")
#endif

namespace singa {
namespace cpu {
namespace {

constexpr size_t kGrain = 1 << 14;

// x as runs (file comment): run (n, c0) holds channels [c0, c0 + W) of image n, its S positions
// `stride` apart, at Offset(n, c0). Plain: W = 1, stride 1; nChw16c: W = 16, stride 16 (both at
// (n * C + c0) * S); channels-last: W of the C channels, stride C, at n * S * C + c0, with W the
// channels of a 64-byte cache line (16 float32, 32 bfloat16 values): two runs sharing a line
// would each read it, in different threads.
struct Geometry {
  size_t N, C, S;
  MemLayout layout = MemLayout::kPlain;
  size_t width = 1;
  Geometry(size_t n, size_t c, size_t s, MemLayout l = MemLayout::kPlain, bool bf16 = false)
      : N(n), C(c), S(s), layout(l), width(WidthOf(l, c, bf16)) {}
  static size_t WidthOf(MemLayout l, size_t c, bool bf16) {
    if (l == MemLayout::kPlain) return 1;
    return l == MemLayout::kChannelsLast && bf16 && c % 32 == 0 ? 32 : 16;
  }
  bool Last() const { return layout == MemLayout::kChannelsLast; }
  size_t Width() const { return width; }
  size_t Stride() const { return Last() ? C : Width(); }
  size_t Offset(size_t n, size_t c0) const { return Last() ? n * S * C + c0 : (n * C + c0) * S; }
  // Channels per thread's task: one run, or plain channels of kBlockFloats values per image
  // together (256 channels of a 2-d input, 16 of 4x4 images, one of 16x16 or more): a task
  // reads each image's part of x in one contiguous piece. One channel per task at 4x4 read
  // 64 bytes at a stride of C * 64 bytes, which the prefetchers did not follow: the plain
  // backward ran 3x slower than the nChw16c one on ResNet-18's last stage (512 x 4x4). The
  // order of the additions per channel is the same in any block.
  static constexpr size_t kBlockFloats = 256;
  size_t Block() const {
    if (layout != MemLayout::kPlain) return width;
    return std::max<size_t>(1, kBlockFloats / std::max<size_t>(S, 1));
  }
  size_t NumBlocks() const { return (C + Block() - 1) / Block(); }
  bool Parallel() const { return N * C * S >= kGrain && NumBlocks() > 1; }
};

// Runs body(c0, off) for every run (images in order), channels split between threads in blocks
// (a channel is only ever touched by one thread).
template <typename Body>
void ForEachRun(const Geometry& g, Body&& body) {
  const size_t B = g.Block(), W = g.Width();
  const std::ptrdiff_t nb = std::ptrdiff_t(g.NumBlocks());
#pragma omp parallel for schedule(static) if (g.Parallel())
  for (std::ptrdiff_t blk = 0; blk < nb; ++blk) {
    const size_t c0 = size_t(blk) * B, c1 = std::min(g.C, c0 + B);
    for (size_t n = 0; n < g.N; ++n)
      for (size_t c = c0; c < c1; c += W) body(c, g.Offset(n, c));
  }
}

// body(e, j) for element e of a run of width W (channel j of it) at stride: one flat loop for
// a plain run (W = 1: stride 1), else position by position, W channels each. A flat loop over a
// nChw16c run (channel e % 16 of element e) was not vectorised: the per-channel factors are
// read at e % 16, which GCC does not see as a contiguous row of 16; the batch norm forward and
// backward ran 2.5-3x slower in that layout than in the plain one (ResNet-18 training, fusion
// on).
template <size_t W, typename Body>
void ForEachInRun(size_t S, size_t stride, Body&& body) {
  // simd: a row (or a plain run of a small image) is 16 or 32 elements, too short to pay for
  // the aliasing checks GCC adds before each otherwise (body writes element e from reads of
  // element e only)
  if constexpr (W == 1) {
#pragma omp simd
    for (size_t e = 0; e < S; ++e) body(e, 0);
  } else {
    for (size_t s = 0; s < S; ++s)
#pragma omp simd
      for (size_t j = 0; j < W; ++j) body(s * stride + j, j);
  }
}

// Per-channel sums of a run in kLanes independent float accumulators: one accumulator makes the
// loop wait on each add's latency, lanes let it vectorise (about 4x on a batch norm's
// statistics). The order is fixed (lane by lane, the lanes in turn, then the tail) and the same
// whatever the layout, so the sums are deterministic, the same in every layout and for float and
// bfloat16 runs. Acc adds a lane's values for channel j: acc(lane accumulators of j, e, j).
constexpr size_t kLanes = 16;

template <size_t W, size_t K, typename Acc>
void RunSums(size_t S, size_t stride, Acc&& acc, float (*out)[W]) {
  float a[K][kLanes * W] = {};
  size_t i = 0;
  for (; i + kLanes <= S; i += kLanes) {
    if constexpr (W == 1) {  // stride 1; a wider run goes row by row (ForEachInRun)
#pragma omp simd
      for (size_t k = 0; k < kLanes; ++k) acc(a, k, i + k, 0);
    } else {
      for (size_t l = 0; l < kLanes; ++l)
#pragma omp simd
        for (size_t j = 0; j < W; ++j) acc(a, l * W + j, (i + l) * stride + j, j);
    }
  }
  for (size_t j = 0; j < W; ++j) {
    float t[K][1] = {};
    for (size_t l = 0; l < kLanes; ++l)
      for (size_t q = 0; q < K; ++q) t[q][0] += a[q][l * W + j];
    for (size_t k = i; k < S; ++k) acc(t, 0, k * stride + j, j);
    for (size_t q = 0; q < K; ++q) out[q][j] = t[q][0];
  }
}

// Channels-last, the fast way: image n's S positions of all C channels are one contiguous run of
// S * C values, so a pass reads memory in order and vectorises across channels (runs of 16 or 32
// channels at stride C read one cache line per position and ran at half the speed of the plain
// layout, ResNet-50 bf16). RunSumsAcross keeps RunSums's lanes and order for every channel (lane
// l of channel c adds positions l, l + kLanes, ...; then the lanes in turn, then the tail), so
// the sums have the bits of the other layouts. out: K rows of C.
template <size_t K, typename Acc>
void RunSumsAcross(size_t S, size_t C, Acc&& acc, float* out) {
  std::vector<float> buf(K * kLanes * C, 0.0f);
  float* a[K];
  for (size_t q = 0; q < K; ++q) a[q] = buf.data() + q * kLanes * C;
  size_t i = 0;
  for (; i + kLanes <= S; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l)
#pragma omp simd
      for (size_t c = 0; c < C; ++c) acc(a, l * C + c, (i + l) * C + c, c);
  for (size_t c = 0; c < C; ++c) {
    float t[K][1] = {};
    for (size_t l = 0; l < kLanes; ++l)
      for (size_t q = 0; q < K; ++q) t[q][0] += a[q][l * C + c];
    for (size_t k = i; k < S; ++k) acc(t, 0, k * C + c, c);
    for (size_t q = 0; q < K; ++q) out[q * C + c] = t[q][0];
  }
}

// Channels-last sums: run(n, out) fills image n's K x C float sums (RunSumsAcross), images in
// parallel; then they are added to the double totals image by image, as ForEachRun adds runs.
template <size_t K, typename Run>
void SumsAcross(const Geometry& g, Run&& run, double* const* totals) {
  std::vector<float> s(g.N * K * g.C);
  const std::ptrdiff_t N = std::ptrdiff_t(g.N);
#pragma omp parallel for schedule(static) if (g.N * g.C * g.S >= kGrain && g.N > 1)
  for (std::ptrdiff_t n = 0; n < N; ++n) run(size_t(n), s.data() + size_t(n) * K * g.C);
  for (size_t n = 0; n < g.N; ++n)
    for (size_t q = 0; q < K; ++q)
      for (size_t c = 0; c < g.C; ++c) totals[q][c] += s[(n * K + q) * g.C + c];
}

// body(i, c) for every element i of x (channel c): by runs (plain, nChw16c) or, channels-last,
// position by position across all channels.
template <size_t W, typename Body>
void ForEachElement(const Geometry& g, Body&& body) {
  if (!g.Last()) {
    const size_t stride = g.Stride();
    ForEachRun(g, [&](size_t c0, size_t off) {
      ForEachInRun<W>(g.S, stride, [&](size_t e, size_t j) { body(off + e, c0 + j); });
    });
    return;
  }
  const std::ptrdiff_t P = std::ptrdiff_t(g.N * g.S);
  const size_t C = g.C;
#pragma omp parallel for schedule(static) if (g.N * g.C * g.S >= kGrain)
  for (std::ptrdiff_t p = 0; p < P; ++p)
#pragma omp simd
    for (size_t c = 0; c < C; ++c) body(size_t(p) * C + c, c);
}

// Per-channel sum of f(x, c) over N and S.
template <size_t W, typename T, typename F>
void ChannelSums(const Geometry& g, const T* x, F f, std::vector<double>* out) {
  out->assign(g.C, 0.0);
  double* sum = out->data();
  if (g.Last()) {
    SumsAcross<1>(g, [&](size_t n, float* o) {
      const T* r = x + n * g.S * g.C;
      RunSumsAcross<1>(g.S, g.C,
                       [&](auto& a, size_t k, size_t e, size_t c) { a[0][k] += f(Ld(r, e), c); },
                       o);
    }, &sum);
    return;
  }
  const size_t stride = g.Stride();
  ForEachRun(g, [&](size_t c0, size_t off) {
    const T* r = x + off;
    float s[1][W];
    RunSums<W, 1>(g.S, stride,
                  [&](auto& a, size_t k, size_t e, size_t j) { a[0][k] += f(Ld(r, e), c0 + j); },
                  s);
    for (size_t j = 0; j < W; ++j) sum[c0 + j] += s[0][j];
  });
}

// Calls f(std::integral_constant<size_t, W>) with the run width of g's layout.
template <typename F>
void ByWidth(const Geometry& g, F&& f) {
  if (g.Width() == 1) f(std::integral_constant<size_t, 1>{});
  else if (g.Width() == 16) f(std::integral_constant<size_t, 16>{});
  else f(std::integral_constant<size_t, 32>{});
}

// y = x * a[c] + b[c] (+ res, a fused residual add: null when none), then max(0, .) when relu.
template <size_t W, typename T>
void Affine(const Geometry& g, const T* x, const float* a, const float* b, const T* res,
            bool relu, T* y) {
  if (res) {
    if (relu)
      ForEachElement<W>(g, [&](size_t i, size_t c) {
        St(y, i, fn::ReLUOp{}(Rounded(Ld(x, i) * a[c] + b[c], y) + Ld(res, i)));
      });
    else
      ForEachElement<W>(g, [&](size_t i, size_t c) {
        St(y, i, Rounded(Ld(x, i) * a[c] + b[c], y) + Ld(res, i));
      });
  } else if (relu) {
    ForEachElement<W>(g, [&](size_t i, size_t c) {
      St(y, i, fn::ReLUOp{}(Ld(x, i) * a[c] + b[c]));  // NaN kept
    });
  } else {
    ForEachElement<W>(g, [&](size_t i, size_t c) { St(y, i, Ld(x, i) * a[c] + b[c]); });
  }
}

// The residual of a fused add (Graph: epilogue fusion), or null.
template <typename T>
const T* Residual(const Epilogue& e) {
  return e.residual ? static_cast<const T*>(e.residual->data()) : nullptr;
}

// x's geometry in the layout the graph chose for it (and so for y, dy, dx: one group,
// graph/layouts.cc).
Geometry GeometryOf(size_t N, size_t C, size_t S, const Tensor& x) {
  return Geometry(N, C, S, x.block()->mem_layout(), x.data_type() == kBFloat16);
}
// The operands a graph may keep in either layout: reads[0..n) by mask, writes[0].
LayoutHooks Offer(const Tensor& x, uint32_t reads) {
  return OffersChannels16(x) ? LayoutHooks::Both(reads, 1u, true) : LayoutHooks{};
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
  const Geometry g = GeometryOf(a.N, a.C, a.S, a.x);
  ByWidth(g, [&](auto w) {
    Affine<decltype(w)::value>(g, In<T>(a.x), k.data(), b.data(), Residual<T>(a.epi), a.relu,
                               Out<T>(a.y));
  });
}

template <typename T>
void RunTraining(const BnTrainArgs& a) {
  const Geometry g = GeometryOf(a.N, a.C, a.S, a.x);
  const T* px = In<T>(a.x);
  const double M = double(g.N * g.S);
  std::vector<double> sum, sq;
  auto sums = [&](auto f, std::vector<double>* out) {
    ByWidth(g, [&](auto w) { ChannelSums<decltype(w)::value>(g, px, f, out); });
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
    const Geometry g = GeometryOf(a.N, a.C, a.S, a.x);
    const float *ps = InPtr(a.scale), *pb = InPtr(a.bias), *pm = InPtr(a.running_mean),
                *pv = InPtr(a.running_var);
    std::vector<float> k(g.C), b(g.C);
    FoldBatchNorm(ps, pb, pm, pv, a.eps, g.C, k.data(), b.data());
    ByElemType(a.x, [&](auto t) {
      using T = decltype(t);
      ByWidth(g, [&](auto w) {
        Affine<decltype(w)::value>(g, In<T>(a.x), k.data(), b.data(), Residual<T>(a.epi),
                                   a.relu, Out<T>(a.y));
      });
    });
  };
  r.epilogue = kEpiAdd;
  return r;
}

// The backward's incoming gradient dy, element by element: as stored, or (a graph's kEpiReLUGrad)
// ReLUBackward(dy, mask) computed where it is read, with the op's semantics: 0 where
// mask <= 0, dy elsewhere (a NaN mask passes dy, a NaN dy is zeroed where mask <= 0). Both read
// the same floats the stored dz would hold (bfloat16: dz's bits are dy's or zero), so a fused
// run has the unfused bits.
template <typename T>
struct Grad {
  const T* dy;
  float operator()(size_t e) const { return Ld(dy, e); }
  Grad At(size_t off) const { return {dy + off}; }
};
template <typename T>
struct MaskedGrad {
  const T *dy, *mask;
  float operator()(size_t e) const {
    // both loads unconditional: a select GCC vectorises (loading dy only where the mask passes
    // it made the loops scalar and branchy, 5x slower than the unfused pair)
    const float d = Ld(dy, e), m = Ld(mask, e);
    return m <= 0.f ? 0.f : d;
  }
  MaskedGrad At(size_t off) const { return {dy + off, mask + off}; }
};

template <size_t W, typename T, typename G>
void RunBackward(const BnBwdArgs& a, const Geometry& g, const G& dy) {
  const float eps = a.eps;
  const T* px = In<T>(a.x);
  const float *ps = InPtr(a.scale), *pm = InPtr(a.mean), *pv = InPtr(a.var);
  float *pds = OutPtr(a.dscale), *pdb = OutPtr(a.dbias);
  const size_t stride = g.Stride();
  // sum(dy) and sum(dy * (x - mean)) per channel, in one pass.
  std::vector<double> s_dy(g.C, 0.0), s_dyx(g.C, 0.0);
  double *a1 = s_dy.data(), *a2 = s_dyx.data();
  auto two = [&](const G& d, const T* r, const float* m) {
    return [d, r, m](auto& acc, size_t k, size_t e, size_t j) {
      const float di = d(e);
      acc[0][k] += di;
      acc[1][k] += di * (Ld(r, e) - m[j]);
    };
  };
  if (g.N * g.S > 0 && g.Last()) {
    double* totals[2] = {a1, a2};
    SumsAcross<2>(g, [&](size_t n, float* o) {
      const size_t off = n * g.S * g.C;
      RunSumsAcross<2>(g.S, g.C, two(dy.At(off), px + off, pm), o);
    }, totals);
  } else if (g.N * g.S > 0)
    ForEachRun(g, [&](size_t c0, size_t off) {
      const T* r = px + off;
      const float* m = pm + c0;
      float s[2][W];
      RunSums<W, 2>(g.S, stride, two(dy.At(off), r, m), s);
      for (size_t j = 0; j < W; ++j) {
        a1[c0 + j] += s[0][j];
        a2[c0 + j] += s[1][j];
      }
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
  const float *q = k1.data(), *b = k2.data(), *k = k3.data();
  ForEachElement<W>(g, [&](size_t i, size_t c) {
    St(pdx, i, q[c] * dy(i) - b[c] * Ld(px, i) + k[c]);
  });
}

// A tensor that is its whole block, from offset 0: a graph's kEpiReLUGrad blocks replace it.
bool WholeBlock(const Tensor& t) {
  return t.IsContiguous() && t.block() && t.MemSize() == t.block()->size();
}

Prepared<BnBwdArgs> Backward(const BnBwdArgs& args) {
  Prepared<BnBwdArgs> r;
  r.layouts = Offer(args.x, 3u);  // reads {dy, x, scale, mean, var}, writes {dx, dscale, dbias}
  r.run = [](const BnBwdArgs& a, float*) {
    const Geometry g = GeometryOf(a.N, a.C, a.S, a.x);
    ByElemType(a.x, [&](auto t) {
      using T = decltype(t);
      ByWidth(g, [&](auto w) {
        constexpr size_t W = decltype(w)::value;
        if (a.epi.relu_mask)
          RunBackward<W, T>(a, g, MaskedGrad<T>{static_cast<const T*>(a.epi.relu_dy->data()),
                                                static_cast<const T*>(a.epi.relu_mask->data())});
        else
          RunBackward<W, T>(a, g, Grad<T>{In<T>(a.dy)});
      });
    });
  };
  if (WholeBlock(args.dy) && WholeBlock(args.x)) r.epilogue = kEpiReLUGrad;
  return r;
}

}  // namespace

// The kernels of the AVX-512 copy (batchnorm_avx512.cc), and the choice between the two.
namespace bn_avx512 {
Prepared<BnTrainArgs> ForwardTraining(const BnTrainArgs& a);
Prepared<BnInferArgs> ForwardInference(const BnInferArgs& a);
Prepared<BnBwdArgs> Backward(const BnBwdArgs& a);
}  // namespace bn_avx512
#ifdef SINGA_BN_AVX512
Prepared<BnTrainArgs> bn_avx512::ForwardTraining(const BnTrainArgs& a) {
  return cpu::ForwardTraining(a);
}
Prepared<BnInferArgs> bn_avx512::ForwardInference(const BnInferArgs& a) {
  return cpu::ForwardInference(a);
}
Prepared<BnBwdArgs> bn_avx512::Backward(const BnBwdArgs& a) { return cpu::Backward(a); }
#else
namespace {
// The copy runs twice as fast as the baseline's 128-bit loops (bfloat16 ResNet-50 shapes, one
// thread) with the same bits: neither contracts a * b + c into an FMA.
bool Avx512() {
  static const bool has = CpuHas("avx512f") && CpuHas("avx512bw") && CpuHas("avx512dq") &&
                          CpuHas("avx512vl");
  return has;
}
Prepared<BnTrainArgs> ForwardTrainingOf(const BnTrainArgs& a) {
#if SINGA_BN_HAS_AVX512
  if (Avx512()) return bn_avx512::ForwardTraining(a);
#endif
  return ForwardTraining(a);
}
Prepared<BnInferArgs> ForwardInferenceOf(const BnInferArgs& a) {
#if SINGA_BN_HAS_AVX512
  if (Avx512()) return bn_avx512::ForwardInference(a);
#endif
  return ForwardInference(a);
}
Prepared<BnBwdArgs> BackwardOf(const BnBwdArgs& a) {
#if SINGA_BN_HAS_AVX512
  if (Avx512()) return bn_avx512::Backward(a);
#endif
  return Backward(a);
}
}  // namespace
#endif
}  // namespace cpu

#ifndef SINGA_BN_AVX512
SINGA_REGISTER_KERNEL(BatchNormForwardTraining, kCpuRef, cpu::ForwardTrainingOf);
SINGA_REGISTER_KERNEL(BatchNormForwardInference, kCpuRef, cpu::ForwardInferenceOf);
SINGA_REGISTER_KERNEL(BatchNormBackward, kCpuRef, cpu::BackwardOf);
#endif

}  // namespace singa
