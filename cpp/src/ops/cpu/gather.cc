// GatherElements / GatherND and their scatter-add backwards, the reference CPU kernels
// (kCpuRef); fronts: ../gather.cc.
//
// Every index is read and checked first (a whole number inside [-A, A), negatives wrapped) and
// turned into an element offset of x, serially, so a bad index throws before any data moves.
// The gathers then copy in parallel; the scatters add serially in index order (repeated indices
// accumulate deterministically).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../../core/dispatch.h"
#include "../strided.h"
#include "../transformer_kernels.h"

namespace singa {
namespace cpu {
namespace {

// Index k of idx wrapped into [0, A); throws ValueError / AxisError naming op.
size_t IndexAt(const char* op, const Tensor& idx, size_t k, size_t A, size_t axis,
               const Shape& x_shape) {
  const void* raw = idx.block()->data();
  const double v = idx.data_type() == kInt ? double(static_cast<const int32_t*>(raw)[k])
                                           : double(static_cast<const float*>(raw)[k]);
  SINGA_CHECK_VALUE(std::nearbyint(v) == v,
                    op << ": index " << v << " (position " << k << ") is not a whole number");
  SINGA_CHECK_AXIS(v >= -double(A) && v < double(A),
                   op << ": index " << v << " is out of range for axis " << axis << " of size "
                      << A << " (input shape " << x_shape << ")");
  return size_t(v < 0 ? v + double(A) : v);
}

// For every element e of the indices' shape, the offset of x it addresses.
std::vector<size_t> ElementOffsets(const char* op, const ElementsArgs& g) {
  const size_t n = Product(g.idx_shape), nd = g.x_shape.size();
  Strides xs(nd);
  std::ptrdiff_t s = 1;
  for (size_t d = nd; d-- > 0;) {
    xs[d] = s;
    s *= std::ptrdiff_t(g.x_shape[d]);
  }
  std::vector<size_t> off(n);
  std::vector<size_t> coord(nd, 0);
  for (size_t e = 0; e < n; ++e) {
    size_t o = 0;
    for (size_t d = 0; d < nd; ++d)
      o += (d == g.axis ? IndexAt(op, g.indices, e, g.x_shape[d], d, g.x_shape) : coord[d]) *
           size_t(xs[d]);
    off[e] = o;
    for (size_t d = nd; d-- > 0;) {  // next coordinate in the indices' shape
      if (++coord[d] < g.idx_shape[d]) break;
      coord[d] = 0;
    }
  }
  return off;
}

// For every (batch, k) the offset of its slice's first element in x.
std::vector<size_t> SliceOffsets(const char* op, const NdArgs& g) {
  const size_t q = g.x_dims.size();
  const size_t per_batch_elems = Product(g.x_dims) * g.slice;
  std::vector<size_t> off(g.batch * g.per_batch);
  for (size_t bk = 0; bk < off.size(); ++bk) {
    size_t pos = 0;
    for (size_t j = 0; j < q; ++j)
      pos = pos * g.x_dims[j] + IndexAt(op, g.indices, bk * q + j, g.x_dims[j], g.batch_dims + j,
                                         g.x_shape);
    off[bk] = (bk / std::max<size_t>(g.per_batch, 1)) * per_batch_elems + pos * g.slice;
  }
  return off;
}

void GatherElements(const Tensor& x, const ElementsArgs& g, const Tensor& out, Context*) {
  const std::vector<size_t> off = ElementOffsets("GatherElements", g);
  const size_t w = SizeOf(x.data_type());
  const char* px = static_cast<const char*>(x.block()->data());
  char* py = static_cast<char*>(out.block()->mutable_data());
  const std::ptrdiff_t n = std::ptrdiff_t(off.size());
#pragma omp parallel for schedule(static) if (off.size() >= kParallelGrain)
  for (std::ptrdiff_t e = 0; e < n; ++e) std::memcpy(py + size_t(e) * w, px + off[e] * w, w);
}

void GatherElementsBackward(const Tensor& dy, const ElementsArgs& g, const Tensor& dx,
                            Context*) {
  const std::vector<size_t> off = ElementOffsets("GatherElementsBackward", g);
  SINGA_DISPATCH_FLOAT_INT(dx.data_type(), "GatherElementsBackward", T, {
    T* pdx = static_cast<T*>(dx.block()->mutable_data());
    const T* pdy = static_cast<const T*>(dy.block()->data());
    std::fill(pdx, pdx + dx.Size(), T(0));
    for (size_t e = 0; e < off.size(); ++e) pdx[off[e]] += pdy[e];
  });
}

void GatherND(const Tensor& x, const NdArgs& g, const Tensor& out, Context*) {
  const std::vector<size_t> off = SliceOffsets("GatherND", g);
  const size_t row = g.slice * SizeOf(x.data_type());
  const char* px = static_cast<const char*>(x.block()->data());
  char* py = static_cast<char*>(out.block()->mutable_data());
  const std::ptrdiff_t n = std::ptrdiff_t(off.size());
#pragma omp parallel for schedule(static) if (off.size() * g.slice >= kParallelGrain && n > 1)
  for (std::ptrdiff_t k = 0; k < n; ++k)
    std::memcpy(py + size_t(k) * row, px + off[k] * SizeOf(x.data_type()), row);
}

void GatherNDBackward(const Tensor& dy, const NdArgs& g, const Tensor& dx, Context*) {
  const std::vector<size_t> off = SliceOffsets("GatherNDBackward", g);
  SINGA_DISPATCH_FLOAT_INT(dx.data_type(), "GatherNDBackward", T, {
    T* pdx = static_cast<T*>(dx.block()->mutable_data());
    const T* pdy = static_cast<const T*>(dy.block()->data());
    std::fill(pdx, pdx + dx.Size(), T(0));
    for (size_t k = 0; k < off.size(); ++k) {
      const T* src = pdy + k * g.slice;
      T* dst = pdx + off[k];
      for (size_t i = 0; i < g.slice; ++i) dst[i] += src[i];
    }
  });
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(GatherElements, kCpuRef, &cpu::GatherElements);
SINGA_REGISTER_KERNEL(GatherElementsBackward, kCpuRef, &cpu::GatherElementsBackward);
SINGA_REGISTER_KERNEL(GatherND, kCpuRef, &cpu::GatherND);
SINGA_REGISTER_KERNEL(GatherNDBackward, kCpuRef, &cpu::GatherNDBackward);
// Gathers are memory movement: oneDNN has nothing better; the reference kernels run.

}  // namespace singa
