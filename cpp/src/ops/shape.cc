// Data movement without arithmetic: concatenation, slicing, SINGA's row/column copies, element
// range copies and Tensor::Repeat (see singa/ops/shape.h). Views live in views.cc.
//
// These ops only move elements, so they run on every storage type (float32, int32, float16).
// Concatenation and slicing read their inputs through strides, so transposed and broadcast inputs
// are handled without an extra contiguous copy. Fronts here; CPU kernels in cpu/shape.cc (and
// cpu/tensor.cc for CopyDataToFrom's byte copy).
#include "singa/ops/shape.h"

#include <algorithm>
#include <cstdint>

#include "kernel_slots.h"

namespace singa {

SINGA_KERNEL_SLOT(Concat, void(const std::vector<Tensor>&, size_t, const Tensor&, Context*));
SINGA_KERNEL_SLOT(Slice, void(const Tensor&, std::ptrdiff_t, const Tensor&, Context*));
SINGA_KERNEL_SLOT(Repeat, void(const Tensor&, const std::vector<size_t>&, size_t, size_t,
                               const Tensor&, Context*));

namespace {

// numpy.repeat's axis=None: repeat the flattened tensor. SINGA's Python layer passes this value
// (Apache SINGA calls it Noaxis); shape.h cannot grow a constant for it (shared header).
constexpr int kNoAxis = 9999;

void CheckHasData(const char* op, const Tensor& t, const char* what) {
  SINGA_CHECK(t.block() != nullptr, ValueError,
              op << ": the " << what << " tensor is empty (no memory)");
}

// Rejects dtypes that the strided copies cannot handle, naming the op (instead of Clone's name).
void CheckStorageType(const char* op, DataType dt) {
  SINGA_CHECK_DTYPE(dt == kFloat32 || dt == kInt || dt == kFloat16 || dt == kBFloat16,
                    op << ": dtype " << DataTypeName(dt)
                       << " is not supported (expected float32, int32, float16 or bfloat16)");
}

Tensor Concat(OpId id, const std::vector<Tensor>& in, int axis) {
  const char* op = OpName(id);
  SINGA_CHECK_VALUE(!in.empty(), op << ": needs at least one tensor to concatenate");
  const Tensor& first = in[0];
  for (size_t k = 0; k < in.size(); ++k) CheckHasData(op, in[k], k == 0 ? "first" : "an input");
  CheckStorageType(op, first.data_type());
  const size_t nd = first.nDim();
  const size_t a = NormalizeAxis(axis, nd, op);
  Shape out_shape = first.shape();
  out_shape[a] = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const Tensor& t = in[k];
    SINGA_CHECK_DTYPE(t.data_type() == first.data_type(),
                      op << ": tensor " << k << " is " << t.data_type() << " but tensor 0 is "
                         << first.data_type());
    SINGA_CHECK_DEVICE(t.device() == first.device(),
                       op << ": tensor " << k << " lives on another device than tensor 0");
    SINGA_CHECK_SHAPE(t.nDim() == nd, op << ": tensor " << k << " has shape " << t.shape()
                                         << " but tensor 0 has shape " << first.shape()
                                         << " (ranks differ)");
    for (size_t d = 0; d < nd; ++d) {
      SINGA_CHECK_SHAPE(d == a || t.shape()[d] == first.shape()[d],
                        op << ": tensor " << k << " has shape " << t.shape()
                           << " but tensor 0 has shape " << first.shape()
                           << "; all dimensions except axis " << a << " must agree (dimension "
                           << d << " differs)");
    }
    out_shape[a] += t.shape()[a];
  }
  Tensor out(out_shape, first.device(), first.data_type());
  if (out.Size() == 0) return out;
  // Each input is written into a window of the output: same strides as the output, starting
  // at the input's offset along `axis`.
  std::vector<Tensor> srcs(in.begin(), in.end());
  std::vector<Block*> reads;
  for (const Tensor& t : srcs)  // each block once, even when a tensor is passed twice
    if (std::find(reads.begin(), reads.end(), t.block()) == reads.end()) reads.push_back(t.block());
  auto* k = ConcatKernel().For(*first.device());
  first.device()->Exec({.id = id, .reads = reads, .writes = {out.block()}},
                       [k, srcs, out, a](Context* ctx) { k(srcs, a, out, ctx); });
  return out;
}

Tensor Slice(OpId id, const Tensor& in, size_t start, size_t end, int axis) {
  const char* op = OpName(id);
  CheckHasData(op, in, "input");
  CheckStorageType(op, in.data_type());
  const size_t a = NormalizeAxis(axis, in.nDim(), op);
  const size_t dim = in.shape()[a];
  SINGA_CHECK_AXIS(start <= end && end <= dim,
                   op << ": range [" << start << ", " << end << ") is invalid for axis " << a
                      << " of shape " << in.shape() << " (expected start <= end <= " << dim
                      << ")");
  Shape out_shape = in.shape();
  out_shape[a] = end - start;
  Tensor out(out_shape, in.device(), in.data_type());
  if (out.Size() == 0) return out;
  const std::ptrdiff_t offset = static_cast<std::ptrdiff_t>(start) * in.stride()[a];
  auto* k = SliceKernel().For(*in.device());
  in.device()->Exec({.id = id, .reads = {in.block()}, .writes = {out.block()}},
                    [k, in, offset, out](Context* ctx) { k(in, offset, out, ctx); });
  return out;
}

void CheckRank(const char* op, const Tensor& t, size_t min_rank, size_t max_rank) {
  SINGA_CHECK_SHAPE(t.nDim() >= min_rank && t.nDim() <= max_rank,
                    op << ": expects a tensor of rank " << min_rank
                       << (max_rank == min_rank ? "" : " or more") << ", got shape " << t.shape());
}

}  // namespace

Tensor ConcatOn(const std::vector<Tensor>& in, int axis) {
  return Concat(OpId::kConcatOn, in, axis);
}

Tensor ConcatenateRows(const std::vector<Tensor>& in) {
  for (const Tensor& t : in) CheckRank("ConcatenateRows", t, 1, SIZE_MAX);
  return Concat(OpId::kConcatenateRows, in, 0);
}

Tensor ConcatenateColumns(const std::vector<Tensor>& in) {
  for (const Tensor& t : in) CheckRank("ConcatenateColumns", t, 2, 2);
  return Concat(OpId::kConcatenateColumns, in, 1);
}

Tensor SliceOn(const Tensor& in, size_t start, size_t end, int axis) {
  return Slice(OpId::kSliceOn, in, start, end, axis);
}
Tensor SliceRows(const Tensor& in, size_t start, size_t end) {
  CheckRank("SliceRows", in, 1, SIZE_MAX);
  return Slice(OpId::kSliceRows, in, start, end, 0);
}
Tensor SliceColumns(const Tensor& in, size_t start, size_t end) {
  CheckRank("SliceColumns", in, 2, 2);
  return Slice(OpId::kSliceColumns, in, start, end, 1);
}
Tensor CopyRows(const Tensor& in, size_t start, size_t end) {
  CheckRank("CopyRows", in, 1, SIZE_MAX);
  return Slice(OpId::kCopyRows, in, start, end, 0);
}
Tensor CopyColumns(const Tensor& in, size_t start, size_t end) {
  CheckRank("CopyColumns", in, 2, 2);
  return Slice(OpId::kCopyColumns, in, start, end, 1);
}

void CopyDataToFrom(Tensor* dst, const Tensor& src, size_t num, size_t dst_offset,
                    size_t src_offset) {
  const OpId id = OpId::kCopyDataToFrom;
  const char* op = OpName(id);
  SINGA_CHECK_VALUE(dst != nullptr, op << ": the destination is null");
  CheckHasData(op, *dst, "destination");
  CheckHasData(op, src, "source");
  SINGA_CHECK_DTYPE(dst->data_type() == src.data_type(),
                    op << ": destination is " << dst->data_type() << " but source is "
                       << src.data_type());
  SINGA_CHECK_SHAPE(src_offset <= src.Size() && num <= src.Size() - src_offset,
                    op << ": " << num << " elements from offset " << src_offset
                       << " exceed the source of shape " << src.shape() << " (" << src.Size()
                       << " elements)");
  SINGA_CHECK_SHAPE(dst_offset <= dst->Size() && num <= dst->Size() - dst_offset,
                    op << ": " << num << " elements at offset " << dst_offset
                       << " exceed the destination of shape " << dst->shape() << " ("
                       << dst->Size() << " elements)");
  SINGA_CHECK_SHAPE(dst->IsContiguous(), op << ": the destination (shape " << dst->shape()
                                             << ") is a non-contiguous view");
  if (num == 0) return;
  // Offsets are row-major element positions, so a strided source is made contiguous first.
  Tensor from = src.Contiguous();
  if (from.device() != dst->device()) from.ToDevice(dst->device());
  const size_t es = SizeOf(dst->data_type());
  if (!dst->device()->is_host()) {
    dst->device()->CopyDataToFrom(dst->block(), from.block(), num * es, kDeviceToDevice,
                                  dst_offset * es, src_offset * es);
    return;
  }
  // On the host, our own operation: it holds both tensors (Device::CopyDataToFrom records raw
  // Block pointers, and `from` may be a temporary copy that a replayed graph would outlive).
  const Tensor to = *dst;
  auto* k = CopyBytesKernel().For(*dst->device());
  dst->device()->Exec({.id = id, .reads = {from.block()}, .writes = {to.block()}},
                      [k, from, to, num, es, dst_offset, src_offset](Context* ctx) {
                        k(from, src_offset * es, to, dst_offset * es, num * es, ctx);
                      });
}

Tensor Tensor::Repeat(const std::vector<size_t>& repeats, int axis) const {
  const OpId id = OpId::kRepeat;
  const char* op = OpName(id);
  CheckHasData(op, *this, "input");
  CheckStorageType(op, dtype_);
  // axis == kNoAxis: numpy's axis=None, the flattened tensor. Other axes may be negative.
  const Tensor in = axis == kNoAxis ? singa::Reshape(Contiguous(), Shape{Size()})
                                    : Contiguous();
  const size_t a = axis == kNoAxis ? 0 : NormalizeAxis(axis, nDim(), op);
  const size_t dim = in.shape()[a];
  SINGA_CHECK_SHAPE(repeats.size() == 1 || repeats.size() == dim,
                    op << ": " << repeats.size() << " repeat counts given for axis " << a
                       << " of length " << dim << " (shape " << in.shape()
                       << "); expected 1 or " << dim);
  // Where each input index along the axis lands in the output, as a cumulative count.
  std::vector<size_t> reps(dim);
  size_t total = 0;
  for (size_t j = 0; j < dim; ++j) {
    reps[j] = repeats.size() == 1 ? repeats[0] : repeats[j];
    total += reps[j];
  }
  Shape out_shape = in.shape();
  out_shape[a] = total;
  Tensor out(out_shape, device_, dtype_);
  if (out.Size() == 0) return out;
  const size_t outer = Product(in.shape(), 0, a), inner = Product(in.shape(), a + 1);
  auto* k = RepeatKernel().For(*device_);
  device_->Exec({.id = id, .reads = {in.block()}, .writes = {out.block()}},
                [k, in, reps, outer, inner, out](Context* ctx) {
                  k(in, reps, outer, inner, out, ctx);
                });
  return out;
}

}  // namespace singa
