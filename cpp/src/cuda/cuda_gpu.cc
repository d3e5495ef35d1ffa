// CudaGPU, its allocator and the GPU queries of singa/core/cuda_gpu.h (CUDA builds only).
#include "singa/core/cuda_gpu.h"

#include <sstream>

#include "cuda_common.h"
#include "singa/graph/graph.h"

namespace singa {

namespace cuda {
const char* CublasStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "an unknown cuBLAS status";
  }
}

const char* CurandStatusName(curandStatus_t s) {
  switch (s) {
    case CURAND_STATUS_SUCCESS: return "CURAND_STATUS_SUCCESS";
    case CURAND_STATUS_NOT_INITIALIZED: return "CURAND_STATUS_NOT_INITIALIZED";
    case CURAND_STATUS_ALLOCATION_FAILED: return "CURAND_STATUS_ALLOCATION_FAILED";
    case CURAND_STATUS_LAUNCH_FAILURE: return "CURAND_STATUS_LAUNCH_FAILURE";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return "CURAND_STATUS_LENGTH_NOT_MULTIPLE";
    default: return "an unknown cuRAND status";
  }
}
void ThrowDeviceStatus(int code, int device_id) {
  switch (code) {
    case kStatusIndexOutOfRange:
      SINGA_THROW(AxisError, "an index operation on GPU " << device_id
                                 << " read an index outside the axis (checked on the device; the "
                                    "CPU raises at the op, a GPU at the next synchronisation)");
    case kStatusLabelOutOfRange:
      SINGA_THROW(ValueError, "a loss on GPU " << device_id
                                  << " read a class label outside [0, number of classes)");
    case kStatusNotInteger:
      SINGA_THROW(ValueError, "an operation on GPU " << device_id
                                  << " read a float index or label that is not a whole number");
    default:
      SINGA_THROW(DeviceError, "GPU " << device_id << ": unknown device status " << code);
  }
}
}  // namespace cuda

namespace {

// cudaGetDeviceCount fails without a driver (cudaErrorInsufficientDriver) or a GPU
// (cudaErrorNoDevice): both mean "no GPU", not an error, for the queries.
int DeviceCount(cudaError_t* why = nullptr) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (why) *why = e;
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

void CheckId(int id, const char* what) {
  cudaError_t why = cudaSuccess;
  const int n = DeviceCount(&why);
  SINGA_CHECK_DEVICE(n > 0, what << ": no CUDA GPU is usable on this machine (cudaGetDeviceCount: "
                                 << cudaGetErrorName(why) << ": " << cudaGetErrorString(why)
                                 << "); use a CPU device");
  SINGA_CHECK_DEVICE(id >= 0 && id < n, what << ": GPU id " << id << " does not exist; this "
                                             "machine has " << n << " GPU(s), ids 0.." << n - 1);
}

}  // namespace

bool BuiltWithCuda() { return true; }
int GetNumGPUs() { return DeviceCount(); }

std::vector<int> GetGPUIDs() {
  std::vector<int> ids(GetNumGPUs());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
  return ids;
}

std::pair<size_t, size_t> GetGPUMemSize(int id) {
  CheckId(id, "GetGPUMemSize");
  SINGA_CUDA_CHECK(cudaSetDevice(id), "GetGPUMemSize");
  size_t free_b = 0, total_b = 0;
  SINGA_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b), "GetGPUMemSize");
  return {free_b, total_b};
}

std::string DeviceQuery(int id, bool verbose) {
  CheckId(id, "DeviceQuery");
  cudaDeviceProp p{};
  SINGA_CUDA_CHECK(cudaGetDeviceProperties(&p, id), "DeviceQuery");
  std::ostringstream os;
  os << "GPU " << id << ": " << p.name << ", compute capability " << p.major << "." << p.minor
     << ", " << (p.totalGlobalMem >> 20) << " MiB";
  if (verbose) {
    os << "\n  multiprocessors: " << p.multiProcessorCount
       << "\n  shared memory per block: " << p.sharedMemPerBlock
       << "\n  max threads per block: " << p.maxThreadsPerBlock
       << "\n  L2 cache: " << p.l2CacheSize << " bytes";
  }
  return os.str();
}

std::shared_ptr<Device> CreateCudaGPUOn(int id, PoolOptions options) {
  CheckId(id, "create_cuda_gpu_on");
  return std::make_shared<CudaGPU>(id, options);
}

void* CudaAllocator::Allocate(size_t bytes) noexcept {
  void* p = nullptr;
  if (cudaSetDevice(device_id_) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // out of memory is not sticky: clear it, the pool retries
    return nullptr;
  }
  return p;
}

void CudaAllocator::Deallocate(void* ptr, size_t) noexcept {
  if (ptr == nullptr) return;
  if (cudaSetDevice(device_id_) == cudaSuccess && cudaFree(ptr) == cudaSuccess) return;
  (void)cudaGetLastError();  // at process exit the driver may be gone already: nothing to free
}

namespace {
// CUDA's allocations are 256-byte aligned; the pool keeps every piece so (vectorised kernels and
// cuDNN want at least 16).
PoolOptions GpuPoolOptions(PoolOptions o) {
  if (o.alignment < 256) o.alignment = 256;
  return o;
}
}  // namespace

CudaGPU::CudaGPU(int id, PoolOptions options)
    : Device(id, kCuda,
             std::make_unique<CnMemPool>(std::make_unique<CudaAllocator>(id),
                                         GpuPoolOptions(options))) {
  backend_ = Backend::kCuda;
  Context* ctx = context();
  ctx->device_id = id;
  SINGA_CUDA_CHECK(cudaSetDevice(id), "CudaGPU(" << id << ")");
  cudaStream_t stream = nullptr;
  SINGA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                   "CudaGPU: creating the stream");
  ctx->stream = stream;
  cublasHandle_t blas = nullptr;
  SINGA_CUBLAS_CHECK(cublasCreate(&blas), "CudaGPU: cublasCreate");
  ctx->cublas_handle = blas;
  SINGA_CUBLAS_CHECK(cublasSetStream(blas, stream), "CudaGPU: cublasSetStream");
  // Scalars (alpha, beta, dot results) are host values unless a kernel switches to device mode.
  SINGA_CUBLAS_CHECK(cublasSetPointerMode(blas, CUBLAS_POINTER_MODE_HOST), "CudaGPU");
  cudnnHandle_t dnn = nullptr;
  SINGA_CUDNN_CHECK(cudnnCreate(&dnn), "CudaGPU: cudnnCreate");
  ctx->cudnn_handle = dnn;
  SINGA_CUDNN_CHECK(cudnnSetStream(dnn, stream), "CudaGPU: cudnnSetStream");
  curandGenerator_t gen = nullptr;
  SINGA_CURAND_CHECK(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10),
                     "CudaGPU: curandCreateGenerator");
  ctx->curand_generator = gen;
  SINGA_CURAND_CHECK(curandSetStream(gen, stream), "CudaGPU: curandSetStream");
  SetRandSeed(ctx->seed);
  void* status = nullptr;
  SINGA_CUDA_CHECK(cudaMalloc(&status, sizeof(int)), "CudaGPU: the status word");
  ctx->device_status = status;
  SINGA_CUDA_CHECK(cudaMemset(status, 0, sizeof(int)), "CudaGPU: the status word");
}

CudaGPU::~CudaGPU() {
  // The graph's arena and the operations' tensors go back to the pool while the stream and
  // handles still exist; errors are ignored here (a destructor must not throw).
  try {
    ResetGraph();
  } catch (...) {
  }
  Context* ctx = context();
  cudaSetDevice(id());
  DropCaptured();
  if (ctx->stream) cudaStreamSynchronize(static_cast<cudaStream_t>(ctx->stream));
  if (ctx->device_status) cudaFree(ctx->device_status);
  if (ctx->curand_generator) curandDestroyGenerator(cuda::Curand(ctx));
  if (ctx->cudnn_handle) cudnnDestroy(cuda::Cudnn(ctx));
  if (ctx->cublas_handle) cublasDestroy(cuda::Cublas(ctx));
  if (ctx->stream) cudaStreamDestroy(cuda::Stream(ctx));
  (void)cudaGetLastError();
}

void CudaGPU::Activate() { SINGA_CUDA_CHECK(cudaSetDevice(id()), "CudaGPU " << id()); }

void CudaGPU::Sync() {
  Activate();
  // Errors of kernels that ran asynchronously (an illegal address, a failed assertion) surface
  // here, as an exception.
  Context* ctx = context();
  SINGA_CUDA_CHECK(cudaStreamSynchronize(cuda::Stream(ctx)), "CudaGPU " << id() << " Sync");
  int status = cuda::kStatusOk;
  SINGA_CUDA_CHECK(cudaMemcpy(&status, ctx->device_status, sizeof(int), cudaMemcpyDeviceToHost),
                   "CudaGPU " << id() << " Sync: reading the status word");
  if (status != cuda::kStatusOk) {
    SINGA_CUDA_CHECK(cudaMemset(ctx->device_status, 0, sizeof(int)), "CudaGPU Sync");
    cuda::ThrowDeviceStatus(status, id());
  }
}

void CudaGPU::FillZero(void* ptr, size_t bytes) {
  SINGA_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, cuda::Stream(context())), "FillZero");
}

void CudaGPU::SetRandSeed(uint64_t seed) {
  Device::SetRandSeed(seed);
  Context* ctx = context();
  if (ctx->curand_generator == nullptr) return;
  SINGA_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(cuda::Curand(ctx), seed), "SetRandSeed");
  SINGA_CURAND_CHECK(curandSetGeneratorOffset(cuda::Curand(ctx), 0), "SetRandSeed");
}

void CudaGPU::BeginCapture() {
  DropCaptured();
  // Thread-local mode: other threads may still use CUDA (e.g. another device) meanwhile.
  SINGA_CUDA_CHECK(cudaStreamBeginCapture(cuda::Stream(context()), cudaStreamCaptureModeThreadLocal),
                   "CudaGPU: begin capturing the graph");
}

void CudaGPU::EndCapture() {
  cudaGraph_t g = nullptr;
  SINGA_CUDA_CHECK(cudaStreamEndCapture(cuda::Stream(context()), &g),
                   "CudaGPU: end capturing the graph");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  SINGA_CUDA_CHECK(e, "CudaGPU: instantiating the captured graph");
  graph_exec_ = exec;
}

void CudaGPU::LaunchCaptured() {
  SINGA_CHECK(graph_exec_ != nullptr, Error, "CudaGPU: no captured graph to launch");
  SINGA_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph_exec_),
                                   cuda::Stream(context())),
                   "CudaGPU: launching the captured graph");
}

void CudaGPU::DropCaptured() {
  cudaStream_t s = cuda::Stream(context());
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (s && cudaStreamIsCapturing(s, &status) == cudaSuccess &&
      status != cudaStreamCaptureStatusNone) {
    cudaGraph_t g = nullptr;  // a capture cut short by an exception: end it, drop what it had
    if (cudaStreamEndCapture(s, &g) == cudaSuccess && g) cudaGraphDestroy(g);
  }
  if (graph_exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph_exec_));
  graph_exec_ = nullptr;
  (void)cudaGetLastError();
}

void CudaGPU::CopyRaw(void* dst, const void* src, size_t nbytes, CopyDirection direction,
                      Context* ctx) {
  if (nbytes == 0 || dst == src) return;
  cudaStream_t s = cuda::Stream(ctx);
  SINGA_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, s), "CopyDataToFrom");
  // Host memory on either side belongs to the caller, who may reuse it as soon as we return.
  if (direction == kHostToDevice || direction == kDeviceToHost || direction == kHostToHost)
    SINGA_CUDA_CHECK(cudaStreamSynchronize(s), "CopyDataToFrom");
}

}  // namespace singa
