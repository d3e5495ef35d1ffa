// The kernel registry: lookup by backend, stated fallbacks, errors for missing kernels.
#include <gtest/gtest.h>

#include <algorithm>

#include "singa/core/device.h"
#include "singa/core/kernel.h"
#include "test_helpers.h"

namespace singa {
namespace {

int RefTwice(int x) { return 2 * x; }
int DnnlTwice(int x) { return x + x; }

SINGA_KERNEL_SLOT(TestTwice, int(int));
SINGA_REGISTER_KERNEL(TestTwice, kCpuRef, RefTwice);
SINGA_KERNEL_SLOT(TestTwiceDnnl, int(int));
SINGA_REGISTER_KERNEL(TestTwiceDnnl, kCpuRef, RefTwice);
SINGA_REGISTER_KERNEL(TestTwiceDnnl, kCpuDnnl, DnnlTwice);
SINGA_KERNEL_SLOT(TestOnlyRef, int(int));
SINGA_REGISTER_KERNEL(TestOnlyRef, kCpuRef, RefTwice);
SINGA_KERNEL_FALLBACK(TestOnlyRef, kCpuDnnl, kCpuRef);

TEST(Kernel, LookupFollowsBackendAndFallback) {
  EXPECT_EQ(TestTwiceDnnlKernel().Get(Backend::kCpuRef), &RefTwice);
  EXPECT_EQ(TestTwiceDnnlKernel().Get(Backend::kCpuDnnl), &DnnlTwice);
  EXPECT_EQ(TestOnlyRefKernel().Get(Backend::kCpuDnnl), &RefTwice);
  EXPECT_EQ(TestOnlyRefKernel().Resolve(Backend::kCpuDnnl), Backend::kCpuRef);
}

TEST(Kernel, MissingKernelThrowsNamingOpAndBackend) {
  EXPECT_THROW_MSG(TestTwiceKernel().Get(Backend::kCuda), NotImplementedError, "TestTwice");
  EXPECT_THROW_MSG(TestTwiceKernel().Get(Backend::kCpuDnnl), NotImplementedError, "dnnl");
}

TEST(Kernel, ListKernelsReportsEverySlotAndBackend) {
  auto rows = ListKernels();
  auto find = [&](const std::string& op, Backend b) {
    return std::find_if(rows.begin(), rows.end(), [&](const KernelInfo& r) {
      return r.op == op && r.backend == b;
    });
  };
  auto r = find("TestOnlyRef", Backend::kCpuDnnl);
  ASSERT_NE(r, rows.end());
  EXPECT_FALSE(r->has_kernel);
  EXPECT_TRUE(r->has_fallback);
  EXPECT_EQ(r->fallback, Backend::kCpuRef);
  r = find("TestTwice", Backend::kCuda);
  ASSERT_NE(r, rows.end());
  EXPECT_FALSE(r->has_kernel || r->has_fallback);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end(), [](const KernelInfo& a,
                                                         const KernelInfo& b) {
    return a.op < b.op;
  }));
}

TEST(Kernel, DeviceBackendSwitch) {
  CppCPU dev;
  EXPECT_TRUE(dev.SupportsBackend(Backend::kCpuRef));
  EXPECT_FALSE(dev.SupportsBackend(Backend::kCuda));
  dev.set_backend(Backend::kCpuRef);
  EXPECT_EQ(dev.backend(), Backend::kCpuRef);
  EXPECT_EQ(TestTwiceDnnlKernel().For(dev), &RefTwice);
  EXPECT_THROW_MSG(dev.set_backend(Backend::kCuda), DeviceError, "cuda");
}

}  // namespace
}  // namespace singa
