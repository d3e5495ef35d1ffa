// singa/ops/transformer.h: the ops transformers need beyond nn.h: layer normalisation, the
// running sum along an axis, and ONNX's element / n-d gathers with their scatter-add backwards.
//
//   auto r = singa::LayerNormForward(x, w, b, {512}, 1e-5f);     // {y, mean, rstd}
//   auto g = singa::LayerNormBackward(dy, x, w, r[1], r[2], {512});  // {dx, dw, db}
//   singa::Tensor c = singa::CumSum(x, -1, /*exclusive=*/false, /*reverse=*/false);
//   singa::Tensor e = singa::GatherElements(x, idx, 1);          // ONNX GatherElements
//   singa::Tensor n = singa::GatherND(x, idx, /*batch_dims=*/0);  // ONNX GatherND
//
// GELU, IsNaN, IsInf and MaskedFill are elementwise (elementwise.def / elementwise.h).
// Every function validates its operands first (ShapeError, AxisError, DTypeError, ValueError,
// naming the op); index values are read on the device and checked when the op runs (eagerly at
// the call, in a graph at RunGraph), as IndexSelect does. Results are new contiguous tensors.
#pragma once

#include <vector>

#include "singa/core/tensor.h"

namespace singa {

/// Layer normalisation over the trailing axes given by normalized_shape (torch.nn.functional.
/// layer_norm): x's last normalized_shape.size() axes must equal normalized_shape. weight and
/// bias hold normalized_shape's elements, or are empty Tensor()s (no affine). x: float32 (float16
/// on CUDA devices). Returns {y, mean, rstd}: mean and rstd = 1 / sqrt(var + eps) (biased var)
/// are float32 with one value per normalised row (x.shape[:-k]).
std::vector<Tensor> LayerNormForward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                     const Shape& normalized_shape, float eps);
/// Returns {dx, dweight, dbias} from the forward's mean and rstd; dweight and dbias are empty
/// when weight is (no affine). dbias is computed whenever weight is given.
std::vector<Tensor> LayerNormBackward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                      const Tensor& mean, const Tensor& rstd,
                                      const Shape& normalized_shape);

/// The running sum along `axis` (ONNX CumSum): exclusive leaves each element out of its own sum
/// (the first is 0), reverse sums from the end. float32 or int32. The backward of CumSum(x, a, e,
/// r) is CumSum(dy, a, e, !r).
Tensor CumSum(const Tensor& x, int axis, bool exclusive = false, bool reverse = false);

/// out[i][j][k] = x[i][idx[i][j][k]][k] for axis 1 (ONNX GatherElements): indices (int32, or
/// float32 holding whole numbers; negative ones wrap) have x's rank, and every axis but `axis` no
/// longer than x's. out has the indices' shape and x's dtype (float32, int32 or float16).
Tensor GatherElements(const Tensor& x, const Tensor& indices, int axis);
/// The backward of GatherElements: zeros of x_shape, dy added at the indices (repeats add up).
Tensor GatherElementsBackward(const Tensor& dy, const Tensor& indices, int axis,
                              const Shape& x_shape);
/// ONNX GatherND: indices (..., q) address x's axes batch_dims .. batch_dims + q - 1 after the
/// batch_dims leading axes, which x and indices share. out shape: indices.shape[:-1] +
/// x.shape[batch_dims + q:].
Tensor GatherND(const Tensor& x, const Tensor& indices, int batch_dims = 0);
/// The backward of GatherND: zeros of x_shape, dy's slices added at the indices.
Tensor GatherNDBackward(const Tensor& dy, const Tensor& indices, int batch_dims,
                        const Shape& x_shape);

}  // namespace singa
