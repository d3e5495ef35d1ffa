// singa::Communicator in a process of its own (not under mpirun): an MPI singleton, world size 1,
// where an all-reduce is the identity times the scale. What crosses ranks is tested by
// tests/python/test_dist.py under mpirun.
#include <cmath>
#include <memory>
#include <vector>

#include "singa/dist/communicator.h"
#include "test_helpers.h"

using namespace singa;
using singa_test::FromVector;

namespace {

std::vector<float> Values(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.Size());
}

// MPI_Finalize once the tests are done (an MPI process must not exit without it).
struct FinalizeAtExit {
  ~FinalizeAtExit() { Communicator::Finalize(); }
} finalize_at_exit;

}  // namespace

// The graph's collective chain, independent of MPI: collectives on unrelated blocks run in
// submission order, and form a chain of their own (random-number ops are not tied to them).
TEST(Dist, GraphChainsCollectivesInSubmissionOrder) {
  auto dev = std::make_shared<CppCPU>();
  auto b0 = dev->NewBlock(4), b1 = dev->NewBlock(4), b2 = dev->NewBlock(4), b3 = dev->NewBlock(4);
  auto noop = [](Context*) {};
  dev->EnableGraph(true);
  dev->Exec({.writes = {b0.get()}, .label = "allreduce0", .collective = true}, noop);
  dev->Exec({.writes = {b1.get()}, .label = "rand0", .use_rand_generator = true}, noop);
  dev->Exec({.writes = {b2.get()}, .label = "allreduce1", .collective = true}, noop);
  dev->Exec({.writes = {b3.get()}, .label = "rand1", .use_rand_generator = true}, noop);
  dev->EnableGraph(false);
  dev->RunGraph(false);
  const auto& n = dev->graph()->nodes();
  EXPECT_EQ(n[0].succ, (std::vector<size_t>{2}));
  EXPECT_EQ(n[1].succ, (std::vector<size_t>{3}));
  EXPECT_EQ(n[2].num_pred, 1u);
  EXPECT_EQ(n[3].num_pred, 1u);
  dev->ResetGraph();
}

TEST(Dist, WithoutMpiTheCommunicatorIsNotImplemented) {
  if (BuiltWithDist()) GTEST_SKIP() << "built with MPI";
  EXPECT_THROW(Communicator c(16), NotImplementedError);
}

class DistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!BuiltWithDist()) GTEST_SKIP() << "singa built without MPI (USE_DIST=OFF)";
  }
};

TEST_F(DistTest, SingletonIsWorldSizeOne) {
  Communicator c(16);
  EXPECT_EQ(c.world_size(), 1);
  EXPECT_EQ(c.global_rank(), 0);
  EXPECT_EQ(c.local_rank(), 0);
}

TEST_F(DistTest, SynchSumsThenScales) {
  Communicator c(3);  // a 3-element buffer: 7 elements go in three rounds
  Tensor t = FromVector({1, 2, 3, 4, 5, 6, 7}, {7});
  c.Synch(t, 0.5f);
  EXPECT_EQ(Values(t), (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f}));
}

TEST_F(DistTest, FusedSynchIsRecordedAndReplayedByTheGraph) {
  Communicator c(16);
  auto dev = std::make_shared<CppCPU>();
  Tensor a(Shape{2}, dev), b(Shape{3}, dev);
  a.CopyDataFromHostPtr(std::vector<float>{1, 2}.data(), 2);
  b.CopyDataFromHostPtr(std::vector<float>{3, 4, 5}.data(), 3);
  singa_test::Hold ha(a), hb(b);
  std::vector<Tensor> ts{a, b};
  dev->EnableGraph(true);
  c.FusedSynch(ts, /*send=*/false, 2.0f);  // stages nothing
  c.FusedSynch(ts, /*send=*/true, 2.0f);
  dev->EnableGraph(false);
  EXPECT_EQ(Values(a), (std::vector<float>{1, 2}));  // recorded, not run
  dev->RunGraph();
  dev->RunGraph();
  EXPECT_EQ(Values(a), (std::vector<float>{4, 8}));
  EXPECT_EQ(Values(b), (std::vector<float>{12, 16, 20}));
  dev->ResetGraph();
}

TEST_F(DistTest, HalfTravelsAsFloat16) {
  Communicator c(16);
  Tensor t = FromVector({1.0f / 3, 1000.1f, -2.5f}, {3});
  c.SynchHalf(t);
  for (float x : Values(t)) EXPECT_EQ(x, HalfToFloat(FloatToHalf(x)));
  EXPECT_EQ(Values(t)[0], HalfToFloat(FloatToHalf(1.0f / 3)));
  EXPECT_NE(Values(t)[0], 1.0f / 3);
  EXPECT_EQ(Values(t)[2], -2.5f);
}

TEST_F(DistTest, SparseTopKKeepsTheLargestAndAccumulatesTheRest) {
  Communicator c(16);
  Tensor g = FromVector({0.1f, -3, 0.2f, 2}, {4});
  Tensor acc = FromVector({0, 0, 0, 0}, {4});
  c.Sparsification(g, acc, 0.5f, /*topK=*/true);  // ceil(0.5 * 4) = 2 elements
  EXPECT_EQ(Values(g), (std::vector<float>{0, -3, 0, 2}));
  EXPECT_EQ(Values(acc), (std::vector<float>{0.1f, 0, 0.2f, 0}));
  Tensor g2 = FromVector({0.1f, 0, 0, 0}, {4});  // with the correction: 0.2, 0, 0.2, 0
  c.Sparsification(g2, acc, 0.5f, true);
  EXPECT_EQ(Values(g2), (std::vector<float>{0.2f, 0, 0.2f, 0}));
  EXPECT_EQ(Values(acc), (std::vector<float>{0, 0, 0, 0}));
}

TEST_F(DistTest, SparseThresholdSendsOnlyLargeValues) {
  Communicator c(16);
  Tensor a = FromVector({0.5f, -2}, {2}), b = FromVector({1, -0.9f, 3}, {3});
  std::vector<Tensor> ts{a, b};
  c.FusedSparsification(ts, 1.0f, /*topK=*/false);  // |x| >= 1
  EXPECT_EQ(Values(a), (std::vector<float>{0, -2}));
  EXPECT_EQ(Values(b), (std::vector<float>{1, 0, 3}));
}

TEST_F(DistTest, BadArgumentsThrow) {
  Communicator c(16);
  Tensor i(Shape{3}, kInt);
  EXPECT_THROW(c.Synch(i), DTypeError);
  std::vector<Tensor> none;
  EXPECT_THROW(c.FusedSynch(none, true), ValueError);
  Tensor g = FromVector({1, 2}, {2}), acc = FromVector({0, 0, 0}, {3});
  EXPECT_THROW(c.Sparsification(g, acc, 0.5f, true), ShapeError);
  EXPECT_THROW(Communicator bad(0), ValueError);
}

// Overlap: the start copies the tensors (later writes to them do not change what is reduced),
// the wait writes scale * sum back; on the communication thread or inline, eager or replayed.
TEST_F(DistTest, BucketReducesWhatTheStartCopiedAndTheWaitWritesItBack) {
  for (bool overlap : {true, false}) {
    Communicator c(2);  // 2-element rounds: the 5 elements go in three
    c.set_overlap(overlap);
    EXPECT_EQ(c.overlap(), overlap);
    Tensor a = FromVector({1, 2}, {2}), b = FromVector({3, 4, 5}, {3});
    std::vector<Tensor> ts{a, b};
    const int h = c.StartBucket(ts);
    EXPECT_EQ(c.pending_buckets(), 1);
    a.CopyDataFromHostPtr(std::vector<float>{-7, -7}.data(), 2);  // backward may reuse it
    c.WaitBucket(h, 2.0f);
    EXPECT_EQ(c.pending_buckets(), 0);
    EXPECT_EQ(Values(a), (std::vector<float>{2, 4})) << "overlap " << overlap;
    EXPECT_EQ(Values(b), (std::vector<float>{6, 8, 10})) << "overlap " << overlap;
  }
}

TEST_F(DistTest, BucketsAreRecordedAndReplayedByTheGraph) {
  Communicator c(16);
  auto dev = std::make_shared<CppCPU>();
  Tensor a(Shape{2}, dev), b(Shape{1}, dev);
  a.CopyDataFromHostPtr(std::vector<float>{1, 2}.data(), 2);
  b.CopyDataFromHostPtr(std::vector<float>{3}.data(), 1);
  singa_test::Hold ha(a), hb(b);
  std::vector<Tensor> ta{a}, tb{b};
  dev->EnableGraph(true);
  const int h0 = c.StartBucket(ta), h1 = c.StartBucket(tb, /*half=*/true);
  c.WaitBucket(h0, 2.0f);
  c.WaitBucket(h1, 3.0f);
  dev->EnableGraph(false);
  EXPECT_EQ(Values(a), (std::vector<float>{1, 2}));  // recorded, not run
  dev->RunGraph();
  dev->RunGraph();
  EXPECT_EQ(Values(a), (std::vector<float>{4, 8}));
  EXPECT_EQ(Values(b), (std::vector<float>{27}));
  // start, start, wait, wait: one chain of collectives
  const auto& n = dev->graph()->nodes();
  ASSERT_EQ(n.size(), 4u);
  EXPECT_EQ(n[0].succ, (std::vector<size_t>{1, 2}));
  dev->ResetGraph();
}

TEST_F(DistTest, BucketMisuseThrows) {
  Communicator c(16);
  EXPECT_THROW(c.WaitBucket(5), ValueError);
  Tensor i(Shape{3}, kInt);
  std::vector<Tensor> ints{i};
  EXPECT_THROW(c.StartBucket(ints), DTypeError);
  EXPECT_EQ(c.pending_buckets(), 0);
  Tensor a = FromVector({1}, {1});
  std::vector<Tensor> ta{a};
  const int h = c.StartBucket(ta);
  c.WaitBucket(h);
  EXPECT_THROW(c.WaitBucket(h), ValueError);  // waited for already
}
