// CUDA kernels of the binary lines of singa/ops/elementwise.def (a, b and out share one shape; a
// and b broadcast by stride 0). The loops are in elementwise.cuh.
#include "elementwise.cuh"

namespace singa {
namespace cuda {
namespace {

#define SINGA_UNARY(Name, kinds, expr)
#define SINGA_BINARY(Name, kinds, expr)                                                     \
  void Name##Cuda(const Tensor& a, const Tensor& b, const Tensor& out, Context* ctx) {     \
    Binary<fn::Name##Op, k##kinds>(#Name, fn::Name##Op{}, a, b, out, ctx);                  \
  }
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY

void MaskedFill(const Tensor& x, const Tensor& mask, float value, const Tensor& out,
                Context* ctx) {
  Binary<fn::MaskedFillOp, kFI>("MaskedFill", fn::MaskedFillOp{value}, x, mask, out, ctx);
}

}  // namespace
}  // namespace cuda

#define SINGA_UNARY(Name, kinds, expr)
#define SINGA_BINARY(Name, kinds, expr) SINGA_REGISTER_KERNEL(Name, kCuda, &cuda::Name##Cuda);
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
SINGA_REGISTER_KERNEL(MaskedFill, kCuda, &cuda::MaskedFill);

}  // namespace singa
