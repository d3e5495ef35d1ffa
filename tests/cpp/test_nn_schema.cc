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

// Convolution's bias is an optional read ("b?" in its row): in the OpDesc only when given.
// The ReLU variant is its own id; the three directions declare the flops of the hand-written
// formula they replaced (2 per multiply-add; the bias gradient, a reduction, none).
TEST(NnSchema, ConvolutionReadsItsBiasOnlyWhenGivenAndDeclaresItsFlops) {
  auto dev = std::make_shared<CppCPU>();
  ConvHandle h(Shape{2, 3, 6, 6}, {3, 3}, {2, 2}, {1, 1}, 3, 4, true);
  Tensor x(Shape{2, 3, 6, 6}, dev), W(h.WeightShape(), dev), b(Shape{4}, dev);
  Tensor dy(h.OutputShape(2), dev);
  dev->SetRandSeed(5);
  for (Tensor* t : {&x, &W, &b, &dy}) Gaussian(0.f, 1.f, t);
  dev->EnableGraph(true);
  Tensor y = Conv2dForward(x, W, b, h);
  Tensor yr = Conv2dForward(x, W, Tensor(), h, /*relu=*/true);
  Tensor dx = Conv2dBackwardX(dy, W, h), dW = Conv2dBackwardW(dy, x, h);
  Tensor db = Conv2dBackwardB(dy, h);
  dev->EnableGraph(false);
  const Graph& g = *dev->graph();
  const Graph::Node *fwd = Find(g, OpId::kConv2dForward), *relu = Find(g, OpId::kConv2dForwardReLU);
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(fwd->reads, (std::vector<Block*>{x.block(), W.block(), b.block()}));
  EXPECT_EQ(relu->reads, (std::vector<Block*>{x.block(), W.block()}));
  EXPECT_EQ(fwd->writes.at(0), y.block());
  EXPECT_EQ(relu->writes.at(0), yr.block());
  const double per_output = 2.0 * 3 * 3 * 3;  // C / groups * kh * kw multiply-adds
  EXPECT_EQ(fwd->flops, per_output * y.Size());
  EXPECT_EQ(Find(g, OpId::kConv2dBackwardX)->flops, per_output * dy.Size());
  EXPECT_EQ(Find(g, OpId::kConv2dBackwardW)->flops, per_output * dy.Size());
  EXPECT_EQ(Find(g, OpId::kConv2dBackwardB)->flops, 0.0);
  EXPECT_EQ(Find(g, OpId::kConv2dBackwardB)->writes.at(0), db.block());
  dev->ResetGraph();
}

// Batch norm's rows declare their arithmetic per element of x (6 training, 2 inference, 9
// backward): below the bytes they move at any dtype, so the cost model's estimate of a
// batch norm is its bytes, as before the rows declared any.
TEST(NnSchema, BatchNormDeclaresFlopsPerElementBelowItsBytes) {
  auto dev = std::make_shared<CppCPU>();
  const size_t N = 2, C = 3, S = 5 * 4;
  Tensor x(Shape{N, C, 5, 4}, dev), scale(Shape{C}, dev), bias(Shape{C}, dev);
  Tensor rm(Shape{C}, dev), rv(Shape{C}, dev), dy(Shape{N, C, 5, 4}, dev);
  for (Tensor* t : {&x, &scale, &bias, &dy}) Gaussian(0.f, 1.f, t);
  rm.SetValue(0.f);
  rv.SetValue(1.f);
  dev->EnableGraph(true);
  std::vector<Tensor> r = BatchNormForwardTraining(x, scale, bias, &rm, &rv, 0.1f, 1e-5f);
  BatchNormForwardInference(x, scale, bias, rm, rv, 1e-5f);
  BatchNormBackward(dy, x, scale, r[1], r[2], 1e-5f);
  dev->EnableGraph(false);
  const Graph& g = *dev->graph();
  const double M = double(N * C * S);
  const std::pair<OpId, double> rows[] = {{OpId::kBatchNormForwardTraining, 6 * M},
                                          {OpId::kBatchNormForwardInference, 2 * M},
                                          {OpId::kBatchNormBackward, 9 * M}};
  for (const auto& [id, flops] : rows) {
    const Graph::Node* n = Find(g, id);
    ASSERT_NE(n, nullptr) << OpName(id);
    EXPECT_EQ(n->flops, flops) << OpName(id);
    // the roofline (graph.h): 150 flops per ns against 25 bytes per ns, and the least a batch
    // norm moves: x read and y (dx) written, 2 bytes each in bfloat16
    EXPECT_LT(n->flops / 150.0, 4.0 * M / 25.0) << OpName(id);
  }
  dev->ResetGraph();
}
