// Tensor: construction, layout, copies and conversions (see singa/core/tensor.h). Math lives in
// cpp/src/ops/.
#include "singa/core/tensor.h"

#include <algorithm>
#include <cstring>

#include "../ops/kernel_slots.h"
#include "singa/ops/elementwise.h"

namespace singa {

// The copy and conversion kernels (CPU: cpp/src/ops/cpu/tensor.cc).
SINGA_KERNEL_SLOT(StridedCopy, void(const Tensor&, const Tensor&, Context*));
SINGA_KERNEL_SLOT(CopyBytes, void(const Tensor&, size_t, const Tensor&, size_t, size_t, Context*));
SINGA_KERNEL_SLOT(Fill, void(const Tensor&, double, Context*));

namespace {
// The storage types the copy kernels handle; others throw here, naming the op.
void CheckStorage(const char* op, DataType dt) {
  SINGA_CHECK_DTYPE(dt == kFloat32 || dt == kInt || dt == kFloat16 || dt == kBFloat16,
                    op << ": dtype " << DataTypeName(dt)
                       << " is not supported (expected float32, int32, float16 or bfloat16)");
}
}  // namespace

Tensor::Tensor() : device_(defaultDevice()) {}

Tensor::Tensor(const Shape& shape, DataType dtype) : Tensor(shape, defaultDevice(), dtype) {}

Tensor::Tensor(const Shape& shape, std::shared_ptr<Device> device, DataType dtype)
    : shape_(shape),
      strides_(ContiguousStrides(shape)),
      dtype_(dtype),
      device_(device ? std::move(device) : defaultDevice()) {
  block_ = device_->NewBlock(NBytes(shape_, dtype_));  // validates dtype and size
  block_->set_layout(dtype_, shape_);
}

Tensor::Tensor(std::shared_ptr<Block> block, const Shape& shape, const Strides& strides,
               std::shared_ptr<Device> device, DataType dtype)
    : shape_(shape),
      strides_(strides),
      dtype_(dtype),
      device_(std::move(device)),
      block_(std::move(block)) {
  SINGA_CHECK_SHAPE(shape_.size() == strides_.size(),
                    "Tensor: shape " << shape_ << " and strides " << strides_
                                     << " have different ranks");
  Product(shape_);  // a view (a broadcast) past 2^63 - 1 elements throws here, not at first use
}

size_t Tensor::shape(size_t idx) const {
  SINGA_CHECK_AXIS(idx < shape_.size(), "Tensor::shape: axis " << idx
                                            << " is out of range for shape " << shape_);
  return shape_[idx];
}

bool Tensor::IsContiguous() const {
  std::ptrdiff_t expect = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expect) return false;
    expect *= static_cast<std::ptrdiff_t>(shape_[i]);
  }
  return true;
}

void Tensor::CheckHostAccess(const char* what) const {
  SINGA_CHECK(block_ != nullptr, ValueError, what << ": the tensor is empty (no memory)");
  SINGA_CHECK_DEVICE(device_->is_host(), what << ": direct memory access needs a host tensor; "
                                                 "call ToHost() first");
  SINGA_CHECK(!device_->graph_enabled(), Error,
              what << ": reading tensor memory while operations are buffered into a graph");
}

template <typename SType>
const SType* Tensor::data() const {
  CheckHostAccess("Tensor::data");
  SINGA_CHECK_DTYPE(DataTypeOf<SType>() == dtype_, "Tensor::data: asked for "
                                                   << DataTypeName(DataTypeOf<SType>())
                                                   << " but the tensor holds " << dtype_);
  return static_cast<const SType*>(block_->data());
}

template <typename SType>
SType* Tensor::mutable_data() {
  CheckHostAccess("Tensor::mutable_data");
  SINGA_CHECK_DTYPE(DataTypeOf<SType>() == dtype_, "Tensor::mutable_data: asked for "
                                                   << DataTypeName(DataTypeOf<SType>())
                                                   << " but the tensor holds " << dtype_);
  return static_cast<SType*>(block_->mutable_data());
}

template <typename SType>
void Tensor::CopyDataFromHostPtr(const SType* src, size_t num, size_t offset) {
  SINGA_CHECK_DTYPE(DataTypeOf<SType>() == dtype_, "CopyDataFromHostPtr: source is "
                                                   << DataTypeName(DataTypeOf<SType>())
                                                   << " but the tensor holds " << dtype_);
  SINGA_CHECK_SHAPE(offset + num <= Size(), "CopyDataFromHostPtr: " << num << " elements at offset "
                                                << offset << " do not fit a tensor of shape "
                                                << shape_);
  SINGA_CHECK_SHAPE(IsContiguous(), "CopyDataFromHostPtr: the tensor is a non-contiguous view");
  device_->CopyDataFromHostPtr(block_.get(), src, num * sizeof(SType), offset * sizeof(SType));
}

void Tensor::CopyData(const Tensor& src) {
  SINGA_CHECK_SHAPE(src.Size() == Size(), "CopyData: source has " << src.Size() << " elements "
                                              << src.shape() << ", destination " << Size() << " "
                                              << shape_);
  SINGA_CHECK_DTYPE(src.data_type() == dtype_, "CopyData: source dtype " << src.data_type()
                                                   << " differs from destination " << dtype_);
  SINGA_CHECK_SHAPE(IsContiguous() || src.shape() == shape_,
                    "CopyData: a non-contiguous destination " << shape_
                        << " needs a source of the same shape, got " << src.shape());
  Tensor from = src.Contiguous();
  if (from.block() == block_.get() && from.stride() == strides_) return;
  if (from.device() != device_) from.ToDevice(device_);
  if (from.block() == block_.get()) from = from.Clone();  // overlapping layouts: copy first
  const Tensor to = *this;
  if (IsContiguous()) {
    auto* k = CopyBytesKernel().For(*device_);
    const size_t nbytes = from.MemSize();
    device_->Exec({.id = OpId::kCopyData, .reads = {from.block()}, .writes = {to.block()}},
                  [k, from, to, nbytes](Context* ctx) { k(from, 0, to, 0, nbytes, ctx); });
    return;
  }
  // A strided destination (a transposed view): written through its strides.
  CheckStorage("CopyData", dtype_);
  auto* k = StridedCopyKernel().For(*device_);
  device_->Exec({.id = OpId::kCopyData,
                 .reads = {from.block(), to.block()},
                 .writes = {to.block()}},
                [k, from, to](Context* ctx) { k(from, to, ctx); });
}

template <typename SType>
std::vector<SType> Tensor::ToVector() const {
  SINGA_CHECK_DTYPE(DataTypeOf<SType>() == dtype_, "ToVector: asked for "
                                                   << DataTypeName(DataTypeOf<SType>())
                                                   << " but the tensor holds " << dtype_);
  std::vector<SType> out(Size());
  if (out.empty()) return out;
  Tensor c = Contiguous();
  c.device()->CopyDataToHostPtr(c.block(), out.data(), out.size() * sizeof(SType));
  return out;
}

template <typename SType>
void Tensor::SetValue(SType x) {
  SINGA_CHECK_SHAPE(IsContiguous(), "SetValue: the tensor is a non-contiguous view");
  CheckStorage("SetValue", dtype_);
  const Tensor t = *this;
  // Converted to the element type inside the kernel; double holds float and int32 values exactly.
  const double v = static_cast<double>(x);
  auto* k = FillKernel().For(*device_);
  device_->Exec({.id = OpId::kSetValue, .writes = {block_.get()}},
                [k, t, v](Context* ctx) { k(t, v, ctx); });
}

Tensor Tensor::Clone(std::shared_ptr<Device> device) const {
  Tensor out(shape_, device_, dtype_);
  if (block_ != nullptr && Size() > 0) {
    CheckStorage("Clone", dtype_);
    const Tensor in = *this;
    auto* k = StridedCopyKernel().For(*device_);
    device_->Exec({.id = OpId::kClone, .reads = {in.block()}, .writes = {out.block()}},
                  [k, in, out](Context* ctx) { k(in, out, ctx); });
  }
  if (device && device != device_) out.ToDevice(device);
  return out;
}

Tensor Tensor::Contiguous() const {
  if (block_ == nullptr || IsContiguous()) return *this;
  return Clone();
}

Tensor& Tensor::ToDevice(std::shared_ptr<Device> device) {
  if (!device || device == device_) return *this;
  Tensor c = Contiguous();
  auto nb = device->NewBlock(c.MemSize());
  nb->set_layout(dtype_, shape_);
  if (c.MemSize() > 0) {
    // Through host memory: correct for every pair of devices, and only used at boundaries.
    std::vector<char> host(c.MemSize());
    c.device()->CopyDataToHostPtr(c.block(), host.data(), host.size());
    device->CopyDataFromHostPtr(nb.get(), host.data(), host.size());
  }
  block_ = nb;
  strides_ = ContiguousStrides(shape_);
  device_ = std::move(device);
  return *this;
}

Tensor& Tensor::ToHost() {
  if (!device_->is_host()) ToDevice(defaultDevice());
  return *this;
}

Tensor Tensor::AsType(DataType dtype) const {
  Tensor out(shape_, device_, dtype);
  if (empty()) return out;
  CheckStorage("AsType", dtype_);
  CheckStorage("AsType", dtype);
  const Tensor in = *this;
  auto* k = StridedCopyKernel().For(*device_);
  // element i to element i when in is contiguous over its block: any one layout will do
  const bool flat = in.IsContiguous() && in.Size() * SizeOf(dtype_) == in.block()->size();
  device_->Exec({.id = OpId::kAsType,
                 .reads = {in.block()},
                 .writes = {out.block()},
                 .layouts = flat ? LayoutHooks::Flat() : LayoutHooks{}},
                [k, in, out](Context* ctx) { k(in, out, ctx); });
  return out;
}

Tensor& Tensor::Reshape(const Shape& shape) {
  SINGA_CHECK_SHAPE(Product(shape) == Size(), "Reshape: cannot reshape a tensor of shape "
                                                  << shape_ << " (" << Size()
                                                  << " elements) into shape " << shape << " ("
                                                  << Product(shape) << " elements)");
  if (!IsContiguous()) *this = Contiguous();
  shape_ = shape;
  strides_ = ContiguousStrides(shape_);
  return *this;
}

Tensor& Tensor::ResetLike(const Tensor& t) {
  device_ = t.device();
  dtype_ = t.data_type();
  shape_ = t.shape();
  strides_ = ContiguousStrides(shape_);
  block_ = device_->NewBlock(MemSize());
  block_->set_layout(dtype_, shape_);
  return *this;
}

Tensor& Tensor::Resize(const Shape& shape) {
  if (Product(shape) != Size() || block_ == nullptr) {
    block_ = device_->NewBlock(NBytes(shape, dtype_));
    block_->set_layout(dtype_, shape);
  }
  shape_ = shape;
  strides_ = ContiguousStrides(shape_);
  return *this;
}

Tensor& Tensor::T() {
  std::reverse(shape_.begin(), shape_.end());
  std::reverse(strides_.begin(), strides_.end());
  return *this;
}

// In-place operators: the result must keep this tensor's shape.
#define SINGA_INPLACE_OP(OP, Fn)                   \
  Tensor& Tensor::operator OP(const Tensor& t) {   \
    Fn(*this, t, this);                            \
    return *this;                                  \
  }                                                \
  Tensor& Tensor::operator OP(float x) {           \
    Fn(*this, x, this);                            \
    return *this;                                  \
  }
SINGA_INPLACE_OP(+=, Add)
SINGA_INPLACE_OP(-=, Sub)
SINGA_INPLACE_OP(*=, EltwiseMult)
SINGA_INPLACE_OP(/=, Div)
#undef SINGA_INPLACE_OP

void CheckSameDevice(const char* op, const std::vector<const Tensor*>& tensors) {
  for (const Tensor* t : tensors) {
    if (t->device() == tensors[0]->device()) continue;
    // Two host devices can share a lang and id: the address tells them apart.
    auto name = [](const std::shared_ptr<Device>& d) {
      std::ostringstream os;
      os << (d->is_host() ? "cpu" : "cuda") << ":" << d->id() << "@" << d.get();
      return os.str();
    };
    SINGA_THROW(DeviceError, op << ": operands live on different devices ("
                                << name(tensors[0]->device()) << " and " << name(t->device())
                                << "); move one with ToDevice()");
  }
}

#define SINGA_INSTANTIATE(T)                                                    \
  template const T* Tensor::data<T>() const;                              \
  template T* Tensor::mutable_data<T>();                                  \
  template void Tensor::CopyDataFromHostPtr<T>(const T*, size_t, size_t); \
  template std::vector<T> Tensor::ToVector<T>() const;
SINGA_INSTANTIATE(float)
SINGA_INSTANTIATE(int32_t)
SINGA_INSTANTIATE(Half)
SINGA_INSTANTIATE(BFloat16)
#undef SINGA_INSTANTIATE
template void Tensor::SetValue<float>(float);
template void Tensor::SetValue<int32_t>(int32_t);
template void Tensor::SetValue<double>(double);

}  // namespace singa
