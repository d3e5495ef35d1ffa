// singa/singa.h alone gives the whole public API (issue 16, point 9): this file includes nothing
// else from singa, so a public header missing from singa.h fails to compile here.
// tests/python/test_public_header.py checks the list itself against cpp/include/singa/.
#include <singa/singa.h>

#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <vector>

namespace {

// The declarations of every part of the API are visible (a use that needs the full type).
static_assert(std::is_class<singa::Graph>::value, "graph/graph.h");
static_assert(std::is_class<singa::CnMemPool>::value, "memory/pool.h");
static_assert(std::is_class<singa::Communicator>::value, "dist/communicator.h");
static_assert(std::is_trivially_copyable<singa::NcclUniqueId>::value, "dist/nccl.h");
static_assert(std::is_class<singa::Context>::value, "core/context.h");
static_assert(std::is_class<singa::fn::ExpOp>::value, "ops/elementwise_functors.h");

// One forward and backward step of conv -> max pool -> linear -> softmax cross entropy, with the
// ops of ops/nn.h, ops/blas.h and ops/shape.h.
TEST(PublicHeader, ConvNetStepWithSingaHOnly) {
  auto dev = singa::defaultDevice();
  singa::Tensor x({2, 1, 6, 6}, dev);
  singa::Gaussian(0.f, 1.f, &x);
  singa::ConvHandle ch(x.shape(), {3, 3}, {1, 1}, {1, 1}, 1, 4, /*bias=*/true);
  singa::Tensor W(ch.WeightShape(), dev), b({4}, dev);
  singa::Gaussian(0.f, 0.1f, &W);
  b.SetValue(0.f);
  singa::Tensor y = singa::Conv2dForward(x, W, b, ch, /*relu=*/true);
  EXPECT_EQ(y.shape(), (singa::Shape{2, 4, 6, 6}));
  singa::PoolingHandle ph(y.shape(), {2, 2}, {2, 2}, {0, 0}, /*is_max=*/true);
  singa::Tensor p = singa::Pool2dForward(y, ph);
  EXPECT_EQ(p.shape(), (singa::Shape{2, 4, 3, 3}));

  // Zero weights in the classifier: every logit is 0, so each sample's loss is exactly log(3).
  singa::Tensor flat = singa::Reshape(p, singa::Shape{2, 36});
  singa::Tensor Wl({36, 3}, dev);
  Wl.SetValue(0.f);
  singa::Tensor logits = singa::Mult(flat, Wl);
  singa::Tensor labels({2}, dev, singa::kInt);
  std::vector<int> lab{0, 2};
  labels.CopyDataFromHostPtr(lab.data(), lab.size());
  singa::Tensor loss = singa::SoftmaxCrossEntropyForward(logits, labels);
  std::vector<float> l = loss.ToVector<float>();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_NEAR(l[0], std::log(3.f), 1e-6f);
  EXPECT_NEAR(l[1], std::log(3.f), 1e-6f);
  // d loss / d logits = softmax - onehot = 1/3 - [label == j].
  std::vector<float> g = singa::SoftmaxCrossEntropyBackward(logits, labels).ToVector<float>();
  ASSERT_EQ(g.size(), 6u);
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j)
      EXPECT_NEAR(g[i * 3 + j], 1.f / 3 - (static_cast<int>(j) == lab[i] ? 1.f : 0.f), 1e-6f);
  singa::Tensor dx = singa::Conv2dBackwardX(y, W, ch);
  EXPECT_EQ(dx.shape(), x.shape());
}

// Errors and the build queries (core/error.h, core/cuda_gpu.h, dist/*.h) come with the header.
TEST(PublicHeader, ErrorsAndBuildQueries) {
  auto dev = singa::defaultDevice();
  singa::Tensor x({1, 1, 2, 2}, dev);
  EXPECT_THROW(singa::ConvHandle(x.shape(), {3, 3}, {1, 1}, {0, 0}, 1, 1, false),
               singa::ShapeError);
  if (!singa::BuiltWithCuda()) {
    EXPECT_EQ(singa::GetNumGPUs(), 0);
    EXPECT_THROW(singa::CreateCudaGPUOn(0), singa::Error);
  }
  if (!singa::BuiltWithNccl()) EXPECT_THROW(singa::NewNcclId(), singa::NotImplementedError);
}

}  // namespace
