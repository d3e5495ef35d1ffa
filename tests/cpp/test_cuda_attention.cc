// The CUDA attention kernels (cpp/src/ops/cuda/attention.cu) against the CPU kernels: forward
// output, lse and every gradient, over odd lengths (several tiles), masks of both kinds,
// causal, broadcast batch axes and dropout (one hash on both devices: the same elements drop).
// Skips where no GPU is usable.
#include <vector>

#include "gpu_test_util.h"
#include "singa/ops/attention.h"

namespace {

using singa::Shape;
using singa::Tensor;
using singa_test::ExpectSameOnGpu;
using singa_test::OnGpu;
using singa_test::RandomTensor;

constexpr float kTol = 2e-4f;  // float32 sums in another order, expf vs our exp

struct Case {
  Shape q, k, v, mask;
  bool int_mask = false, causal = false;
  float dropout = 0.f, scale = 0.f;
};

void Compare(const Case& c) {
  unsigned seed = 11;
  const Tensor q = RandomTensor(c.q, -1, 1, seed++), k = RandomTensor(c.k, -1, 1, seed++),
               v = RandomTensor(c.v, -1, 1, seed++);
  Tensor mask;
  if (!c.mask.empty()) {
    mask = RandomTensor(c.mask, -1, 1, seed++);
    if (c.int_mask) mask = singa::GT(mask, -0.5f).AsType(singa::kInt);
  }
  singa::AttentionOptions o;
  o.causal = c.causal;
  o.dropout_p = c.dropout;
  o.scale = c.scale;
  const singa::AttentionForwardResult cpu = singa::ScaledDotProductAttention(q, k, v, mask, o);
  singa::AttentionForwardResult gpu = singa::ScaledDotProductAttention(
      OnGpu(q), OnGpu(k), OnGpu(v), mask.block() ? OnGpu(mask) : Tensor(), o);
  if (c.dropout > 0.f) {
    // each forward draws its own seed: the GPU backward gets the CPU forward's seed, output
    // and lse, and must then drop exactly what the CPU backward drops
    gpu.seed = OnGpu(cpu.seed);
    gpu.out = OnGpu(cpu.out);
    gpu.lse = OnGpu(cpu.lse);
  } else {
    ExpectSameOnGpu(cpu.out, gpu.out, kTol);
    ExpectSameOnGpu(cpu.lse, gpu.lse, kTol);
  }
  const Tensor dy = RandomTensor(cpu.out.shape(), -1, 1, seed++);
  const std::vector<Tensor> g = singa::ScaledDotProductAttentionBackward(dy, q, k, v, mask, cpu, o);
  const std::vector<Tensor> gg = singa::ScaledDotProductAttentionBackward(
      OnGpu(dy), OnGpu(q), OnGpu(k), OnGpu(v), mask.block() ? OnGpu(mask) : Tensor(), gpu, o);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(testing::Message() << "gradient " << i);
    ExpectSameOnGpu(g[i], gg[i], kTol);
  }
}

TEST(CudaAttention, MatchesTheCpuKernels) {
  SINGA_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {{2, 3, 9, 8}, {2, 3, 11, 8}, {2, 3, 11, 5}, {}},
      {{2, 70, 16}, {2, 300, 16}, {2, 300, 16}, {}, false, true},    // causal, several tiles
      {{1, 2, 130, 8}, {1, 2, 65, 8}, {1, 2, 65, 4}, {}, false, true},  // causal, L > S
      {{2, 4, 33, 8}, {2, 1, 47, 8}, {2, 1, 47, 8}, {33, 47}, true},  // keep mask, kv heads
      {{1, 4, 33, 8}, {3, 4, 47, 8}, {3, 4, 47, 8}, {3, 1, 1, 47}},   // additive key bias
      {{2, 9, 64}, {2, 11, 64}, {2, 11, 128}, {}, false, false, 0.f, 0.3f},
      {{2, 3, 40, 8}, {2, 3, 70, 8}, {2, 3, 70, 8}, {}, false, false, 0.25f},  // dropout
      {{2, 0, 8}, {2, 5, 8}, {2, 5, 8}, {}},  // no query: dk, dv zeros
      {{2, 3, 8}, {2, 0, 8}, {2, 0, 8}, {}},  // no key: zeros out, dq zeros
      // head sizes with kernels of their own (E == Ev in 16, 32, 64, 128: rows in registers)
      {{2, 2, 150, 64}, {2, 2, 150, 64}, {2, 2, 150, 64}, {}, false, true},  // causal, 3 tiles
      {{1, 4, 33, 32}, {1, 4, 47, 32}, {1, 4, 47, 32}, {33, 47}, true},      // keep mask
      {{1, 3, 40, 32}, {1, 3, 70, 32}, {1, 3, 70, 32}, {}, false, false, 0.25f},  // dropout
      {{1, 2, 20, 128}, {1, 2, 30, 128}, {1, 2, 30, 128}, {1, 1, 1, 30}},  // additive bias
      {{1, 9, 16}, {1, 11, 16}, {1, 11, 16}, {}, false, false, 0.f, 0.3f},   // own scale
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "case " << i);
    Compare(cases[i]);
  }
}

TEST(CudaAttention, DropoutForwardDropsWhatTheCpuDrops) {
  SINGA_REQUIRE_GPU();
  // v = identity: the output is the dropped probability matrix, so the two devices' keep
  // patterns can be compared directly. Both draw their seeds; copying the CPU's seed into a
  // GPU backward is checked above, here the GPU forward must drop at the rate asked.
  const size_t L = 64, S = 128;  // v is S x S: S at most the kernel's 128 value columns
  Tensor eye(Shape{1, S, S});
  std::vector<float> id(S * S, 0.f);
  for (size_t i = 0; i < S; ++i) id[i * S + i] = 1.f;
  eye.CopyDataFromHostPtr(id.data(), id.size());
  singa::AttentionOptions o;
  o.dropout_p = 0.3f;
  const Tensor q = RandomTensor({1, L, 8}, -1, 1, 3), k = RandomTensor({1, S, 8}, -1, 1, 4);
  Tensor out = singa::ScaledDotProductAttention(OnGpu(q), OnGpu(k), OnGpu(eye), Tensor(), o).out;
  out.ToHost();
  size_t dropped = 0;
  for (float x : out.ToVector<float>()) dropped += x == 0.f;
  EXPECT_NEAR(double(dropped) / double(L * S), 0.3, 0.02);
}

TEST(CudaAttention, HeadsLargerThanTheKernelsRaise) {
  SINGA_REQUIRE_GPU();
  const Tensor q = OnGpu(RandomTensor({2, 3, 256}));
  EXPECT_THROW(singa::ScaledDotProductAttention(q, q, q, Tensor(), singa::AttentionOptions()),
               singa::NotImplementedError);
}

}  // namespace
