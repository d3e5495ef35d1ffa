// cudnn_common.h (private, CUDA builds only): what the kernels of cpp/src/ops/cuda/ (blas, conv,
// pooling, batch norm) share: RAII owners of cuDNN descriptors, the cuDNN / CUDA data type of a
// tensor, untyped data pointers and the float / half element conversions of the .cu kernels
// (float32 and float16 tensors go through the same code).
//
//   cuda::TensorDesc x(DnnType(a.x), N, C, H, W);   // throws DeviceError if cuDNN refuses
//   SINGA_CUDNN_CHECK(cudnnAddTensor(Cudnn(ctx), &one, b.get(), Data(a.b), &one, x.get(),
//                                    MutData(a.y)), "Conv2dForward: bias");
#pragma once

#include <cuda_fp16.h>

#include <cstddef>

#include "../../cuda/cuda_common.h"
#include "singa/core/tensor.h"

namespace singa {
namespace cuda {

/// The block's data (block start, as the CPU kernels read it), untyped.
inline const void* Data(const Tensor& t) { return t.block()->data(); }
inline void* MutData(const Tensor& t) { return t.block()->mutable_data(); }

/// float32 -> CUDNN_DATA_FLOAT, float16 -> CUDNN_DATA_HALF (the fronts allow nothing else).
inline cudnnDataType_t DnnType(DataType t) {
  SINGA_CHECK_DTYPE(t == kFloat32 || t == kFloat16,
                    "cuDNN kernels take float32 or float16 tensors, got " << t);
  return t == kFloat16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}
inline cudnnDataType_t DnnType(const Tensor& t) { return DnnType(t.data_type()); }

/// float32 -> CUDA_R_32F, float16 -> CUDA_R_16F (cublasGemmEx operands).
inline cudaDataType_t BlasType(DataType t) {
  SINGA_CHECK_DTYPE(t == kFloat32 || t == kFloat16 || t == kBFloat16,
                    "cuBLAS kernels take float32, float16 or bfloat16 tensors, got " << t);
  return t == kFloat16 ? CUDA_R_16F : t == kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

#ifdef __CUDACC__
/// Element loads and stores of the float32 / float16 kernels: math in float, storage as T.
__device__ inline float ToF(float v) { return v; }
__device__ inline float ToF(__half v) { return __half2float(v); }
template <typename T>
__device__ inline T FromF(float v);
template <>
__device__ inline float FromF<float>(float v) { return v; }
template <>
__device__ inline __half FromF<__half>(float v) { return __float2half(v); }
#endif

/// Owns one cuDNN descriptor; movable, not copyable (shared through shared_ptr by the caches).
template <typename D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
class DnnDesc {
 public:
  DnnDesc() { SINGA_CUDNN_CHECK(Create(&d_), "cuDNN: creating a descriptor"); }
  ~DnnDesc() {
    if (d_) Destroy(d_);
  }
  DnnDesc(const DnnDesc&) = delete;
  DnnDesc& operator=(const DnnDesc&) = delete;
  D get() const { return d_; }

 private:
  D d_ = nullptr;
};

/// A packed NCHW tensor descriptor.
class TensorDesc : public DnnDesc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                  cudnnDestroyTensorDescriptor> {
 public:
  TensorDesc(cudnnDataType_t t, size_t n, size_t c, size_t h, size_t w) {
    SINGA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(get(), CUDNN_TENSOR_NCHW, t, int(n), int(c),
                                                 int(h), int(w)),
                      "cuDNN: tensor descriptor (" << n << ", " << c << ", " << h << ", " << w
                                                   << ")");
  }
};

/// An OIHW filter descriptor (O = out channels, I = in channels per group).
class FilterDesc : public DnnDesc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                  cudnnDestroyFilterDescriptor> {
 public:
  FilterDesc(cudnnDataType_t t, size_t o, size_t i, size_t h, size_t w) {
    SINGA_CUDNN_CHECK(cudnnSetFilter4dDescriptor(get(), t, CUDNN_TENSOR_NCHW, int(o), int(i),
                                                 int(h), int(w)),
                      "cuDNN: filter descriptor (" << o << ", " << i << ", " << h << ", " << w
                                                   << ")");
  }
};

using ConvDescBase = DnnDesc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                             cudnnDestroyConvolutionDescriptor>;
using ActivationDescBase = DnnDesc<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor,
                                   cudnnDestroyActivationDescriptor>;

/// max(0, x), for cudnnActivationForward; NaN propagates (numpy / PyTorch semantics).
class ReluDesc : public ActivationDescBase {
 public:
  ReluDesc() {
    SINGA_CUDNN_CHECK(
        cudnnSetActivationDescriptor(get(), CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0),
        "cuDNN: ReLU descriptor");
  }
};

/// Sets cuBLAS to read / write scalars in device memory for its lifetime, then back to host
/// (the mode every other kernel expects), also when the call in between throws.
class DevicePointerMode {
 public:
  explicit DevicePointerMode(cublasHandle_t h) : h_(h) {
    SINGA_CUBLAS_CHECK(cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_DEVICE),
                       "cuBLAS: device pointer mode");
  }
  ~DevicePointerMode() { cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST); }
  DevicePointerMode(const DevicePointerMode&) = delete;
  DevicePointerMode& operator=(const DevicePointerMode&) = delete;

 private:
  cublasHandle_t h_;
};

}  // namespace cuda
}  // namespace singa
