// singa/ops/reduce.h: reductions over axes and Apache SINGA's row/column reductions (softmax:
// schema/nn.py's rows, declared in singa/ops/nn_schema.h).
//
//   singa::Tensor s = singa::ReduceSum(x, {0, 2}, /*keepdims=*/false);
//   singa::Tensor m = singa::ReduceMax(x, {-1}, true);
//   singa::Tensor i = singa::Argmax(x, 1);           // int32 indices
//   float total = singa::SumAll(x);
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


}  // namespace singa
