// CnMem-style memory pool: our own implementation of the design described in pool.h.
#include "singa/memory/pool.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "singa/core/error.h"

namespace singa {

namespace {

constexpr size_t kHostAlignment = 64;

bool IsPowerOfTwo(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Rounds up to a multiple of `alignment` (a power of two). Returns false on overflow so that an
// absurd request becomes an OutOfMemoryError instead of a tiny wrapped-around allocation.
bool RoundUp(size_t bytes, size_t alignment, size_t* out) {
  if (bytes > SIZE_MAX - (alignment - 1)) return false;
  *out = (bytes + alignment - 1) & ~(alignment - 1);
  return true;
}

}  // namespace

// HostAllocator

void* HostAllocator::Allocate(size_t bytes) noexcept {
  size_t rounded = 0;
  // aligned_alloc wants a size that is a multiple of the alignment; 0 would be
  // implementation-defined, so ask for one cache line instead.
  if (!RoundUp(std::max<size_t>(bytes, 1), kHostAlignment, &rounded)) return nullptr;
  return std::aligned_alloc(kHostAlignment, rounded);
}

void HostAllocator::Deallocate(void* ptr, size_t /*bytes*/) noexcept { std::free(ptr); }

// CnMemPool

// A contiguous range of one chunk, either handed out (free == false) or available.
struct CnMemPool::Piece {
  Chunk* chunk;
  size_t offset;
  size_t size;
  bool free;
  Piece* prev;  // address-ordered neighbours inside the same chunk
  Piece* next;
  char* ptr() const;
};

// One block obtained from the allocator; owns the linked list of pieces tiling it.
struct CnMemPool::Chunk {
  char* base;
  size_t size;
  Piece* head;
  Chunk(char* b, size_t s)
      : base(b), size(s), head(new Piece{this, 0, s, true, nullptr, nullptr}) {}
  ~Chunk() {
    while (head != nullptr) {
      Piece* next = head->next;
      delete head;
      head = next;
    }
  }
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;
  bool WhollyFree() const { return head->free && head->next == nullptr; }
};

char* CnMemPool::Piece::ptr() const { return chunk->base + offset; }

CnMemPool::CnMemPool(std::unique_ptr<Allocator> allocator, PoolOptions options)
    : allocator_(std::move(allocator)), options_(options) {
  SINGA_CHECK_VALUE(allocator_ != nullptr, "CnMemPool: allocator is null");
  SINGA_CHECK_VALUE(IsPowerOfTwo(options_.alignment),
                    "CnMemPool: alignment must be a power of two, got " << options_.alignment);
}

CnMemPool::~CnMemPool() {
  // No lock: destroying a pool that another thread still uses is a bug of the caller anyway, and
  // the destructor must not throw. Pieces still handed out are reclaimed with their chunk.
  for (auto& chunk : chunks_) allocator_->Deallocate(chunk->base, chunk->size);
}

CnMemPool::Piece* CnMemPool::FindBestFit(size_t bytes) {
  // The set is ordered by (size, pointer): the first entry not smaller than (bytes, nullptr) is
  // the smallest free piece that fits.
  auto it = free_by_size_.lower_bound({bytes, nullptr});
  return it == free_by_size_.end() ? nullptr : it->second;
}

bool CnMemPool::Grow(size_t bytes) {
  size_t size = 0;
  if (!RoundUp(std::max(options_.chunk_bytes, bytes), options_.alignment, &size)) return false;
  if (options_.max_reserved != 0) {
    if (bytes > options_.max_reserved - stats_.reserved) return false;
    // Shrink the chunk to what the limit still allows rather than refusing a request that fits.
    size_t room = (options_.max_reserved - stats_.reserved) & ~(options_.alignment - 1);
    size = std::min(size, room);  // still >= bytes: bytes is aligned and fits under the limit
  }
  chunks_.reserve(chunks_.size() + 1);  // so that push_back cannot throw once memory is held
  char* base = static_cast<char*>(allocator_->Allocate(size));
  if (base == nullptr) return false;
  try {
    auto chunk = std::make_unique<Chunk>(base, size);
    free_by_size_.insert({size, chunk->head});
    chunks_.push_back(std::move(chunk));
  } catch (...) {  // bad_alloc of the bookkeeping: do not leak the chunk itself
    allocator_->Deallocate(base, size);
    throw;
  }
  stats_.reserved += size;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  stats_.num_chunks = chunks_.size();
  return true;
}

void* CnMemPool::Take(Piece* piece, size_t bytes) {
  free_by_size_.erase({piece->size, piece});
  // Sizes are multiples of the alignment, so any remainder is worth keeping as its own piece.
  if (piece->size - bytes >= options_.alignment) {
    Piece* rest = new Piece{piece->chunk, piece->offset + bytes, piece->size - bytes,
                            true,         piece,                 piece->next};
    if (piece->next != nullptr) piece->next->prev = rest;
    piece->next = rest;
    piece->size = bytes;
    free_by_size_.insert({rest->size, rest});
  }
  piece->free = false;
  void* ptr = piece->ptr();
  used_[ptr] = piece;
  stats_.in_use += piece->size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  stats_.num_mallocs++;
  return ptr;
}

void* CnMemPool::Malloc(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t rounded = 0;
  // Malloc(0) takes a real piece so that the pointer is unique and can be freed like any other.
  bool ok = RoundUp(bytes == 0 ? options_.alignment : bytes, options_.alignment, &rounded);
  Piece* piece = ok ? FindBestFit(rounded) : nullptr;
  if (ok && piece == nullptr) {
    // Wholly free chunks may be too small for this request but still count against the allocator
    // or max_reserved: give them back and try once more.
    if (!Grow(rounded)) {
      ReleaseCacheLocked();
      ok = Grow(rounded);
    }
    if (ok) piece = FindBestFit(rounded);
  }
  if (piece == nullptr) {
    std::string limit = options_.max_reserved ? std::to_string(options_.max_reserved) : "none";
    SINGA_THROW(OutOfMemoryError, "CnMemPool: out of memory allocating "
                                      << bytes << " bytes (in use " << stats_.in_use
                                      << " bytes, reserved " << stats_.reserved
                                      << " bytes, limit " << limit << ")");
  }
  return Take(piece, rounded);
}

void CnMemPool::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = used_.find(ptr);
  SINGA_CHECK_VALUE(it != used_.end(),
                    "CnMemPool: Free of pointer " << ptr << " that this pool did not hand out"
                                                  << " (or that was already freed)");
  Piece* piece = it->second;
  used_.erase(it);
  stats_.in_use -= piece->size;
  piece->free = true;
  // Merge with free neighbours so that no two adjacent pieces are both free.
  if (Piece* next = piece->next; next != nullptr && next->free) {
    free_by_size_.erase({next->size, next});
    piece->size += next->size;
    piece->next = next->next;
    if (next->next != nullptr) next->next->prev = piece;
    delete next;
  }
  if (Piece* prev = piece->prev; prev != nullptr && prev->free) {
    free_by_size_.erase({prev->size, prev});
    prev->size += piece->size;
    prev->next = piece->next;
    if (piece->next != nullptr) piece->next->prev = prev;
    delete piece;
    piece = prev;
  }
  free_by_size_.insert({piece->size, piece});
}

PoolStats CnMemPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CnMemPool::ReleaseCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  ReleaseCacheLocked();
}

void CnMemPool::ReleaseCacheLocked() {
  std::vector<std::unique_ptr<Chunk>> kept;
  kept.reserve(chunks_.size());  // the only step that may throw comes before any change
  for (auto& chunk : chunks_) {
    if (chunk->WhollyFree()) {
      free_by_size_.erase({chunk->size, chunk->head});
      allocator_->Deallocate(chunk->base, chunk->size);
      stats_.reserved -= chunk->size;
    } else {
      kept.push_back(std::move(chunk));
    }
  }
  chunks_.swap(kept);  // the released chunks (and their single piece) die with `kept`
  stats_.num_chunks = chunks_.size();
}

void CnMemPool::ResetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
  stats_.peak_reserved = stats_.reserved;
}

// Every violation is a bug of the pool itself, hence plain singa::Error.
#define POOL_INVARIANT(cond, msg) SINGA_CHECK(cond, Error, "CnMemPool invariant: " << msg)

void CnMemPool::CheckInvariants() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t reserved = 0, in_use = 0, num_free = 0, num_used = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const Chunk& chunk = *chunks_[c];
    POOL_INVARIANT(chunk.head != nullptr && chunk.head->prev == nullptr, "chunk " << c << " head");
    size_t offset = 0;
    for (const Piece* p = chunk.head; p != nullptr; p = p->next) {
      POOL_INVARIANT(p->chunk == &chunk && p->offset == offset,
                     "chunk " << c << " has a gap or overlap at offset " << offset);
      POOL_INVARIANT(p->size > 0 && p->size % options_.alignment == 0,
                     "piece at offset " << p->offset << " has bad size " << p->size);
      POOL_INVARIANT(p->next == nullptr || p->next->prev == p, "bad link at " << p->offset);
      bool indexed = free_by_size_.count({p->size, const_cast<Piece*>(p)}) != 0;
      if (p->free) {
        POOL_INVARIANT(p->next == nullptr || !p->next->free,
                       "adjacent free pieces at offset " << p->offset << " not merged");
        POOL_INVARIANT(indexed, "free piece at offset " << p->offset << " not indexed");
        ++num_free;
      } else {
        auto it = used_.find(p->ptr());
        POOL_INVARIANT(!indexed && it != used_.end() && it->second == p,
                       "used piece at offset " << p->offset << " badly indexed");
        in_use += p->size;
        ++num_used;
      }
      offset += p->size;
    }
    POOL_INVARIANT(offset == chunk.size, "pieces of chunk " << c << " cover " << offset << " of "
                                                            << chunk.size << " bytes");
    reserved += chunk.size;
  }
  POOL_INVARIANT(num_free == free_by_size_.size() && num_used == used_.size(),
                 "the indexes hold pieces that are in no chunk");
  POOL_INVARIANT(in_use == stats_.in_use,
                 "stats in_use " << stats_.in_use << " but pieces sum to " << in_use);
  POOL_INVARIANT(reserved == stats_.reserved && chunks_.size() == stats_.num_chunks,
                 "stats reserved " << stats_.reserved << " in " << stats_.num_chunks
                                   << " chunks, but chunks hold " << reserved << " in "
                                   << chunks_.size());
}

#undef POOL_INVARIANT

// PlainPool

PlainPool::PlainPool(std::unique_ptr<Allocator> allocator, size_t alignment)
    : allocator_(std::move(allocator)), alignment_(alignment) {
  SINGA_CHECK_VALUE(allocator_ != nullptr, "PlainPool: allocator is null");
  SINGA_CHECK_VALUE(IsPowerOfTwo(alignment_),
                    "PlainPool: alignment must be a power of two, got " << alignment_);
}

PlainPool::~PlainPool() {
  for (auto& entry : sizes_) allocator_->Deallocate(entry.first, entry.second);
}

void* PlainPool::Malloc(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t rounded = 0;
  void* ptr = nullptr;
  if (RoundUp(bytes == 0 ? alignment_ : bytes, alignment_, &rounded)) {
    ptr = allocator_->Allocate(rounded);
  }
  if (ptr == nullptr) {
    SINGA_THROW(OutOfMemoryError, "PlainPool: out of memory allocating "
                                      << bytes << " bytes (in use " << stats_.in_use
                                      << " bytes, reserved " << stats_.reserved << " bytes)");
  }
  sizes_[ptr] = rounded;
  // Every allocation is its own chunk: in_use and reserved move together.
  stats_.in_use += rounded;
  stats_.reserved += rounded;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  stats_.num_mallocs++;
  stats_.num_chunks = sizes_.size();
  return ptr;
}

void PlainPool::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sizes_.find(ptr);
  SINGA_CHECK_VALUE(it != sizes_.end(),
                    "PlainPool: Free of pointer " << ptr << " that this pool did not hand out");
  allocator_->Deallocate(ptr, it->second);
  stats_.in_use -= it->second;
  stats_.reserved -= it->second;
  sizes_.erase(it);
  stats_.num_chunks = sizes_.size();
}

PoolStats PlainPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void PlainPool::ResetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
  stats_.peak_reserved = stats_.reserved;
}

}  // namespace singa
