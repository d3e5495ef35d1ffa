// Tests of singa/memory/pool.h: CnMemPool against a fake fixed-capacity allocator, and PlainPool.
#include "singa/memory/pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "singa/core/error.h"

namespace {

using singa::CnMemPool;
using singa::PoolOptions;

// What the fake allocator saw. Shared so that tests can still read it after the pool (which owns
// the allocator) is destroyed.
struct FakeState {
  size_t capacity = 0;
  size_t outstanding = 0;  // bytes handed to the pool and not yet returned
  size_t allocations = 0;
  size_t refusals = 0;
  bool bad_deallocate = false;  // a Deallocate with an unknown pointer or a different size
  std::map<void*, size_t> live;
};

// Refuses (returns nullptr) once `capacity` bytes are out, like a device with fixed memory. The
// memory itself comes from the C library, 4096-aligned so that any pool alignment up to a page
// is honoured by the chunk base.
class FakeAllocator : public singa::Allocator {
 public:
  explicit FakeAllocator(std::shared_ptr<FakeState> state) : state_(std::move(state)) {}
  void* Allocate(size_t bytes) noexcept override {
    if (bytes > state_->capacity - state_->outstanding) {
      state_->refusals++;
      return nullptr;
    }
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (p == nullptr) return nullptr;
    state_->outstanding += bytes;
    state_->allocations++;
    state_->live[p] = bytes;
    return p;
  }
  void Deallocate(void* ptr, size_t bytes) noexcept override {
    auto it = state_->live.find(ptr);
    if (it == state_->live.end() || it->second != bytes) {
      state_->bad_deallocate = true;
      return;
    }
    state_->outstanding -= bytes;
    state_->live.erase(it);
    std::free(ptr);
  }

 private:
  std::shared_ptr<FakeState> state_;
};

PoolOptions Options(size_t chunk_bytes, size_t alignment = 64, size_t max_reserved = 0) {
  PoolOptions o;
  o.chunk_bytes = chunk_bytes;
  o.alignment = alignment;
  o.max_reserved = max_reserved;
  return o;
}

std::unique_ptr<CnMemPool> MakePool(std::shared_ptr<FakeState>* state, size_t capacity,
                                    PoolOptions options) {
  *state = std::make_shared<FakeState>();
  (*state)->capacity = capacity;
  return std::make_unique<CnMemPool>(std::make_unique<FakeAllocator>(*state), options);
}

char* C(void* p) { return static_cast<char*>(p); }

TEST(HostAllocatorTest, AlignedAndWritable) {
  singa::HostAllocator alloc;
  for (size_t bytes : {0, 1, 63, 64, 65, 1000, 1 << 20}) {
    void* p = alloc.Allocate(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xAB, bytes);
    alloc.Deallocate(p, bytes);
  }
  EXPECT_EQ(alloc.Allocate(SIZE_MAX), nullptr);  // overflow must fail softly, not throw
}

TEST(CnMemPoolTest, RejectsBadOptions) {
  EXPECT_THROW(CnMemPool(std::make_unique<singa::HostAllocator>(), Options(1024, 0)),
               singa::ValueError);
  EXPECT_THROW(CnMemPool(std::make_unique<singa::HostAllocator>(), Options(1024, 48)),
               singa::ValueError);
  EXPECT_THROW(CnMemPool(nullptr, Options(1024)), singa::ValueError);
}

TEST(CnMemPoolTest, RoundsSizesAndAlignsPointers) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 1 << 20, Options(4096, 128));
  void* a = pool->Malloc(1);
  void* b = pool->Malloc(129);
  void* c = pool->Malloc(128);
  for (void* p : {a, b, c}) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 128, 0u);
  // Pieces are cut in address order from one chunk, each rounded up to 128.
  EXPECT_EQ(C(b) - C(a), 128);
  EXPECT_EQ(C(c) - C(b), 256);
  EXPECT_EQ(pool->stats().in_use, 128u + 256u + 128u);
  pool->CheckInvariants();
}

TEST(CnMemPoolTest, ZeroByteMallocIsUniqueAndValid) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 1 << 20, Options(4096));
  void* a = pool->Malloc(0);
  void* b = pool->Malloc(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool->stats().in_use, 128u);  // each counts as one alignment unit
  pool->Free(a);
  pool->Free(b);
  EXPECT_EQ(pool->stats().in_use, 0u);
}

TEST(CnMemPoolTest, BestFitPicksSmallestFreePiece) {
  constexpr size_t U = 64;
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 1 << 20, Options(16 * U));
  // Layout of the one chunk: [a:4][s1:1][b:2][s2:1][free tail:8]
  void* a = pool->Malloc(4 * U);
  void* s1 = pool->Malloc(1 * U);
  void* b = pool->Malloc(2 * U);
  void* s2 = pool->Malloc(1 * U);
  pool->Free(a);
  pool->Free(b);
  pool->CheckInvariants();
  // Free pieces now have 4, 2 and 8 units: best fit is the exact hole, then the 4-unit one.
  EXPECT_EQ(pool->Malloc(2 * U), b);
  void* d = pool->Malloc(3 * U);
  EXPECT_EQ(d, a);
  EXPECT_EQ(pool->Malloc(1 * U), C(a) + 3 * U);  // the remainder split off the 4-unit piece
  EXPECT_EQ(pool->stats().num_chunks, 1u);
  pool->CheckInvariants();
  (void)s1;
  (void)s2;
}

TEST(CnMemPoolTest, SplitAndMergeRestoreOneFreePiece) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 1 << 20, Options(4096));
  void* a = pool->Malloc(1024);
  void* b = pool->Malloc(1024);
  void* c = pool->Malloc(1024);
  pool->CheckInvariants();
  pool->Free(b);  // middle first: its neighbours are used, nothing to merge
  pool->CheckInvariants();
  pool->Free(a);  // merges with b's hole
  pool->CheckInvariants();
  pool->Free(c);  // merges with both sides and the free tail: one piece again
  pool->CheckInvariants();
  // The whole chunk is one free piece: a chunk-sized request fits it without growing.
  void* whole = pool->Malloc(4096);
  EXPECT_EQ(whole, a);
  EXPECT_EQ(pool->stats().num_chunks, 1u);
  EXPECT_EQ(st->allocations, 1u);
  pool->Free(whole);
  pool->ReleaseCache();
  EXPECT_EQ(pool->stats().num_chunks, 0u);
  EXPECT_EQ(pool->stats().reserved, 0u);
  EXPECT_EQ(st->outstanding, 0u);
  pool->CheckInvariants();
}

TEST(CnMemPoolTest, StatsTrackUseAndPeaks) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 1 << 20, Options(4096));
  EXPECT_EQ(pool->stats().reserved, 0u);  // chunks are reserved lazily
  void* a = pool->Malloc(100);            // 128
  void* b = pool->Malloc(1000);           // 1024
  singa::PoolStats s = pool->stats();
  EXPECT_EQ(s.in_use, 128u + 1024u);
  EXPECT_EQ(s.peak_in_use, 128u + 1024u);
  EXPECT_EQ(s.reserved, 4096u);
  EXPECT_EQ(s.peak_reserved, 4096u);
  EXPECT_EQ(s.num_chunks, 1u);
  EXPECT_EQ(s.num_mallocs, 2u);
  pool->Free(b);
  s = pool->stats();
  EXPECT_EQ(s.in_use, 128u);
  EXPECT_EQ(s.peak_in_use, 128u + 1024u);
  pool->ResetPeak();
  EXPECT_EQ(pool->stats().peak_in_use, 128u);
  pool->Free(a);
  pool->ReleaseCache();
  s = pool->stats();
  EXPECT_EQ(s.reserved, 0u);
  EXPECT_EQ(s.num_chunks, 0u);
  EXPECT_EQ(s.num_mallocs, 2u);
}

TEST(CnMemPoolTest, GrowsWithRequestLargerThanChunk) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 1 << 20, Options(1024));
  void* big = pool->Malloc(5000);  // rounded to 5056: one chunk of exactly that size
  EXPECT_EQ(pool->stats().reserved, 5056u);
  void* small = pool->Malloc(100);  // the big chunk has no room left: a normal chunk is added
  EXPECT_EQ(pool->stats().num_chunks, 2u);
  EXPECT_EQ(pool->stats().reserved, 5056u + 1024u);
  std::memset(big, 1, 5000);
  std::memset(small, 2, 100);
  pool->CheckInvariants();
}

TEST(CnMemPoolTest, OomReleasesCacheAndRetries) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 3000, Options(1024));
  void* a = pool->Malloc(1024);
  void* b = pool->Malloc(1024);
  pool->Free(a);  // its chunk is wholly free but too small for the next request
  // 2048 reserved + 1536 exceeds the capacity; releasing a's chunk makes room.
  void* c = pool->Malloc(1500);
  EXPECT_NE(c, nullptr);
  EXPECT_EQ(st->refusals, 1u);
  EXPECT_EQ(pool->stats().num_chunks, 2u);
  EXPECT_EQ(pool->stats().reserved, 1024u + 1536u);
  pool->CheckInvariants();
  pool->Free(b);
  pool->Free(c);
}

TEST(CnMemPoolTest, OomThrowsWithRequestedSize) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 2048, Options(1024));
  void* a = pool->Malloc(1024);
  void* b = pool->Malloc(1024);
  try {
    pool->Malloc(777);
    FAIL() << "expected OutOfMemoryError";
  } catch (const singa::OutOfMemoryError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("777"), std::string::npos) << msg;
    EXPECT_NE(msg.find("in use 2048"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reserved 2048"), std::string::npos) << msg;
  }
  pool->CheckInvariants();
  pool->Free(a);  // the pool stays usable after a failure
  void* c = pool->Malloc(777);
  EXPECT_EQ(c, a);
  pool->Free(b);
  pool->Free(c);
  EXPECT_THROW(pool->Malloc(SIZE_MAX), singa::OutOfMemoryError);  // no overflow on rounding
}

TEST(CnMemPoolTest, MaxReservedIsALimit) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 1 << 20, Options(4096, 64, 6000));
  void* a = pool->Malloc(4096);
  // Only 1904 bytes of the limit remain: the second chunk shrinks to fit instead of failing.
  void* b = pool->Malloc(1000);
  EXPECT_LE(pool->stats().reserved, 6000u);
  try {
    pool->Malloc(5000);
    FAIL() << "expected OutOfMemoryError";
  } catch (const singa::OutOfMemoryError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("5000"), std::string::npos) << msg;
    EXPECT_NE(msg.find("limit 6000"), std::string::npos) << msg;
  }
  pool->Free(a);
  pool->Free(b);
  pool->CheckInvariants();
}

TEST(CnMemPoolTest, FreeNullptrIsNoOp) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 1 << 20, Options(4096));
  EXPECT_NO_THROW(pool->Free(nullptr));
  EXPECT_EQ(pool->stats().num_chunks, 0u);
}

TEST(CnMemPoolTest, FreeBadPointerThrowsValueError) {
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 1 << 20, Options(4096));
  int on_stack = 0;
  EXPECT_THROW(pool->Free(&on_stack), singa::ValueError);
  void* p = pool->Malloc(256);
  EXPECT_THROW(pool->Free(C(p) + 64), singa::ValueError);  // interior pointer
  pool->Free(p);
  EXPECT_THROW(pool->Free(p), singa::ValueError);  // double free
  pool->CheckInvariants();
}

TEST(CnMemPoolTest, DestructorReturnsEveryChunk) {
  std::shared_ptr<FakeState> st;
  {
    auto pool = MakePool(&st, 1 << 20, Options(1024));
    pool->Malloc(100);
    pool->Malloc(3000);  // left allocated on purpose
    EXPECT_EQ(st->live.size(), 2u);
  }
  EXPECT_EQ(st->outstanding, 0u);
  EXPECT_TRUE(st->live.empty());
  EXPECT_FALSE(st->bad_deallocate);
}

// Random malloc/free against a small fake device. After every step the pool's invariants must
// hold, and the new piece must not overlap a live one; each live allocation carries its own byte
// pattern, checked when it is freed and in periodic sweeps, so any overwrite is caught.
class CnMemPoolRandomTest : public ::testing::TestWithParam<size_t> {};

TEST_P(CnMemPoolRandomTest, InvariantsAndDataSurvive) {
  const size_t align = GetParam();
  std::shared_ptr<FakeState> st;
  auto pool = MakePool(&st, 512 << 10, Options(16384, align));
  struct Live {
    size_t bytes, rounded;
    unsigned char pattern;
  };
  std::map<char*, Live> live;  // ordered by address to look for overlaps
  std::mt19937 rng(12345);     // raw draws (no distributions): same sequence on every platform
  size_t expected_in_use = 0, ooms = 0, serial = 0;
  auto intact = [](char* p, const Live& l) {
    for (size_t i = 0; i < l.bytes; ++i)
      if (static_cast<unsigned char>(p[i]) != l.pattern) return false;
    return true;
  };
  for (int step = 0; step < 5000; ++step) {
    bool do_malloc = live.empty() || (live.size() < 200 && rng() % 100 < 55);
    if (do_malloc) {
      uint32_t kind = rng() % 100;
      size_t bytes = kind < 5 ? 0 : kind < 85 ? rng() % 2000 : 2000 + rng() % 30000;
      char* p = nullptr;
      try {
        p = C(pool->Malloc(bytes));
      } catch (const singa::OutOfMemoryError& e) {
        ++ooms;
        EXPECT_NE(std::string(e.what()).find(std::to_string(bytes)), std::string::npos);
      }
      if (p != nullptr) {
        ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
        size_t rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
        auto next = live.lower_bound(p);
        ASSERT_TRUE(next == live.end() || p + rounded <= next->first) << "overlaps next piece";
        if (next != live.begin()) {
          auto prev = std::prev(next);
          ASSERT_LE(prev->first + prev->second.rounded, p) << "overlaps previous piece";
        }
        Live l{bytes, rounded, static_cast<unsigned char>(++serial * 37 + 11)};
        std::memset(p, l.pattern, bytes);
        live[p] = l;
        expected_in_use += rounded;
      }
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(intact(it->first, it->second)) << "allocation overwritten at step " << step;
      pool->Free(it->first);
      expected_in_use -= it->second.rounded;
      live.erase(it);
    }
    if (rng() % 100 == 0) pool->ReleaseCache();
    ASSERT_NO_THROW(pool->CheckInvariants()) << "step " << step;
    singa::PoolStats s = pool->stats();
    ASSERT_EQ(s.in_use, expected_in_use);
    ASSERT_GE(s.peak_in_use, s.in_use);
    ASSERT_EQ(s.reserved, st->outstanding);
    if (step % 250 == 0) {
      for (auto& [p, l] : live) ASSERT_TRUE(intact(p, l)) << "overwritten, step " << step;
    }
  }
  for (auto& [p, l] : live) {
    ASSERT_TRUE(intact(p, l));
    pool->Free(p);
  }
  pool->CheckInvariants();
  EXPECT_EQ(pool->stats().in_use, 0u);
  pool->ReleaseCache();
  EXPECT_EQ(st->outstanding, 0u);
  RecordProperty("ooms", static_cast<int>(ooms));
  RecordProperty("refusals", static_cast<int>(st->refusals));
}

INSTANTIATE_TEST_SUITE_P(Alignments, CnMemPoolRandomTest, ::testing::Values(16, 64, 256));

TEST(CnMemPoolTest, ThreadsMallocAndFree) {
  CnMemPool pool(std::make_unique<singa::HostAllocator>(), Options(1 << 16));
  constexpr int kThreads = 4, kSteps = 2000;
  auto work = [&pool](int id) {
    std::mt19937 rng(id + 1);
    std::vector<std::pair<char*, size_t>> mine;
    const char pattern = static_cast<char>(0x10 + id);
    for (int i = 0; i < kSteps; ++i) {
      if (mine.empty() || rng() % 2 == 0) {
        size_t bytes = 1 + rng() % 5000;
        char* p = C(pool.Malloc(bytes));
        std::memset(p, pattern, bytes);
        mine.emplace_back(p, bytes);
      } else {
        size_t k = rng() % mine.size();
        auto [p, bytes] = mine[k];
        for (size_t j = 0; j < bytes; ++j) {
          if (p[j] != pattern) {
            ADD_FAILURE() << "thread " << id << " saw its memory overwritten";
            break;
          }
        }
        pool.Free(p);
        mine[k] = mine.back();
        mine.pop_back();
      }
    }
    for (auto& m : mine) pool.Free(m.first);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& t : threads) t.join();
  pool.CheckInvariants();
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_GT(pool.stats().num_mallocs, 0u);
}

TEST(PlainPoolTest, StatsAndErrors) {
  auto st = std::make_shared<FakeState>();
  st->capacity = 4096;
  singa::PlainPool pool(std::make_unique<FakeAllocator>(st), 64);
  void* a = pool.Malloc(100);  // 128
  void* b = pool.Malloc(0);    // 64
  EXPECT_NE(a, b);
  singa::PoolStats s = pool.stats();
  EXPECT_EQ(s.in_use, 192u);
  EXPECT_EQ(s.reserved, 192u);
  EXPECT_EQ(s.num_chunks, 2u);
  EXPECT_EQ(s.num_mallocs, 2u);
  EXPECT_EQ(st->outstanding, 192u);  // every Malloc went to the allocator
  pool.Free(a);
  s = pool.stats();
  EXPECT_EQ(s.in_use, 64u);
  EXPECT_EQ(s.peak_in_use, 192u);
  EXPECT_EQ(s.num_chunks, 1u);
  EXPECT_EQ(st->outstanding, 64u);
  pool.ResetPeak();
  EXPECT_EQ(pool.stats().peak_in_use, 64u);
  EXPECT_NO_THROW(pool.Free(nullptr));
  EXPECT_THROW(pool.Free(a), singa::ValueError);
  try {
    pool.Malloc(5000);
    FAIL() << "expected OutOfMemoryError";
  } catch (const singa::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("5000"), std::string::npos);
  }
  pool.Free(b);
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_FALSE(st->bad_deallocate);
}

}  // namespace
