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
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "singa/core/host_device.h"

namespace singa {
namespace fn {
namespace math {
#ifdef __CUDACC__
using ::acos; using ::acosh; using ::asin; using ::asinh; using ::atan; using ::atanh;
using ::ceil; using ::copysign; using ::cos; using ::cosh; using ::erf; using ::exp; using ::floor; using ::fmod;
using ::log; using ::log1p; using ::nearbyint; using ::pow; using ::round; using ::sin;
using ::sinh; using ::sqrt; using ::tan; using ::tanh;
#else
using std::acos; using std::acosh; using std::asin; using std::asinh; using std::atan;
using std::atanh; using std::ceil; using std::copysign; using std::cos; using std::cosh; using std::erf; using std::exp;
using std::floor; using std::fmod; using std::log; using std::log1p; using std::nearbyint;
using std::pow; using std::round; using std::sin; using std::sinh; using std::sqrt; using std::tan;
using std::tanh;
#endif
}  // namespace math

// Note: GELU's exp, erf and tanh on the host. libm's erff / tanhf are calls the compiler cannot
// vectorise (without -ffast-math), and GELU is the activation of every transformer block, so the
// host uses these branch-free float forms instead, which it vectorises (cpu/elementwise.cc is
// built with -fno-trapping-math for that): exp by n ln2 + r range reduction and a degree-7
// polynomial (relative error ~1e-7); Phi(x) = erfc(-x / sqrt 2) / 2 with erfc(a) = t P(t)
// exp(-a^2), Abramowitz & Stegun 7.1.26, taken on the side where it is small, so that the
// negative tail keeps its relative accuracy (absolute error <= 1e-7 everywhere); tanh through
// exp. NaN flows through the arithmetic. CUDA code calls erfcf / tanhf / expf.
#if defined(__GNUC__) && !defined(__CUDACC__)
#define SINGA_FN_INLINE inline __attribute__((always_inline))  // inlined: else not vectorised
#else
#define SINGA_FN_INLINE inline
#endif
namespace vec {
#ifndef __CUDACC__
SINGA_FN_INLINE float AsFloat(int32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
/// e^r of x = n ln2 + r (|r| <= ln2 / 2; n returned): the degree-7 Taylor polynomial.
SINGA_FN_INLINE float ExpReduced(float x, float* n_out) {
  const float n = std::floor(x * 1.44269504f + 0.5f);
  const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;  // ln 2 split in two
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  *n_out = n;
  return p * r + 1.f;
}
/// exp(x) for x <= 0 (0 below -87, where float underflows; NaN stays NaN).
SINGA_FN_INLINE float Exp(float x) {
  float n;
  const float p = ExpReduced(x, &n);
  // (x >= -87) is false for NaN too: no float-to-int conversion of NaN or -inf
  const float safe_n = x >= -87.f ? n : 0.f;
  const float scale = AsFloat((static_cast<int32_t>(safe_n) + 127) << 23);
  const float e = p * scale;
  return x < -87.f ? 0.f : e;
}
/// exp(x) for every float, as vectorisable as Exp: the argument clamped to [-104, 89] (exp is 0
/// and inf beyond, and the clamped values still round there), the 2^n applied in two halves so
/// that denormal results (x < -87.3) keep their bits and large ones overflow to inf; NaN stays.
SINGA_FN_INLINE float ExpAny(float x) {
  const float c = x < -104.f ? -104.f : (x > 89.f ? 89.f : x);  // NaN: neither, c stays NaN
  float n;
  const float p = ExpReduced(c, &n);
  const int32_t k = c == c ? static_cast<int32_t>(n) : 0;  // no float-to-int of NaN
  const int32_t k1 = k / 2, k2 = k - k1;                     // each in [-75, 64]: 2^k1 normal
  const float e = p * AsFloat((k1 + 127) << 23) * AsFloat((k2 + 127) << 23);
  return c == c ? e : x;
}
/// tanh(x) to ~1 ulp for every float (Tanh's cancellation near 0 made it unfit for the Tanh row):
/// the odd Taylor series to x^13 below |x| = 0.4 (the first term left out is < 4e-9 relative),
/// (1 - e) / (1 + e) with e = exp(-2|x|) above, where 1 - e >= 0.55 loses nothing. NaN stays NaN
/// (it takes the second form), -0 stays -0, +-inf give +-1.
SINGA_FN_INLINE float TanhAny(float x) {
  const float a = std::fabs(x), x2 = x * x;
  float p = -929569.f / 638512875.f;  // the series' coefficient of x^15, then x^13 ... x^3
  p = p * x2 + 21844.f / 6081075.f;
  p = p * x2 - 1382.f / 155925.f;
  p = p * x2 + 62.f / 2835.f;
  p = p * x2 - 17.f / 315.f;
  p = p * x2 + 2.f / 15.f;
  p = p * x2 - 1.f / 3.f;
  const float small = x2 == 0.f ? x : x + x * (x2 * p);  // x itself keeps -0 (and tiny x)
  // 1 - 2e / (1 + e) from |x| = 1 (e <= 0.135): the quotient is small, so the result is rounded
  // once, as libm's (the gradient 1 - t^2 of a saturated tanh magnifies any ulp: 2 ulp at 4.5 put
  // test_autograd_backward's diamond 1.6e-5 off); (1 - e) / (1 + e) between 0.4 and 1.
  const float e = Exp(-2.f * a);
  const float t = a < 1.f ? (1.f - e) / (1.f + e) : 1.f - 2.f * e / (1.f + e);
  const float big = x < 0.f ? -t : t;
  return a < 0.4f ? small : big;
}
/// The standard normal CDF.
SINGA_FN_INLINE float Phi(float x) {
  const float a = std::fabs(x) * 0.70710678f, t = 1.f / (1.f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float half_erfc = 0.5f * p * t * Exp(-a * a), upper = 1.f - half_erfc;
  return x < 0.f ? half_erfc : upper;
}
SINGA_FN_INLINE float Tanh(float x) {
  const float e = Exp(-2.f * std::fabs(x));  // tanh|x| = (1 - e) / (1 + e)
  const float t = (1.f - e) / (1.f + e), neg = -t;
  return x < 0.f ? neg : t;
}
#else
SINGA_HOST_DEVICE inline float Exp(float x) { return expf(x); }
SINGA_HOST_DEVICE inline float ExpAny(float x) { return expf(x); }
SINGA_HOST_DEVICE inline float TanhAny(float x) { return tanhf(x); }
SINGA_HOST_DEVICE inline float Phi(float x) { return 0.5f * erfcf(-x * 0.70710678f); }
SINGA_HOST_DEVICE inline float Tanh(float x) { return tanhf(x); }
#endif
}  // namespace vec

// int32 +, -, * and negation wrap around as numpy's do: computed in the unsigned type, whose
// overflow is defined (in int it is undefined behaviour: UBSan stopped int32 Square of 2^30.5,
// found by tools/fuzz_numpy.py under make fuzz-asan's sanitizers). Floats: the plain operator.
template <typename T, bool = std::is_integral<T>::value>
struct WrapOf {
  using type = T;
};
template <typename T>
struct WrapOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using WrapType = typename WrapOf<T>::type;
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T WrapAdd(T a, T b) {
  return T(WrapType<T>(a) + WrapType<T>(b));
}
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T WrapSub(T a, T b) {
  return T(WrapType<T>(a) - WrapType<T>(b));
}
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T WrapMul(T a, T b) {
  return T(WrapType<T>(a) * WrapType<T>(b));
}
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T WrapNeg(T x) {
  return T(WrapType<T>(0) - WrapType<T>(x));
}

// C's fmod; int32: 0 for a zero divisor as numpy's fmod (and no `%` by 0 or -1: undefined in C++).
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T FmodOf(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    return b == T(0) || b == T(-1) ? T(0) : T(a % b);
  } else {
    return math::fmod(a, b);
  }
}

// a ** b. int32 exactly, by repeated squaring in the unsigned type (wrapping as numpy's: the float
// pow lost the low bits past 2^24, 5 ** 13 was 1220703104); a negative exponent gives what an
// integer can hold of 1 / a^-b, as PyTorch's tensor ** tensor (1, -1 or 0; numpy raises, and a
// Python int exponent raises in Tensor.__pow__).
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T PowOf(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    if (b < T(0)) return a == T(1) ? T(1) : a == T(-1) ? T((b & T(1)) ? -1 : 1) : T(0);
    WrapType<T> r = 1, base = WrapType<T>(a);
    for (T e = b; e != T(0); e >>= 1) {
      if (e & T(1)) r *= base;
      base *= base;
    }
    return T(r);
  } else {
    return math::pow(a, b);
  }
}

// Python's // and % (numpy's floor_divide and remainder): the quotient rounded toward -inf, the
// remainder with the divisor's sign, a == q * b + r. int32: exact (float32 lost the low bits past
// 2^24), 0 for a zero divisor as numpy gives, INT_MIN // -1 wraps to INT_MIN as numpy's, and no
// `%` by 0 or -1 is ever evaluated (both undefined in C++). Floats: numpy's rule, so the bits
// match: the remainder from fmod (exact however large a / b is), the quotient (a - r) / b,
// moved by one where the remainder's sign was fixed, then rounded to the nearest integer (the
// division is exact up to rounding). A zero divisor gives a / b and fmod's NaN, as numpy.
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T FloorDivOf(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    if (b == T(0)) return T(0);
    if (b == T(-1)) return WrapNeg(a);
    const T q = a / b;
    return (a % b != T(0) && (a < T(0)) != (b < T(0))) ? T(q - T(1)) : q;
  } else {
    if (b == T(0)) return a / b;
    const T r = math::fmod(a, b);
    T q = (a - r) / b;
    if (r != T(0) && (r < T(0)) != (b < T(0))) q -= T(1);
    if (q == T(0)) return math::copysign(T(0), a / b);
    const T f = math::floor(q);
    return q - f > T(0.5) ? f + T(1) : f;
  }
}
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T ModOf(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    if (b == T(0) || b == T(-1)) return T(0);
    const T r = a % b;
    return (r != T(0) && (r < T(0)) != (b < T(0))) ? T(r + b) : r;
  } else {
    const T r = math::fmod(a, b);
    if (b == T(0) || r != r) return r;
    if (r == T(0)) return math::copysign(T(0), b);
    return (r < T(0)) != (b < T(0)) ? r + b : r;
  }
}

// exp through vec::ExpAny: the host's loop vectorises (libm's expf is a call per element, 3x
// PyTorch's time); within 2 ulp of the correctly rounded value. CUDA: expf.
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T ExpOf(T x) {
  return T(vec::ExpAny(float(x)));
}

// tanh through vec::TanhAny (libm's tanhf is a call per element: 5.7x PyTorch's time).
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T TanhOf(T x) {
  return T(vec::TanhAny(float(x)));
}

// The logistic function through exp of a non-positive argument only (vec::Exp's domain: the
// host's loop vectorises, where libm's expf is a call per element, 7x PyTorch's time):
// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below; NaN stays NaN, +-inf give 1 and 0.
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T SigmoidOf(T x) {
  const float v = float(x), e = vec::Exp(v >= 0.f ? -v : v);
  const float pos = 1.f / (1.f + e), neg = e / (1.f + e);
  return T(v >= 0.f ? pos : neg);
}

// GELU's pieces, shared by the table's forward and backward rows (a row is one expression).
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T GeluPhi(T x) {
  return T(vec::Phi(float(x)));
}
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T GeluDeriv(T x) {  // Phi(x) + x * phi(x)
  return GeluPhi(x) + x * T(0.39894228040143268) * T(vec::Exp(float(T(-0.5) * x * x)));
}
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T GeluTanhOf(T x) {  // tanh(sqrt(2 / pi) * (x + 0.044715 x^3))
  return T(vec::Tanh(float(T(0.79788456080286536) * (x + T(0.044715) * x * x * x))));
}
template <typename T>
SINGA_HOST_DEVICE SINGA_FN_INLINE T GeluTanhDeriv(T x) {
  const T t = GeluTanhOf(x);
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

}  // namespace fn
}  // namespace singa

// The op schema's activations (LeakyReLUOp, EluOp...), generated from schema/activations.py.
#include "singa/ops/activation_functors.h"
