// CPU reference kernels of IndexSelect (gather) and IndexAdd (its backward); fronts: ../index.cc.
//
// The output is viewed as (outer, K, inner) with K the number of indices: each (o, k) pair copies
// one run of `inner` elements. Index values are read and checked here, serially, before any
// parallel loop, so a bad index throws instead of reading outside the tensor.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../../core/dispatch.h"
#include "../kernel_slots.h"
#include "../strided.h"

namespace singa {
namespace cpu {
namespace {

constexpr size_t kGrain = 1 << 15;

// The indices as offsets into [0, A), negative ones wrapped.
std::vector<size_t> ReadIndices(const char* op, const Tensor& idx, size_t A, size_t axis,
                                const Shape& x_shape) {
  const size_t K = idx.Size();
  std::vector<size_t> out(K);
  if (K == 0) return out;
  const void* raw = idx.block()->data();
  for (size_t k = 0; k < K; ++k) {
    double v = idx.data_type() == kInt ? double(static_cast<const int32_t*>(raw)[k])
                                       : double(static_cast<const float*>(raw)[k]);
    SINGA_CHECK_VALUE(std::nearbyint(v) == v,
                      op << ": index " << v << " (position " << k << ") is not a whole number");
    SINGA_CHECK_AXIS(v >= -double(A) && v < double(A),
                     op << ": index " << v << " is out of range for axis " << axis
                        << " of size " << A << " (shape " << x_shape << ")");
    out[k] = size_t(v < 0 ? v + double(A) : v);
  }
  return out;
}

// dx[o, ix[k], :] += dy[o, k, :]. Each task owns a disjoint part of dx: whole outer slices when
// there are enough of them, else column ranges of the inner run, so repeated indices never race.
template <typename T>
void ScatterAdd(const T* dy, const std::vector<size_t>& ix, size_t outer, size_t A, size_t inner,
                int nt, T* dx) {
  const size_t K = ix.size();
  const bool big = outer * K * inner >= kGrain && nt > 1;
  const bool by_outer = big && outer >= size_t(nt);
  const size_t tasks = !big ? 1 : by_outer ? outer : std::min<size_t>(inner, size_t(nt) * 4);
#pragma omp parallel for schedule(static) if (tasks > 1)
  for (std::ptrdiff_t task = 0; task < std::ptrdiff_t(tasks); ++task) {
    size_t o0 = 0, o1 = outer, i0 = 0, i1 = inner;
    if (by_outer) {
      o0 = size_t(task);
      o1 = o0 + 1;
    } else if (tasks > 1) {
      i0 = inner * size_t(task) / tasks;
      i1 = inner * (size_t(task) + 1) / tasks;
    }
    for (size_t o = o0; o < o1; ++o)
      for (size_t k = 0; k < K; ++k) {
        const T* src = dy + (o * K + k) * inner;
        T* dst = dx + (o * A + ix[k]) * inner;
        for (size_t i = i0; i < i1; ++i) dst[i] += src[i];
      }
  }
}

void IndexSelect(const Tensor& x, const GatherArgs& g, const Tensor& out, Context*) {
  const char* op = "IndexSelect";
  const size_t outer = g.d.outer, A = g.d.mid, inner = g.d.inner;
  const std::vector<size_t> ix = ReadIndices(op, g.indices, A, g.axis, g.x_shape);
  const size_t K = ix.size();
  if (out.Size() == 0) return;
  const char* px = static_cast<const char*>(x.block()->data());
  char* py = static_cast<char*>(out.block()->mutable_data());
  const size_t row = inner * SizeOf(x.data_type());
  const std::ptrdiff_t pairs = std::ptrdiff_t(outer * K);
#pragma omp parallel for schedule(static) if (outer * K * inner >= kGrain && pairs > 1)
  for (std::ptrdiff_t p = 0; p < pairs; ++p) {
    const size_t o = size_t(p) / K, k = size_t(p) % K;
    std::memcpy(py + size_t(p) * row, px + (o * A + ix[k]) * row, row);
  }
}

void IndexAdd(const Tensor& dy, const GatherArgs& g, const Tensor& dx, Context*) {
  const char* op = "IndexAdd";
  const std::vector<size_t> ix = ReadIndices(op, g.indices, g.d.mid, g.axis, g.x_shape);
  SINGA_DISPATCH_FLOAT_INT(dx.data_type(), op, T, {
    T* pdx = static_cast<T*>(dx.block()->mutable_data());
    std::fill(pdx, pdx + dx.Size(), T(0));
    if (dy.Size() == 0) return;
    ScatterAdd(static_cast<const T*>(dy.block()->data()), ix, g.d.outer, g.d.mid, g.d.inner,
               MaxThreads(), pdx);
  });
}

}  // namespace

SINGA_REGISTER_KERNEL(IndexSelect, kCpuRef, &IndexSelect);
SINGA_REGISTER_KERNEL(IndexAdd, kCpuRef, &IndexAdd);
// Gathers are memory movement: oneDNN has nothing better; the reference kernels run.

}  // namespace cpu
}  // namespace singa
