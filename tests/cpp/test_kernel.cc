// The kernel registry: lookup by backend, stated fallbacks, errors for missing kernels.
#include <gtest/gtest.h>

#include <algorithm>

#include "singa/core/device.h"
#include "singa/core/kernel.h"
#include "ops/nn_kernels.h"
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

// A Prepare slot (nn_kernels.h) whose oneDNN kernel declines odd sizes, and whose reference
// kernel declines negative ones.
struct TestArgs {
  int n = 0;
};
Prepared<TestArgs> RefPrepare(const TestArgs& a) {
  if (a.n < 0) return {};
  return {1, [](const TestArgs&, float* ws) { ws[0] = 1.f; }};
}
Prepared<TestArgs> DnnlPrepare(const TestArgs& a) {
  if (a.n % 2) return {};
  return {2, [](const TestArgs&, float* ws) { ws[0] = 2.f; }};
}
SINGA_KERNEL_SLOT(TestPrepare, PrepareFn<TestArgs>);
SINGA_REGISTER_KERNEL(TestPrepare, kCpuRef, RefPrepare);
SINGA_REGISTER_KERNEL(TestPrepare, kCpuDnnl, DnnlPrepare);

TEST(Kernel, LookupFollowsBackendAndFallback) {
  EXPECT_EQ(TestTwiceDnnlKernel().Get(Backend::kCpuRef), &RefTwice);
  EXPECT_EQ(TestTwiceDnnlKernel().Get(Backend::kCpuDnnl), &DnnlTwice);
  EXPECT_EQ(TestOnlyRefKernel().Get(Backend::kCpuDnnl), &RefTwice);
  EXPECT_EQ(TestOnlyRefKernel().Resolve(Backend::kCpuDnnl), Backend::kCpuRef);
}

TEST(Kernel, MissingKernelThrowsNamingOpAndBackend) {
  EXPECT_THROW_MSG(TestTwiceKernel().Get(Backend::kCuda), NotImplementedError, "TestTwice");
  EXPECT_THROW_MSG(TestTwiceKernel().Get(Backend::kCuda), NotImplementedError, "cuda");
  EXPECT_THROW_MSG(TestTwiceKernel().FallbackOf(Backend::kCuda), NotImplementedError,
                   "TestTwice");
  EXPECT_THROW_MSG(TestTwiceKernel().FallbackOf(Backend::kCpuRef), NotImplementedError, "cpu");
}

// One fallback chain for missing kernels and declined calls: oneDNN's default is the reference.
TEST(Kernel, OneDnnFallsBackToTheReferenceByDefault) {
  EXPECT_EQ(TestTwiceKernel().Get(Backend::kCpuDnnl), &RefTwice);  // nothing stated
  EXPECT_EQ(TestTwiceKernel().FallbackOf(Backend::kCpuDnnl), Backend::kCpuRef);
  // a oneDNN kernel that declines a call hands it to the same backend a missing one would
  EXPECT_EQ(TestTwiceDnnlKernel().FallbackOf(Backend::kCpuDnnl), Backend::kCpuRef);
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

TEST(Kernel, DeclinedCallsFollowTheSameFallbackChain) {
  CppCPU dev;
  for (Backend b : {Backend::kCpuRef, Backend::kCpuDnnl}) {
    if (!dev.SupportsBackend(b)) continue;
    dev.set_backend(b);
    const bool dnnl = b == Backend::kCpuDnnl;
    EXPECT_EQ(Prepare(TestPrepareKernel(), TestArgs{2}, dev).workspace, dnnl ? 2u : 1u);
    EXPECT_EQ(Prepare(TestPrepareKernel(), TestArgs{3}, dev).workspace, 1u);  // dnnl declined
    EXPECT_THROW_MSG(Prepare(TestPrepareKernel(), TestArgs{-1}, dev), NotImplementedError,
                     "TestPrepare");  // the reference declined: the chain ends there
  }
}

}  // namespace
}  // namespace singa
