// singa/core/context.h: per-device state that kernels need when they run.
//
//   dev->Exec({.id = singa::OpId::kGaussian, .writes = {out.block()}, .use_rand_generator = true},
//             [=](singa::Context* ctx) {
//               std::normal_distribution<float> d(0.f, 1.f);
//               float v = d(ctx->random_generator);
//             });
//
// A Context belongs to one Device and is passed to every operation it executes, so kernels reach
// the random generator (seedable through Device::SetRandSeed) and, on CUDA builds, the cuBLAS /
// cuDNN handles and stream, without global state.
#pragma once

#include <cstdint>
#include <random>

namespace singa {

struct Context {
  /// Default-constructed, so seeded with mt19937's default 5489 like Apache SINGA's CppCPU: an
  /// unseeded device draws the same numbers as SINGA's.
  std::mt19937 random_generator;
  uint64_t seed = std::mt19937::default_seed;
  // A CudaGPU's: its cudaStream_t, cublasHandle_t, cudnnHandle_t and curandGenerator_t, kept as
  // void* so that this header needs no CUDA header (typed accessors: cpp/src/cuda/cuda_common.h).
  void* stream = nullptr;
  void* cublas_handle = nullptr;
  void* cudnn_handle = nullptr;
  void* curand_generator = nullptr;
  /// A CudaGPU's device-memory status word (int32): a kernel that meets a bad index or label
  /// cannot throw, so it records a code there (cpp/src/cuda/cuda_common.h: ReportDeviceError) and
  /// the device's next Sync throws the matching singa::Error.
  void* device_status = nullptr;
  int device_id = -1;  ///< the GPU's id, -1 on the host
};

}  // namespace singa
