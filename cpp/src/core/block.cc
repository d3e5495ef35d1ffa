// Block: lazy allocation through the owning device's pool (see singa/core/block.h).
#include "singa/core/block.h"

#include "singa/core/device.h"

namespace singa {

Block::~Block() {
  if (owned_ && ptr_ != nullptr) device_->Free(ptr_);
}

void Block::Allocate() {
  ptr_ = device_->Malloc(size_);
  owned_ = true;
  if (zero_on_alloc_) {
    zero_on_alloc_ = false;
    device_->FillZero(ptr_, size_);
  }
}

const void* Block::data() {
  if (ptr_ == nullptr) Allocate();
  return ptr_;
}

void* Block::mutable_data() {
  if (ptr_ == nullptr) Allocate();
  initialized_ = true;
  return ptr_;
}

void Block::Release() {
  if (owned_ && ptr_ != nullptr) device_->Free(ptr_);
  ptr_ = nullptr;
  owned_ = false;
  initialized_ = false;
}

void Block::SetExternal(void* ptr) {
  if (owned_ && ptr_ != nullptr) device_->Free(ptr_);
  ptr_ = ptr;
  owned_ = false;
}

}  // namespace singa
