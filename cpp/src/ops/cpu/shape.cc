// CPU reference kernels of the data-movement ops: concatenation, slicing, repeat (fronts:
// ../shape.cc). They only move elements, so they run on every storage type.
#include <algorithm>
#include <cstdint>

#include "../../core/convert.h"
#include "../../core/dispatch.h"
#include "../kernel_slots.h"
#include "../strided.h"

namespace singa {
namespace cpu {
namespace {

// Each source written into a window of the output: same strides as the output, starting at the
// source's offset along `axis`.
void Concat(const std::vector<Tensor>& srcs, size_t axis, const Tensor& out, Context*) {
  SINGA_DISPATCH_STORAGE(out.data_type(), "Concat", T, {
    T* base = static_cast<T*>(out.block()->mutable_data());
    std::ptrdiff_t offset = 0;
    for (const Tensor& t : srcs) {
      if (t.Size() > 0)
        StridedConvert<T, T>(static_cast<const T*>(t.block()->data()), t.stride(), base + offset,
                             out.stride(), t.shape());
      offset += static_cast<std::ptrdiff_t>(t.shape()[axis]) * out.stride()[axis];
    }
  });
}

void Slice(const Tensor& in, std::ptrdiff_t offset, const Tensor& out, Context*) {
  SINGA_DISPATCH_STORAGE(out.data_type(), "Slice", T, {
    StridedConvert<T, T>(static_cast<const T*>(in.block()->data()) + offset, in.stride(),
                         static_cast<T*>(out.block()->mutable_data()), out.stride(), out.shape());
  });
}

// Contiguous (outer, sum(reps), inner) from (outer, reps.size(), inner): slice j of every outer
// block is written reps[j] times.
template <typename T>
void RepeatLoop(const T* x, T* y, const std::vector<size_t>& reps, size_t outer,
                  size_t inner) {
  size_t total = 0;
  for (size_t r : reps) total += r;
  const size_t dim = reps.size();
  const std::ptrdiff_t n_outer = static_cast<std::ptrdiff_t>(outer);
#pragma omp parallel for schedule(static) if (outer > 1 && outer * total * inner >= kParallelGrain)
  for (std::ptrdiff_t o = 0; o < n_outer; ++o) {
    const T* src = x + static_cast<size_t>(o) * dim * inner;
    T* dst = y + static_cast<size_t>(o) * total * inner;
    if (inner == 1) {  // single elements (a flattened repeat): fill runs instead of copies
      for (size_t j = 0; j < dim; ++j) dst = std::fill_n(dst, reps[j], src[j]);
      continue;
    }
    for (size_t j = 0; j < dim; ++j, src += inner)
      for (size_t k = 0; k < reps[j]; ++k, dst += inner) std::copy_n(src, inner, dst);
  }
}

void Repeat(const Tensor& in, const std::vector<size_t>& reps, size_t outer, size_t inner,
            const Tensor& out, Context*) {
  SINGA_DISPATCH_STORAGE(out.data_type(), "Repeat", T, {
    RepeatLoop(static_cast<const T*>(in.block()->data()),
               static_cast<T*>(out.block()->mutable_data()), reps, outer, inner);
  });
}

}  // namespace

SINGA_REGISTER_KERNEL(Concat, kCpuRef, &Concat);
SINGA_REGISTER_KERNEL(Slice, kCpuRef, &Slice);
SINGA_REGISTER_KERNEL(Repeat, kCpuRef, &Repeat);
// Plain memory movement: oneDNN has nothing better; the reference kernels run.

}  // namespace cpu
}  // namespace singa
