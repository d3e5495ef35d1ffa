// Reductions (sum, mean, max, min, argmax, argmin), SINGA's row/column reductions and softmax on
// the CPU (see singa/ops/reduce.h).
//
// Every reduction is planned as out[o, i] = reduce over r of x[o, r, i] on a buffer laid out as
// (outer, red, inner): the reduced axes, once size-1 axes are dropped and neighbours merged,
// usually form one block (a sum over the batch axis, over the last axis, over all axes).
// Transposed views are planned in memory order and reduced without a copy when that order keeps
// the output's axes in their logical order; other strided inputs are copied first. When the
// reduced axes are scattered (axes 0 and 2 of a 4-d tensor), the kept axes are permuted to the
// front and copied, which leaves inner == 1. Kernels walk `inner` in blocks of columns so that
// the inner loop is contiguous and vectorises, use interleaved lanes for single columns, and
// split long reductions between threads when there are too few outputs to keep them busy.
//
// Accuracy: float32 sums accumulate in double, int32 sums in int64 (results are cast back), so
// sums of millions of elements match a float64 reference to ~1e-7.
#include "singa/ops/reduce.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../core/dispatch.h"
#include "singa/ops/shape.h"
#include "strided.h"

namespace singa {
namespace {

// Columns handled together by one task: a stack array of states, and a contiguous inner loop.
constexpr size_t kBlock = 256;

void CheckInput(const char* op, const Tensor& in) {
  SINGA_CHECK(in.block() != nullptr, ValueError, op << ": the input tensor is empty (no memory)");
}

// ---- reduction operators: Start a state from the first element, Step with the next ones, Merge
// the state of a later chunk into an earlier one, Finish into the output element. ----

template <typename T>
struct SumOp {
  using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  using Out = T;
  struct State {
    Acc v;
  };
  bool mean = false;
  static State Start(T x, size_t) { return {static_cast<Acc>(x)}; }
  static void Step(State& s, T x, size_t) { s.v += static_cast<Acc>(x); }
  static void Merge(State& a, const State& b) { a.v += b.v; }
  Out Finish(const State& s, size_t n) const {
    return mean ? static_cast<Out>(static_cast<double>(s.v) / static_cast<double>(n))
                : static_cast<Out>(s.v);
  }
  // Sum of nothing is 0; the mean of nothing is NaN (numpy warns and returns nan).
  Out Empty() const {
    if (mean) return static_cast<Out>(std::numeric_limits<double>::quiet_NaN());
    return Out(0);
  }
};

// Does x replace the current best? NaN wins over numbers (numpy propagates NaN through max/min
// and argmax reports the first NaN); ties keep the earlier element.
template <typename T, bool kMax>
inline bool Better(T x, T cur) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(cur)) return false;
    if (std::isnan(x)) return true;
  }
  return kMax ? x > cur : x < cur;
}

template <typename T, bool kMax>
struct ExtremeOp {
  using Out = T;
  struct State {
    T v;
  };
  static State Start(T x, size_t) { return {x}; }
  static void Step(State& s, T x, size_t) {
    if (Better<T, kMax>(x, s.v)) s.v = x;
  }
  static void Merge(State& a, const State& b) { Step(a, b.v, 0); }
  Out Finish(const State& s, size_t) const { return s.v; }
  Out Empty() const { return T(0); }  // never used: empty max/min is rejected before
};

template <typename T, bool kMax>
struct ArgOp {
  using Out = int32_t;
  struct State {
    T v;
    size_t idx;
  };
  static State Start(T x, size_t r) { return {x, r}; }
  static void Step(State& s, T x, size_t r) {
    if (Better<T, kMax>(x, s.v)) s = {x, r};
  }
  // Order-free (ties and NaNs go to the smaller index), so that interleaved lanes and thread
  // chunks may be merged in any grouping and still report the first extreme element.
  static void Merge(State& a, const State& b) {
    if (Better<T, kMax>(b.v, a.v) || (!Better<T, kMax>(a.v, b.v) && b.idx < a.idx)) a = b;
  }
  Out Finish(const State& s, size_t) const { return static_cast<Out>(s.idx); }
  Out Empty() const { return 0; }
};

// States of columns [i0, i0 + n) over reduction rows [rb, re) (re > rb).
template <typename T, typename Op>
inline void ReduceColumns(const T* x, size_t inner, size_t n, size_t rb, size_t re,
                          typename Op::State* st) {
  constexpr size_t kLanes = 8;
  if (n == 1 && re - rb >= 2 * kLanes) {
    // One column (a row sum when inner == 1): a single accumulator would be one long chain of
    // dependent adds; interleaved lanes let the CPU overlap them, then merge in order.
    typename Op::State lane[kLanes];
    for (size_t l = 0; l < kLanes; ++l) lane[l] = Op::Start(x[(rb + l) * inner], rb + l);
    size_t r = rb + kLanes;
    for (; r + kLanes <= re; r += kLanes)
      for (size_t l = 0; l < kLanes; ++l) Op::Step(lane[l], x[(r + l) * inner], r + l);
    for (size_t l = 0; r + l < re; ++l) Op::Step(lane[l], x[(r + l) * inner], r + l);
    for (size_t l = 1; l < kLanes; ++l) Op::Merge(lane[0], lane[l]);
    st[0] = lane[0];
    return;
  }
  for (size_t i = 0; i < n; ++i) st[i] = Op::Start(x[rb * inner + i], rb);
  for (size_t r = rb + 1; r < re; ++r) {
    const T* row = x + r * inner;
    for (size_t i = 0; i < n; ++i) Op::Step(st[i], row[i], r);
  }
}

// out[o * inner + i] = reduce_r x[(o * red + r) * inner + i].
template <typename T, typename Op>
void ReduceKernel(const T* x, typename Op::Out* y, size_t outer, size_t red, size_t inner,
                  const Op& op) {
  using State = typename Op::State;
  const size_t nout = outer * inner;
  if (nout == 0) return;
  if (red == 0) {
    std::fill(y, y + nout, op.Empty());
    return;
  }
  const size_t total = nout * red;
  const size_t width = std::min(inner, kBlock);
  const size_t nblk = (inner + width - 1) / width;
  const std::ptrdiff_t tasks = static_cast<std::ptrdiff_t>(outer * nblk);
  const size_t nt = static_cast<size_t>(MaxThreads());
  const bool parallel = total >= kParallelGrain;
  // Too few tasks for the threads: also split the reduced axis, then merge chunks in order.
  size_t splits = 1;
  if (parallel && static_cast<size_t>(tasks) < nt) splits = std::min(nt, red / 64 + 1);

  if (splits == 1) {
#pragma omp parallel for schedule(static) if (parallel && tasks > 1)
    for (std::ptrdiff_t t = 0; t < tasks; ++t) {
      const size_t o = static_cast<size_t>(t) / nblk, i0 = static_cast<size_t>(t) % nblk * width;
      const size_t n = std::min(width, inner - i0);
      std::array<State, kBlock> st;
      ReduceColumns<T, Op>(x + o * red * inner + i0, inner, n, 0, red, st.data());
      for (size_t i = 0; i < n; ++i) y[o * inner + i0 + i] = op.Finish(st[i], red);
    }
    return;
  }
  std::vector<State> part(static_cast<size_t>(tasks) * splits * width);
  const std::ptrdiff_t jobs = tasks * static_cast<std::ptrdiff_t>(splits);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t j = 0; j < jobs; ++j) {
    const size_t t = static_cast<size_t>(j) / splits, s = static_cast<size_t>(j) % splits;
    const size_t o = t / nblk, i0 = t % nblk * width, n = std::min(width, inner - i0);
    const size_t rb = red * s / splits, re = red * (s + 1) / splits;
    if (re == rb) continue;
    // Into a local array first: neighbouring chunks' states share cache lines in `part`.
    std::array<State, kBlock> st;
    ReduceColumns<T, Op>(x + o * red * inner + i0, inner, n, rb, re, st.data());
    std::copy_n(st.data(), n, part.data() + (t * splits + s) * width);
  }
  for (size_t t = 0; t < static_cast<size_t>(tasks); ++t) {
    const size_t o = t / nblk, i0 = t % nblk * width, n = std::min(width, inner - i0);
    for (size_t i = 0; i < n; ++i) {
      bool have = false;
      State acc{};
      for (size_t s = 0; s < splits; ++s) {
        if (red * (s + 1) / splits == red * s / splits) continue;  // empty chunk
        const State& p = part[(t * splits + s) * width + i];
        if (have) Op::Merge(acc, p);
        else acc = p;
        have = true;
      }
      y[o * inner + i0 + i] = op.Finish(acc, red);
    }
  }
}

// A reduction laid out as (outer, red, inner) over `src`, whose memory (from the start of its
// block) holds exactly that layout: a contiguous tensor or an in-place-reducible permuted view.
struct Plan {
  Tensor src;
  size_t outer = 1, red = 1, inner = 1;
  Shape out_shape;
};

Plan MakePlan(const char* op, const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  CheckInput(op, in);
  const size_t nd = in.nDim();
  std::vector<bool> reduced(nd, axes.empty());
  for (int a : axes) {
    size_t d = NormalizeAxis(a, nd, op);
    SINGA_CHECK_AXIS(!reduced[d], op << ": axis " << a << " is repeated in the axes list for a "
                                        "tensor of shape " << in.shape());
    reduced[d] = true;
  }
  Plan p;
  for (size_t d = 0; d < nd; ++d) {
    if (!reduced[d]) p.out_shape.push_back(in.shape()[d]);
    else if (keepdims) p.out_shape.push_back(1);
  }
  // The axes in memory order. A transposed (permuted) view of a dense block is reduced in place
  // when its kept axes appear in memory in their logical order, since the output is written in
  // memory order; anything else (broadcast views, other permutations) is copied first.
  std::vector<size_t> order;
  for (size_t d = 0; d < nd; ++d)
    if (in.shape()[d] != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return in.stride()[a] > in.stride()[b]; });
  bool in_place = true;
  std::ptrdiff_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    in_place = in_place && in.stride()[order[k]] == expect;
    expect *= static_cast<std::ptrdiff_t>(in.shape()[order[k]]);
  }
  for (size_t k = 0, prev_kept = 0; k < order.size() && in_place; ++k) {
    if (reduced[order[k]]) continue;
    in_place = order[k] >= prev_kept;
    prev_kept = order[k];
  }
  if (!in_place) std::sort(order.begin(), order.end());  // the layout of in.Contiguous()
  // Groups of neighbouring axes with the same role (size-1 axes change nothing).
  std::vector<std::pair<bool, size_t>> groups;
  for (size_t d : order) {
    const size_t n = in.shape()[d];
    if (!groups.empty() && groups.back().first == reduced[d]) groups.back().second *= n;
    else groups.emplace_back(reduced[d], n);
  }
  size_t red_groups = 0;
  for (const auto& g : groups) red_groups += g.first;
  if (red_groups <= 1) {
    bool seen_red = false;
    for (const auto& g : groups) {
      if (g.first) { p.red = g.second; seen_red = true; }
      else if (seen_red) p.inner *= g.second;
      else p.outer *= g.second;
    }
    p.src = in_place ? in : in.Contiguous();
    return p;
  }
  // Scattered reduced axes: kept axes first (keeping their order), then a copy.
  std::vector<size_t> perm;
  for (size_t d = 0; d < nd; ++d)
    if (!reduced[d]) perm.push_back(d);
  for (size_t d = 0; d < nd; ++d)
    if (reduced[d]) perm.push_back(d);
  p.src = Transpose(in, perm).Contiguous();
  p.outer = 1;
  p.red = 1;
  for (size_t d = 0; d < nd; ++d) (reduced[d] ? p.red : p.outer) *= in.shape()[d];
  return p;
}

template <typename T, typename Op>
Tensor RunReduce(const char* name, const Plan& p, const Op& op) {
  using Out = typename Op::Out;
  const Tensor src = p.src;
  Tensor out(p.out_shape, src.device(), DataTypeOf<Out>());
  const size_t outer = p.outer, red = p.red, inner = p.inner;
  src.device()->Exec(
      [src, out, outer, red, inner, op](Context*) {
        ReduceKernel<T, Op>(static_cast<const T*>(src.block()->data()),
                            static_cast<Out*>(out.block()->mutable_data()), outer, red, inner, op);
      },
      {src.block()}, {out.block()}, name);
  return out;
}

enum class Kind { kSum, kMean, kMax, kMin, kArgmax, kArgmin };

Tensor Reduce(const char* name, Kind kind, const Tensor& in_raw, const std::vector<int>& axes,
              bool keepdims) {
  CheckInput(name, in_raw);
  // numpy's mean of integers is a float: convert first so that the division is exact.
  const Tensor in = kind == Kind::kMean && in_raw.data_type() == kInt ? in_raw.AsType(kFloat32)
                                                                      : in_raw;
  Tensor result;
  SINGA_DISPATCH_FLOAT_INT(in.data_type(), name, T, {
    const Plan p = MakePlan(name, in, axes, keepdims);
    const bool extreme = kind != Kind::kSum && kind != Kind::kMean;
    SINGA_CHECK_VALUE(!extreme || p.red > 0,
                      name << ": zero-size reduction over an empty axis of shape " << in.shape()
                           << " has no identity");
    switch (kind) {
      case Kind::kSum: result = RunReduce<T>(name, p, SumOp<T>{false}); break;
      case Kind::kMean: result = RunReduce<T>(name, p, SumOp<T>{true}); break;
      case Kind::kMax: result = RunReduce<T>(name, p, ExtremeOp<T, true>{}); break;
      case Kind::kMin: result = RunReduce<T>(name, p, ExtremeOp<T, false>{}); break;
      case Kind::kArgmax: result = RunReduce<T>(name, p, ArgOp<T, true>{}); break;
      case Kind::kArgmin: result = RunReduce<T>(name, p, ArgOp<T, false>{}); break;
    }
  });
  return result;
}

void CheckMatrix(const char* op, const Tensor& M) {
  CheckInput(op, M);
  SINGA_CHECK_SHAPE(M.nDim() == 2, op << ": expects a matrix (2-d tensor), got shape "
                                      << M.shape());
}

// ---- softmax family along one axis, on a contiguous (outer, dim, inner) layout ----

enum class SoftKind { kSoftMax, kLogSoftMax };

template <SoftKind kKind>
void SoftMaxKernel(const float* x, float* y, size_t outer, size_t dim, size_t inner) {
  const size_t width = std::min(inner, kBlock), nblk = (inner + width - 1) / width;
  const std::ptrdiff_t tasks = static_cast<std::ptrdiff_t>(outer * nblk);
#pragma omp parallel for schedule(static) if (outer * dim * inner >= kParallelGrain)
  for (std::ptrdiff_t t = 0; t < tasks; ++t) {
    const size_t o = static_cast<size_t>(t) / nblk, i0 = static_cast<size_t>(t) % nblk * width;
    const size_t n = std::min(width, inner - i0);
    const float* xb = x + o * dim * inner + i0;
    float* yb = y + o * dim * inner + i0;
    std::array<float, kBlock> mx;
    std::array<double, kBlock> sum;
    // Subtracting the maximum keeps exp() from overflowing; the result is unchanged.
    mx.fill(-std::numeric_limits<float>::infinity());
    sum.fill(0.0);
    for (size_t d = 0; d < dim; ++d)
      for (size_t i = 0; i < n; ++i) mx[i] = std::max(mx[i], xb[d * inner + i]);
    for (size_t d = 0; d < dim; ++d) {
      for (size_t i = 0; i < n; ++i) {
        const float e = std::exp(xb[d * inner + i] - mx[i]);
        if constexpr (kKind == SoftKind::kSoftMax) yb[d * inner + i] = e;
        sum[i] += e;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if constexpr (kKind == SoftKind::kSoftMax) sum[i] = 1.0 / sum[i];
      else sum[i] = static_cast<double>(mx[i]) + std::log(sum[i]);  // log-sum-exp
    }
    for (size_t d = 0; d < dim; ++d) {
      for (size_t i = 0; i < n; ++i) {
        if constexpr (kKind == SoftKind::kSoftMax)
          yb[d * inner + i] = static_cast<float>(yb[d * inner + i] * sum[i]);
        else
          yb[d * inner + i] = static_cast<float>(xb[d * inner + i] - sum[i]);
      }
    }
  }
}

// dx = y * (dy - sum_d(dy * y)).
void SoftMaxBackwardKernel(const float* dy, const float* y, float* dx, size_t outer, size_t dim,
                           size_t inner) {
  const size_t width = std::min(inner, kBlock), nblk = (inner + width - 1) / width;
  const std::ptrdiff_t tasks = static_cast<std::ptrdiff_t>(outer * nblk);
#pragma omp parallel for schedule(static) if (outer * dim * inner >= kParallelGrain)
  for (std::ptrdiff_t t = 0; t < tasks; ++t) {
    const size_t o = static_cast<size_t>(t) / nblk, i0 = static_cast<size_t>(t) % nblk * width;
    const size_t n = std::min(width, inner - i0), base = o * dim * inner + i0;
    std::array<double, kBlock> dot;
    dot.fill(0.0);
    for (size_t d = 0; d < dim; ++d)
      for (size_t i = 0; i < n; ++i)
        dot[i] += static_cast<double>(dy[base + d * inner + i]) * y[base + d * inner + i];
    for (size_t d = 0; d < dim; ++d)
      for (size_t i = 0; i < n; ++i) {
        const size_t k = base + d * inner + i;
        dx[k] = static_cast<float>(y[k] * (dy[k] - dot[i]));
      }
  }
}

// (outer, dim, inner) of `in` around `axis`, after checking that softmax can run on it.
void SoftLayout(const char* op, const Tensor& in, int axis, size_t* outer, size_t* dim,
                size_t* inner) {
  CheckInput(op, in);
  SINGA_CHECK_DTYPE(in.data_type() == kFloat32,
                    op << ": expects float32, got " << in.data_type() << " (shape " << in.shape()
                       << "); convert with as_type");
  const size_t a = NormalizeAxis(axis, in.nDim(), op);
  *outer = Product(in.shape(), 0, a);
  *dim = in.shape()[a];
  *inner = Product(in.shape(), a + 1);
}

template <SoftKind kKind>
Tensor RunSoftMax(const char* name, const Tensor& in_raw, int axis) {
  size_t outer, dim, inner;
  SoftLayout(name, in_raw, axis, &outer, &dim, &inner);
  const Tensor in = in_raw.Contiguous();
  Tensor out(in.shape(), in.device(), kFloat32);
  if (in.Size() == 0) return out;
  in.device()->Exec(
      [in, out, outer, dim, inner](Context*) {
        SoftMaxKernel<kKind>(static_cast<const float*>(in.block()->data()),
                             static_cast<float*>(out.block()->mutable_data()), outer, dim, inner);
      },
      {in.block()}, {out.block()}, name);
  return out;
}

}  // namespace

Tensor ReduceSum(const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  return Reduce("ReduceSum", Kind::kSum, in, axes, keepdims);
}
Tensor ReduceMean(const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  return Reduce("ReduceMean", Kind::kMean, in, axes, keepdims);
}
Tensor ReduceMax(const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  return Reduce("ReduceMax", Kind::kMax, in, axes, keepdims);
}
Tensor ReduceMin(const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  return Reduce("ReduceMin", Kind::kMin, in, axes, keepdims);
}
Tensor Argmax(const Tensor& in, int axis, bool keepdims) {
  return Reduce("Argmax", Kind::kArgmax, in, {axis}, keepdims);
}
Tensor Argmin(const Tensor& in, int axis, bool keepdims) {
  return Reduce("Argmin", Kind::kArgmin, in, {axis}, keepdims);
}

Tensor Sum(const Tensor& in, int axis) { return Reduce("Sum", Kind::kSum, in, {axis}, false); }
Tensor Average(const Tensor& in, int axis) {
  return Reduce("Average", Kind::kMean, in, {axis}, false);
}

float SumAll(const Tensor& in) {
  Tensor s = Reduce("SumAll", Kind::kSum, in, {}, false);
  // The reduction accumulated in double (int64 for int32), so only the final cast rounds.
  if (s.data_type() == kInt) return static_cast<float>(s.ToVector<int32_t>()[0]);
  return s.ToVector<float>()[0];
}

Tensor SumRows(const Tensor& M) {
  CheckMatrix("SumRows", M);
  return Reduce("SumRows", Kind::kSum, M, {0}, false);
}
Tensor SumColumns(const Tensor& M) {
  CheckMatrix("SumColumns", M);
  return Reduce("SumColumns", Kind::kSum, M, {1}, false);
}
Tensor RowMax(const Tensor& M) {
  CheckMatrix("RowMax", M);
  return Reduce("RowMax", Kind::kMax, M, {1}, false);
}

Tensor SoftMax(const Tensor& in, int axis) {
  return RunSoftMax<SoftKind::kSoftMax>("SoftMax", in, axis);
}
Tensor LogSoftMax(const Tensor& in, int axis) {
  return RunSoftMax<SoftKind::kLogSoftMax>("LogSoftMax", in, axis);
}

Tensor SoftMaxBackward(const Tensor& dy_raw, const Tensor& y_raw, int axis) {
  const char* name = "SoftMaxBackward";
  CheckInput(name, dy_raw);
  CheckInput(name, y_raw);
  CheckSameDevice(name, {&dy_raw, &y_raw});
  SINGA_CHECK_SHAPE(dy_raw.shape() == y_raw.shape(), name << ": dy has shape " << dy_raw.shape()
                                                          << " but y has shape "
                                                          << y_raw.shape()
                                                          << " (they must be equal)");
  SINGA_CHECK_DTYPE(dy_raw.data_type() == y_raw.data_type(),
                    name << ": dy is " << dy_raw.data_type() << " but y is " << y_raw.data_type());
  size_t outer, dim, inner;
  SoftLayout(name, y_raw, axis, &outer, &dim, &inner);
  const Tensor dy = dy_raw.Contiguous(), y = y_raw.Contiguous();
  Tensor dx(y.shape(), y.device(), kFloat32);
  if (y.Size() == 0) return dx;
  y.device()->Exec(
      [dy, y, dx, outer, dim, inner](Context*) {
        SoftMaxBackwardKernel(static_cast<const float*>(dy.block()->data()),
                              static_cast<const float*>(y.block()->data()),
                              static_cast<float*>(dx.block()->mutable_data()), outer, dim, inner);
      },
      {dy.block(), y.block()}, {dx.block()}, name);
  return dx;
}

}  // namespace singa
