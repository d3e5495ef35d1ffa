// The memory-budget planner's cost model (singa/graph/graph.h: "Cost model"): products declare
// their arithmetic, and a budgeted graph times its own replays and replans by those times,
// recomputing what is cheap to run rather than what the estimate guesses is.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "singa/graph/graph.h"
#include "singa/ops/attention.h"
#include "singa/ops/blas.h"
#include "singa/ops/nn.h"
#include "test_helpers.h"

using namespace singa;

namespace {

// x -> a = Slow(x), b = Fast(x) -> h = Mix(a, b) -> big = Big(h) -> g = Back(big) ->
// ga = Use(g, a) -> out = Use(ga, b). a and b are the only blocks with a gap across the peak
// (at Big and Back), of equal size: a budget a little below the unconstrained plan drops one.
// Slow sleeps but moves few bytes (the estimate: cheap); Fast declares a huge product it does
// not compute (the estimate: dear). Timed, Fast is the one to recompute.
struct TwoCandidates {
  std::shared_ptr<Device> dev = std::make_shared<CppCPU>();
  std::vector<std::shared_ptr<Block>> keep;
  Block* x = nullptr;
  Block* out = nullptr;
  static constexpr size_t kN = 256;

  Block* Floats(size_t n) {
    keep.push_back(dev->NewBlock(n * sizeof(float)));
    return keep.back().get();
  }
  // y[j] = c + sum_k in_k[j % |in_k|] / (k + 1), then an optional pause.
  void Op(const char* name, std::vector<Block*> in, Block* y, float c, int sleep_ms = 0,
          double flops = 0) {
    dev->Exec({.reads = in, .writes = {y}, .label = name, .flops = flops},
              [in, y, c, sleep_ms](Context*) {
                float* o = static_cast<float*>(y->mutable_data());
                const size_t n = y->size() / sizeof(float);
                for (size_t j = 0; j < n; ++j) {
                  float v = c;
                  for (size_t k = 0; k < in.size(); ++k)
                    v += static_cast<const float*>(in[k]->data())[j % (in[k]->size() / 4)] /
                         float(k + 1);
                  o[j] = v;
                }
                if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
              });
  }

  TwoCandidates() {
    x = Floats(kN);
    std::vector<float> host = singa_test::Iota(kN, -1.f, 0.01f);
    dev->CopyDataFromHostPtr(x, host.data(), x->size());
    x->AddExternalRef();
    dev->EnableGraph(true);
    Block *a = Floats(kN), *b = Floats(kN), *h = Floats(kN), *big = Floats(4 * kN);
    Block *g = Floats(kN), *ga = Floats(kN);
    out = Floats(kN);
    Op("Slow", {x}, a, 0.5f, /*sleep_ms=*/20);
    Op("Fast", {x}, b, 0.25f, 0, /*flops=*/1e12);
    Op("Mix", {a, b}, h, 0.f);
    Op("Big", {h}, big, 1.f);
    Op("Back", {big}, g, 2.f);
    Op("Use", {g, a}, ga, 0.f);
    Op("Use", {ga, b}, out, 0.f);
    out->AddExternalRef();
    dev->EnableGraph(false);
  }
  ~TwoCandidates() { dev->ResetGraph(); }

  std::vector<float> Run() {
    dev->RunGraph(false);
    std::vector<float> o(kN);
    dev->CopyDataToHostPtr(out, o.data(), out->size());
    return o;
  }
  std::vector<std::string> Recomputed() {
    Graph* g = dev->graph();
    std::vector<std::string> names;
    for (size_t pos = 0; pos < g->order().size(); ++pos)
      if (g->IsRecomputeAt(pos)) names.push_back(g->OpNameAt(pos));
    return names;
  }
  size_t Total() {
    const GraphMemoryPlan& p = dev->graph()->memory_plan();
    return p.persistent_bytes + p.arena_bytes;
  }
};

using Names = std::vector<std::string>;

}  // namespace

TEST(GraphBudgetCost, MeasuredTimesReplanTheRecomputation) {
  TwoCandidates t;
  Graph* g = t.dev->graph();
  const std::vector<float> ref = t.Run();
  const size_t total = t.Total();
  t.dev->SetMemoryBudget(total - 1);
  // Steps 1-5 run the estimate's plan (the first untimed, then kTimedRuns timed), step 6
  // replans.
  for (int step = 1; step <= 1 + Graph::kTimedRuns; ++step) {
    ASSERT_EQ(t.Run(), ref) << step;
    EXPECT_EQ(t.Recomputed(), Names{"Slow"}) << step;
    EXPECT_FALSE(g->memory_plan().cost_measured);
    EXPECT_LE(t.Total(), total - 1);
  }
  EXPECT_EQ(g->timed_runs(), Graph::kTimedRuns);
  for (int step = 2 + Graph::kTimedRuns; step <= 3 + Graph::kTimedRuns; ++step) {
    ASSERT_EQ(t.Run(), ref) << step;
    EXPECT_EQ(t.Recomputed(), Names{"Fast"}) << step;
    EXPECT_TRUE(g->memory_plan().cost_measured);
    EXPECT_LE(t.Total(), total - 1);
  }
  // The recomputation costs what Fast took, far below Slow's 20 ms sleep.
  EXPECT_LT(g->memory_plan().recompute_cost, 10.0);
  EXPECT_EQ(g->timed_runs(), Graph::kTimedRuns);  // nothing timed once replanned
  // The times stay with the operations: a new budget is planned by them at once.
  t.dev->SetMemoryBudget(total - 2);
  ASSERT_EQ(t.Run(), ref);
  EXPECT_TRUE(g->memory_plan().cost_measured);
  EXPECT_EQ(t.Recomputed(), Names{"Fast"});
  // The estimate alone keeps the estimate's choice.
  g->SetCostModel(Graph::CostModel::kEstimate);
  ASSERT_EQ(t.Run(), ref);
  EXPECT_FALSE(g->memory_plan().cost_measured);
  EXPECT_EQ(t.Recomputed(), Names{"Slow"});
}

TEST(GraphBudgetCost, NothingIsTimedWithoutRecomputation) {
  TwoCandidates t;
  const std::vector<float> ref = t.Run();
  t.dev->SetMemoryBudget(t.Total());  // fits: the unconstrained plan
  for (int step = 0; step < 4; ++step) ASSERT_EQ(t.Run(), ref);
  EXPECT_EQ(t.dev->graph()->timed_runs(), 0);
  EXPECT_EQ(t.dev->graph()->memory_plan().num_recomputed, 0u);
  TwoCandidates e;  // the estimate: never timed, one plan throughout
  e.dev->graph()->SetCostModel(Graph::CostModel::kEstimate);
  e.Run();
  e.dev->SetMemoryBudget(e.Total() - 1);
  for (int step = 0; step < 4; ++step) {
    ASSERT_EQ(e.Run(), ref);
    EXPECT_EQ(e.Recomputed(), Names{"Slow"});
  }
  EXPECT_EQ(e.dev->graph()->timed_runs(), 0);
}

// What the estimate counts for the products: 2 flops per multiply-add, as recorded.
TEST(GraphBudgetCost, ProductsDeclareTheirFlops) {
  auto dev = std::make_shared<CppCPU>();
  Tensor a(Shape{4, 5}, dev), b(Shape{5, 6}, dev), a3(Shape{3, 4, 5}, dev), b3(Shape{3, 5, 6}, dev);
  ConvHandle h(Shape{2, 3, 8, 8}, {3, 3}, {1, 1}, {1, 1}, 3, 4, false);
  Tensor x(Shape{2, 3, 8, 8}, dev), W(Shape{4, 3, 3, 3}, dev), dy(Shape{2, 4, 8, 8}, dev);
  Tensor q(Shape{2, 7, 8}, dev), k(Shape{2, 9, 8}, dev), v(Shape{2, 9, 5}, dev);
  for (Tensor* t : {&a, &b, &a3, &b3, &x, &W, &dy, &q, &k, &v}) Gaussian(0.f, 1.f, t);
  dev->EnableGraph(true);
  Mult(a, b);
  Mult(a3, b3);
  Conv2dForward(x, W, Tensor(), h);
  Conv2dBackwardX(dy, W, h);
  Conv2dBackwardW(dy, x, h);
  ScaledDotProductAttention(q, k, v, Tensor(), AttentionOptions{});
  dev->EnableGraph(false);
  std::vector<double> flops;
  for (const Graph::Node& n : dev->graph()->nodes())
    if (n.flops > 0) flops.push_back(n.flops);
  const double conv = 2.0 * (2 * 4 * 8 * 8) * (3 * 3 * 3);  // outputs x pairs per output
  EXPECT_EQ(flops, (std::vector<double>{2.0 * 4 * 6 * 5, 2.0 * 3 * 4 * 6 * 5, conv, conv, conv,
                                        2.0 * 2 * 7 * 9 * (8 + 5)}));
  dev->ResetGraph();
}
