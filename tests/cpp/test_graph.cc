// The computational graph: buffering, dependencies, orders, recycling and the planner invariant.
#include <random>
#include <set>

#include "singa/ops/nn.h"
#include "test_helpers.h"

using namespace singa;
using singa_test::FromVector;
using singa_test::Hold;
using singa_test::Iota;

namespace {

// A small "training step" on dev: y = relu(x W) ; loss-ish = sum(y * y); W -= 0.01 * x^T (2y).
struct Step {
  Tensor x, W;
  explicit Step(std::shared_ptr<Device> dev) : x({4, 3}, dev), W({3, 5}, dev) {
    dev->SetRandSeed(1);
    Gaussian(0.f, 1.f, &x);
    Gaussian(0.f, 1.f, &W);
  }
  Tensor Run() {
    Tensor h = Mult(x, W);
    Tensor y = ReLU(h);
    Tensor g = EltwiseMult(ReLUBackward(y, h), 2.f);
    Tensor dW = Mult(Transpose(x), g);
    Axpy(-0.01f, dW, &W);
    return ReduceSum(EltwiseMult(y, y), {});
  }
};

}  // namespace

TEST(Graph, BufferingRecordsInsteadOfRunning) {
  auto dev = std::make_shared<CppCPU>();
  Tensor a = FromVector({1, 2}, {2});
  dev->EnableGraph(true);
  Tensor a2({2}, dev);
  a2.SetValue(3.f);
  Tensor b = Add(a2, 1.f);
  dev->EnableGraph(false);
  EXPECT_GT(dev->graph()->num_nodes(), 0u);
  EXPECT_FALSE(b.block()->initialized());  // nothing ran
  dev->RunGraph();
  EXPECT_EQ(b.ToVector<float>(), (std::vector<float>{4, 4}));
  dev->ResetGraph();
}

TEST(Graph, VersionChangesWithEachRecordedOperationAndReset) {
  auto dev = std::make_shared<CppCPU>();
  Tensor a({2}, dev);
  const uint64_t v0 = dev->graph_version();
  a.SetValue(1.f);  // eager: nothing recorded
  EXPECT_EQ(dev->graph_version(), v0);
  dev->EnableGraph(true);
  a.SetValue(2.f);
  const uint64_t v1 = dev->graph_version();
  dev->EnableGraph(false);
  EXPECT_NE(v1, v0);
  dev->RunGraph();  // replaying changes nothing recorded
  EXPECT_EQ(dev->graph_version(), v1);
  dev->ResetGraph();
  EXPECT_NE(dev->graph_version(), v1);
  EXPECT_NE(dev->graph_version(), v0);
}

TEST(Graph, ReadingValuesWhileBufferingThrows) {
  auto dev = std::make_shared<CppCPU>();
  Tensor a({2}, dev);
  a.SetValue(1.f);
  dev->EnableGraph(true);
  EXPECT_THROW(a.ToVector<float>(), Error);
  EXPECT_THROW(dev->RunGraph(), Error);
  dev->EnableGraph(false);
  dev->ResetGraph();
}

TEST(Graph, DependenciesCoverRawWarWaw) {
  auto dev = std::make_shared<CppCPU>();
  auto b1 = dev->NewBlock(4), b2 = dev->NewBlock(4);
  dev->EnableGraph(true);
  auto noop = [](Context*) {};
  dev->Exec({.writes = {b1.get()}, .label = "w1"}, noop);                       // 0 writes b1
  dev->Exec({.reads = {b1.get()}, .writes = {b2.get()}, .label = "r1"}, noop);  // 1: RAW on 0
  dev->Exec({.writes = {b1.get()}, .label = "w1again"}, noop);  // 2: WAR on 1, WAW on 0
  dev->Exec({.label = "free"}, noop);                           // 3 independent
  dev->EnableGraph(false);
  dev->RunGraph(false);
  const auto& n = dev->graph()->nodes();
  EXPECT_EQ(n[0].succ, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(n[1].succ, (std::vector<size_t>{2}));
  EXPECT_EQ(n[2].num_pred, 2u);
  EXPECT_EQ(n[3].num_pred, 0u);
  // BFS: the roots (0 and 3) first.
  EXPECT_EQ(dev->graph()->order(), (std::vector<size_t>{0, 3, 1, 2}));
  dev->RunGraph(true);
  EXPECT_EQ(dev->graph()->order(), (std::vector<size_t>{0, 1, 2, 3}));
  dev->ResetGraph();
}

TEST(Graph, RandomOperationsKeepTheirOrder) {
  auto dev = std::make_shared<CppCPU>();
  Tensor a({8}, dev), b({8}, dev);
  dev->EnableGraph(true);
  Uniform(0.f, 1.f, &a);
  Uniform(0.f, 1.f, &b);
  dev->EnableGraph(false);
  Hold ha(a), hb(b);  // read after the run: must not be recycled
  const auto& n = dev->graph()->nodes();
  dev->SetRandSeed(3);
  dev->RunGraph(false);
  EXPECT_EQ(n[1].num_pred, 1u);  // chained behind the first random op
  auto ga = a.ToVector<float>(), gb = b.ToVector<float>();
  dev->ResetGraph();
  dev->SetRandSeed(3);
  Uniform(0.f, 1.f, &a);
  Uniform(0.f, 1.f, &b);
  EXPECT_EQ(a.ToVector<float>(), ga);
  EXPECT_EQ(b.ToVector<float>(), gb);
}

// The same step eagerly and as a graph (both orders, planner on and off) gives the same numbers.
TEST(Graph, ReplayMatchesEager) {
  auto eager_dev = std::make_shared<CppCPU>();
  Step eager(eager_dev);
  std::vector<float> eager_losses;
  for (int it = 0; it < 4; ++it) eager_losses.push_back(eager.Run().ToVector<float>()[0]);

  for (bool sequential : {false, true}) {
    for (bool planned : {false, true}) {
      auto dev = std::make_shared<CppCPU>();
      Step s(dev);
      dev->graph()->SetPlanning(planned);
      dev->EnableGraph(true);
      Tensor loss = s.Run();
      dev->EnableGraph(false);
      Hold hold(loss);
      for (int it = 0; it < 4; ++it) {
        dev->RunGraph(sequential);
        EXPECT_FLOAT_EQ(loss.ToVector<float>()[0], eager_losses[it])
            << "iteration " << it << " sequential " << sequential << " planned " << planned;
      }
      EXPECT_EQ(s.W.ToVector<float>(), eager.W.ToVector<float>());
      dev->ResetGraph();
    }
  }
}

TEST(Graph, HeldBlocksAreNeverRecycled) {
  auto dev = std::make_shared<CppCPU>();
  Tensor x({64}, dev);
  x.SetValue(1.f);
  dev->EnableGraph(true);
  Tensor h = Exp(x);      // intermediate, not held by a user handle: recyclable
  Tensor y = Add(h, 1.f);  // held below
  dev->EnableGraph(false);
  y.block()->AddExternalRef();
  dev->graph()->SetPlanning(false);
  dev->RunGraph();
  const auto& info = dev->graph()->blocks();
  EXPECT_TRUE(info.at(h.block()).recyclable);
  EXPECT_FALSE(info.at(y.block()).recyclable);
  EXPECT_FALSE(info.at(x.block()).recyclable);  // input
  EXPECT_FALSE(h.block()->allocated());          // released after its last reader
  EXPECT_TRUE(y.block()->allocated());
  y.block()->RemoveExternalRef();
  dev->ResetGraph();
}

// Property test of the planner: on random graphs, recyclable blocks with overlapping lifetimes
// never share bytes, and the arena is at least the liveness lower bound.
TEST(Graph, PlannerNeverOverlapsLiveBlocks) {
  std::mt19937 rng(123);
  for (int trial = 0; trial < 40; ++trial) {
    auto dev = std::make_shared<CppCPU>();
    std::vector<std::shared_ptr<Block>> blocks;
    dev->EnableGraph(true);
    auto noop = [](Context*) {};
    const int nops = 5 + rng() % 60;
    for (int i = 0; i < nops; ++i) {
      std::vector<Block*> reads, writes;
      if (!blocks.empty()) {
        int nr = rng() % 3;
        for (int r = 0; r < nr; ++r) reads.push_back(blocks[rng() % blocks.size()].get());
      }
      if (rng() % 4 != 0 || blocks.empty()) {
        blocks.push_back(dev->NewBlock(1 + rng() % 5000));
        writes.push_back(blocks.back().get());
      } else {
        writes.push_back(blocks[rng() % blocks.size()].get());  // in-place update
      }
      dev->Exec({.reads = reads, .writes = writes, .label = "op"}, noop);
    }
    dev->EnableGraph(false);
    dev->RunGraph(trial % 2 == 0);
    const auto& info = dev->graph()->blocks();
    std::vector<const Graph::BlockInfo*> rec;
    for (auto& [b, i] : info)
      if (i.recyclable) rec.push_back(&i);
    for (size_t p = 0; p < rec.size(); ++p) {
      for (size_t q = p + 1; q < rec.size(); ++q) {
        const auto *a = rec[p], *b = rec[q];
        bool live_overlap = a->first <= b->last && b->first <= a->last;
        bool byte_overlap = a->offset < b->offset + b->block->size() &&
                            b->offset < a->offset + a->block->size();
        EXPECT_FALSE(live_overlap && byte_overlap) << "trial " << trial;
      }
    }
    const auto& plan = dev->graph()->memory_plan();
    EXPECT_GE(plan.arena_bytes, plan.lower_bound_bytes);
    dev->ResetGraph();
  }
}

TEST(Graph, PlanningSavesMemoryOnAChain) {
  // A chain of 20 ops on 1 MB tensors needs about 2 live tensors at a time, not 20.
  auto dev = std::make_shared<CppCPU>();
  Tensor x({1 << 18}, dev);
  x.SetValue(0.5f);
  dev->EnableGraph(true);
  Tensor y = x;
  for (int i = 0; i < 20; ++i) y = Add(y, 1.f);
  Tensor out = Add(y, 0.f);
  dev->EnableGraph(false);
  out.block()->AddExternalRef();
  dev->RunGraph();
  const auto& plan = dev->graph()->memory_plan();
  EXPECT_LE(plan.arena_bytes, 3u * (1u << 20));
  EXPECT_GE(plan.recyclable_bytes, 20u * (1u << 20));
  EXPECT_FLOAT_EQ(out.ToVector<float>()[7], 20.5f);
  std::string dot = dev->graph()->ToDot();
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("Add"), std::string::npos);
  out.block()->RemoveExternalRef();
  dev->ResetGraph();
}

TEST(Graph, BlockListOrderAndNamesForDrawings) {
  auto dev = std::make_shared<CppCPU>();
  Step s(dev);
  Hold hold_x(s.x), hold_w(s.W);
  s.x.block()->set_name("input[0]");
  s.W.block()->set_name("fc.W");
  dev->EnableGraph(true);
  Tensor loss = s.Run();
  dev->EnableGraph(false);
  EXPECT_TRUE(dev->graph()->BlockList().empty());  // nothing built yet
  dev->RunGraph();
  const auto list = dev->graph()->BlockList();
  ASSERT_EQ(list.size(), dev->graph()->blocks().size());
  for (size_t i = 1; i < list.size(); ++i) EXPECT_LE(list[i - 1].first, list[i].first);
  size_t named = 0;
  for (const auto& info : list) {
    EXPECT_LT(info.last, dev->graph()->num_nodes());
    if (!info.block->name().empty()) {
      ++named;
      EXPECT_EQ(info.kind, Graph::kInput);
      EXPECT_FALSE(info.recyclable);
    }
  }
  EXPECT_EQ(named, 2u);
  EXPECT_EQ(dev->graph()->OpNameAt(0), dev->graph()->nodes()[dev->graph()->order()[0]].name);
  EXPECT_THROW(dev->graph()->OpNameAt(dev->graph()->num_nodes()), AxisError);
  const std::string dot = dev->graph()->ToDot();
  EXPECT_NE(dot.find("label=\"fc.W (60 B)\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"input[0] (48 B)\""), std::string::npos) << dot;
  dev->ResetGraph();
}

TEST(Graph, DotEscapesNames) {
  auto dev = std::make_shared<CppCPU>();
  Tensor a({2}, dev);
  a.SetValue(1.f);
  a.block()->set_name("say \"hi\"");
  dev->EnableGraph(true);
  Tensor b = Add(a, 1.f);
  dev->EnableGraph(false);
  EXPECT_NE(dev->graph()->ToDot().find("label=\"say \\\"hi\\\" (8 B)\""), std::string::npos);
  dev->ResetGraph();
}

// ReLU fusion: a convolution whose output only a ReLU reads runs with the ReLU as a post-op; the
// ReLU becomes a no-op whose output shares the convolution's block. Values match eager mode.
namespace {

struct ConvReluStep {
  Tensor x, W;
  ConvHandle h;
  ConvReluStep(std::shared_ptr<Device> dev, bool extra_reader)
      : x({2, 3, 6, 5}, dev), W({4, 3, 3, 3}, dev),
        h({2, 3, 6, 5}, {3, 3}, {1, 1}, {1, 1}, 3, 4, false), extra_reader_(extra_reader) {
    dev->SetRandSeed(7);
    Gaussian(0.f, 1.f, &x);
    Gaussian(0.f, 1.f, &W);
  }
  // y = conv(x, W); z = relu(y); loss = sum(z * z) (+ sum(y) when y has a second reader)
  Tensor Run() {
    Tensor y = Conv2dForward(x, W, Tensor(), h);
    Tensor z = ReLU(y);
    Tensor s = ReduceSum(EltwiseMult(z, z), {});
    return extra_reader_ ? Add(s, ReduceSum(y, {})) : s;
  }
  bool extra_reader_;
};

std::vector<float> RunConvRelu(bool graph, bool extra_reader, bool planned, size_t* fused) {
  auto dev = std::make_shared<CppCPU>();
  ConvReluStep step(dev, extra_reader);
  if (!graph) return step.Run().ToVector<float>();
  dev->graph()->SetPlanning(planned);
  dev->EnableGraph(true);
  Tensor loss = step.Run();
  dev->EnableGraph(false);
  Hold hold(loss);
  dev->RunGraph();
  dev->RunGraph();  // a replay gives the same
  *fused = dev->graph()->num_fused();
  std::vector<float> out = loss.ToVector<float>();
  dev->ResetGraph();
  return out;
}

}  // namespace

TEST(Graph, ReluFusedIntoTheConvolutionThatOnlyItReads) {
  size_t fused = 99;
  const auto eager = RunConvRelu(false, false, true, nullptr);
  EXPECT_EQ(RunConvRelu(true, false, true, &fused), eager);
  EXPECT_EQ(fused, 1u);
}

TEST(Graph, ReluNotFusedWhenTheInputHasAnotherReaderOrMemoryIsNotPlanned) {
  size_t fused = 99;
  const auto eager = RunConvRelu(false, true, true, nullptr);
  EXPECT_EQ(RunConvRelu(true, true, true, &fused), eager);
  EXPECT_EQ(fused, 0u);  // y is also summed: it must keep its pre-ReLU values
  const auto eager2 = RunConvRelu(false, false, true, nullptr);
  EXPECT_EQ(RunConvRelu(true, false, false, &fused), eager2);
  EXPECT_EQ(fused, 0u);  // dynamic recycling cannot alias blocks
}
