// singa/memory/pool.h: a CnMem-style memory pool (our own implementation of CnMem's design).
//
//   singa::CnMemPool pool(std::make_unique<singa::HostAllocator>(), singa::PoolOptions{});
//   void* p = pool.Malloc(1000);          // best-fit piece of a large chunk
//   pool.Free(p);                         // merged back with its free neighbours
//   singa::PoolStats s = pool.stats();    // in_use, peak_in_use, reserved ...
//   pool.ReleaseCache();                  // give wholly free chunks back to the allocator
//
// Design (why): asking the system (malloc / cudaMalloc) for every tensor is slow on the GPU and
// fragments the heap on the CPU. The pool reserves large chunks from an Allocator, cuts best-fit
// pieces out of them, splits a piece when the rest is worth keeping and merges a freed piece with
// free neighbours of the same chunk. Sizes are rounded up to `alignment`. When the allocator fails
// the pool releases its wholly free chunks and retries once, then throws OutOfMemoryError naming
// the requested size, the bytes in use and the bytes reserved.
//
// Invariants (tested in tests/cpp/test_pool.cc with a fake fixed-capacity allocator):
//   - pieces of one chunk tile it exactly, in address order, with no gap and no overlap;
//   - no two adjacent pieces of a chunk are both free (they are merged on Free);
//   - stats().in_use is the sum of the rounded sizes of the pieces handed out and not yet freed.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace singa {

/// Where a pool gets its chunks. Must not throw: returns nullptr when memory is exhausted.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* Allocate(size_t bytes) noexcept = 0;
  virtual void Deallocate(void* ptr, size_t bytes) noexcept = 0;
};

/// Host memory from the C library, aligned to 64 bytes (a cache line, and enough for AVX-512).
class HostAllocator : public Allocator {
 public:
  void* Allocate(size_t bytes) noexcept override;
  void Deallocate(void* ptr, size_t bytes) noexcept override;
};

struct PoolStats {
  size_t in_use = 0;         ///< bytes handed out and not yet freed (rounded sizes)
  size_t peak_in_use = 0;    ///< the largest in_use seen since construction or ResetPeak()
  size_t reserved = 0;       ///< bytes currently held from the allocator
  size_t peak_reserved = 0;  ///< the largest reserved seen
  size_t num_mallocs = 0;    ///< Malloc calls served
  size_t num_chunks = 0;     ///< chunks currently held
};

struct PoolOptions {
  size_t chunk_bytes = size_t(32) << 20;  ///< the smallest chunk asked of the allocator
  size_t alignment = 64;                  ///< every size is rounded up to a multiple of this
  size_t max_reserved = 0;                ///< 0: no limit; else never reserve more than this
};

/// A memory pool: the interface devices allocate block memory through.
class MemPool {
 public:
  virtual ~MemPool() = default;
  /// Never returns nullptr: throws OutOfMemoryError. Malloc(0) returns a valid unique pointer.
  virtual void* Malloc(size_t bytes) = 0;
  /// Free(nullptr) is a no-op; freeing a pointer this pool did not hand out throws ValueError.
  virtual void Free(void* ptr) = 0;
  virtual PoolStats stats() const = 0;
  /// Returns wholly free chunks to the allocator.
  virtual void ReleaseCache() = 0;
  virtual void ResetPeak() = 0;
};

/// The CnMem-style pool described at the top of this file. Thread-safe.
class CnMemPool : public MemPool {
 public:
  CnMemPool(std::unique_ptr<Allocator> allocator, PoolOptions options = {});
  ~CnMemPool() override;
  CnMemPool(const CnMemPool&) = delete;
  CnMemPool& operator=(const CnMemPool&) = delete;

  void* Malloc(size_t bytes) override;
  void Free(void* ptr) override;
  PoolStats stats() const override;
  void ReleaseCache() override;
  void ResetPeak() override;

  /// For tests: checks the invariants above; throws singa::Error describing the first violation.
  void CheckInvariants() const;

 private:
  struct Piece;
  struct Chunk;
  // Implementation detail, see pool.cc.
  Piece* FindBestFit(size_t bytes);
  bool Grow(size_t bytes);
  void* Take(Piece* piece, size_t bytes);
  void ReleaseCacheLocked();  // ReleaseCache() body; the caller holds mutex_

  std::unique_ptr<Allocator> allocator_;
  PoolOptions options_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::set<std::pair<size_t, Piece*>> free_by_size_;  // best fit: lower_bound on (size, nullptr)
  std::unordered_map<void*, Piece*> used_;             // pointer handed out -> its piece
  PoolStats stats_;
};

/// No pooling: every Malloc goes to the allocator. Same stats, used as the off switch to compare.
class PlainPool : public MemPool {
 public:
  explicit PlainPool(std::unique_ptr<Allocator> allocator, size_t alignment = 64);
  ~PlainPool() override;
  void* Malloc(size_t bytes) override;
  void Free(void* ptr) override;
  PoolStats stats() const override;
  void ReleaseCache() override {}
  void ResetPeak() override;

 private:
  std::unique_ptr<Allocator> allocator_;
  size_t alignment_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;
  PoolStats stats_;
};

}  // namespace singa
