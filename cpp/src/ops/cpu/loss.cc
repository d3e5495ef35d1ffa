// CPU reference kernels of the cross-entropy losses (fronts and shape checks: ../loss.cc).
// Label values are read and checked here, serially and before any parallel loop, so a bad label
// throws ValueError instead of reading outside the row.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../kernel_slots.h"

namespace singa {
namespace cpu {
namespace {

constexpr size_t kGrain = 1 << 14;

enum class Kind { kSoftmaxFwd, kSoftmaxBwd, kProbFwd, kProbBwd };

constexpr const char* OpName(Kind k) {
  return k == Kind::kSoftmaxFwd   ? "SoftmaxCrossEntropyForward"
         : k == Kind::kSoftmaxBwd ? "SoftmaxCrossEntropyBackward"
         : k == Kind::kProbFwd    ? "CrossEntropyFwd"
                                  : "SoftmaxCrossEntropyBwd";
}

// The labels of t, checked to lie in [0, C). Runs inside the kernel, before the parallel loop.
std::vector<int32_t> ReadLabels(const char* op, const Tensor& t, size_t N, size_t C) {
  std::vector<int32_t> out(N);
  const void* raw = t.block()->data();
  for (size_t i = 0; i < N; ++i) {
    double v = t.data_type() == kInt ? double(static_cast<const int32_t*>(raw)[i])
                                     : double(static_cast<const float*>(raw)[i]);
    SINGA_CHECK_VALUE(std::nearbyint(v) == v, op << ": label " << v << " of sample " << i
                                                 << " is not a whole number");
    SINGA_CHECK_VALUE(v >= 0 && v < double(C), op << ": label " << v << " of sample " << i
                                                  << " is outside [0, " << C << ")");
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

// Runs f(i) for every row, split between threads when there is enough work.
template <typename F>
void ForRows(size_t N, size_t C, F&& f) {
#pragma omp parallel for schedule(static) if (N * C >= kGrain && N > 1)
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(N); ++i) f(size_t(i));
}

// max and log(sum(exp(z - max))) of one row, kept apart: log_softmax(z) is (z - max) - log_s.
// Adding them first (lse = max + log_s, then lse - z) lost log_s when |max| was large in float
// (logits [1e30, 1e30] gave the loss 0, not log 2, and gradients summing to 2).
inline void LogSumExp(const float* z, size_t C, float* m, float* log_s) {
  float mx = -INFINITY;
  for (size_t j = 0; j < C; ++j) mx = std::max(mx, z[j]);
  float s = 0.f;
  for (size_t j = 0; j < C; ++j) s += std::exp(z[j] - mx);
  *m = mx;
  *log_s = std::log(s);
}

template <Kind kind>
void Loss(const Tensor& x, const Tensor& t, bool labels, const Tensor& out, Context*) {
  const size_t N = x.shape(0), C = x.shape(1);
  const float* px = static_cast<const float*>(x.block()->data());
  float* py = static_cast<float*>(out.block()->mutable_data());
  std::vector<int32_t> lab;
  const float* pt = nullptr;
  if (labels) lab = ReadLabels(OpName(kind), t, N, C);
  else pt = static_cast<const float*>(t.block()->data());
  const int32_t* pl = lab.data();
  ForRows(N, C, [&](size_t i) {
    const float* z = px + i * C;
    const float* ti = labels ? nullptr : pt + i * C;
    if constexpr (kind == Kind::kSoftmaxFwd) {
      float m, log_s;
      LogSumExp(z, C, &m, &log_s);
      if (labels) {
        py[i] = log_s - (z[pl[i]] - m);
      } else {
        float s = 0.f;
        // a class with target 0 adds nothing, also where its logit is -inf (0 * inf is NaN;
        // SINGA, which clamps the probability, and the label form give the finite loss)
        for (size_t j = 0; j < C; ++j)
          if (ti[j] != 0.f) s += ti[j] * (log_s - (z[j] - m));
        py[i] = s;
      }
    } else if constexpr (kind == Kind::kSoftmaxBwd) {
      float m, log_s;
      LogSumExp(z, C, &m, &log_s);
      float* g = py + i * C;
      float tsum = 1.f;
      if (!labels) {
        tsum = 0.f;
        for (size_t j = 0; j < C; ++j) tsum += ti[j];
      }
      for (size_t j = 0; j < C; ++j) g[j] = std::exp((z[j] - m) - log_s) * tsum;
      if (labels) g[pl[i]] -= 1.f;
      else
        for (size_t j = 0; j < C; ++j) g[j] -= ti[j];
    } else if constexpr (kind == Kind::kProbFwd) {
      if (labels) {
        py[i] = -std::log(std::max(z[pl[i]], FLT_MIN));
      } else {
        float s = 0.f;
        for (size_t j = 0; j < C; ++j)
          if (ti[j] != 0.f) s -= ti[j] * std::log(std::max(z[j], FLT_MIN));
        py[i] = s;
      }
    } else {
      float* g = py + i * C;
      if (labels) {
        std::copy(z, z + C, g);
        g[pl[i]] -= 1.f;
      } else {
        for (size_t j = 0; j < C; ++j) g[j] = z[j] - ti[j];
      }
    }
  });
}

}  // namespace

SINGA_REGISTER_KERNEL(SoftmaxCrossEntropyForward, kCpuRef, &Loss<Kind::kSoftmaxFwd>);
SINGA_REGISTER_KERNEL(SoftmaxCrossEntropyBackward, kCpuRef, &Loss<Kind::kSoftmaxBwd>);
SINGA_REGISTER_KERNEL(CrossEntropyFwd, kCpuRef, &Loss<Kind::kProbFwd>);
SINGA_REGISTER_KERNEL(SoftmaxCrossEntropyBwd, kCpuRef, &Loss<Kind::kProbBwd>);
// Row-wise loops over small class counts: oneDNN has no such primitive; the reference runs.

}  // namespace cpu
}  // namespace singa
