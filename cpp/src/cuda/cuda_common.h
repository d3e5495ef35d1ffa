// cuda_common.h (private, CUDA builds only): error checks and typed Context accessors shared by
// the CudaGPU device (cuda_gpu.cc) and every CUDA kernel (cpp/src/ops/cuda/).
//
//   SINGA_CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, Stream(ctx)), "Copy");
//   SINGA_CUBLAS_CHECK(cublasSgemm(Cublas(ctx), ...), "Gemm");
//   MyKernel<<<Blocks(n), kThreads, 0, Stream(ctx)>>>(...);
//   SINGA_CUDA_CHECK_LAUNCH("MyKernel");          // a bad launch configuration throws here
//
// Every failure throws a singa::Error (DeviceError; OutOfMemoryError for allocation failures),
// naming the operation and the library's own message: the process never aborts.
#pragma once

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <curand.h>

#include <cstddef>

#include "singa/core/context.h"
#include "singa/core/error.h"

namespace singa {
namespace cuda {

inline cudaStream_t Stream(const Context* ctx) { return static_cast<cudaStream_t>(ctx->stream); }
inline cublasHandle_t Cublas(const Context* ctx) {
  return static_cast<cublasHandle_t>(ctx->cublas_handle);
}
inline cudnnHandle_t Cudnn(const Context* ctx) {
  return static_cast<cudnnHandle_t>(ctx->cudnn_handle);
}
inline curandGenerator_t Curand(const Context* ctx) {
  return static_cast<curandGenerator_t>(ctx->curand_generator);
}

const char* CublasStatusName(cublasStatus_t s);
const char* CurandStatusName(curandStatus_t s);

/// Codes a kernel records in Context::device_status (the first one wins); CudaGPU::Sync turns
/// them into exceptions.
enum DeviceStatus : int {
  kStatusOk = 0,
  kStatusIndexOutOfRange = 1,   ///< AxisError: a gather/scatter index outside the axis
  kStatusLabelOutOfRange = 2,   ///< ValueError: a class label outside [0, C)
  kStatusNotInteger = 3,        ///< ValueError: a float32 index or label that is not whole
};
inline int* StatusPtr(const Context* ctx) { return static_cast<int*>(ctx->device_status); }
/// Throws the error a status code stands for (host side, after a Sync).
[[noreturn]] void ThrowDeviceStatus(int code, int device_id);

#ifdef __CUDACC__
/// Device side: records `code` unless an earlier error is already recorded.
__device__ inline void ReportDeviceError(int* status, int code) {
  atomicCAS(status, int(kStatusOk), code);
}
#endif

/// Threads per block of the simple 1-d kernels, and a grid covering n elements (grid-stride
/// loops take the rest: the grid is capped so huge tensors need no 64-bit grid arithmetic).
constexpr int kThreads = 256;
inline unsigned Blocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b == 0 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

}  // namespace cuda
}  // namespace singa

#define SINGA_CUDA_CHECK(call, what)                                                      \
  do {                                                                                    \
    cudaError_t singa_cuda_err_ = (call);                                                 \
    if (singa_cuda_err_ != cudaSuccess) {                                                 \
      (void)cudaGetLastError(); /* clear a sticky-free error so later calls can proceed */ \
      if (singa_cuda_err_ == cudaErrorMemoryAllocation)                                   \
        SINGA_THROW(OutOfMemoryError, what << ": " << cudaGetErrorString(singa_cuda_err_)); \
      SINGA_THROW(DeviceError, what << ": CUDA error " << cudaGetErrorName(singa_cuda_err_) \
                                    << " (" << cudaGetErrorString(singa_cuda_err_) << ")"); \
    }                                                                                     \
  } while (0)

/// After a <<<...>>> launch: a bad configuration or a missing kernel image throws.
#define SINGA_CUDA_CHECK_LAUNCH(what) SINGA_CUDA_CHECK(cudaPeekAtLastError(), what)

#define SINGA_CUBLAS_CHECK(call, what)                                                     \
  do {                                                                                     \
    cublasStatus_t singa_cublas_st_ = (call);                                              \
    SINGA_CHECK(singa_cublas_st_ == CUBLAS_STATUS_SUCCESS, DeviceError,                    \
                what << ": cuBLAS " << ::singa::cuda::CublasStatusName(singa_cublas_st_)); \
  } while (0)

#define SINGA_CUDNN_CHECK(call, what)                                                       \
  do {                                                                                      \
    cudnnStatus_t singa_cudnn_st_ = (call);                                                 \
    SINGA_CHECK(singa_cudnn_st_ == CUDNN_STATUS_SUCCESS, DeviceError,                       \
                what << ": cuDNN " << cudnnGetErrorString(singa_cudnn_st_));                \
  } while (0)

#define SINGA_CURAND_CHECK(call, what)                                                     \
  do {                                                                                     \
    curandStatus_t singa_curand_st_ = (call);                                              \
    SINGA_CHECK(singa_curand_st_ == CURAND_STATUS_SUCCESS, DeviceError,                    \
                what << ": cuRAND " << ::singa::cuda::CurandStatusName(singa_curand_st_)); \
  } while (0)
