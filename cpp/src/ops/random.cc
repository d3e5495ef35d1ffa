// Random fills from the device's generator (see singa/ops/random.h).
//
// The numbers come from Context::random_generator (a std::mt19937 seeded by
// Device::SetRandSeed), drawn inside the operation so that a replayed graph draws fresh numbers
// each iteration, and serially so that a seed gives the same tensor whatever the thread count.
// The transforms from raw 32-bit draws to floats are written out here instead of using
// std::*_distribution, whose algorithms differ between standard libraries: the same seed gives
// the same numbers with libstdc++ and libc++.
#include "singa/ops/random.h"

#include <cmath>
#include <cstdint>
#include <random>

namespace singa {
namespace {

constexpr double kTwoPow32 = 4294967296.0;

// Uniform in [0, 1) with 32 random bits (exact in double).
inline double Unit(std::mt19937& g) { return static_cast<double>(g()) / kTwoPow32; }

// Uniform in (0, 1]: safe to take the logarithm of.
inline double UnitOpenZero(std::mt19937& g) {
  return (static_cast<double>(g()) + 1.0) / kTwoPow32;
}

void CheckOut(const char* op, const Tensor* out) {
  SINGA_CHECK_VALUE(out != nullptr, op << ": the output tensor is null");
  SINGA_CHECK(out->block() != nullptr, ValueError,
              op << ": the output tensor is empty (no memory)");
  SINGA_CHECK_DTYPE(out->data_type() == kFloat32,
                    op << ": the output must be float32, got " << out->data_type()
                       << " (shape " << out->shape() << ")");
  SINGA_CHECK_SHAPE(out->IsContiguous(), op << ": the output (shape " << out->shape()
                                             << ") is a non-contiguous view");
}

// Runs fill(data, n, generator) as one operation that uses the device's random generator.
template <typename Fill>
void Submit(const char* op, Tensor* out, Fill fill) {
  if (out->Size() == 0) return;
  const Tensor t = *out;
  t.device()->Exec(
      [t, fill](Context* ctx) {
        fill(static_cast<float*>(t.block()->mutable_data()), t.Size(), ctx->random_generator);
      },
      {}, {t.block()}, op, /*use_rand_generator=*/true);
}

}  // namespace

void Uniform(float low, float high, Tensor* out) {
  SINGA_CHECK_VALUE(std::isfinite(low) && std::isfinite(high) && low <= high,
                    "Uniform: expects finite low <= high, got low " << low << " and high "
                                                                    << high);
  CheckOut("Uniform", out);
  Submit("Uniform", out, [low, high](float* p, size_t n, std::mt19937& g) {
    const double span = static_cast<double>(high) - static_cast<double>(low);
    for (size_t i = 0; i < n; ++i) {
      float v = static_cast<float>(low + span * Unit(g));
      // Rounding to float can land on `high`; the interval is half-open.
      if (v >= high && high > low) v = std::nextafter(high, low);
      p[i] = v;
    }
  });
}

void Gaussian(float mean, float std, Tensor* out) {
  SINGA_CHECK_VALUE(std::isfinite(mean) && std::isfinite(std) && std >= 0.f,
                    "Gaussian: expects a finite mean and a finite std >= 0, got mean "
                        << mean << " and std " << std);
  CheckOut("Gaussian", out);
  Submit("Gaussian", out, [mean, std](float* p, size_t n, std::mt19937& g) {
    // Box-Muller: two uniforms give two independent standard normals.
    constexpr double kTwoPi = 6.283185307179586476925;
    for (size_t i = 0; i < n; i += 2) {
      const double r = std::sqrt(-2.0 * std::log(UnitOpenZero(g)));
      const double theta = kTwoPi * Unit(g);
      p[i] = static_cast<float>(mean + std * r * std::cos(theta));
      if (i + 1 < n) p[i + 1] = static_cast<float>(mean + std * r * std::sin(theta));
    }
  });
}

void Bernoulli(float p, Tensor* out) {
  SINGA_CHECK_VALUE(p >= 0.f && p <= 1.f,
                    "Bernoulli: expects a probability p in [0, 1], got " << p);
  CheckOut("Bernoulli", out);
  Submit("Bernoulli", out, [p](float* x, size_t n, std::mt19937& g) {
    // Unit() < 1 always, so p == 1 gives all ones and p == 0 all zeros.
    for (size_t i = 0; i < n; ++i) x[i] = Unit(g) < static_cast<double>(p) ? 1.f : 0.f;
  });
}

}  // namespace singa
