// dlpack_bridge.h: the C++ half of singa's DLPack exchange (cython/singa/_wrap_dlpack.pyx and the
// buffer protocol in _wrap_tensor.pyx are the Python half; cdlpack.pxd declares this file).
//
//   void* m = singa_dlpack::ExportTensor(t, /*versioned=*/true, kSingaDLCPU, 0, code, bits, 0);
//   // ... put m in a "dltensor_versioned" capsule; the consumer calls m->deleter once done
//   singa::Tensor v = singa_dlpack::ImportTensor(dev, ptr, shape, dtype, managed, versioned);
//   // v's block reads and writes the producer's memory; its last owner calls the deleter
//
// Lifetimes (the invariant of this file): an exported DLPack tensor holds a singa::Tensor, so its
// block and device live until the consumer calls the deleter, and counts as one external
// reference of the block, so that a graph built meanwhile treats the block as user-held (never
// recycled, never moved into the planned arena). An imported block is a view of the producer's
// memory (Block::SetExternal: singa never frees it) whose shared_ptr deleter hands the memory
// back through the producer's DLPack deleter when the last singa tensor, view or recorded
// operation using the block lets go. Neither deleter needs the GIL itself (a Python producer's
// deleter takes it, as DLPack requires of producers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/types.h>
#include <memory>
#include <vector>

#include "dlpack.h"
#include "singa/core/block.h"
#include "singa/core/tensor.h"

namespace singa_dlpack {

struct ExportCtx {
  singa::Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor legacy{};
  DLManagedTensorVersioned versioned{};

  explicit ExportCtx(const singa::Tensor& t) : tensor(t) {
    if (tensor.block() != nullptr) tensor.block()->AddExternalRef();
  }
  ~ExportCtx() {
    if (tensor.block() != nullptr) tensor.block()->RemoveExternalRef();
  }
};

inline void DeleteLegacy(DLManagedTensor* m) noexcept {
  delete static_cast<ExportCtx*>(m->manager_ctx);
}

inline void DeleteVersioned(DLManagedTensorVersioned* m) noexcept {
  delete static_cast<ExportCtx*>(m->manager_ctx);
}

/// A DLManagedTensor (versioned == false) or DLManagedTensorVersioned describing t's memory, with
/// t's shape and strides (elements). The caller has checked the device and dtype.
inline void* ExportTensor(const singa::Tensor& t, bool versioned, int32_t device_type,
                          int32_t device_id, uint8_t code, uint8_t bits, uint64_t flags) {
  // A consumer never dereferences an empty tensor's pointer, but some reject NULL.
  alignas(256) static char empty_data[256];
  auto ctx = std::make_unique<ExportCtx>(t);
  for (size_t d : t.shape()) ctx->shape.push_back(static_cast<int64_t>(d));
  for (auto s : t.stride()) ctx->strides.push_back(static_cast<int64_t>(s));
  DLTensor dl{};
  dl.data = t.Size() == 0 || t.block() == nullptr ? empty_data : t.block()->mutable_data();
  dl.device.device_type = device_type;
  dl.device.device_id = device_id;
  dl.ndim = static_cast<int32_t>(t.nDim());
  dl.dtype.code = code;
  dl.dtype.bits = bits;
  dl.dtype.lanes = 1;
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  ExportCtx* raw = ctx.release();
  if (versioned) {
    raw->versioned.version.major = 1;
    raw->versioned.version.minor = 0;
    raw->versioned.manager_ctx = raw;
    raw->versioned.deleter = DeleteVersioned;
    raw->versioned.flags = flags;
    raw->versioned.dl_tensor = dl;
    return &raw->versioned;
  }
  raw->legacy.dl_tensor = dl;
  raw->legacy.manager_ctx = raw;
  raw->legacy.deleter = DeleteLegacy;
  return &raw->legacy;
}

/// What a buffer-protocol view of a host tensor holds until it is released (Tensor.__getbuffer__):
/// the tensor, so its block lives and counts as user-held as for a DLPack export, and the shape
/// and byte strides the Py_buffer points at.
struct BufferCtx {
  explicit BufferCtx(const singa::Tensor& t) : hold(t) {
    const auto esize = static_cast<ssize_t>(singa::SizeOf(t.data_type()));
    for (size_t d : t.shape()) shape.push_back(static_cast<ssize_t>(d));
    for (auto s : t.stride()) strides.push_back(static_cast<ssize_t>(s) * esize);
  }
  ExportCtx hold;
  std::vector<ssize_t> shape, strides;
};
inline BufferCtx* NewBufferCtx(const singa::Tensor& t) { return new BufferCtx(t); }
inline void DeleteBufferCtx(void* ctx) { delete static_cast<BufferCtx*>(ctx); }

/// A host tensor's first element (a valid, never dereferenced address when it is empty).
inline void* HostData(const singa::Tensor& t) {
  alignas(256) static char empty_data[256];
  return t.Size() == 0 || t.block() == nullptr ? empty_data : t.block()->mutable_data();
}

/// The CUDA stream every operation of `device` is enqueued on, as the integer a consumer passes
/// to a producer's __dlpack__(stream=...) (null on the host).
inline uintptr_t DeviceStream(singa::Device* device) {
  return reinterpret_cast<uintptr_t>(device->context()->stream);
}

/// Deletes a Block, then hands its memory back to the producer (once armed: a shared_ptr whose
/// construction fails deletes the block without touching the producer's tensor).
struct GiveBack {
  void* managed = nullptr;
  bool versioned = false;
  bool armed = false;
  void operator()(singa::Block* b) const noexcept {
    delete b;
    if (!armed) return;
    if (versioned) {
      auto* m = static_cast<DLManagedTensorVersioned*>(managed);
      if (m->deleter != nullptr) m->deleter(m);
    } else {
      auto* m = static_cast<DLManagedTensor*>(managed);
      if (m->deleter != nullptr) m->deleter(m);
    }
  }
};

/// A contiguous tensor of `shape` and `dtype` on `device` over the producer's memory at `data`.
/// From the return on, singa owns `managed` (the DLPack tensor) and calls its deleter once.
inline singa::Tensor ImportTensor(std::shared_ptr<singa::Device> device, void* data,
                                  const singa::Shape& shape, singa::DataType dtype, void* managed,
                                  bool versioned) {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  std::shared_ptr<singa::Block> block(new singa::Block(device.get(), n * singa::SizeOf(dtype)),
                                      GiveBack{managed, versioned, false});
  block->SetExternal(data);
  block->mutable_data();  // marks it initialized: the producer's values are the contents
  block->set_layout(dtype, shape);
  singa::Strides strides(shape.size());
  std::ptrdiff_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= static_cast<std::ptrdiff_t>(shape[i]);
  }
  singa::Tensor t(block, shape, strides, device, dtype);
  std::get_deleter<GiveBack>(block)->armed = true;
  return t;
}

}  // namespace singa_dlpack
