// The op schema's NN rows (schema/nn.py) as the graph sees them: the generated launch submits
// the row's OpId (chosen by the handle), its reads and writes and its recomputable flag.
#include "singa/graph/graph.h"
#include "singa/ops/nn.h"
#include "test_helpers.h"

using namespace singa;

namespace {

const Graph::Node* Find(const Graph& g, OpId id) {
  for (const auto& n : g.nodes())
    if (n.id == id) return &n;
  return nullptr;
}

}  // namespace

TEST(NnSchema, PoolingSubmitsItsRowsIdsReadsAndWrites) {
  for (bool is_max : {true, false}) {
    auto dev = std::make_shared<CppCPU>();
    Tensor x({2, 3, 6, 6}, dev);
    dev->SetRandSeed(3);
    Gaussian(0.f, 1.f, &x);
    PoolingHandle h(x.shape(), {3, 3}, {2, 2}, {1, 1}, is_max);
    dev->EnableGraph(true);
    Tensor y = Pool2dForward(x, h);
    Tensor dy({2, 3, 3, 3}, dev);
    dy.SetValue(1.f);
    Tensor dx = Pool2dBackward(dy, x, y, h);
    dev->EnableGraph(false);
    const Graph& g = *dev->graph();
    const Graph::Node* fwd =
        Find(g, is_max ? OpId::kMaxPool2dForward : OpId::kAvgPool2dForward);
    const Graph::Node* bwd =
        Find(g, is_max ? OpId::kMaxPool2dBackward : OpId::kAvgPool2dBackward);
    ASSERT_NE(fwd, nullptr);
    ASSERT_NE(bwd, nullptr);
    EXPECT_EQ(fwd->reads, std::vector<Block*>{x.block()});
    EXPECT_EQ(fwd->writes.at(0), y.block());  // then scratch, where a kernel asks for it
    EXPECT_EQ(bwd->reads, (std::vector<Block*>{dy.block(), x.block()}));
    EXPECT_EQ(bwd->writes.at(0), dx.block());
    EXPECT_TRUE(fwd->recomputable && bwd->recomputable);  // the rows' recomputable
    EXPECT_STREQ(OpName(fwd->id), is_max ? "MaxPool2dForward" : "AvgPool2dForward");
  }
}
