// kernel_slots.h (private): the kernel slots of the core ops (elementwise, reduce, blas, shape,
// index, loss, optim) and of Tensor's copies and conversions, with their argument types.
//
//   // front (cpp/src/ops/reduce.cc): validate, make the output, pick the kernel, submit
//   auto* k = ReduceSumKernel().For(*in.device());
//   dev->Exec({.id = OpId::kReduceSum, .reads = {src.block()}, .writes = {out.block()}},
//             [k, src, out, d](Context* ctx) { k(src, d, out, ctx); });
//   // CPU reference kernel (cpp/src/ops/cpu/reduce.cc): computation only
//   SINGA_REGISTER_KERNEL(ReduceSum, kCpuRef, cpu::ReduceSum);  // oneDNN devices run it too
//
// Kernel arguments are what a CUDA kernel can take as well: tensors (whose blocks the kernel
// reads through block()->data() when it runs, on the device that owns them), sizes and strides
// computed by the front, plain scalars that are fixed for the life of the recorded operation,
// and the Context. Values that change between replays (learning rate, labels, indices) stay in
// tensors and are read inside the kernel. The slots are defined (created at load time) in the
// front's .cc; each backend registers its kernels in its own folder (cpu/, later cuda/).
#pragma once

#include <cstddef>
#include <vector>

#include "singa/core/context.h"
#include "singa/core/kernel.h"
#include "singa/core/tensor.h"

namespace singa {

// ---- elementwise (one slot per line of elementwise.def, plus Clamp; the schema's
// activations declare theirs in the generated activation_*.inc) ----
// out[i] = op(in[i]) over in's shape; in and out have the same dtype (float32 or int32) and any
// strides. Binary: a, b and out share one shape (a and b broadcast by strides, 0 for repeats).
using UnaryKernelFn = void(const Tensor& in, const Tensor& out, Context* ctx);
using BinaryKernelFn = void(const Tensor& a, const Tensor& b, const Tensor& out, Context* ctx);
#define SINGA_UNARY(Name, kinds, expr) SINGA_KERNEL_SLOT_DECL(Name, UnaryKernelFn);
#define SINGA_BINARY(Name, kinds, expr) SINGA_KERNEL_SLOT_DECL(Name, BinaryKernelFn);
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
SINGA_KERNEL_SLOT_DECL(Clamp, void(const Tensor& in, float low, float high, const Tensor& out,
                                   Context* ctx));
/// out = mask != 0 ? value : x; x, mask and out share one shape and dtype (broadcast by strides).
SINGA_KERNEL_SLOT_DECL(MaskedFill, void(const Tensor& x, const Tensor& mask, float value,
                                        const Tensor& out, Context* ctx));

// ---- copies and conversions (Tensor, shape.cc) ----
/// out = convert(in) elementwise over in's shape, each with its own strides; any storage types.
SINGA_KERNEL_SLOT_DECL(StridedCopy, void(const Tensor& in, const Tensor& out, Context* ctx));
/// nbytes from `from` at byte offset from_off to `to` at to_off (the ranges may overlap).
SINGA_KERNEL_SLOT_DECL(CopyBytes, void(const Tensor& from, size_t from_off, const Tensor& to,
                                       size_t to_off, size_t nbytes, Context* ctx));
/// Every element of the contiguous `t` set to `value` converted to t's dtype.
SINGA_KERNEL_SLOT_DECL(Fill, void(const Tensor& t, double value, Context* ctx));

// ---- reductions and softmax: a contiguous-in-memory layout (outer, mid, inner) ----
struct Dims3 {
  size_t outer = 1, mid = 1, inner = 1;
};
/// out[o, i] = reduce over r of src[o, r, i], src read from its block's start in that layout.
using ReduceKernelFn = void(const Tensor& src, const Dims3& d, const Tensor& out, Context* ctx);
SINGA_KERNEL_SLOT_DECL(ReduceSum, ReduceKernelFn);
SINGA_KERNEL_SLOT_DECL(ReduceMean, ReduceKernelFn);
SINGA_KERNEL_SLOT_DECL(ReduceMax, ReduceKernelFn);
SINGA_KERNEL_SLOT_DECL(ReduceMin, ReduceKernelFn);
SINGA_KERNEL_SLOT_DECL(Argmax, ReduceKernelFn);
SINGA_KERNEL_SLOT_DECL(Argmin, ReduceKernelFn);
// Softmax, its log and its backward: schema/nn.py's rows (nn_kernels.h's SoftMaxArgs).

// ---- BLAS ----
/// Row-major C(m,n) = alpha op(A) op(B) + beta C on float32 data; C is contiguous (ldc = n).
struct GemmArgs {
  Tensor a, b, c;
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  float alpha = 1.f, beta = 0.f;
};
SINGA_KERNEL_SLOT_DECL(Gemm, void(const GemmArgs& g, Context* ctx));
/// One product per batch index: the matrices of a and b start at the batch axes' strides
/// (a.stride()[d], b.stride()[d] for d < batch.size()), c is contiguous (batch..., m, n).
struct BatchedGemmArgs {
  Tensor a, b, c;
  Shape batch;
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0;
};
SINGA_KERNEL_SLOT_DECL(BatchedGemm, void(const BatchedGemmArgs& g, Context* ctx));
/// y += alpha x over x.Size() contiguous float32 elements.
SINGA_KERNEL_SLOT_DECL(Axpy, void(float alpha, const Tensor& x, const Tensor& y, Context* ctx));
/// out[0] = sum a[i] b[i] (contiguous float32); the result stays on the device.
SINGA_KERNEL_SLOT_DECL(Dot, void(const Tensor& a, const Tensor& b, const Tensor& out,
                                 Context* ctx));
/// out[0] = sum |x[i]| and sqrt(sum x[i]^2) (contiguous float32).
SINGA_KERNEL_SLOT_DECL(Asum, void(const Tensor& x, const Tensor& out, Context* ctx));
SINGA_KERNEL_SLOT_DECL(Nrm2, void(const Tensor& x, const Tensor& out, Context* ctx));

// ---- data movement (shape.cc) ----
/// Each source written into out's window along `axis`, one after the other.
SINGA_KERNEL_SLOT_DECL(Concat, void(const std::vector<Tensor>& srcs, size_t axis,
                                    const Tensor& out, Context* ctx));
/// out = the elements of `in` starting `offset` elements into its block, read with in's strides
/// over out's shape.
SINGA_KERNEL_SLOT_DECL(Slice, void(const Tensor& in, std::ptrdiff_t offset, const Tensor& out,
                                   Context* ctx));
/// Contiguous (outer, sum(reps), inner) from contiguous (outer, reps.size(), inner).
SINGA_KERNEL_SLOT_DECL(Repeat, void(const Tensor& in, const std::vector<size_t>& reps,
                                    size_t outer, size_t inner, const Tensor& out, Context* ctx));

// ---- gather / scatter (index.cc) ----
/// x viewed as (outer, axis_len, inner); indices (int32 or float32 holding whole numbers,
/// negative ones wrap) are read and range-checked inside the kernel (AxisError / ValueError).
struct GatherArgs {
  Tensor indices;
  Dims3 d;            // outer, axis length, inner of x
  size_t axis = 0;    // for error messages
  Shape x_shape;      // for error messages
};
SINGA_KERNEL_SLOT_DECL(IndexSelect, void(const Tensor& x, const GatherArgs& g, const Tensor& out,
                                         Context* ctx));
/// dx (zeroed by the kernel) [o, idx[k], :] += dy[o, k, :].
SINGA_KERNEL_SLOT_DECL(IndexAdd, void(const Tensor& dy, const GatherArgs& g, const Tensor& dx,
                                      Context* ctx));
/// The fronts' check of an index tensor (its values are checked by the kernels).
inline void CheckIndices(const char* op, const Tensor& indices) {
  SINGA_CHECK(indices.block() != nullptr, ValueError, op << ": the indices tensor is empty");
  SINGA_CHECK_DTYPE(indices.data_type() == kInt || indices.data_type() == kFloat32,
                    op << ": indices must be int32 (or float32 holding whole numbers), got "
                       << indices.data_type());
}

// ---- cross-entropy losses (loss.cc) ----
/// x: contiguous float32 (N, C); t: contiguous labels (N values, int32 or whole float32; checked
/// inside the kernel) when `labels`, else a float32 (N, C) matrix. out: (N,) or (N, C).
using LossKernelFn = void(const Tensor& x, const Tensor& t, bool labels, const Tensor& out,
                          Context* ctx);
SINGA_KERNEL_SLOT_DECL(SoftmaxCrossEntropyForward, LossKernelFn);
SINGA_KERNEL_SLOT_DECL(SoftmaxCrossEntropyBackward, LossKernelFn);
SINGA_KERNEL_SLOT_DECL(CrossEntropyFwd, LossKernelFn);
SINGA_KERNEL_SLOT_DECL(SoftmaxCrossEntropyBwd, LossKernelFn);

// ---- optimizer updates (optim.cc) ----
/// Contiguous float32 param/grad (and buf if has_buf); hyper-parameters are one-element float32
/// tensors read inside the kernel, so a replay sees their current values.
struct SGDArgs {
  Tensor param, grad, buf, lr, momentum, dampening, weight_decay;
  bool has_buf = false, nesterov = false;
};
SINGA_KERNEL_SLOT_DECL(SGDUpdate, void(const SGDArgs& a, Context* ctx));
/// One Adam step (adam_step.h): param, grad, m, v contiguous float32 of one size; lr, the betas,
/// epsilon, weight_decay and step (the optimizer's step counter) (1,) float32 device tensors.
struct AdamArgs {
  Tensor param, grad, m, v, lr, beta1, beta2, epsilon, weight_decay, step;
  bool decay = false;  // false: weight decay is off (g = grad, not grad + p * 0)
};
SINGA_KERNEL_SLOT_DECL(AdamUpdate, void(const AdamArgs& a, Context* ctx));

}  // namespace singa
