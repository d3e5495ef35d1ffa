// Private: the kernel slots of the random fills (front: ops/random.cc, CPU: ops/cpu/random.cc).
//
//   auto* k = UniformFillKernel().For(*dev);
//   dev->Exec({.id = OpId::kUniform, .writes = {t.block()}, .use_rand_generator = true},
//             [k, t](Context* ctx) { k(0.f, 1.f, ptr, n, ctx); });
//
// Every kernel draws from ctx->random_generator, in element order, serially: a seed gives the same
// tensor whatever the thread count. (a, b) are (low, high), (mean, std) or (p, unused).
#pragma once

#include <cstddef>

#include "singa/core/context.h"
#include "singa/core/kernel.h"

namespace singa {

using RandomFillFn = void(float a, float b, float* out, size_t n, Context* ctx);
SINGA_KERNEL_SLOT_DECL(UniformFill, RandomFillFn);
SINGA_KERNEL_SLOT_DECL(GaussianFill, RandomFillFn);
SINGA_KERNEL_SLOT_DECL(BernoulliFill, RandomFillFn);

}  // namespace singa
