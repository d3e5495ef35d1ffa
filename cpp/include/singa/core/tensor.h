// singa/core/tensor.h: an n-dimensional array on a device.
//
//   auto dev = singa::defaultDevice();
//   singa::Tensor a({2, 3}, dev);                    // float32, memory allocated on first write
//   a.SetValue(1.0f);
//   std::vector<float> host{1, 2, 3, 4, 5, 6};
//   singa::Tensor b({2, 3}, dev);
//   b.CopyDataFromHostPtr(host.data(), host.size());
//   singa::Tensor c = singa::Add(a, b);              // see singa/ops/*.h for the math
//   singa::Tensor t = singa::Transpose(c);           // a view: shape (3, 2), no copy
//   std::vector<float> out = t.ToVector<float>();    // row-major copy honouring the strides
//
// A Tensor is a cheap handle: copying it shares the block (like numpy views); Clone() copies data.
// Strides are in elements and may be 0 (a broadcast axis) or non-row-major (a transpose), so a
// tensor is not always contiguous; kernels that need contiguous input call Contiguous() first.
#pragma once

#include <memory>
#include <vector>

#include "singa/core/block.h"
#include "singa/core/common.h"
#include "singa/core/device.h"
#include "singa/core/error.h"

namespace singa {

class Tensor {
 public:
  /// An empty tensor (no block) of shape () on the default host device.
  Tensor();
  explicit Tensor(const Shape& shape, DataType dtype = kFloat32);
  Tensor(const Shape& shape, std::shared_ptr<Device> device, DataType dtype = kFloat32);
  /// A view: shares `block`, with the given shape and strides.
  Tensor(std::shared_ptr<Block> block, const Shape& shape, const Strides& strides,
         std::shared_ptr<Device> device, DataType dtype);

  const Shape& shape() const { return shape_; }
  size_t shape(size_t idx) const;
  size_t nDim() const { return shape_.size(); }
  size_t Size() const { return Product(shape_); }
  /// Bytes of Size() elements.
  size_t MemSize() const { return Size() * SizeOf(dtype_); }
  const Strides& stride() const { return strides_; }
  DataType data_type() const { return dtype_; }
  const std::shared_ptr<Device>& device() const { return device_; }
  Block* block() const { return block_.get(); }
  const std::shared_ptr<Block>& block_ptr() const { return block_; }
  /// No block or no element.
  bool empty() const { return block_ == nullptr || Size() == 0; }
  bool IsContiguous() const;
  /// Apache SINGA's name: true when the layout is not row-major contiguous.
  bool transpose() const { return !IsContiguous(); }

  /// Host pointer to the first element (host devices only; allocates lazily).
  template <typename SType>
  const SType* data() const;
  template <typename SType>
  SType* mutable_data();

  /// Copies `num` elements from host memory into positions [offset, offset+num) (row-major).
  template <typename SType>
  void CopyDataFromHostPtr(const SType* src, size_t num, size_t offset = 0);
  /// Copies the values of `src` (same Size(), same dtype) into this tensor's memory.
  void CopyData(const Tensor& src);
  /// Row-major host copy of the values, honouring strides.
  template <typename SType>
  std::vector<SType> ToVector() const;
  /// Fills every element with x (converted to this dtype).
  template <typename SType>
  void SetValue(SType x);

  /// A contiguous deep copy, on `device` (this tensor's device if null).
  Tensor Clone(std::shared_ptr<Device> device = nullptr) const;
  /// This tensor if contiguous, else a contiguous copy.
  Tensor Contiguous() const;
  /// Moves the data to `device` in place.
  Tensor& ToDevice(std::shared_ptr<Device> device);
  Tensor& ToHost();
  /// A copy converted to dtype (float32 <-> int32 <-> float16).
  Tensor AsType(DataType dtype) const;
  /// Reshapes in place; copies first if the layout is not contiguous. One dim may be -1 only in
  /// the free function Reshape(t, std::vector<int>).
  Tensor& Reshape(const Shape& shape);
  /// Reallocates as a contiguous tensor of the given shape, dtype and device of `t`.
  Tensor& ResetLike(const Tensor& t);
  Tensor& Resize(const Shape& shape);
  /// Transposes in place (a view change, no copy).
  Tensor& T();
  /// Repeats elements along `axis` (numpy.repeat; negative axes count from the end). axis == 9999
  /// (Apache SINGA's Noaxis) flattens first, like numpy's axis=None.
  Tensor Repeat(const std::vector<size_t>& repeats, int axis) const;

  Tensor& operator+=(const Tensor& t);
  Tensor& operator-=(const Tensor& t);
  Tensor& operator*=(const Tensor& t);
  Tensor& operator/=(const Tensor& t);
  Tensor& operator+=(float x);
  Tensor& operator-=(float x);
  Tensor& operator*=(float x);
  Tensor& operator/=(float x);

  /// Sum of absolute values / Euclidean norm of all elements (float32 result).
  float L1() const;
  float L2() const;

 private:
  void CheckHostAccess(const char* what) const;

  Shape shape_;
  Strides strides_;
  DataType dtype_ = kFloat32;
  std::shared_ptr<Device> device_;
  std::shared_ptr<Block> block_;
};

/// Checks that every tensor lives on the same device as the first; throws DeviceError naming op.
void CheckSameDevice(const char* op, const std::vector<const Tensor*>& tensors);

}  // namespace singa
