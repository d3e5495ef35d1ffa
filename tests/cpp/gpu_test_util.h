// gpu_test_util.h: what the GPU tests share. Every GPU test compares a GPU result with the CPU
// result of the same op, and skips (with the reason) where no GPU is usable.
//
//   TEST(CudaOps, Add) {
//     SINGA_REQUIRE_GPU();                              // GTEST_SKIP with the reason
//     auto gpu = singa_test::Gpu();
//     singa::Tensor a = singa_test::RandomTensor({3, 4}), b = singa_test::RandomTensor({4});
//     singa_test::ExpectSameOnGpu(singa::Add(a, b),
//                                 singa::Add(singa_test::OnGpu(a, gpu), singa_test::OnGpu(b, gpu)));
//   }
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "singa/core/cuda_gpu.h"
#include "singa/singa.h"

namespace singa_test {

/// Skips the calling test unless this build has CUDA and the machine a GPU.
#define SINGA_REQUIRE_GPU()                                                                 \
  do {                                                                                      \
    if (!singa::BuiltWithCuda()) GTEST_SKIP() << "libsinga was built without CUDA";         \
    if (singa::GetNumGPUs() == 0) GTEST_SKIP() << "no CUDA GPU is usable on this machine";  \
  } while (0)

/// One GPU device shared by the tests of a process (creating handles is slow).
inline std::shared_ptr<singa::Device> Gpu() {
  static std::shared_ptr<singa::Device> gpu = singa::CreateCudaGPUOn(0);
  return gpu;
}

inline singa::Tensor OnGpu(const singa::Tensor& t, std::shared_ptr<singa::Device> gpu = Gpu()) {
  singa::Tensor g = t.Clone();
  g.ToDevice(gpu);
  return g;
}

/// A float32 host tensor of uniform values in [lo, hi), reproducible per seed.
inline singa::Tensor RandomTensor(const singa::Shape& shape, float lo = -1.f, float hi = 1.f,
                                  unsigned seed = 7) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(singa::Product(shape));
  for (float& x : v) x = d(gen);
  singa::Tensor t(shape);
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

/// The CPU result and the GPU result agree elementwise within rtol * max(1, |cpu|) (float32
/// tensors; others are converted first).
inline void ExpectSameOnGpu(const singa::Tensor& cpu, const singa::Tensor& gpu,
                            float rtol = 1e-5f) {
  ASSERT_EQ(cpu.shape(), gpu.shape());
  singa::Tensor c = cpu.data_type() == singa::kFloat32 ? cpu : cpu.AsType(singa::kFloat32);
  singa::Tensor g = gpu.data_type() == singa::kFloat32 ? gpu : gpu.AsType(singa::kFloat32);
  g.ToHost();
  const std::vector<float> a = c.ToVector<float>(), b = g.ToVector<float>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {  // NaN where the CPU has NaN, nowhere else
      ASSERT_TRUE(std::isnan(a[i]) && std::isnan(b[i]))
          << "element " << i << ": cpu " << a[i] << " gpu " << b[i];
      continue;
    }
    ASSERT_LE(std::fabs(a[i] - b[i]), rtol * std::fmax(1.f, std::fabs(a[i])))
        << "element " << i << ": cpu " << a[i] << " gpu " << b[i];
  }
}

}  // namespace singa_test
