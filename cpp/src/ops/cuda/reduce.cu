// CUDA kernels of the reductions and the softmax family on the (outer, mid, inner) layout of
// kernel_slots.h (fronts: ops/reduce.cc; CPU reference: ops/cpu/reduce.cc).
//
// Three shapes of work: inner == 1 (a reduction over the last axis, the common case) gives one
// block per row and a shared-memory tree; a long reduced axis otherwise (a bias gradient's
// column sums) gives column strips, whose lanes split the rows (cuda_kernels.cuh); short ones
// one thread per output column walking the reduced axis (consecutive threads read consecutive
// addresses). Numerics follow the CPU kernels: float32 sums accumulate in double, int32 sums in
// int64; max/min propagate NaN and argmax/argmin report the first extreme element; softmax
// subtracts the row maximum and sums in double. float16 data (GPU only) is read as float and each
// output rounded once to half.
#include <cmath>
#include <limits>

#include "../nn_kernels.h"
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

// ---- reduction operators: a State starts empty (n == 0), Steps over elements, Merges with the
// state of another part (order-free, so the block tree may group them in any way) and Finishes
// into the output element. ----

// What SumR and ExtremeR share: a state holding a value and how many elements went into it.
template <typename V>
struct CountedR {
  static constexpr bool kArg = false;
  struct State {
    V v;
    long long n;
  };
  __device__ static State Init() { return {V(0), 0}; }
};

template <typename T>
using SumAcc = std::conditional_t<std::is_integral_v<T>, long long, double>;

template <typename T, bool kMean>
struct SumR : CountedR<SumAcc<T>> {
  using Acc = SumAcc<T>;
  using Out = T;
  using State = typename CountedR<Acc>::State;
  __device__ static void Step(State& s, T x, long long) {
    s.v += static_cast<Acc>(x);
    ++s.n;
  }
  __device__ State operator()(State a, const State& b) const {
    a.v += b.v;
    a.n += b.n;
    return a;
  }
  __device__ static Out Finish(const State& s, long long red) {
    if (kMean) {
      // The mean of nothing is NaN (as numpy and the CPU kernel).
      const double m = red == 0 ? std::numeric_limits<double>::quiet_NaN()
                                : static_cast<double>(s.v) / static_cast<double>(red);
      return static_cast<Out>(m);
    }
    return static_cast<Out>(s.v);
  }
};

// Does x replace the current best? NaN wins over numbers; ties keep the earlier element.
template <typename T, bool kMax>
__device__ __forceinline__ bool Better(T x, T cur) {
  if (IsNaN(cur)) return false;
  if (IsNaN(x)) return true;
  return kMax ? x > cur : x < cur;
}

template <typename T, bool kMax>
struct ExtremeR : CountedR<T> {
  using Out = T;
  using State = typename CountedR<T>::State;
  __device__ static void Step(State& s, T x, long long) {
    if (s.n == 0 || Better<T, kMax>(x, s.v)) s.v = x;
    ++s.n;
  }
  __device__ State operator()(State a, const State& b) const {
    if (b.n == 0) return a;
    if (a.n == 0 || Better<T, kMax>(b.v, a.v)) a.v = b.v;
    a.n += b.n;
    return a;
  }
  __device__ static Out Finish(const State& s, long long) { return s.v; }
};

template <typename T, bool kMax>
struct ArgR {
  static constexpr bool kArg = true;
  using Out = int32_t;
  struct State {
    T v;
    long long idx;  // -1: empty
  };
  __device__ static State Init() { return {T(0), -1}; }
  __device__ static void Step(State& s, T x, long long r) {
    if (s.idx < 0 || Better<T, kMax>(x, s.v)) s = {x, r};
  }
  __device__ State operator()(State a, const State& b) const {
    if (b.idx < 0) return a;
    if (a.idx < 0) return b;
    if (Better<T, kMax>(b.v, a.v) || (!Better<T, kMax>(a.v, b.v) && b.idx < a.idx)) return b;
    return a;
  }
  __device__ static Out Finish(const State& s, long long) {
    return static_cast<Out>(s.idx < 0 ? 0 : s.idx);
  }
};

// The ops compute in M (float for float16 data); the output element type: the data's, or int32
// for the arg ops.
template <typename T, typename Op>
using ReduceOut = std::conditional_t<Op::kArg, int32_t, T>;

// out[c] over columns c = o * inner + i: one thread each, walking r.
template <typename T, typename Op>
__global__ void ReduceColumns(Op op, const T* x, ReduceOut<T, Op>* y, int64_t outer, int64_t red,
                              int64_t inner) {
  using M = MathType<T>;
  SINGA_GRID_STRIDE(c, outer * inner) {
    const int64_t o = c / inner, i = c % inner;
    const T* col = x + o * red * inner + i;
    auto st = Op::Init();
    for (int64_t r = 0; r < red; ++r) Op::Step(st, Convert<M>(col[r * inner]), r);
    y[c] = Convert<ReduceOut<T, Op>>(Op::Finish(st, red));
  }
}

// out[c] over columns c = o * inner + i with many rows: a strip block per kStripCols columns of
// one o (cuda_kernels.cuh), its lanes splitting the rows.
template <typename T, typename Op>
__global__ void __launch_bounds__(kStripCols * kStripLanes)
    ReduceColumnStrips(Op op, const T* x, ReduceOut<T, Op>* y, int64_t outer, int64_t red,
                       int64_t inner) {
  using M = MathType<T>;
  __shared__ typename Op::State smem[kStripLanes * kStripCols];
  const int64_t strips = Strips(inner);
  for (int64_t s = blockIdx.x; s < outer * strips; s += gridDim.x) {  // the same for the block
    const int64_t o = s / strips, i = (s % strips) * kStripCols + threadIdx.x;
    auto st = Op::Init();
    if (i < inner) {
      const T* col = x + o * red * inner + i;
      for (int64_t r = threadIdx.y; r < red; r += kStripLanes)
        Op::Step(st, Convert<M>(col[r * inner]), r);
    }
    st = StripReduce(st, op, smem);
    if (threadIdx.y == 0 && i < inner)
      y[o * inner + i] = Convert<ReduceOut<T, Op>>(Op::Finish(st, red));
  }
}

// inner == 1: one block per row o (grid-stride over rows), a tree over the threads.
template <typename T, typename Op>
__global__ void ReduceRows(Op op, const T* x, ReduceOut<T, Op>* y, int64_t outer, int64_t red) {
  using M = MathType<T>;
  __shared__ typename Op::State smem[kThreads];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const T* row = x + o * red;
    auto st = Op::Init();
    for (int64_t r = threadIdx.x; r < red; r += blockDim.x) Op::Step(st, Convert<M>(row[r]), r);
    st = BlockReduce(st, op, smem);
    if (threadIdx.x == 0) y[o] = Convert<ReduceOut<T, Op>>(Op::Finish(st, red));
  }
}

// T: the stored element type (float, int32_t or __half); Op computes in MathType<T>.
template <typename T, typename Op>
void ReduceLaunch(const char* name, const Tensor& src, const Dims3& d, const Tensor& out,
                  Context* ctx) {
  const int64_t nout = int64_t(d.outer * d.inner);
  if (nout == 0) return;
  const T* x = DevPtr<const T>(src);
  auto* y = MutDevPtr<ReduceOut<T, Op>>(out);
  if (d.inner == 1 && d.mid >= 64)
    ReduceRows<T, Op><<<UnitBlocks(int64_t(d.outer)), kThreads, 0, Stream(ctx)>>>(
        Op{}, x, y, int64_t(d.outer), int64_t(d.mid));
  else if (d.mid >= 64)
    ReduceColumnStrips<T, Op>
        <<<UnitBlocks(int64_t(d.outer) * Strips(int64_t(d.inner))), dim3(kStripCols, kStripLanes),
           0, Stream(ctx)>>>(Op{}, x, y, int64_t(d.outer), int64_t(d.mid), int64_t(d.inner));
  else
    ReduceColumns<T, Op><<<Blocks(nout), kThreads, 0, Stream(ctx)>>>(
        Op{}, x, y, int64_t(d.outer), int64_t(d.mid), int64_t(d.inner));
  SINGA_CUDA_CHECK_LAUNCH(name);
}

// The element type is the source's (float32, int32, or float16 on the GPU; the front checked).
// One instantiation per reduction: its op id (for messages), the operator template R (SumR,
// ExtremeR, ArgR) and R's flag (mean; max), registered at the end of this file.
template <OpId kId, template <typename, bool> class R, bool kFlag>
void ReduceKernel(const Tensor& src, const Dims3& d, const Tensor& out, Context* ctx) {
  const char* name = OpName(kId);
  switch (src.data_type()) {
    case kFloat32:
      return ReduceLaunch<float, R<float, kFlag>>(name, src, d, out, ctx);
    case kInt:
      return ReduceLaunch<int32_t, R<int32_t, kFlag>>(name, src, d, out, ctx);
    case kFloat16:
      return ReduceLaunch<__half, R<float, kFlag>>(name, src, d, out, ctx);
    default:
      SINGA_THROW(DTypeError, name << ": dtype " << DataTypeName(src.data_type())
                                   << " is not supported (float32, int32 or float16)");
  }
}

// ---- softmax family along d.mid of a contiguous (outer, dim, inner) layout: float32 data, or
// float16 on the GPU (read as float, each output rounded once). ----

// One (o, i) line of `dim` elements `inner` apart, read by `lanes` threads starting at `lane`;
// Reduce combines the lanes' partial results (a block tree, or nothing for one lane). The last
// pass recomputes exp(x - max) rather than re-reading it from y: the same float value (so float32
// results equal the CPU's, which stores it then scales), and no float16 rounding in between.
template <bool kLog, typename T, typename Reduce>
__device__ void SoftMaxLine(const T* x, T* y, int64_t dim, int64_t inner, int64_t lane,
                            int64_t lanes, const Reduce& reduce) {
  float mx = -INFINITY;
  for (int64_t k = lane; k < dim; k += lanes) mx = MaxMerge{}(mx, Convert<float>(x[k * inner]));
  mx = reduce(mx, MaxMerge{});
  double sum = 0.0;
  for (int64_t k = lane; k < dim; k += lanes) sum += expf(Convert<float>(x[k * inner]) - mx);
  sum = reduce(sum, SumMerge{});
  if (kLog) {
    // (x - max) - log(sum), as the CPU: max + log(sum) first loses log(sum) when |max| is large
    const double log_sum = log(sum);
    for (int64_t k = lane; k < dim; k += lanes)
      y[k * inner] = Convert<T>(static_cast<float>(
          (static_cast<double>(Convert<float>(x[k * inner])) - mx) - log_sum));
  } else {
    const double inv = 1.0 / sum;
    for (int64_t k = lane; k < dim; k += lanes) {
      const float e = expf(Convert<float>(x[k * inner]) - mx);
      y[k * inner] = Convert<T>(static_cast<float>(e * inv));
    }
  }
}

// dx = y * (dy - sum(dy * y)) along one line.
template <typename T, typename Reduce>
__device__ void SoftMaxBackwardLine(const T* dy, const T* y, T* dx, int64_t dim, int64_t inner,
                                    int64_t lane, int64_t lanes, const Reduce& reduce) {
  double dot = 0.0;
  for (int64_t k = lane; k < dim; k += lanes)
    dot += static_cast<double>(Convert<float>(dy[k * inner])) * Convert<float>(y[k * inner]);
  dot = reduce(dot, SumMerge{});
  for (int64_t k = lane; k < dim; k += lanes) {
    const float yk = Convert<float>(y[k * inner]), dyk = Convert<float>(dy[k * inner]);
    dx[k * inner] = Convert<T>(static_cast<float>(yk * (dyk - dot)));
  }
}

struct NoReduce {  // a single thread holds the whole line
  template <typename V, typename M>
  __device__ V operator()(V v, const M&) const { return v; }
};
struct BlockTree {  // the block's threads share the line
  float* fsmem;
  double* dsmem;
  __device__ float operator()(float v, const MaxMerge& m) const { return BlockReduce(v, m, fsmem); }
  __device__ double operator()(double v, const SumMerge& m) const {
    return BlockReduce(v, m, dsmem);
  }
};

template <bool kLog, typename T>
__global__ void SoftMaxColumns(const T* x, T* y, int64_t outer, int64_t dim, int64_t inner) {
  SINGA_GRID_STRIDE(c, outer * inner) {
    const int64_t base = (c / inner) * dim * inner + c % inner;
    SoftMaxLine<kLog>(x + base, y + base, dim, inner, 0, 1, NoReduce{});
  }
}

template <bool kLog, typename T>
__global__ void SoftMaxRows(const T* x, T* y, int64_t outer, int64_t dim) {
  __shared__ float fsmem[kThreads];
  __shared__ double dsmem[kThreads];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x)
    SoftMaxLine<kLog>(x + o * dim, y + o * dim, dim, 1, threadIdx.x, blockDim.x,
                      BlockTree{fsmem, dsmem});
}

template <typename T>
__global__ void SoftMaxBackwardColumns(const T* dy, const T* y, T* dx, int64_t outer,
                                       int64_t dim, int64_t inner) {
  SINGA_GRID_STRIDE(c, outer * inner) {
    const int64_t base = (c / inner) * dim * inner + c % inner;
    SoftMaxBackwardLine(dy + base, y + base, dx + base, dim, inner, 0, 1, NoReduce{});
  }
}

template <typename T>
__global__ void SoftMaxBackwardRows(const T* dy, const T* y, T* dx, int64_t outer, int64_t dim) {
  __shared__ float fsmem[kThreads];
  __shared__ double dsmem[kThreads];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x)
    SoftMaxBackwardLine(dy + o * dim, y + o * dim, dx + o * dim, dim, 1, threadIdx.x, blockDim.x,
                        BlockTree{fsmem, dsmem});
}

template <bool kLog>
void SoftMaxRun(const Tensor& in, const Dims3& d, const Tensor& out, Context* ctx) {
  const char* name = kLog ? "LogSoftMax" : "SoftMax";
  const int64_t lines = int64_t(d.outer * d.inner);
  if (lines == 0 || d.mid == 0) return;
  WithFloatType(name, in.data_type(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = DevPtr<const T>(in);
    T* y = MutDevPtr<T>(out);
    if (d.inner == 1 && d.mid >= 64)
      SoftMaxRows<kLog, T><<<UnitBlocks(int64_t(d.outer)), kThreads, 0, Stream(ctx)>>>(
          x, y, int64_t(d.outer), int64_t(d.mid));
    else
      SoftMaxColumns<kLog, T><<<Blocks(lines), kThreads, 0, Stream(ctx)>>>(
          x, y, int64_t(d.outer), int64_t(d.mid), int64_t(d.inner));
    SINGA_CUDA_CHECK_LAUNCH(name);
  });
}

void SoftMaxBackwardRun(const Tensor& dy, const Tensor& y, const Dims3& d, const Tensor& dx,
                        Context* ctx) {
  const int64_t lines = int64_t(d.outer * d.inner);
  if (lines == 0 || d.mid == 0) return;
  WithFloatType("SoftMaxBackward", y.data_type(), [&](auto zero) {
    using T = decltype(zero);
    const T* pdy = DevPtr<const T>(dy);
    const T* py = DevPtr<const T>(y);
    T* pdx = MutDevPtr<T>(dx);
    if (d.inner == 1 && d.mid >= 64)
      SoftMaxBackwardRows<T><<<UnitBlocks(int64_t(d.outer)), kThreads, 0, Stream(ctx)>>>(
          pdy, py, pdx, int64_t(d.outer), int64_t(d.mid));
    else
      SoftMaxBackwardColumns<T><<<Blocks(lines), kThreads, 0, Stream(ctx)>>>(
          pdy, py, pdx, int64_t(d.outer), int64_t(d.mid), int64_t(d.inner));
    SINGA_CUDA_CHECK_LAUNCH("SoftMaxBackward");
  });
}

// schema/nn.py's softmax rows: the kernels above on the output's stream.
template <bool kLog>
Prepared<SoftMaxArgs> SoftMaxFamily(const SoftMaxArgs&) {
  Prepared<SoftMaxArgs> r;
  r.run = [](const SoftMaxArgs& a, float*) {
    SoftMaxRun<kLog>(a.x, Dims3{a.outer, a.dim, a.inner}, a.y, a.y.device()->context());
  };
  return r;
}

Prepared<SoftMaxBwdArgs> PrepareSoftMaxBackward(const SoftMaxBwdArgs&) {
  Prepared<SoftMaxBwdArgs> r;
  r.run = [](const SoftMaxBwdArgs& a, float*) {
    SoftMaxBackwardRun(a.dy, a.y, Dims3{a.outer, a.dim, a.inner}, a.dx, a.dx.device()->context());
  };
  return r;
}

}  // namespace
}  // namespace cuda

// Each reduction: (slot, its op id, operator, flag); the slot and the op id share the name.
#define SINGA_CUDA_REDUCTION(Name, R, flag) \
  SINGA_REGISTER_KERNEL(Name, kCuda, (&cuda::ReduceKernel<OpId::k##Name, cuda::R, flag>))
SINGA_CUDA_REDUCTION(ReduceSum, SumR, false);
SINGA_CUDA_REDUCTION(ReduceMean, SumR, true);
SINGA_CUDA_REDUCTION(ReduceMax, ExtremeR, true);
SINGA_CUDA_REDUCTION(ReduceMin, ExtremeR, false);
SINGA_CUDA_REDUCTION(Argmax, ArgR, true);
SINGA_CUDA_REDUCTION(Argmin, ArgR, false);
#undef SINGA_CUDA_REDUCTION
SINGA_REGISTER_KERNEL(SoftMax, kCuda, &cuda::SoftMaxFamily<false>);
SINGA_REGISTER_KERNEL(LogSoftMax, kCuda, &cuda::SoftMaxFamily<true>);
SINGA_REGISTER_KERNEL(SoftMaxBackward, kCuda, &cuda::PrepareSoftMaxBackward);

}  // namespace singa
