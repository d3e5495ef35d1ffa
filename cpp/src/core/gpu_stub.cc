// The GPU functions of singa/core/cuda_gpu.h in a build without CUDA (USE_CUDA=OFF): no GPU, and
// a clear error for whoever asks for one. A CUDA build compiles cpp/src/cuda/ instead.
#include "singa/core/cuda_gpu.h"
#include "singa/core/error.h"
#include "singa/dist/nccl.h"

namespace singa {

namespace {
[[noreturn]] void NoCuda(const char* what) {
  SINGA_THROW(NotImplementedError, what << ": libsinga was built without CUDA (configure with "
                                           "-DUSE_CUDA=ON, see cmake/Cuda.cmake)");
}
}  // namespace

bool BuiltWithCuda() { return false; }
int GetNumGPUs() { return 0; }
std::vector<int> GetGPUIDs() { return {}; }
std::pair<size_t, size_t> GetGPUMemSize(int) { NoCuda("GetGPUMemSize"); }
std::string DeviceQuery(int, bool) { NoCuda("DeviceQuery"); }
std::shared_ptr<Device> CreateCudaGPUOn(int, PoolOptions) { NoCuda("CreateCudaGPUOn"); }
void* CudaAllocator::Allocate(size_t) noexcept { return nullptr; }
void CudaAllocator::Deallocate(void*, size_t) noexcept {}

bool BuiltWithNccl() { return false; }
NcclUniqueId NewNcclId() { NoCuda("NewNcclId (NCCL)"); }
struct NcclComm::State {};
NcclComm::NcclComm(const NcclUniqueId&, int world_size, int rank, std::shared_ptr<Device>)
    : world_size_(world_size), rank_(rank) {
  NoCuda("NcclComm");
}
NcclComm::~NcclComm() = default;
void NcclComm::AllReduce(const std::vector<Tensor>&, float, bool) { NoCuda("NcclComm::AllReduce"); }

}  // namespace singa
