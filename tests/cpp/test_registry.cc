// The kernel registry as a whole: every op slot has a CPU reference kernel, a oneDNN kernel or a
// stated fallback (and, in a CUDA build, a CUDA kernel or stated fallback); every line of
// elementwise.def has its slot; and each backend a device supports computes the same numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "singa/core/device.h"
#include "singa/core/kernel.h"
#include "singa/ops/elementwise.h"
#include "singa/ops/elementwise_functors.h"
#include "singa/ops/reduce.h"
#include "test_helpers.h"

namespace singa {
namespace {

using Rows = std::map<std::string, std::map<Backend, KernelInfo>>;

Rows KernelTable() {
  Rows rows;
  for (const KernelInfo& r : ListKernels()) rows[r.op][r.backend] = r;
  return rows;
}

// The slots that test_kernel.cc declares to test the registry itself (they lack fallbacks on
// purpose); they share this test binary but are not ops.
bool IsRegistryTestSlot(const std::string& op) { return op.rfind("Test", 0) == 0; }

// Does backend b of op reach a kernel, following stated fallbacks?
bool Reaches(const std::map<Backend, KernelInfo>& row, Backend b) {
  for (int hops = 0; hops <= kNumBackends; ++hops) {
    const KernelInfo& r = row.at(b);
    if (r.has_kernel) return true;
    if (!r.has_fallback) return false;
    b = r.fallback;
  }
  return false;  // a cycle of fallbacks
}

TEST(Registry, EveryOpHasACpuKernelAndEveryBackendAKernelOrStatedFallback) {
  const Rows rows = KernelTable();
  size_t ops = 0;
  for (const auto& [op, row] : rows) {
    if (IsRegistryTestSlot(op)) continue;
    ++ops;
    ASSERT_EQ(row.size(), size_t(kNumBackends)) << op;
    EXPECT_TRUE(row.at(Backend::kCpuRef).has_kernel) << op << ": no CPU reference kernel";
    const KernelInfo& dnnl = row.at(Backend::kCpuDnnl);
    EXPECT_TRUE(dnnl.has_kernel || dnnl.has_fallback)
        << op << ": the dnnl backend has neither a kernel nor a stated fallback";
    EXPECT_TRUE(Reaches(row, Backend::kCpuDnnl)) << op << ": dnnl's fallback reaches no kernel";
#ifdef SINGA_USE_CUDA
    const KernelInfo& cuda = row.at(Backend::kCuda);
    EXPECT_TRUE(cuda.has_kernel || cuda.has_fallback)
        << op << ": the cuda backend has neither a kernel nor a stated fallback";
    EXPECT_TRUE(Reaches(row, Backend::kCuda)) << op << ": cuda's fallback reaches no kernel";
#endif
  }
  EXPECT_GT(ops, 60u);  // the table below alone has more
}

TEST(Registry, EveryElementwiseTableLineAndCoreOpHasItsSlot) {
  const std::vector<std::string> expected = {
#define SINGA_UNARY(Name, kinds, expr) #Name,
#define SINGA_BINARY(Name, kinds, expr) #Name,
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
      "Clamp", "LeakyReLU",
      // reductions, softmax, BLAS, data movement, gather, losses, optimizer, tensor copies
      "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "Argmax", "Argmin", "SoftMax",
      "LogSoftMax", "SoftMaxBackward", "Gemm", "BatchedGemm", "Axpy", "Dot", "Asum", "Nrm2",
      "Concat", "Slice", "Repeat", "IndexSelect", "IndexAdd", "SoftmaxCrossEntropyForward",
      "SoftmaxCrossEntropyBackward", "CrossEntropyFwd", "SoftmaxCrossEntropyBwd", "SGDUpdate",
      "AdamUpdate", "StridedCopy", "CopyBytes", "Fill", "AttentionForward", "AttentionBackward"};
  const Rows rows = KernelTable();
  std::set<std::string> seen;
  for (const std::string& op : expected) {
    EXPECT_TRUE(seen.insert(op).second) << op << " is listed twice";
    auto it = rows.find(op);
    ASSERT_NE(it, rows.end()) << op << " has no kernel slot";
    EXPECT_TRUE(it->second.at(Backend::kCpuRef).has_kernel) << op << ": no CPU kernel";
  }
}

TEST(Registry, EverySupportedBackendComputesTheSameNumbers) {
  auto d = std::make_shared<CppCPU>();
  CppCPU& dev = *d;
  Tensor x(Shape{3, 5}, d, kFloat32), y(Shape{5}, d, kFloat32);
  std::vector<float> xv(15), yv(5);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.25f * float(i) - 1.5f;
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = 2.f - float(i);
  x.CopyDataFromHostPtr(xv.data(), xv.size());
  y.CopyDataFromHostPtr(yv.data(), yv.size());
  for (Backend b : {Backend::kCpuRef, Backend::kCpuDnnl, Backend::kCuda}) {
    if (!dev.SupportsBackend(b)) continue;
    dev.set_backend(b);
    const std::vector<float> sum = ReduceSum(Add(x, y), {0}, false).ToVector<float>();
    ASSERT_EQ(sum.size(), 5u) << BackendName(b);
    for (size_t j = 0; j < 5; ++j) {
      float want = 0.f;
      for (size_t i = 0; i < 3; ++i) want += xv[i * 5 + j] + yv[j];
      EXPECT_FLOAT_EQ(sum[j], want) << BackendName(b) << " column " << j;
    }
  }
}

// The functor header (what a .cu file will include) computes what the ops compute, line by line.
TEST(Registry, FunctorHeaderMatchesTheOps) {
  const std::vector<float> xs = {-1.75f, -0.3f, 0.f, 0.6f, 1.5f, 2.25f};
  const std::vector<float> bs = {0.5f, 2.f, -1.f, 0.6f, 3.f, -0.25f};
  Tensor x(Shape{xs.size()}, kFloat32), b(Shape{bs.size()}, kFloat32);
  x.CopyDataFromHostPtr(xs.data(), xs.size());
  b.CopyDataFromHostPtr(bs.data(), bs.size());
  auto same = [](float u, float v) { return u == v || (std::isnan(u) && std::isnan(v)); };
#define SINGA_UNARY(Name, kinds, expr)                                                   \
  {                                                                                      \
    const std::vector<float> y = Name(x).ToVector<float>();                              \
    for (size_t i = 0; i < xs.size(); ++i)                                               \
      EXPECT_PRED2(same, y[i], fn::Name##Op{}(xs[i])) << #Name << "(" << xs[i] << ")";   \
  }
#define SINGA_BINARY(Name, kinds, expr)                                                  \
  {                                                                                      \
    const std::vector<float> y = Name(x, b).ToVector<float>();                           \
    for (size_t i = 0; i < xs.size(); ++i)                                               \
      EXPECT_PRED2(same, y[i], fn::Name##Op{}(xs[i], bs[i])) << #Name << "(" << xs[i]    \
                                                             << ", " << bs[i] << ")";    \
  }
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
  // Spot values against the standard library, so the header itself is checked too.
  EXPECT_FLOAT_EQ(fn::ExpOp{}(0.6f), std::exp(0.6f));
  EXPECT_FLOAT_EQ(fn::SoftPlusOp{}(0.6f), std::log1p(std::exp(0.6f)));
  EXPECT_FLOAT_EQ(fn::PowOp{}(1.5f, 3.f), 3.375f);
  EXPECT_EQ(fn::AbsOp{}(-3), 3);
}

}  // namespace
}  // namespace singa
