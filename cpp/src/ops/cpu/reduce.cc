// CPU reference kernels of the reductions and the softmax family (fronts and the planning of the
// (outer, red, inner) layout: ../reduce.cc).
//
// Kernels walk `inner` in blocks of columns so that the inner loop is contiguous and vectorises,
// use interleaved lanes for single columns, and split long reductions between threads when there
// are too few outputs to keep them busy.
//
// Accuracy: float32 sums accumulate in double, int32 sums in int64 (results are cast back), so
// sums of millions of elements match a float64 reference to ~1e-7.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "../../core/dispatch.h"
#include "../kernel_slots.h"
#include "../nn_kernels.h"
#include "../strided.h"

namespace singa {
namespace cpu {
namespace {

// Columns handled together by one task: a stack array of states, and a contiguous inner loop.
constexpr size_t kBlock = 256;

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
void ReduceLoop(const T* x, typename Op::Out* y, size_t outer, size_t red, size_t inner,
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

// The reduction kernels: the element type is the source's (float32 or int32; the front checked).
template <template <typename> class MakeOp>
void ReduceKernel(const Tensor& src, const Dims3& d, const Tensor& out, Context*) {
  SINGA_DISPATCH_FLOAT_INT(src.data_type(), "Reduce", T, {
    using Op = typename MakeOp<T>::type;
    ReduceLoop<T, Op>(static_cast<const T*>(src.block()->data()),
                      static_cast<typename Op::Out*>(out.block()->mutable_data()), d.outer, d.mid,
                      d.inner, MakeOp<T>::Make());
  });
}
// Each maps an element type to its reduction operator (a template template argument of the
// kernel, so that the kernel alone dispatches on the element type).
template <typename T>
struct SumOf {
  using type = SumOp<T>;
  static type Make() { return {false}; }
};
template <typename T>
struct MeanOf {
  using type = SumOp<T>;
  static type Make() { return {true}; }
};
template <typename T>
struct MaxOf {
  using type = ExtremeOp<T, true>;
  static type Make() { return {}; }
};
template <typename T>
struct MinOf {
  using type = ExtremeOp<T, false>;
  static type Make() { return {}; }
};
template <typename T>
struct ArgmaxOf {
  using type = ArgOp<T, true>;
  static type Make() { return {}; }
};
template <typename T>
struct ArgminOf {
  using type = ArgOp<T, false>;
  static type Make() { return {}; }
};

// ---- softmax family along one axis, on a contiguous (outer, dim, inner) layout ----

enum class SoftKind { kSoftMax, kLogSoftMax };

template <SoftKind kKind>
void SoftMaxLoop(const float* x, float* y, size_t outer, size_t dim, size_t inner) {
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
      else sum[i] = std::log(sum[i]);  // log-sum-exp minus the maximum
    }
    for (size_t d = 0; d < dim; ++d) {
      for (size_t i = 0; i < n; ++i) {
        if constexpr (kKind == SoftKind::kSoftMax)
          yb[d * inner + i] = static_cast<float>(yb[d * inner + i] * sum[i]);
        else  // (x - max) - log(sum): max + log(sum) first would lose log(sum) when |max| is
              // large (x = [1e30, 1e30] gave 0, not -log 2)
          yb[d * inner + i] = static_cast<float>(
              (static_cast<double>(xb[d * inner + i]) - mx[i]) - sum[i]);
      }
    }
  }
}

// dx = y * (dy - sum_d(dy * y)).
void SoftMaxBackwardLoop(const float* dy, const float* y, float* dx, size_t outer, size_t dim,
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

template <SoftKind kKind>
Prepared<SoftMaxArgs> SoftMaxFamily(const SoftMaxArgs&) {
  Prepared<SoftMaxArgs> r;
  r.run = [](const SoftMaxArgs& a, float*) {
    SoftMaxLoop<kKind>(InPtr(a.x), OutPtr(a.y), a.outer, a.dim, a.inner);
  };
  return r;
}

Prepared<SoftMaxBwdArgs> PrepareSoftMaxBackward(const SoftMaxBwdArgs&) {
  Prepared<SoftMaxBwdArgs> r;
  r.run = [](const SoftMaxBwdArgs& a, float*) {
    SoftMaxBackwardLoop(InPtr(a.dy), InPtr(a.y), OutPtr(a.dx), a.outer, a.dim, a.inner);
  };
  return r;
}

}  // namespace

SINGA_REGISTER_KERNEL(ReduceSum, kCpuRef, &ReduceKernel<SumOf>);
SINGA_REGISTER_KERNEL(ReduceMean, kCpuRef, &ReduceKernel<MeanOf>);
SINGA_REGISTER_KERNEL(ReduceMax, kCpuRef, &ReduceKernel<MaxOf>);
SINGA_REGISTER_KERNEL(ReduceMin, kCpuRef, &ReduceKernel<MinOf>);
SINGA_REGISTER_KERNEL(Argmax, kCpuRef, &ReduceKernel<ArgmaxOf>);
SINGA_REGISTER_KERNEL(Argmin, kCpuRef, &ReduceKernel<ArgminOf>);
SINGA_REGISTER_KERNEL(SoftMax, kCpuRef, &SoftMaxFamily<SoftKind::kSoftMax>);  // schema/nn.py
SINGA_REGISTER_KERNEL(LogSoftMax, kCpuRef, &SoftMaxFamily<SoftKind::kLogSoftMax>);
SINGA_REGISTER_KERNEL(SoftMaxBackward, kCpuRef, &PrepareSoftMaxBackward);
// oneDNN's reduction and softmax primitives: not wired (yet); the reference kernels run.

}  // namespace cpu
}  // namespace singa
