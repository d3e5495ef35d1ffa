// Batch norm in training under a memory budget: its output is dropped after the forward and
// refilled by its rerun form (OpDesc::rerun) before the backward reads it again, with the
// forward's bits and the running statistics updated once per step; on the reference kernel
// (a normalisation with the saved batch statistics) and on oneDNN's (the training primitive
// again, into scratch statistics), with and without a fused ReLU.
#include <memory>
#include <string>
#include <vector>

#include "singa/graph/graph.h"
#include "singa/ops/nn.h"
#include "test_helpers.h"

#ifdef SINGA_USE_DNNL
#include "ops/dnnl/common.h"
#endif

using namespace singa;
using singa_test::FromVector;
using singa_test::Hold;

namespace {

// y = bn(x) (+ ReLU), a chain of forward ops on y, then a backward that reads y last: y is the
// activation a budget drops across the gap.
struct BnStep {
  std::shared_ptr<Device> dev = std::make_shared<CppCPU>();
  Tensor x, scale, bias, rm, rv, out;
  std::vector<std::unique_ptr<Hold>> held;

  BnStep(Backend backend, bool relu_op) {
    dev->set_backend(backend);
    const Shape xs{4, 3, 6, 5};
    x = Tensor(xs, dev);
    scale = Tensor(Shape{3}, dev);
    bias = Tensor(Shape{3}, dev);
    rm = Tensor(Shape{3}, dev);
    rv = Tensor(Shape{3}, dev);
    dev->SetRandSeed(3);
    Gaussian(0.5f, 2.f, &x);
    Gaussian(1.f, 0.2f, &scale);
    Gaussian(0.f, 0.3f, &bias);
    for (Tensor* t : {&x, &scale, &bias, &rm, &rv}) held.push_back(std::make_unique<Hold>(*t));
    dev->EnableGraph(true);
    auto r = BatchNormForwardTraining(x, scale, bias, &rm, &rv, 0.1f, 1e-5f, relu_op);
    Tensor y = relu_op ? r[0] : ReLU(r[0]);  // a separate ReLU: fused into the batch norm
    Tensor h = Add(EltwiseMult(y, 1.5f), 0.25f);
    for (int i = 0; i < 3; ++i) h = Add(EltwiseMult(h, 0.75f), 0.5f);
    auto g = BatchNormBackward(h, x, scale, r[1], r[2], 1e-5f);
    // y read last, after dx is gone (the graph runs in submission order): y is the one block
    // whose drop lowers the peak from three activations to two.
    Tensor dsum = ReduceSum(g[0], {});
    out = Add(dsum, ReduceSum(EltwiseMult(y, y), {}));
    held.push_back(std::make_unique<Hold>(out));
    dev->EnableGraph(false);
  }
  ~BnStep() { dev->ResetGraph(); }

  // The result and the running statistics after one step from zero / one.
  std::vector<float> Run() {
    rm.SetValue(0.f);
    rv.SetValue(1.f);
    dev->RunGraph(true);
    std::vector<float> v = out.ToVector<float>();
    for (const Tensor* t : {&rm, &rv})
      for (float f : t->ToVector<float>()) v.push_back(f);
    return v;
  }

  bool BatchNormRecomputed() {
    Graph* g = dev->graph();
    for (size_t pos = 0; pos < g->order().size(); ++pos)
      if (g->IsRecomputeAt(pos) && g->OpNameAt(pos).rfind("BatchNormForwardTraining", 0) == 0)
        return true;
    return false;
  }
};

// The least budget (from the error a tiny one raises), then the step at it.
void ExpectRecomputedBitIdentical(Backend backend) {
  for (bool relu_op : {false, true}) {
    const std::string where = std::string(relu_op ? "relu in the op" : "fused ReLU");
    BnStep step(backend, relu_op);
    const std::vector<float> ref = step.Run();
    EXPECT_FALSE(step.BatchNormRecomputed());
    if (!relu_op) EXPECT_EQ(step.dev->graph()->num_fused(), 1u) << where;
    step.dev->SetMemoryBudget(step.dev->graph()->memory_plan().persistent_bytes + 64);
    size_t least = 0;
    try {
      step.Run();
    } catch (const OutOfMemoryError& e) {
      const std::string msg = e.what();
      least = std::stoull(msg.substr(msg.find("needs at least ") + 15));
    }
    ASSERT_GT(least, 0u) << where;
    step.dev->SetMemoryBudget(least);
    EXPECT_EQ(step.Run(), ref) << where;  // output and running statistics: the same bits
    EXPECT_TRUE(step.BatchNormRecomputed()) << where;
    EXPECT_EQ(step.Run(), ref) << where;  // and again on replay
  }
}

}  // namespace

TEST(GraphBudgetBatchNorm, ReferenceKernelRerunsFromSavedStatistics) {
  ExpectRecomputedBitIdentical(Backend::kCpuRef);
}

#ifdef SINGA_USE_DNNL
TEST(GraphBudgetBatchNorm, OneDnnRerunsIntoScratchStatistics) {
  dnnl_kernel::SetBatchNormEnabled(true);
  try {
    ExpectRecomputedBitIdentical(Backend::kCpuDnnl);
  } catch (...) {
    dnnl_kernel::SetBatchNormEnabled(false);
    throw;
  }
  dnnl_kernel::SetBatchNormEnabled(false);
}
#endif
