// Cross-entropy losses: the fronts (see singa/ops/nn.h); the CPU kernels are in cpu/loss.cc.
//
// Targets come in two forms: class labels (int32 (N,) or (N, 1), or float32 (N,) holding whole
// numbers) or a float32 matrix of the logits' shape (one-hot or probabilities). Shapes are
// checked at the call; label values live on the device and are checked inside the kernel, so
// a bad label throws ValueError (eagerly at the call, in a graph at RunGraph) instead of reading
// outside the row as Apache SINGA did.
#include "kernel_slots.h"
#include "singa/ops/nn.h"

namespace singa {

SINGA_KERNEL_SLOT(SoftmaxCrossEntropyForward, LossKernelFn);
SINGA_KERNEL_SLOT(SoftmaxCrossEntropyBackward, LossKernelFn);
SINGA_KERNEL_SLOT(CrossEntropyFwd, LossKernelFn);
SINGA_KERNEL_SLOT(SoftmaxCrossEntropyBwd, LossKernelFn);
namespace {

struct Operands {
  Tensor x;       // logits or probabilities, contiguous (N, C)
  Tensor t;       // target, contiguous
  bool labels;    // t holds N class labels
  size_t N, C;
};

Operands Check(const char* op, const char* xname, const Tensor& x, const Tensor& t) {
  SINGA_CHECK(x.block() != nullptr && t.block() != nullptr, ValueError,
              op << ": an input tensor is empty");
  // float16 logits/probabilities compute (in float) on CUDA devices only; a target matrix then
  // has x's dtype (float32 targets are converted), labels stay int32 or float32.
  const bool half = x.data_type() == kFloat16 && DeviceBackend(*x.device()) == Backend::kCuda;
  SINGA_CHECK_DTYPE(x.data_type() == kFloat32 || half,
                    op << ": expects float32 " << xname << " (float16 on CUDA devices), got "
                       << x.data_type());
  SINGA_CHECK_SHAPE(x.nDim() == 2, op << ": expected 2-d " << xname << " (N, C), got "
                                      << x.shape());
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32 || t.data_type() == kInt ||
                        (half && t.data_type() == kFloat16),
                    op << ": the target must be int32 labels or a float32 matrix, got "
                       << t.data_type());
  CheckSameDevice(op, {&x, &t});
  const size_t N = x.shape(0), C = x.shape(1);
  bool labels;
  if (t.data_type() != kInt && t.shape() == x.shape()) {
    labels = false;
  } else {
    const bool vec = t.nDim() == 1 || (t.nDim() == 2 && t.shape(1) == 1);
    SINGA_CHECK_SHAPE(vec, op << ": the target has shape " << t.shape() << "; expected " << N
                              << " labels, (" << N << ",) or (" << N << ", 1), or a float32 "
                              << "matrix of the " << xname << "' shape " << x.shape());
    SINGA_CHECK_SHAPE(t.shape(0) == N, op << ": got " << t.shape(0) << " labels (target shape "
                                          << t.shape() << ") for " << N << " samples ("
                                          << xname << " " << x.shape() << ")");
    labels = true;
  }
  SINGA_CHECK_DTYPE(labels || t.data_type() == x.data_type() || half,
                    op << ": a target matrix must be float32, got " << t.data_type());
  SINGA_CHECK_DTYPE(!labels || t.data_type() != kFloat16,
                    op << ": labels must be int32 or float32, got float16");
  SINGA_CHECK_VALUE(!labels || C > 0 || N == 0,
                    op << ": labels need at least one class, " << xname << " " << x.shape());
  const Tensor tm = !labels && t.data_type() != x.data_type() ? t.AsType(x.data_type()) : t;
  return {x.Contiguous(), tm.Contiguous(), labels, N, C};
}

Tensor Run(bool fwd, const KernelSlot<LossKernelFn>& slot, OpId id, const char* xname,
           const Tensor& x_in, const Tensor& t_in) {
  const char* op = OpName(id);
  const Operands o = Check(op, xname, x_in, t_in);
  auto* k = slot.For(*o.x.device());
  Tensor out(fwd ? Shape{o.N} : Shape{o.N, o.C}, o.x.device(), o.x.data_type());
  const Tensor x = o.x, t = o.t;
  const bool labels = o.labels;
  x.device()->Exec({.id = id, .reads = {x.block(), t.block()}, .writes = {out.block()}},
                   [k, x, t, labels, out](Context* ctx) { k(x, t, labels, out, ctx); });
  return out;
}

}  // namespace

Tensor SoftmaxCrossEntropyForward(const Tensor& logits, const Tensor& target) {
  return Run(true, SoftmaxCrossEntropyForwardKernel(), OpId::kSoftmaxCrossEntropyForward,
             "logits", logits, target);
}

Tensor SoftmaxCrossEntropyBackward(const Tensor& logits, const Tensor& target) {
  return Run(false, SoftmaxCrossEntropyBackwardKernel(), OpId::kSoftmaxCrossEntropyBackward,
             "logits", logits, target);
}

Tensor CrossEntropyFwd(const Tensor& p, const Tensor& t) {
  return Run(true, CrossEntropyFwdKernel(), OpId::kCrossEntropyFwd, "probabilities", p, t);
}

Tensor SoftmaxCrossEntropyBwd(const Tensor& p, const Tensor& t) {
  return Run(false, SoftmaxCrossEntropyBwdKernel(), OpId::kSoftmaxCrossEntropyBwd,
             "probabilities", p, t);
}

}  // namespace singa
