// strided.h (private): iterating over n-d index spaces whose operands have arbitrary strides.
//
//   ForEachRow<2>(shape, {&x.stride(), &out_strides}, [&](const Offsets<2>& off, size_t n,
//                                                         const Offsets<2>& step) {
//     for (size_t i = 0; i < n; ++i) y[off[1] + i * step[1]] = f(x[off[0] + i * step[0]]);
//   });
//
// Why: one loop structure serves contiguous, transposed and broadcast (stride 0) operands. Axes of
// size 1 are dropped and adjacent axes that are contiguous for every operand are merged, so a
// contiguous tensor becomes one long row (one vectorisable inner loop) and a bias broadcast over a
// matrix becomes rows whose bias stride is 1 and row stride 0. Rows are split between OpenMP
// threads when there is enough work.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "singa/core/common.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace singa {

template <size_t N>
using Offsets = std::array<std::ptrdiff_t, N>;

/// The OpenMP team size a parallel region would get (1 without OpenMP).
inline int MaxThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// Minimum number of elements before a loop is split between threads.
constexpr size_t kParallelGrain = 1 << 15;

/// Drops size-1 axes and merges axes that are contiguous for all operands, in place.
template <size_t N>
void CollapseAxes(Shape* shape, std::array<Strides, N>* strides) {
  Shape s;
  std::array<Strides, N> st;
  for (size_t d = 0; d < shape->size(); ++d) {
    if ((*shape)[d] == 1) continue;
    bool merge = !s.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = st[k].back() == (*strides)[k][d] * static_cast<std::ptrdiff_t>((*shape)[d]);
    if (merge) {
      s.back() *= (*shape)[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = (*strides)[k][d];
    } else {
      s.push_back((*shape)[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back((*strides)[k][d]);
    }
  }
  if (s.empty()) {  // a scalar, or all axes of size 1
    s.push_back(1);
    for (size_t k = 0; k < N; ++k) st[k].assign(1, 1);
  }
  *shape = s;
  *strides = st;
}

/// Calls body(offsets, inner_length, inner_steps) once per row of the last (collapsed) axis.
template <size_t N, typename Body>
void ForEachRow(const Shape& shape_in, const std::array<const Strides*, N>& strides_in,
                Body&& body) {
  size_t total = Product(shape_in);
  if (total == 0) return;
  Shape shape = shape_in;
  std::array<Strides, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = *strides_in[k];
  CollapseAxes<N>(&shape, &strides);
  const size_t nd = shape.size();
  const size_t inner = shape[nd - 1];
  Offsets<N> step;
  for (size_t k = 0; k < N; ++k) step[k] = strides[k][nd - 1];
  const std::ptrdiff_t rows = static_cast<std::ptrdiff_t>(total / inner);
  auto offsets_of = [&](std::ptrdiff_t row) {
    Offsets<N> off{};
    for (size_t d = nd - 1; d-- > 0;) {
      std::ptrdiff_t i = row % static_cast<std::ptrdiff_t>(shape[d]);
      row /= static_cast<std::ptrdiff_t>(shape[d]);
      for (size_t k = 0; k < N; ++k) off[k] += i * strides[k][d];
    }
    return off;
  };
  if (rows == 1 && inner >= 2 * kParallelGrain) {
    // One long row: split it into pieces instead.
#pragma omp parallel
    {
#ifdef _OPENMP
      const std::ptrdiff_t nt = omp_get_num_threads(), t = omp_get_thread_num();
#else
      const std::ptrdiff_t nt = 1, t = 0;
#endif
      std::ptrdiff_t n = static_cast<std::ptrdiff_t>(inner);
      std::ptrdiff_t begin = n * t / nt, end = n * (t + 1) / nt;
      Offsets<N> off;
      for (size_t k = 0; k < N; ++k) off[k] = begin * step[k];
      if (end > begin) body(off, static_cast<size_t>(end - begin), step);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (total >= kParallelGrain && rows > 1)
  for (std::ptrdiff_t r = 0; r < rows; ++r) body(offsets_of(r), inner, step);
}

}  // namespace singa
