// Random fills: the device-independent front (see singa/ops/random.h). It checks the parameters
// and the output, picks the device's kernel once (ops/random_kernel.h) and submits one operation
// that uses the device's random generator, so a replayed graph draws fresh numbers each time and
// in the same order as eager mode.
#include "singa/ops/random.h"

#include <cmath>

#include "random_kernel.h"

namespace singa {

SINGA_KERNEL_SLOT(UniformFill, RandomFillFn);
SINGA_KERNEL_SLOT(GaussianFill, RandomFillFn);
SINGA_KERNEL_SLOT(BernoulliFill, RandomFillFn);

namespace {

void CheckOut(const char* op, const Tensor* out) {
  SINGA_CHECK_VALUE(out != nullptr, op << ": the output tensor is null");
  SINGA_CHECK(out->block() != nullptr, ValueError,
              op << ": the output tensor is empty (no memory)");
  SINGA_CHECK_DTYPE(out->data_type() == kFloat32,
                    op << ": the output must be float32, got " << out->data_type()
                       << " (shape " << out->shape() << ")");
  SINGA_CHECK_SHAPE(out->IsContiguous(), op << ": the output (shape " << out->shape()
                                             << ") is a non-contiguous view");
}

void Submit(OpId id, const KernelSlot<RandomFillFn>& slot, float a, float b, Tensor* out) {
  const char* op = OpName(id);
  CheckOut(op, out);
  if (out->Size() == 0) return;
  RandomFillFn* k = slot.For(*out->device());
  const Tensor t = *out;
  t.device()->Exec({.id = id, .writes = {t.block()}, .use_rand_generator = true},
                   [k, t, a, b](Context* ctx) {
                     k(a, b, static_cast<float*>(t.block()->mutable_data()), t.Size(), ctx);
                   });
}

}  // namespace

void Uniform(float low, float high, Tensor* out) {
  SINGA_CHECK_VALUE(std::isfinite(low) && std::isfinite(high) && low <= high,
                    "Uniform: expects finite low <= high, got low " << low << " and high "
                                                                    << high);
  Submit(OpId::kUniform, UniformFillKernel(), low, high, out);
}

void Gaussian(float mean, float std, Tensor* out) {
  SINGA_CHECK_VALUE(std::isfinite(mean) && std::isfinite(std) && std >= 0.f,
                    "Gaussian: expects a finite mean and a finite std >= 0, got mean "
                        << mean << " and std " << std);
  Submit(OpId::kGaussian, GaussianFillKernel(), mean, std, out);
}

void Bernoulli(float p, Tensor* out) {
  SINGA_CHECK_VALUE(p >= 0.f && p <= 1.f,
                    "Bernoulli: expects a probability p in [0, 1], got " << p);
  Submit(OpId::kBernoulli, BernoulliFillKernel(), p, 0.f, out);
}

}  // namespace singa
