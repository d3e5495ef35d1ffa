// bfloat16 on the GPU against the CPU: conversions both ways, a few elementwise lines (computed
// in float, rounded once on both sides), the cuBLAS bf16 product and a convolution (through
// float32 on the GPU, oneDNN or float32 on the CPU). Every test skips where no GPU is usable.
#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "singa/ops/blas.h"
#include "singa/ops/elementwise.h"
#include "singa/ops/nn.h"

namespace singa {
namespace {

using singa_test::ExpectSameOnGpu;
using singa_test::OnGpu;
using singa_test::RandomTensor;

constexpr float kBf16Step = 1.f / 128;  // one rounding of an 8-bit significand, relative

TEST(CudaBFloat16, ConversionsMatchTheCpuBitForBit) {
  SINGA_REQUIRE_GPU();
  const Tensor x = RandomTensor({5, 7}, -40.f, 40.f);
  const Tensor on_gpu = OnGpu(x).AsType(kBFloat16);
  Tensor back = on_gpu.AsType(kFloat32);
  ExpectSameOnGpu(x.AsType(kBFloat16).AsType(kFloat32), back, 0.f);
}

TEST(CudaBFloat16, ElementwiseComputesInFloatAndRoundsOnce) {
  SINGA_REQUIRE_GPU();
  const Tensor a = RandomTensor({4, 9}, 0.1f, 2.f).AsType(kBFloat16);
  const Tensor b = RandomTensor({9}, 0.5f, 1.5f, 3).AsType(kBFloat16);
  ExpectSameOnGpu(Add(a, b), Add(OnGpu(a), OnGpu(b)), kBf16Step);
  ExpectSameOnGpu(Div(a, b), Div(OnGpu(a), OnGpu(b)), kBf16Step);
  ExpectSameOnGpu(Exp(a), Exp(OnGpu(a)), kBf16Step);
  EXPECT_EQ(Tanh(OnGpu(a)).data_type(), kBFloat16);
}

TEST(CudaBFloat16, MatrixProductAndConvolution) {
  SINGA_REQUIRE_GPU();
  const Tensor a = RandomTensor({2, 17, 30}).AsType(kBFloat16);
  const Tensor w = RandomTensor({30, 6}, -1.f, 1.f, 5).AsType(kBFloat16);
  ExpectSameOnGpu(Mult(a, w), Mult(OnGpu(a), OnGpu(w)), 4 * kBf16Step);
  const Tensor x = RandomTensor({2, 3, 8, 8}).AsType(kBFloat16);
  const Tensor k = RandomTensor({4, 3, 3, 3}, -0.5f, 0.5f, 9).AsType(kBFloat16);
  ConvHandle h(x.shape(), {3, 3}, {1, 1}, {1, 1}, 3, 4, false);
  ExpectSameOnGpu(Conv2dForward(x, k, Tensor(), h), Conv2dForward(OnGpu(x), OnGpu(k), Tensor(), h),
                  4 * kBf16Step);
}

}  // namespace
}  // namespace singa
