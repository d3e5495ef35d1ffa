// The graph's layout pass (cpp/src/graph/layouts.cc): which blocks it keeps channel-blocked,
// checked with operations that declare their layouts and record what they see when they run.
#include <map>
#include <string>

#include "test_helpers.h"

using namespace singa;

namespace {

// A recorded step: "produce" writes a, "relu" (flat) reads a and writes b, "consume" reads b.
// Each operation notes the layout of the blocks it touches when it runs.
struct Chain {
  std::shared_ptr<Device> dev = std::make_shared<CppCPU>();
  Shape shape{2, 32, 3, 5};
  std::map<std::string, MemLayout> seen;

  void Op(const std::string& name, std::vector<Block*> reads, std::vector<Block*> writes,
          LayoutHooks layouts) {
    Block* b = writes.empty() ? reads[0] : writes[0];
    dev->Exec({.reads = reads, .writes = writes, .label = "op", .layouts = layouts},
              [this, name, b](Context*) { seen[name] = b->mem_layout(); });
  }

  // Records the chain (consume accepts its input blocked when consumer_accepts) and runs it.
  Graph::LayoutCounts Run(bool consumer_accepts, bool hold_b = false, bool layouts = true) {
    Tensor x(shape, dev), a(shape, dev), b(shape, dev), out(Shape{2}, dev);
    if (hold_b) b.block()->AddExternalRef();
    dev->graph()->SetLayouts(layouts);
    dev->EnableGraph(true);
    Op("produce", {x.block()}, {a.block()}, {.reads = 0, .writes = 1});
    Op("relu", {a.block()}, {b.block()}, LayoutHooks::Flat());
    Op("consume", {b.block()}, {out.block()}, {.reads = consumer_accepts ? 1u : 0u});
    dev->EnableGraph(false);
    dev->RunGraph(false);
    const Graph::LayoutCounts counts = dev->graph()->layout_counts();
    dev->ResetGraph();
    if (hold_b) b.block()->RemoveExternalRef();
    EXPECT_EQ(a.block()->mem_layout(), MemLayout::kPlain) << "a reset graph leaves blocks plain";
    return counts;
  }
};

}  // namespace

TEST(GraphLayouts, AChainOfAcceptingOperationsStaysBlocked) {
  Chain c;
  const auto counts = c.Run(true);
  EXPECT_EQ(counts.blocks, 2u);
  EXPECT_EQ(counts.bytes, 2 * 2 * 32 * 3 * 5 * sizeof(float));
  EXPECT_EQ(c.seen["produce"], MemLayout::kChannels16);
  EXPECT_EQ(c.seen["relu"], MemLayout::kChannels16);
}

TEST(GraphLayouts, AReaderWithoutABlockedKernelKeepsTheWholeGroupPlain) {
  Chain c;
  EXPECT_EQ(c.Run(false).blocks, 0u);  // b must be plain, and relu reads a in b's layout
  EXPECT_EQ(c.seen["produce"], MemLayout::kPlain);
}

TEST(GraphLayouts, BlocksAUserHoldsStayPlain) {
  Chain c;
  EXPECT_EQ(c.Run(true, /*hold_b=*/true).blocks, 0u);
}

TEST(GraphLayouts, SwitchedOffEverythingIsPlainUnderABudgetNot) {
  Chain c;
  EXPECT_EQ(c.Run(true, false, /*layouts=*/false).blocks, 0u);
  c.dev->graph()->SetFusion(false);
  EXPECT_EQ(c.Run(true).blocks, 0u);
  c.dev->graph()->SetFusion(true);
  // a recomputation reruns the operation on its blocks, tagged as for the run (test_graph_budget)
  c.dev->graph()->SetMemoryBudgetFraction(1.0);
  EXPECT_EQ(c.Run(true).blocks, 2u);
  c.dev->graph()->SetMemoryBudgetFraction(0);
  EXPECT_EQ(c.Run(true).blocks, 2u);
}

TEST(GraphLayouts, ChannelsNotAMultipleOf16OrOneByOneImagesStayPlain) {
  Chain c;
  c.shape = {2, 24, 3, 5};
  EXPECT_EQ(c.Run(true).blocks, 0u);
  c.shape = {2, 32, 1, 1};  // the same bytes in both layouts: never tagged
  EXPECT_EQ(c.Run(true).blocks, 0u);
}

TEST(GraphLayouts, OneLayoutOperandsOfDifferentShapesStayPlain) {
  Chain c;
  Tensor x(c.shape, c.dev), a(c.shape, c.dev), b(Shape{2, 32, 5, 3}, c.dev),
      s(c.shape, c.dev), out(Shape{2}, c.dev);
  c.dev->EnableGraph(true);
  c.Op("produce", {x.block()}, {a.block()}, {.writes = 1});
  c.Op("produce2", {x.block()}, {b.block()}, {.writes = 1});
  c.Op("add", {a.block(), b.block()}, {s.block()}, LayoutHooks::Flat());
  c.Op("consume", {s.block()}, {out.block()}, {.reads = 1});
  c.dev->EnableGraph(false);
  c.dev->RunGraph(false);
  EXPECT_EQ(c.dev->graph()->layout_counts().blocks, 0u);
  c.dev->ResetGraph();
}

TEST(GraphLayouts, IndependentOperandsEachChooseTheirOwn) {
  // A convolution-like operation reorders what it does not get blocked: its input may be plain
  // (read by a plain-only operation too) while its output stays blocked.
  Chain c;
  Tensor x(c.shape, c.dev), a(c.shape, c.dev), y(c.shape, c.dev), out(Shape{2}, c.dev),
      out2(Shape{2}, c.dev);
  c.dev->EnableGraph(true);
  c.Op("produce", {x.block()}, {a.block()}, {.writes = 1});
  c.Op("plain_reader", {a.block()}, {out2.block()}, {});
  c.Op("conv", {a.block()}, {y.block()}, {.reads = 1, .writes = 1});
  c.Op("consume", {y.block()}, {out.block()}, {.reads = 1});
  c.dev->EnableGraph(false);
  c.dev->RunGraph(false);
  EXPECT_EQ(c.dev->graph()->layout_counts().blocks, 1u);
  EXPECT_EQ(c.seen["produce"], MemLayout::kPlain);
  EXPECT_EQ(c.seen["conv"], MemLayout::kChannels16);
  c.dev->ResetGraph();
}
