// The GPU memory pool: the CnMem-style pool (tested with a fake allocator in test_pool.cc) over
// CudaAllocator. The allocator's contract, which the pool's out-of-memory ladder relies on, is
// checked in every build: it never throws, returns nullptr when it cannot allocate (no CUDA, no
// GPU, out of memory), ignores nullptr on Deallocate. With a GPU: 256-byte aligned memory, and an
// impossible request ends as OutOfMemoryError through the pool after its release-and-retry.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "gpu_test_util.h"
#include "singa/core/cuda_gpu.h"
#include "singa/memory/pool.h"

namespace {

using singa::CnMemPool;
using singa::CudaAllocator;

TEST(CudaAllocatorContract, NeverThrowsAndSaysNoWithNullptrWithoutAGpu) {
  if (singa::GetNumGPUs() > 0) GTEST_SKIP() << "a GPU is present: the no-GPU contract is moot";
  CudaAllocator a(0);
  void* p = reinterpret_cast<void*>(1);
  EXPECT_NO_THROW(p = a.Allocate(1024));
  EXPECT_EQ(p, nullptr);
  EXPECT_NO_THROW(a.Deallocate(nullptr, 1024));
  CudaAllocator bad(-3);
  EXPECT_EQ(bad.Allocate(16), nullptr);
}

TEST(CudaAllocatorContract, PoolOverItRaisesOutOfMemoryNamingTheRequest) {
  if (singa::GetNumGPUs() > 0) GTEST_SKIP() << "a GPU is present: allocations would succeed";
  singa::PoolOptions o;
  o.alignment = 256;
  CnMemPool pool(std::make_unique<CudaAllocator>(0), o);
  try {
    pool.Malloc(4321);
    FAIL() << "expected OutOfMemoryError";
  } catch (const singa::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("4321"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_EQ(pool.stats().reserved, 0u);
  pool.CheckInvariants();
}

TEST(CudaAllocatorContract, GpuMemoryIsAlignedAndReturned) {
  SINGA_REQUIRE_GPU();
  CudaAllocator a(0);
  void* p = a.Allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  a.Deallocate(p, 1000);
  const auto mem = singa::GetGPUMemSize(0);
  EXPECT_EQ(a.Allocate(mem.second * 4), nullptr);  // more than the GPU has: nullptr, no throw
}

TEST(CudaAllocatorContract, PoolOnGpuAlignsAndRaisesOutOfMemory) {
  SINGA_REQUIRE_GPU();
  auto gpu = singa_test::Gpu();
  singa::PoolStats before = gpu->mem_stats();
  void* p = gpu->Malloc(300);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(gpu->mem_stats().in_use, before.in_use + 512);  // rounded to the GPU's 256
  gpu->Free(p);
  const auto mem = singa::GetGPUMemSize(0);
  EXPECT_THROW(gpu->Malloc(mem.second * 4), singa::OutOfMemoryError);
  EXPECT_EQ(gpu->mem_stats().in_use, before.in_use);
}

TEST(CudaDevice, NoGpuMeansClearErrorsNotAborts) {
  if (singa::GetNumGPUs() > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_TRUE(singa::GetGPUIDs().empty());
  if (singa::BuiltWithCuda()) {
    EXPECT_THROW(singa::CreateCudaGPUOn(0), singa::DeviceError);
    EXPECT_THROW(singa::GetGPUMemSize(0), singa::DeviceError);
    EXPECT_THROW(singa::DeviceQuery(0), singa::DeviceError);
  } else {
    EXPECT_THROW(singa::CreateCudaGPUOn(0), singa::NotImplementedError);
    EXPECT_THROW(singa::GetGPUMemSize(0), singa::NotImplementedError);
  }
}

TEST(CudaDevice, BadIdIsADeviceError) {
  SINGA_REQUIRE_GPU();
  EXPECT_THROW(singa::CreateCudaGPUOn(singa::GetNumGPUs()), singa::DeviceError);
  EXPECT_THROW(singa::CreateCudaGPUOn(-1), singa::DeviceError);
}

TEST(CudaDevice, ContextHoldsStreamHandlesAndStatus) {
  SINGA_REQUIRE_GPU();
  auto gpu = singa_test::Gpu();
  singa::Context* ctx = gpu->context();
  EXPECT_NE(ctx->stream, nullptr);
  EXPECT_NE(ctx->cublas_handle, nullptr);
  EXPECT_NE(ctx->cudnn_handle, nullptr);
  EXPECT_NE(ctx->curand_generator, nullptr);
  EXPECT_NE(ctx->device_status, nullptr);
  EXPECT_EQ(ctx->device_id, 0);
  EXPECT_EQ(gpu->backend(), singa::Backend::kCuda);
  EXPECT_FALSE(gpu->is_host());
  EXPECT_TRUE(gpu->CanCapture());
}

TEST(CudaDevice, HostRoundTripAndZeroedNewTensors) {
  SINGA_REQUIRE_GPU();
  auto gpu = singa_test::Gpu();
  singa::Tensor x = singa_test::RandomTensor({5, 7});
  singa::Tensor g = singa_test::OnGpu(x, gpu);
  EXPECT_EQ(g.device(), gpu);
  singa::Tensor back = g.Clone();
  back.ToHost();
  EXPECT_EQ(back.ToVector<float>(), x.ToVector<float>());
  singa::Tensor z({3, 3}, gpu);
  z.block()->ZeroOnFirstAlloc();
  for (float v : z.ToVector<float>()) EXPECT_EQ(v, 0.f);
}

}  // namespace
