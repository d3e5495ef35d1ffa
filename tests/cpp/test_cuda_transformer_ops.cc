// The CUDA kernels of singa/ops/transformer.h (layer norm, cumsum, the ONNX gathers) and of
// MaskedFill against the CPU reference kernels, on odd shapes; bad indices raise at Sync. (The
// GELU / IsNaN / IsInf rows are checked with every table line in test_cuda_core_ops.cc.) Every
// test skips where no GPU is usable (SINGA_REQUIRE_GPU).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "singa/ops/elementwise.h"
#include "singa/ops/transformer.h"

namespace singa {
namespace {

using singa_test::ExpectSameOnGpu;
using singa_test::Gpu;
using singa_test::OnGpu;
using singa_test::RandomTensor;

Tensor Ints(const std::vector<int>& v, const Shape& shape) {
  Tensor t(shape, defaultDevice(), kInt);
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

TEST(CudaTransformerOps, LayerNormForwardBackwardAffineAndPlain) {
  SINGA_REQUIRE_GPU();
  // {300, 70}, {2, 150, 33}: many rows, so dweight / dbias split them among the strip lanes
  for (Shape shape : {Shape{7, 300}, Shape{3, 5, 33}, Shape{1, 1030}, Shape{300, 70},
                      Shape{2, 150, 33}}) {
    const size_t N = shape.back();
    SCOPED_TRACE("N " + std::to_string(N));
    const Tensor x = RandomTensor(shape, -3.f, 3.f, 51);
    const Tensor dy = RandomTensor(shape, -1.f, 1.f, 52);
    for (bool affine : {true, false}) {
      const Tensor w = affine ? RandomTensor({N}, 0.5f, 1.5f, 53) : Tensor();
      const Tensor b = affine ? RandomTensor({N}, -1.f, 1.f, 54) : Tensor();
      auto c = LayerNormForward(x, w, b, {N}, 1e-5f);
      auto g = LayerNormForward(OnGpu(x), affine ? OnGpu(w) : w, affine ? OnGpu(b) : b, {N},
                                1e-5f);
      for (int i = 0; i < 3; ++i) ExpectSameOnGpu(c[i], g[i], 1e-4f);
      auto cb = LayerNormBackward(dy, x, w, c[1], c[2], {N});
      auto gb = LayerNormBackward(OnGpu(dy), OnGpu(x), affine ? OnGpu(w) : w, g[1], g[2], {N});
      ExpectSameOnGpu(cb[0], gb[0], 1e-4f);
      if (affine) {
        ExpectSameOnGpu(cb[1], gb[1], 1e-4f);
        ExpectSameOnGpu(cb[2], gb[2], 1e-4f);
      }
    }
  }
}

TEST(CudaTransformerOps, CumSumEveryAxisAndMode) {
  SINGA_REQUIRE_GPU();
  const Tensor x = RandomTensor({3, 17, 5}, -1.f, 1.f, 55);
  const Tensor xi = Ints({1, -2, 3, 4, 5, -6}, {2, 3});
  for (int axis : {0, 1, -1})
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        ExpectSameOnGpu(CumSum(x, axis, exclusive, reverse),
                        CumSum(OnGpu(x), axis, exclusive, reverse), 0.f);  // same order of sums
        ExpectSameOnGpu(CumSum(xi, axis % 2, exclusive, reverse),
                        CumSum(OnGpu(xi), axis % 2, exclusive, reverse), 0.f);
      }
}

TEST(CudaTransformerOps, GatherElementsAndGatherNDWithScatterAdds) {
  SINGA_REQUIRE_GPU();
  const Tensor x = RandomTensor({4, 5, 3}, -1.f, 1.f, 56);
  const Tensor ie = Ints({4, -1, 0, 0, 2, 3, 1, 1, -5, 2, 2, 2}, {2, 2, 3});
  for (int axis : {1}) {
    const Tensor y = GatherElements(x, ie, axis);
    ExpectSameOnGpu(y, GatherElements(OnGpu(x), OnGpu(ie), axis), 0.f);
    const Tensor dy = RandomTensor(y.shape(), -1.f, 1.f, 57);
    ExpectSameOnGpu(GatherElementsBackward(dy, ie, axis, x.shape()),
                    GatherElementsBackward(OnGpu(dy), OnGpu(ie), axis, x.shape()), 1e-5f);
  }
  const Tensor in = Ints({3, 4, -1, 0, 3, 4, 0, 2}, {2, 2, 2});  // q = 2, repeats
  const Tensor y = GatherND(x, in, 0);
  ExpectSameOnGpu(y, GatherND(OnGpu(x), OnGpu(in), 0), 0.f);
  const Tensor dy = RandomTensor(y.shape(), -1.f, 1.f, 58);
  ExpectSameOnGpu(GatherNDBackward(dy, in, 0, x.shape()),
                  GatherNDBackward(OnGpu(dy), OnGpu(in), 0, x.shape()), 1e-5f);
  const Tensor ib = Ints({1, 4, 0, 2, 3, 3, 1, 0}, {4, 2, 1});  // batch_dims 1
  ExpectSameOnGpu(GatherND(x, ib, 1), GatherND(OnGpu(x), OnGpu(ib), 1), 0.f);
}

TEST(CudaTransformerOps, MaskedFillBroadcast) {
  SINGA_REQUIRE_GPU();
  const Tensor x = RandomTensor({3, 1, 6}, -1.f, 1.f, 59);
  const Tensor m = Ints({1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1}, {2, 6});
  ExpectSameOnGpu(MaskedFill(x, m, -7.f), MaskedFill(OnGpu(x), OnGpu(m), -7.f), 0.f);
}

TEST(CudaTransformerOps, BadIndicesRaiseAtSync) {
  SINGA_REQUIRE_GPU();
  const Tensor x = OnGpu(RandomTensor({2, 3}, -1.f, 1.f, 60));
  EXPECT_THROW(
      {
        Tensor y = GatherElements(x, OnGpu(Ints({3}, {1, 1})), 1);
        Gpu()->Sync();
      },
      AxisError);
  EXPECT_THROW(
      {
        Tensor y = GatherND(x, OnGpu(Ints({0, -4}, {1, 2})), 0);
        Gpu()->Sync();
      },
      AxisError);
}

}  // namespace
}  // namespace singa
