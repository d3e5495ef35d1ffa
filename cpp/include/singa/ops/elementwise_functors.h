// singa/ops/elementwise_functors.h: one functor per line of elementwise.def, for any backend.
//
//   singa::fn::ExpOp op;
//   float y = op(1.f);                          // host code
//   // in a .cu file the same functor runs on the device (SINGA_HOST_DEVICE):
//   //   __global__ void K(const float* x, float* y, int n) { y[i] = singa::fn::ExpOp{}(x[i]); }
//
// The table (elementwise.def) stays the single source: this header, the front (elementwise.cc),
// the CPU kernels (ops/cpu/elementwise.cc) and the Cython bindings are all generated from it.
//
// Math: the table writes plain `exp(x)`, `log1p(x)` ... (no `std::`). Every functor body opens
// the namespace singa::fn::math, which on the host brings in the std:: overloads (float and
// double, so float stays float), and under nvcc CUDA's global __host__ __device__ float/double
// overloads. So one expression compiles on both sides.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "singa/core/host_device.h"

namespace singa {
namespace fn {
namespace math {
#ifdef __CUDACC__
using ::acos; using ::acosh; using ::asin; using ::asinh; using ::atan; using ::atanh;
using ::ceil; using ::cos; using ::cosh; using ::erf; using ::exp; using ::floor; using ::log;
using ::log1p; using ::nearbyint; using ::pow; using ::round; using ::sin; using ::sinh;
using ::sqrt; using ::tan; using ::tanh;
#else
using std::acos; using std::acosh; using std::asin; using std::asinh; using std::atan;
using std::atanh; using std::ceil; using std::cos; using std::cosh; using std::erf; using std::exp;
using std::floor; using std::log; using std::log1p; using std::nearbyint; using std::pow;
using std::round; using std::sin; using std::sinh; using std::sqrt; using std::tan; using std::tanh;
#endif
}  // namespace math

// GELU's pieces, shared by the table's forward and backward rows (a row is one expression).
template <typename T>
SINGA_HOST_DEVICE T GeluDeriv(T x) {  // Phi(x) + x * phi(x)
  using namespace math;
  return T(0.5) * (T(1) + erf(x * T(0.70710678118654752))) +
         x * T(0.39894228040143268) * exp(T(-0.5) * x * x);
}
template <typename T>
SINGA_HOST_DEVICE T GeluTanhInner(T x) {  // sqrt(2 / pi) * (x + 0.044715 x^3)
  return T(0.79788456080286536) * (x + T(0.044715) * x * x * x);
}
template <typename T>
SINGA_HOST_DEVICE T GeluTanhDeriv(T x) {
  using namespace math;
  const T t = tanh(GeluTanhInner(x));
  return T(0.5) * (T(1) + t) +
         T(0.5) * x * (T(1) - t * t) * T(0.79788456080286536) * (T(1) + T(0.134145) * x * x);
}

#define SINGA_UNARY(Name, kinds, expr)                 \
  struct Name##Op {                                    \
    template <typename T>                              \
    SINGA_HOST_DEVICE T operator()(T x) const {        \
      using namespace ::singa::fn::math;               \
      return (expr);                                   \
    }                                                  \
  };
#define SINGA_BINARY(Name, kinds, expr)                \
  struct Name##Op {                                    \
    template <typename T>                              \
    SINGA_HOST_DEVICE T operator()(T a, T b) const {   \
      using namespace ::singa::fn::math;               \
      return (expr);                                   \
    }                                                  \
  };
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY

/// Clips into [low, high]; NaN fails both tests and passes through (np.clip).
struct ClampOp {
  float low, high;
  template <typename T>
  SINGA_HOST_DEVICE T operator()(T x) const {
    const T lo = Bound<T>(low), hi = Bound<T>(high);
    return x < lo ? lo : (x > hi ? hi : x);
  }
  // An integer type saturates the bound: an infinite one (autograd.clip(x, 0, None) passes
  // +-inf) converted as-is is undefined behaviour and gave INT_MIN on x86.
  template <typename T>
  SINGA_HOST_DEVICE static T Bound(float v) {
    if constexpr (std::is_integral_v<T>) {
      constexpr T lowest = std::numeric_limits<T>::lowest(), highest = std::numeric_limits<T>::max();
      if (v <= static_cast<float>(lowest)) return lowest;
      if (v >= static_cast<float>(highest)) return highest;
    }
    return T(v);
  }
};
/// value where the mask b is nonzero (NaN counts as nonzero, as bool(nan) in numpy), else a.
struct MaskedFillOp {
  float value;
  template <typename T>
  SINGA_HOST_DEVICE T operator()(T a, T b) const { return b != T(0) ? T(value) : a; }
};
/// x if x > 0 else slope * x (NaN: slope * NaN, still NaN).
struct LeakyReLUOp {
  float slope;
  template <typename T>
  SINGA_HOST_DEVICE T operator()(T x) const { return x > T(0) ? x : T(slope * x); }
};

}  // namespace fn
}  // namespace singa
