// singa/core/block.h: a chunk of device memory, allocated lazily on first access.
//
//   auto dev = singa::defaultDevice();
//   std::shared_ptr<singa::Block> b = dev->NewBlock(1024);   // no memory yet
//   float* p = static_cast<float*>(b->mutable_data());       // allocated now, from dev's pool
//
// Why lazy: with the graph on, operations are recorded long before they run; a block created while
// recording takes memory only when the first operation that touches it runs (and may give it back
// after its last reader: automatic recycling), so memory follows the execution, not the program.
//
// Ownership: tensors share a block through std::shared_ptr. Kernels never cache data pointers: they
// call data()/mutable_data() when they run, so a replayed graph may move a block's memory (to a
// recycled piece or a planned arena offset) between iterations.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "singa/core/common.h"
#include "singa/core/layout.h"

namespace singa {

class Device;

class Block {
 public:
  Block(Device* device, size_t size) : device_(device), size_(size) {}
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  /// Read access; allocates if the block has no memory yet (contents undefined, or zeros after
  /// ZeroOnFirstAlloc()).
  const void* data();
  /// Write access; allocates if needed and marks the block initialized.
  void* mutable_data();
  size_t size() const { return size_; }
  Device* device() const { return device_; }
  /// True once memory is attached.
  bool allocated() const { return ptr_ != nullptr; }
  /// True once something has been written.
  bool initialized() const { return initialized_; }

  /// Gives the memory back to the device's pool (recycling); the next access allocates again.
  void Release();
  /// Attaches memory owned by someone else (a planned arena); Release() then only detaches it.
  void SetExternal(void* ptr);

  /// The first allocation of this block's own memory fills it with zeros (Apache SINGA's CppCPU
  /// zeroes every Malloc, and code like `t = Tensor(shape); t += x` relies on it). Set only for
  /// tensors a user creates (the Python constructor), so operation outputs, which are written
  /// in full anyway, and planned arena memory (SetExternal) are never zeroed: a graph replay
  /// pays nothing. The request is spent by that first allocation.
  void ZeroOnFirstAlloc() { zero_on_alloc_ = true; }
  bool zero_on_alloc() const { return zero_on_alloc_; }

  /// The element type and shape of the tensor that created this block (set by Tensor), read by
  /// Device::SetCheckFinite's scan and its message. A raw block (NewBlock alone) has none.
  void set_layout(DataType dtype, Shape shape) {
    dtype_ = dtype;
    shape_ = std::move(shape);
    has_layout_ = true;
  }
  bool has_layout() const { return has_layout_; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }

  /// How this block's 4-d tensor is stored (singa/core/layout.h): plain unless a graph's build
  /// chose a blocked layout for it; kernels that accept one read this when they run.
  MemLayout mem_layout() const { return mem_layout_; }
  void set_mem_layout(MemLayout l) { mem_layout_ = l; }

  /// A name a user knows ("conv1.W", "input[0]") for drawings of the graph; empty by default.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  /// Python-side handles on this block (see cython/): a block that the user still holds is never
  /// recycled by the graph. C++ users who keep tensors across graph replays call these too.
  void AddExternalRef() { external_refs_.fetch_add(1, std::memory_order_relaxed); }
  void RemoveExternalRef() { external_refs_.fetch_sub(1, std::memory_order_relaxed); }
  int external_refs() const { return external_refs_.load(std::memory_order_relaxed); }

 private:
  void Allocate();

  Device* device_;
  size_t size_;
  void* ptr_ = nullptr;
  bool owned_ = false;
  bool initialized_ = false;
  bool zero_on_alloc_ = false;
  std::string name_;
  bool has_layout_ = false;
  DataType dtype_ = kFloat32;
  Shape shape_;
  MemLayout mem_layout_ = MemLayout::kPlain;
  std::atomic<int> external_refs_{0};
};

/// Gives each block that has no memory yet its memory now. Device::Exec and a graph's replay
/// call it on an operation's writes before its kernel runs: kernels split their work between
/// OpenMP threads, and a lazily allocated output first reached from several threads at once was
/// allocated once per thread, each thread writing its rows into its own copy (on the first
/// 16-core GPU machine a layer norm's dx kept 18 of its 300 rows).
inline void AllocateBlocks(const std::vector<Block*>& blocks) {
  for (Block* b : blocks)
    if (b != nullptr && !b->allocated()) b->mutable_data();
}

}  // namespace singa
