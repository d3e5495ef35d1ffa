// singa/ops/shape.h: operations that move data without arithmetic.
//
//   singa::Tensor v = singa::Reshape(x, std::vector<int>{-1, 4});    // one dim may be -1
//   singa::Tensor t = singa::Transpose(x, {0, 2, 1});                // a view, no copy
//   singa::Tensor c = singa::ConcatOn({a, b}, 1);
//   singa::Tensor s = singa::SliceOn(x, 2, 5, 0);                    // rows 2..4, a copy
//   singa::Tensor b = singa::Broadcast(x, {4, 3});                   // a view with stride 0
//
// Views (Transpose, Broadcast, Reshape of a contiguous tensor) share the block; everything else
// returns a new contiguous tensor.
#pragma once

#include <vector>

#include "singa/core/tensor.h"

namespace singa {

Tensor Reshape(const Tensor& in, const Shape& shape);
/// numpy-style: one entry may be -1 (inferred), 0 is a zero-sized dimension.
Tensor Reshape(const Tensor& in, const std::vector<int>& shape);
/// Reverses the axes.
Tensor Transpose(const Tensor& in);
/// Permutes the axes; `axes` must be a permutation of 0..ndim-1 (repeats throw AxisError).
Tensor Transpose(const Tensor& in, const std::vector<size_t>& axes);
/// A view of `in` broadcast to `shape` (numpy.broadcast_to).
Tensor Broadcast(const Tensor& in, const Shape& shape);

/// Joins tensors along `axis`; all other dimensions, dtypes and devices must agree.
Tensor ConcatOn(const std::vector<Tensor>& in, int axis);
Tensor ConcatenateRows(const std::vector<Tensor>& in);
Tensor ConcatenateColumns(const std::vector<Tensor>& in);
/// Elements [start, end) along `axis` (a copy). start <= end <= shape[axis].
Tensor SliceOn(const Tensor& in, size_t start, size_t end, int axis);
Tensor SliceRows(const Tensor& in, size_t start, size_t end);
Tensor SliceColumns(const Tensor& in, size_t start, size_t end);
Tensor CopyRows(const Tensor& in, size_t start, size_t end);
Tensor CopyColumns(const Tensor& in, size_t start, size_t end);
/// Copies `num` elements of src (from src_offset, row-major) into dst (at dst_offset).
void CopyDataToFrom(Tensor* dst, const Tensor& src, size_t num, size_t dst_offset = 0,
                    size_t src_offset = 0);

}  // namespace singa
