// CumSum, the reference CPU kernel (kCpuRef); front: ../cumsum.cc.
//
// x is (outer, mid, inner), scanned along mid. Each step adds a whole contiguous row of `inner`
// values to the previous output row: out[k] = out[prev] + (exclusive ? x[prev] : x[k]), with
// out[first] = exclusive ? 0 : x[first]; `reverse` walks k from the end. Outer slices are
// independent and split between threads. Sums run in the element type, in order (numpy's
// float32 cumsum does the same); int32 sums wrap around as numpy's (fn::WrapAdd: signed overflow
// is undefined behaviour, which UBSan caught under tools/fuzz_numpy.py).
#include <algorithm>
#include <cstdint>

#include "../../core/dispatch.h"
#include "singa/ops/elementwise_functors.h"
#include "../strided.h"
#include "../transformer_kernels.h"

namespace singa {
namespace cpu {
namespace {

template <typename T>
void Scan(const T* x, const Dims3& d, bool exclusive, bool reverse, T* y) {
  const size_t mid = d.mid, inner = d.inner;
  const std::ptrdiff_t outer = std::ptrdiff_t(d.outer);
#pragma omp parallel for schedule(static) if (outer > 1 && d.outer * mid * inner >= kParallelGrain)
  for (std::ptrdiff_t o = 0; o < outer; ++o) {
    const T* xo = x + size_t(o) * mid * inner;
    T* yo = y + size_t(o) * mid * inner;
    for (size_t step = 0; step < mid; ++step) {
      const size_t k = reverse ? mid - 1 - step : step;
      T* row = yo + k * inner;
      if (step == 0) {
        if (exclusive) std::fill(row, row + inner, T(0));
        else std::copy(xo + k * inner, xo + (k + 1) * inner, row);
        continue;
      }
      const size_t prev = reverse ? k + 1 : k - 1;
      const T* add = xo + (exclusive ? prev : k) * inner;
      const T* before = yo + prev * inner;
      for (size_t i = 0; i < inner; ++i) row[i] = fn::WrapAdd(before[i], add[i]);
    }
  }
}

void CumSum(const Tensor& in, const Dims3& d, bool exclusive, bool reverse, const Tensor& out,
            Context*) {
  SINGA_DISPATCH_FLOAT_INT(in.data_type(), "CumSum", T, {
    Scan(static_cast<const T*>(in.block()->data()), d, exclusive, reverse,
         static_cast<T*>(out.block()->mutable_data()));
  });
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(CumSum, kCpuRef, &cpu::CumSum);
// a scan is memory movement plus one add: oneDNN has nothing for it

}  // namespace singa
