// strided_indexer.h (private): the n-d index math of the CUDA elementwise and copy kernels, in
// plain C++ (host and device), so that tests/cpp/test_functors.cc checks it on a machine
// without a GPU.
//
//   auto ix = cuda::MakeIndexer<2>("Exp", in.shape(), {&in.stride(), &out.stride()});
//   // in a kernel, passed by value:  int64_t off[2]; ix.Offsets(i, off);  y[off[1]] = f(x[off[0]]);
//   if (ix.Contiguous()) { /* every operand is one dense row: the fast path, y[i] = f(x[i]) */ }
//
// Why: the axes are first collapsed as the CPU kernels collapse them (strided.h: size-1 axes
// dropped, axes that are contiguous for every operand merged), so a contiguous or simply
// broadcast operand costs one or two divisions per element, and the GPU visits exactly the
// elements (and the offsets, stride 0 for broadcast axes) that the CPU loops visit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "singa/core/common.h"
#include "singa/core/error.h"
#include "singa/ops/elementwise_functors.h"  // SINGA_HOST_DEVICE
#ifndef __CUDACC__
#include "../strided.h"  // CollapseAxes, for MakeIndexer's definition
#endif

namespace singa {
namespace cuda {

/// Collapsed axes an indexer holds; more than this after collapsing throws NotImplementedError.
constexpr int kMaxDims = 8;

/// Linear index over `size` (row-major) -> element offset of each of N operands.
template <int N>
struct StridedIndexer {
  int ndim = 1;
  int64_t size[kMaxDims] = {1};
  int64_t stride[N][kMaxDims] = {};

  /// off[k] = sum_d index_d * stride[k][d], with (index_d) the row-major digits of `linear`.
  SINGA_HOST_DEVICE void Offsets(int64_t linear, int64_t* off) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t i = d == 0 ? linear : linear % size[d];
      if (d > 0) linear /= size[d];
      for (int k = 0; k < N; ++k) off[k] += i * stride[k][d];
    }
  }

  /// Every operand is one dense row (the elementwise fast path).
  bool Contiguous() const {
    if (ndim != 1) return false;
    for (int k = 0; k < N; ++k)
      if (stride[k][0] != 1) return false;
    return true;
  }
};

#ifndef __CUDACC__
/// The indexer of `shape` with each operand's strides, axes collapsed as strided.h does.
template <int N>
StridedIndexer<N> MakeIndexer(const char* op, const Shape& shape,
                              const std::array<const Strides*, N>& strides) {
  Shape s = shape;
  std::array<Strides, N> st;
  for (int k = 0; k < N; ++k) st[k] = *strides[k];
  CollapseAxes<N>(&s, &st);
  SINGA_CHECK(s.size() <= size_t(kMaxDims), NotImplementedError,
              op << ": the CUDA kernels index at most " << kMaxDims
                 << " non-mergeable axes; shape " << shape << " has " << s.size());
  StridedIndexer<N> ix;
  ix.ndim = static_cast<int>(s.size());
  for (int d = 0; d < ix.ndim; ++d) {
    ix.size[d] = static_cast<int64_t>(s[d]);
    for (int k = 0; k < N; ++k) ix.stride[k][d] = static_cast<int64_t>(st[k][d]);
  }
  return ix;
}

#else
// nvcc translation units call the instantiations for N = 2 and 3 made in strided_indexer.cc:
// compiled by the host compiler with OpenMP, which strided.h's pragmas need (nvcc's host pass
// would warn about every one of them).
template <int N>
StridedIndexer<N> MakeIndexer(const char* op, const Shape& shape,
                              const std::array<const Strides*, N>& strides);
#endif  // __CUDACC__

}  // namespace cuda
}  // namespace singa
