// The running sum along an axis (ONNX CumSum; see singa/ops/transformer.h): the front. Kernels:
// cpu/cumsum.cc, cuda/cumsum.cu.
#include "singa/ops/transformer.h"
#include "transformer_kernels.h"

namespace singa {

SINGA_KERNEL_SLOT(CumSum, void(const Tensor&, const Dims3&, bool, bool, const Tensor&, Context*));

Tensor CumSum(const Tensor& x_in, int axis_in, bool exclusive, bool reverse) {
  const OpId id = OpId::kCumSum;
  const char* op = OpName(id);
  SINGA_CHECK(x_in.block() != nullptr, ValueError, op << ": the input tensor is empty");
  SINGA_CHECK_DTYPE(x_in.data_type() == kFloat32 || x_in.data_type() == kInt,
                    op << ": dtype " << DataTypeName(x_in.data_type())
                       << " is not supported (float32 or int32)");
  SINGA_CHECK_AXIS(x_in.nDim() > 0, op << ": cannot scan a 0-d tensor");
  const size_t axis = NormalizeAxis(axis_in, x_in.nDim(), op);
  const Tensor x = x_in.Contiguous();
  const Shape& s = x.shape();
  const Dims3 d{Product(s, 0, axis), s[axis], Product(s, axis + 1)};
  Tensor out(s, x.device(), x.data_type());
  if (out.Size() == 0) return out;
  auto* k = CumSumKernel().For(*x.device());
  x.device()->Exec({.id = id, .reads = {x.block()}, .writes = {out.block()}},
                   [k, x, d, exclusive, reverse, out](Context* ctx) {
                     k(x, d, exclusive, reverse, out, ctx);
                   });
  return out;
}

}  // namespace singa
