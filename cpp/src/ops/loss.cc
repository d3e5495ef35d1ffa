// Cross-entropy losses on the CPU (see singa/ops/nn.h).
//
// Targets come in two forms: class labels (int32 (N,) or (N, 1), or float32 (N,) holding whole
// numbers) or a float32 matrix of the logits' shape (one-hot or probabilities). Shapes are
// checked at the call; label values are checked inside the kernel, serially and before any
// parallel loop, so a bad label throws ValueError (eagerly at the call, in a graph at RunGraph)
// instead of reading outside the row as Apache SINGA did.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "singa/ops/nn.h"

namespace singa {
namespace {

constexpr size_t kGrain = 1 << 14;

struct Operands {
  Tensor x;       // logits or probabilities, contiguous (N, C)
  Tensor t;       // target, contiguous
  bool labels;    // t holds N class labels
  size_t N, C;
};

Operands Check(const char* op, const char* xname, const Tensor& x, const Tensor& t) {
  SINGA_CHECK(x.block() != nullptr && t.block() != nullptr, ValueError,
              op << ": an input tensor is empty");
  SINGA_CHECK_DTYPE(x.data_type() == kFloat32,
                    op << ": expects float32 " << xname << ", got " << x.data_type());
  SINGA_CHECK_SHAPE(x.nDim() == 2, op << ": expected 2-d " << xname << " (N, C), got "
                                      << x.shape());
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32 || t.data_type() == kInt,
                    op << ": the target must be int32 labels or a float32 matrix, got "
                       << t.data_type());
  CheckSameDevice(op, {&x, &t});
  const size_t N = x.shape(0), C = x.shape(1);
  bool labels;
  if (t.data_type() == kFloat32 && t.shape() == x.shape()) {
    labels = false;
  } else {
    const bool vec = t.nDim() == 1 || (t.nDim() == 2 && t.shape(1) == 1);
    SINGA_CHECK_SHAPE(vec, op << ": the target has shape " << t.shape() << "; expected " << N
                              << " labels, (" << N << ",) or (" << N << ", 1), or a float32 "
                              << "matrix of the " << xname << "' shape " << x.shape());
    SINGA_CHECK_SHAPE(t.shape(0) == N, op << ": got " << t.shape(0) << " labels (target shape "
                                          << t.shape() << ") for " << N << " samples ("
                                          << xname << " " << x.shape() << ")");
    labels = true;
  }
  SINGA_CHECK_VALUE(!labels || C > 0 || N == 0,
                    op << ": labels need at least one class, " << xname << " " << x.shape());
  return {x.Contiguous(), t.Contiguous(), labels, N, C};
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

// max and log(sum(exp(z - max))) of one row.
inline void LogSumExp(const float* z, size_t C, float* m, float* lse) {
  float mx = -INFINITY;
  for (size_t j = 0; j < C; ++j) mx = std::max(mx, z[j]);
  float s = 0.f;
  for (size_t j = 0; j < C; ++j) s += std::exp(z[j] - mx);
  *m = mx;
  *lse = mx + std::log(s);
}

enum class Kind { kSoftmaxFwd, kSoftmaxBwd, kProbFwd, kProbBwd };

Tensor Run(Kind kind, const char* op, const char* xname, const Tensor& x_in, const Tensor& t_in) {
  const Operands o = Check(op, xname, x_in, t_in);
  const bool fwd = kind == Kind::kSoftmaxFwd || kind == Kind::kProbFwd;
  Tensor out(fwd ? Shape{o.N} : Shape{o.N, o.C}, o.x.device(), kFloat32);
  const Tensor x = o.x, t = o.t;
  const bool labels = o.labels;
  const size_t N = o.N, C = o.C;
  x.device()->Exec(
      [x, t, out, labels, N, C, kind, op](Context*) {
        const float* px = static_cast<const float*>(x.block()->data());
        float* py = static_cast<float*>(out.block()->mutable_data());
        std::vector<int32_t> lab;
        const float* pt = nullptr;
        if (labels) lab = ReadLabels(op, t, N, C);
        else pt = static_cast<const float*>(t.block()->data());
        const int32_t* pl = lab.data();
        ForRows(N, C, [&](size_t i) {
          const float* z = px + i * C;
          const float* ti = labels ? nullptr : pt + i * C;
          switch (kind) {
            case Kind::kSoftmaxFwd: {
              float m, lse;
              LogSumExp(z, C, &m, &lse);
              if (labels) {
                py[i] = lse - z[pl[i]];
              } else {
                float s = 0.f;
                for (size_t j = 0; j < C; ++j) s += ti[j] * (lse - z[j]);
                py[i] = s;
              }
              break;
            }
            case Kind::kSoftmaxBwd: {
              float m, lse;
              LogSumExp(z, C, &m, &lse);
              float* g = py + i * C;
              float tsum = 1.f;
              if (!labels) {
                tsum = 0.f;
                for (size_t j = 0; j < C; ++j) tsum += ti[j];
              }
              for (size_t j = 0; j < C; ++j) g[j] = std::exp(z[j] - lse) * tsum;
              if (labels) g[pl[i]] -= 1.f;
              else
                for (size_t j = 0; j < C; ++j) g[j] -= ti[j];
              break;
            }
            case Kind::kProbFwd: {
              if (labels) {
                py[i] = -std::log(std::max(z[pl[i]], FLT_MIN));
              } else {
                float s = 0.f;
                for (size_t j = 0; j < C; ++j)
                  if (ti[j] != 0.f) s -= ti[j] * std::log(std::max(z[j], FLT_MIN));
                py[i] = s;
              }
              break;
            }
            case Kind::kProbBwd: {
              float* g = py + i * C;
              if (labels) {
                std::copy(z, z + C, g);
                g[pl[i]] -= 1.f;
              } else {
                for (size_t j = 0; j < C; ++j) g[j] = z[j] - ti[j];
              }
              break;
            }
          }
        });
      },
      {x.block(), t.block()}, {out.block()}, op);
  return out;
}

}  // namespace

Tensor SoftmaxCrossEntropyForward(const Tensor& logits, const Tensor& target) {
  return Run(Kind::kSoftmaxFwd, "SoftmaxCrossEntropyForward", "logits", logits, target);
}

Tensor SoftmaxCrossEntropyBackward(const Tensor& logits, const Tensor& target) {
  return Run(Kind::kSoftmaxBwd, "SoftmaxCrossEntropyBackward", "logits", logits, target);
}

Tensor CrossEntropyFwd(const Tensor& p, const Tensor& t) {
  return Run(Kind::kProbFwd, "CrossEntropyFwd", "probabilities", p, t);
}

Tensor SoftmaxCrossEntropyBwd(const Tensor& p, const Tensor& t) {
  return Run(Kind::kProbBwd, "SoftmaxCrossEntropyBwd", "probabilities", p, t);
}

}  // namespace singa
