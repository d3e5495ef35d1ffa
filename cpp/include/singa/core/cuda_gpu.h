// singa/core/cuda_gpu.h: CUDA GPU devices (every build declares these; a build without CUDA
// answers "no GPU" and throws NotImplementedError when asked for one).
//
//   if (singa::GetNumGPUs() > 0) {
//     std::shared_ptr<singa::Device> gpu = singa::CreateCudaGPUOn(0);
//     singa::Tensor x({2, 3}, gpu);                 // memory from the GPU's CnMem-style pool
//     gpu->Exec(..);                                // kernels enqueue on the device's stream
//     gpu->Sync();                                  // waits for the stream
//   }
//
// A CudaGPU computes with the kCuda kernels (cpp/src/ops/cuda/). Its Context holds the CUDA
// stream every operation of the device is enqueued on, the cuBLAS and cuDNN handles bound to that
// stream and a cuRAND generator (typed accessors: cpp/src/cuda/cuda_common.h). Operations are
// asynchronous: Exec returns once the work is enqueued; reading values on the host
// (CopyDataToHostPtr) synchronises first. Memory is freed to the pool at once, which is safe
// because every use of it is ordered on the one stream.
//
// The graph on a GPU (singa/graph/graph.h): a replay enqueues the recorded operations on the
// stream; with SetCudaGraph(true) (the default) the first replay of a graph whose operations all
// allow it is captured as a CUDA Graph and later replays launch that graph in one call. Operations
// that draw random numbers (cuRAND advances its offset on the host) or copy to the host make a
// graph replay op by op instead.
//
// Errors: no driver, no GPU or a bad id throws DeviceError (never aborts); cudaMalloc failing
// goes through the pool's release-and-retry, then OutOfMemoryError.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "singa/core/device.h"
#include "singa/memory/pool.h"

namespace singa {

/// True when libsinga was built with CUDA (USE_CUDA): singa_wrap.USE_CUDA.
bool BuiltWithCuda();
/// The number of usable CUDA GPUs: 0 without CUDA, without a driver or without a GPU.
int GetNumGPUs();
/// Their ids (0 .. GetNumGPUs()-1).
std::vector<int> GetGPUIDs();
/// (free, total) bytes of GPU `id`; throws DeviceError for a bad id.
std::pair<size_t, size_t> GetGPUMemSize(int id);
/// A description of GPU `id` (name, compute capability, memory; more when verbose).
std::string DeviceQuery(int id, bool verbose = false);
/// A new CudaGPU on GPU `id` with its own stream, handles and pool.
std::shared_ptr<Device> CreateCudaGPUOn(int id, PoolOptions options = {});

/// The memory of one GPU, for the CnMem-style pool: cudaMalloc / cudaFree on that GPU.
/// Allocate returns nullptr when the GPU is out of memory (the pool then releases its cache and
/// retries once, then throws OutOfMemoryError). Declared here so the pool tests can check it.
class CudaAllocator : public Allocator {
 public:
  explicit CudaAllocator(int device_id) : device_id_(device_id) {}
  void* Allocate(size_t bytes) noexcept override;
  void Deallocate(void* ptr, size_t bytes) noexcept override;
  int device_id() const { return device_id_; }

 private:
  int device_id_;
};

#ifdef SINGA_USE_CUDA
/// The CUDA device. Created by CreateCudaGPUOn (throws DeviceError when GPU `id` cannot be used).
class CudaGPU : public Device {
 public:
  explicit CudaGPU(int id, PoolOptions options = {});
  ~CudaGPU() override;
  bool SupportsBackend(Backend b) const override { return b == Backend::kCuda; }
  void Sync() override;
  void FillZero(void* ptr, size_t bytes) override;
  void SetRandSeed(uint64_t seed) override;
  void Activate() override;

  // CUDA Graph capture of a graph replay (Graph::Run drives it).
  bool CanCapture() const override { return true; }
  void BeginCapture() override;
  void EndCapture() override;
  void LaunchCaptured() override;
  void DropCaptured() override;

 protected:
  void CopyRaw(void* dst, const void* src, size_t nbytes, CopyDirection direction,
               Context* ctx) override;

 private:
  void* graph_exec_ = nullptr;  ///< cudaGraphExec_t of the last capture
};
#endif

}  // namespace singa
