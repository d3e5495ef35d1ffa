// Typed op ids (singa/core/op_ids.h) and the descriptor Device::Exec takes: names printed as
// before, the graph keyed on ids rather than on names.
#include <set>
#include <string>

#include "singa/core/device.h"
#include "singa/graph/graph.h"
#include "singa/ops/elementwise.h"
#include "test_helpers.h"

using namespace singa;

TEST(OpIds, NamesAreTheOnesProfilesPrinted) {
  EXPECT_STREQ(OpName(OpId::kReLU), "ReLU");        // from elementwise.def
  EXPECT_STREQ(OpName(OpId::kEltwiseMult), "EltwiseMult");
  EXPECT_STREQ(OpName(OpId::kConv2dForward), "Conv2dForward");  // a schema/nn.py row
  EXPECT_STREQ(OpName(OpId::kCommSynch), "Communicator.synch");
  EXPECT_STREQ(OpName(OpId::kCustom), "op");
  EXPECT_STREQ(OpName(static_cast<OpId>(kNumOpIds)), "?");
}

TEST(OpIds, EveryIdHasItsOwnName) {
  std::set<std::string> names;
  for (size_t i = 0; i < kNumOpIds; ++i) {
    const std::string n = OpName(static_cast<OpId>(i));
    EXPECT_FALSE(n.empty()) << "id " << i;
    EXPECT_TRUE(names.insert(n).second) << "two ids print " << n;
  }
}

TEST(OpDesc, CustomOperationsPrintTheirLabel) {
  EXPECT_STREQ((OpDesc{.label = "MyOp"}).name(), "MyOp");
  EXPECT_STREQ((OpDesc{}).name(), "op");
  EXPECT_STREQ((OpDesc{.label = ""}).name(), "op");
  // a library op prints its id's name; a label does not rename it
  EXPECT_STREQ((OpDesc{.id = OpId::kMult, .label = "x"}).name(), "Mult");
}

TEST(OpDesc, GraphNodesKeepIdAndName) {
  Tensor a = singa_test::FromVector({-1, 2}, {2});
  Tensor b({2}, a.device());
  a.device()->EnableGraph(true);
  Tensor r = ReLU(a);
  a.device()->Exec({.reads = {r.block()}, .writes = {b.block()}, .label = "Copy"},
                   [](Context*) {});
  a.device()->EnableGraph(false);
  const auto& n = a.device()->graph()->nodes();
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[0].id, OpId::kReLU);
  EXPECT_EQ(n[0].name, "ReLU");
  EXPECT_EQ(n[1].id, OpId::kCustom);
  EXPECT_EQ(n[1].name, "Copy");
  a.device()->ResetGraph();
}

// ReLU fusion finds its partner by id: an operation that merely calls itself "ReLU" is not one.
TEST(OpDesc, ReluFusionKeysOnTheId) {
  for (bool typed : {true, false}) {
    auto dev = std::make_shared<CppCPU>();
    auto x = dev->NewBlock(16), y = dev->NewBlock(16), z = dev->NewBlock(16);
    auto out = dev->NewBlock(16);
    out->AddExternalRef();  // a result Python holds
    auto noop = [](Context*) {};
    FusionHooks relu_variant;
    relu_variant.accepts = kEpiReLU;
    relu_variant.with_epilogue = [](Context*, const Epilogue&) {};
    dev->EnableGraph(true);
    dev->Exec({.writes = {x.get()}, .label = "Input"}, noop);
    dev->Exec({.reads = {x.get()}, .writes = {y.get()}, .label = "Producer",
               .fusion = relu_variant},
              noop);
    if (typed)
      dev->Exec({.id = OpId::kReLU, .reads = {y.get()}, .writes = {z.get()}}, noop);
    else
      dev->Exec({.reads = {y.get()}, .writes = {z.get()}, .label = "ReLU"}, noop);
    dev->Exec({.reads = {z.get()}, .writes = {out.get()}, .label = "Consumer"}, noop);
    dev->EnableGraph(false);
    dev->RunGraph(true);
    EXPECT_EQ(dev->graph()->num_fused(), typed ? 1u : 0u) << (typed ? "typed" : "labelled");
    dev->ResetGraph();
    out->RemoveExternalRef();
  }
}
