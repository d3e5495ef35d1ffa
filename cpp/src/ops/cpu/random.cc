// CPU kernels of the random fills: the numbers Apache SINGA 3.3's CppCPU draws.
//
// SINGA fills with std::uniform_real_distribution<float>, std::normal_distribution<float> and
// std::bernoulli_distribution (a fresh distribution per call) on a std::mt19937. The algorithms
// of those distributions are not fixed by the C++ standard, so they are written out here as
// libstdc++ (the library SINGA's Linux builds use) implements them: the same seed then gives the
// same tensor as SINGA with any standard library. tests/cpp/test_random.cc compares them with
// the std:: distributions when built against libstdc++, and tests/python/test_device_core.py with
// a numpy reproduction.
#include <cmath>
#include <cstdint>
#include <random>

#include "../random_kernel.h"

namespace singa {
namespace cpu {
namespace {

// libstdc++'s generate_canonical<float, 24>: one 32-bit draw, converted to float (rounding to
// nearest), divided by 2^32, and pulled below 1 when the rounding reached it.
inline float CanonicalFloat(std::mt19937& g) {
  float r = static_cast<float>(g()) / 4294967296.0f;
  return r >= 1.0f ? std::nextafter(1.0f, 0.0f) : r;
}

// libstdc++'s generate_canonical<double, 53>: two draws, low word first.
inline double CanonicalDouble(std::mt19937& g) {
  double sum = static_cast<double>(g());
  sum += static_cast<double>(g()) * 4294967296.0;
  double r = sum / 18446744073709551616.0;
  return r >= 1.0 ? std::nextafter(1.0, 0.0) : r;
}

void UniformFill(float low, float high, float* out, size_t n, Context* ctx) {
  std::mt19937& g = ctx->random_generator;
  const float span = high - low;
  for (size_t i = 0; i < n; ++i) {
    float v = CanonicalFloat(g) * span + low;
    // Deliberately unlike SINGA: float rounding can land on `high` for a narrow interval; the
    // interval stays half-open (this changes only those values, never the stream).
    if (v >= high && high > low) v = std::nextafter(high, low);
    out[i] = v;
  }
}

// libstdc++'s normal_distribution<float>: Marsaglia's polar method. Each accepted pair gives two
// values, the second (x * mult) kept for the next element; a fresh distribution per call, so a
// pair left half used at the end of a tensor is dropped, as in SINGA.
void GaussianFill(float mean, float stddev, float* out, size_t n, Context* ctx) {
  std::mt19937& g = ctx->random_generator;
  for (size_t i = 0; i < n; i += 2) {
    float x, y, r2;
    do {
      // As libstdc++ writes it: float * float, then minus the double 1.0, stored as float.
      x = static_cast<float>(2.0f * CanonicalFloat(g) - 1.0);
      y = static_cast<float>(2.0f * CanonicalFloat(g) - 1.0);
      r2 = x * x + y * y;
    } while (r2 > 1.0f || r2 == 0.0f);
    const float mult = std::sqrt(-2.0f * std::log(r2) / r2);
    out[i] = y * mult * stddev + mean;
    if (i + 1 < n) out[i + 1] = x * mult * stddev + mean;
  }
}

// libstdc++'s bernoulli_distribution: a canonical double below p (taken as a double).
void BernoulliFill(float p, float /*unused*/, float* out, size_t n, Context* ctx) {
  std::mt19937& g = ctx->random_generator;
  const double pd = static_cast<double>(p);
  for (size_t i = 0; i < n; ++i) out[i] = CanonicalDouble(g) < pd ? 1.0f : 0.0f;
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(UniformFill, kCpuRef, cpu::UniformFill);
SINGA_REGISTER_KERNEL(GaussianFill, kCpuRef, cpu::GaussianFill);
SINGA_REGISTER_KERNEL(BernoulliFill, kCpuRef, cpu::BernoulliFill);
// oneDNN has no random number generation: the reference kernels serve that backend.

}  // namespace singa
