// CUDA kernels of the unary lines of singa/ops/elementwise.def, plus Clamp and the schema's activations: one
// registration per table line, the loops in elementwise.cuh (the binary lines are compiled in
// elementwise_binary.cu, a second nvcc job).
#include "elementwise.cuh"

namespace singa {
namespace cuda {
namespace {

void Clamp(const Tensor& in, float low, float high, const Tensor& out, Context* ctx) {
  Unary<fn::ClampOp, kFI>("Clamp", fn::ClampOp{low, high}, in, out, ctx);
}

#define SINGA_UNARY(Name, kinds, expr)                                  \
  void Name##Cuda(const Tensor& in, const Tensor& out, Context* ctx) { \
    Unary<fn::Name##Op, k##kinds>(#Name, fn::Name##Op{}, in, out, ctx); \
  }
#define SINGA_BINARY(Name, kinds, expr)
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY

}  // namespace
}  // namespace cuda

#define SINGA_UNARY(Name, kinds, expr) SINGA_REGISTER_KERNEL(Name, kCuda, &cuda::Name##Cuda);
#define SINGA_BINARY(Name, kinds, expr)
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
SINGA_REGISTER_KERNEL(Clamp, kCuda, &cuda::Clamp);

}  // namespace singa

// The schema's activations (schema/activations.py) on elementwise.cuh's loops.
#include "activation_cuda.inc"
