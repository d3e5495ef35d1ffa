// singa/ops/reduce.h: reductions over axes, softmax, and Apache SINGA's row/column reductions.
//
//   singa::Tensor s = singa::ReduceSum(x, {0, 2}, /*keepdims=*/false);
//   singa::Tensor m = singa::ReduceMax(x, {-1}, true);
//   singa::Tensor i = singa::Argmax(x, 1);           // int32 indices
//   float total = singa::SumAll(x);
//   singa::Tensor p = singa::SoftMax(logits, -1);    // numerically stable, along one axis
//
// Axes may be negative; an empty axes list reduces over every axis. Out-of-range or repeated axes
// throw AxisError; reducing an empty tensor with max/min/argmax throws ValueError (no identity).
#pragma once

#include <vector>

#include "singa/core/tensor.h"

namespace singa {

Tensor ReduceSum(const Tensor& in, const std::vector<int>& axes, bool keepdims = false);
Tensor ReduceMean(const Tensor& in, const std::vector<int>& axes, bool keepdims = false);
Tensor ReduceMax(const Tensor& in, const std::vector<int>& axes, bool keepdims = false);
Tensor ReduceMin(const Tensor& in, const std::vector<int>& axes, bool keepdims = false);
/// Indices (int32) of the largest / smallest element along `axis` (first one on ties).
Tensor Argmax(const Tensor& in, int axis, bool keepdims = false);
Tensor Argmin(const Tensor& in, int axis, bool keepdims = false);

/// Apache SINGA's names. Sum/Average drop the reduced axis.
Tensor Sum(const Tensor& in, int axis);
Tensor Average(const Tensor& in, int axis);
float SumAll(const Tensor& in);
/// For a matrix M (rows x cols): SumRows adds the rows (-> cols), SumColumns adds the columns
/// (-> rows), RowMax takes each row's maximum (-> rows).
Tensor SumRows(const Tensor& M);
Tensor SumColumns(const Tensor& M);
Tensor RowMax(const Tensor& M);

/// exp(x - max) / sum(exp(x - max)) along `axis`.
Tensor SoftMax(const Tensor& in, int axis = -1);
/// The gradient of SoftMax: given y = SoftMax(x) and dy, returns dx = y * (dy - sum(dy * y)).
Tensor SoftMaxBackward(const Tensor& dy, const Tensor& y, int axis = -1);
/// x - log(sum(exp(x))) along `axis`, computed stably.
Tensor LogSoftMax(const Tensor& in, int axis = -1);

}  // namespace singa
