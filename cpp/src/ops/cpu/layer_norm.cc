// Layer normalisation, the reference CPU kernels (kCpuRef); fronts: ../layer_norm.cc.
//
// x is (M, N): each row is normalised on its own, so rows are split between OpenMP threads and
// every loop over a row is contiguous. Statistics are two passes (mean, then the variance around
// it: no cancellation) in float with `omp simd` reductions, which vectorise. The backward keeps
// one partial dweight / dbias per thread and adds them up at the end (no atomics):
//   xhat = (x - mean) * rstd,  g = dy * w,
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum_rows dy * xhat,  db = sum_rows dy.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../strided.h"
#include "../transformer_kernels.h"

namespace singa {
namespace cpu {
namespace {

bool Parallel(size_t M, size_t N) { return M > 1 && M * N >= kParallelGrain; }

Prepared<LnFwdArgs> PrepareForward(const LnFwdArgs&) {
  Prepared<LnFwdArgs> r;
  r.run = [](const LnFwdArgs& a, float*) {
    const size_t M = a.M, N = a.N;
    const float* px = InPtr(a.x);
    const float* pw = a.weight.empty() ? nullptr : InPtr(a.weight);
    const float* pb = a.bias.empty() ? nullptr : InPtr(a.bias);
    float *py = OutPtr(a.y), *pm = OutPtr(a.mean), *pr = OutPtr(a.rstd);
    const float inv_n = N ? 1.f / float(N) : 0.f;
#pragma omp parallel for schedule(static) if (Parallel(M, N))
    for (std::ptrdiff_t m = 0; m < std::ptrdiff_t(M); ++m) {
      const float* x = px + size_t(m) * N;
      float* y = py + size_t(m) * N;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (size_t i = 0; i < N; ++i) s += x[i];
      const float mu = s * inv_n;
      float q = 0.f;
#pragma omp simd reduction(+ : q)
      for (size_t i = 0; i < N; ++i) q += (x[i] - mu) * (x[i] - mu);
      const float rs = 1.f / std::sqrt(q * inv_n + a.eps);
      pm[m] = mu;
      pr[m] = rs;
      if (pw && pb)
        for (size_t i = 0; i < N; ++i) y[i] = (x[i] - mu) * rs * pw[i] + pb[i];
      else if (pw)
        for (size_t i = 0; i < N; ++i) y[i] = (x[i] - mu) * rs * pw[i];
      else if (pb)
        for (size_t i = 0; i < N; ++i) y[i] = (x[i] - mu) * rs + pb[i];
      else
        for (size_t i = 0; i < N; ++i) y[i] = (x[i] - mu) * rs;
    }
  };
  return r;
}

// dx of rows [m0, m1), and that range's dw / db partial sums (when dw is not null).
void BackwardRows(const LnBwdArgs& a, size_t m0, size_t m1, float* dw, float* db) {
  const size_t N = a.N;
  const float *pdy = InPtr(a.dy), *px = InPtr(a.x), *pm = InPtr(a.mean), *pr = InPtr(a.rstd);
  const float* pw = a.weight.empty() ? nullptr : InPtr(a.weight);
  float* pdx = OutPtr(a.dx);
  const float inv_n = N ? 1.f / float(N) : 0.f;
  for (size_t m = m0; m < m1; ++m) {
    const float *dy = pdy + m * N, *x = px + m * N;
    float* dx = pdx + m * N;
    const float mu = pm[m], rs = pr[m];
    float sg = 0.f, sgx = 0.f;  // sum(g), sum(g * xhat)
    if (pw) {
#pragma omp simd reduction(+ : sg, sgx)
      for (size_t i = 0; i < N; ++i) {
        const float g = dy[i] * pw[i];
        sg += g;
        sgx += g * (x[i] - mu) * rs;
      }
    } else {
#pragma omp simd reduction(+ : sg, sgx)
      for (size_t i = 0; i < N; ++i) {
        sg += dy[i];
        sgx += dy[i] * (x[i] - mu) * rs;
      }
    }
    const float c1 = sg * inv_n, c2 = sgx * inv_n;
    if (pw)
      for (size_t i = 0; i < N; ++i) {
        const float xh = (x[i] - mu) * rs;
        dx[i] = rs * (dy[i] * pw[i] - c1 - xh * c2);
      }
    else
      for (size_t i = 0; i < N; ++i) dx[i] = rs * (dy[i] - c1 - (x[i] - mu) * rs * c2);
    if (dw)
      for (size_t i = 0; i < N; ++i) {
        dw[i] += dy[i] * (x[i] - mu) * rs;
        db[i] += dy[i];
      }
  }
}

Prepared<LnBwdArgs> PrepareBackward(const LnBwdArgs&) {
  Prepared<LnBwdArgs> r;
  r.run = [](const LnBwdArgs& a, float*) {
    const size_t M = a.M, N = a.N;
    const bool affine = !a.dweight.empty();
    const int tasks = Parallel(M, N) ? std::min<int>(MaxThreads(), int(M)) : 1;
    // one (dw, db) pair of partial sums per task, added up in task order (deterministic)
    std::vector<float> part(affine ? size_t(tasks) * 2 * N : 0, 0.f);
#pragma omp parallel for schedule(static) if (tasks > 1)
    for (int t = 0; t < tasks; ++t) {
      const size_t m0 = M * size_t(t) / size_t(tasks), m1 = M * size_t(t + 1) / size_t(tasks);
      float* dw = affine ? part.data() + size_t(t) * 2 * N : nullptr;
      BackwardRows(a, m0, m1, dw, affine ? dw + N : nullptr);
    }
    if (!affine) return;
    float *pdw = OutPtr(a.dweight), *pdb = OutPtr(a.dbias);
    std::copy(part.begin(), part.begin() + std::ptrdiff_t(N), pdw);
    std::copy(part.begin() + std::ptrdiff_t(N), part.begin() + std::ptrdiff_t(2 * N), pdb);
    for (int t = 1; t < tasks; ++t) {
      const float* p = part.data() + size_t(t) * 2 * N;
      for (size_t i = 0; i < N; ++i) {
        pdw[i] += p[i];
        pdb[i] += p[N + i];
      }
    }
  };
  return r;
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(LayerNormForward, kCpuRef, cpu::PrepareForward);
SINGA_REGISTER_KERNEL(LayerNormBackward, kCpuRef, cpu::PrepareBackward);

}  // namespace singa
