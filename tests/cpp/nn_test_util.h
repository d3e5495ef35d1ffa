// nn_test_util.h: helpers shared by the neural-network kernel tests (test_conv.cc, test_nn.cc):
// random data, closeness checks and central finite differences.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test_helpers.h"

namespace nn_test {

// Runs body once per kernel backend of the default device (the reference kernels, then oneDNN
// when built with it), so that value tests check every backend; failures name the backend.
inline void ForEachBackend(const std::function<void()>& body) {
  auto dev = singa::defaultDevice();
  const singa::Backend old = dev->backend();
  for (singa::Backend b : {singa::Backend::kCpuRef, singa::Backend::kCpuDnnl}) {
    if (!dev->SupportsBackend(b)) continue;
    SCOPED_TRACE(std::string("backend ") + singa::BackendName(b));
    dev->set_backend(b);
    body();
  }
  dev->set_backend(old);
}

using singa::Shape;

inline std::string Str(const Shape& s) {
  std::ostringstream os;
  singa::operator<<(os, s);
  return os.str();
}

inline std::vector<float> Rand(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

inline void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, float tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.f + std::fabs(want[i]))) << what << " at " << i;
}

inline double DotV(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

// Central differences of f (a scalar function of the values v) at every element of v, or at
// `samples` evenly spaced elements when v is large.
inline std::vector<std::pair<size_t, double>> NumericGrad(std::vector<float> v,
                                                   const std::function<double(const std::vector<float>&)>& f,
                                                   float eps, size_t samples = 64) {
  std::vector<std::pair<size_t, double>> out;
  const size_t step = std::max<size_t>(1, v.size() / samples);
  for (size_t i = 0; i < v.size(); i += step) {
    const float keep = v[i];
    v[i] = keep + eps;
    const double fp = f(v);
    v[i] = keep - eps;
    const double fm = f(v);
    v[i] = keep;
    out.emplace_back(i, (fp - fm) / (2.0 * eps));
  }
  return out;
}

inline void ExpectGradMatches(const std::vector<float>& analytic,
                       const std::vector<std::pair<size_t, double>>& numeric, double tol,
                       const std::string& what) {
  for (auto [i, g] : numeric)
    ASSERT_NEAR(analytic[i], g, tol * (1.0 + std::fabs(g))) << what << " at " << i;
}

}  // namespace nn_test
