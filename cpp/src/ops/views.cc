// Views: reshape, transpose and broadcast change shape and strides and share the block.
#include <algorithm>

#include "singa/ops/shape.h"

namespace singa {

Tensor Reshape(const Tensor& in, const Shape& shape) {
  Tensor out = in;
  out.Reshape(shape);
  return out;
}

Tensor Reshape(const Tensor& in, const std::vector<int>& shape) {
  Shape s(shape.size());
  int infer = -1;
  size_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      SINGA_CHECK_SHAPE(infer < 0, "Reshape: only one dimension may be -1 (reshaping "
                                       << in.shape() << ")");
      infer = static_cast<int>(i);
    } else {
      SINGA_CHECK_SHAPE(shape[i] >= 0, "Reshape: negative dimension " << shape[i]);
      s[i] = static_cast<size_t>(shape[i]);
      known *= s[i];
    }
  }
  if (infer >= 0) {
    SINGA_CHECK_SHAPE(known != 0 && in.Size() % known == 0,
                      "Reshape: cannot infer the -1 dimension reshaping " << in.shape() << " ("
                          << in.Size() << " elements) with the other dimensions giving "
                          << known << " elements");
    s[infer] = in.Size() / known;
  }
  return Reshape(in, s);
}

Tensor Transpose(const Tensor& in) {
  Tensor out = in;
  out.T();
  return out;
}

Tensor Transpose(const Tensor& in, const std::vector<size_t>& axes) {
  const size_t nd = in.nDim();
  SINGA_CHECK_AXIS(axes.size() == nd, "Transpose: " << axes.size()
                                          << " axes given for a tensor of shape " << in.shape());
  std::vector<bool> seen(nd, false);
  Shape shape(nd);
  Strides strides(nd);
  for (size_t i = 0; i < nd; ++i) {
    SINGA_CHECK_AXIS(axes[i] < nd && !seen[axes[i]],
                     "Transpose: axes must be a permutation of 0.." << nd - 1 << ", got axis "
                                                                    << axes[i] << " at position "
                                                                    << i << " (repeated or out of range)");
    seen[axes[i]] = true;
    shape[i] = in.shape()[axes[i]];
    strides[i] = in.stride()[axes[i]];
  }
  return Tensor(in.block_ptr(), shape, strides, in.device(), in.data_type());
}

Tensor Broadcast(const Tensor& in, const Shape& shape) {
  if (in.shape() == shape) return in;
  SINGA_CHECK_SHAPE(in.nDim() <= shape.size(), "Broadcast: cannot broadcast shape " << in.shape()
                                                   << " to the lower-rank shape " << shape);
  const size_t lead = shape.size() - in.nDim();
  Strides strides(shape.size(), 0);
  for (size_t i = 0; i < in.nDim(); ++i) {
    size_t d = in.shape()[i];
    SINGA_CHECK_SHAPE(d == shape[lead + i] || d == 1,
                      "Broadcast: cannot broadcast shape " << in.shape() << " to " << shape);
    strides[lead + i] = d == 1 ? 0 : in.stride()[i];
  }
  return Tensor(in.block_ptr(), shape, strides, in.device(), in.data_type());
}

}  // namespace singa
