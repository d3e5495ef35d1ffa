// Device: Exec contract, host copies, memory statistics, seeding, thread control.
#include "test_helpers.h"

using namespace singa;

TEST(Device, ExecRunsWithContextAndBlocks) {
  auto dev = std::make_shared<CppCPU>();
  auto b = dev->NewBlock(sizeof(float));
  Context* seen = nullptr;
  dev->Exec([&](Context* ctx) { seen = ctx; *static_cast<float*>(b->mutable_data()) = 3.f; },
            {}, {b.get()}, "Write");
  EXPECT_EQ(seen, dev->context());
  float out = 0;
  dev->CopyDataToHostPtr(b.get(), &out, sizeof(float));
  EXPECT_EQ(out, 3.f);
}

TEST(Device, HostCopiesAreBoundsChecked) {
  auto dev = std::make_shared<CppCPU>();
  auto b = dev->NewBlock(8);
  float v[4] = {1, 2, 3, 4};
  EXPECT_THROW(dev->CopyDataFromHostPtr(b.get(), v, 16), ValueError);
  EXPECT_THROW(dev->CopyDataToHostPtr(b.get(), v, 8, 4), ValueError);
  dev->CopyDataFromHostPtr(b.get(), v, 8);
  auto c = dev->NewBlock(8);
  dev->CopyDataToFrom(c.get(), b.get(), 8, kHostToHost);
  float out[2];
  dev->CopyDataToHostPtr(c.get(), out, 8);
  EXPECT_EQ(out[1], 2.f);
}

TEST(Device, MemoryStatisticsFollowTensors) {
  auto dev = std::make_shared<CppCPU>();
  EXPECT_EQ(dev->mem_stats().in_use, 0u);
  {
    Tensor t({1000}, dev);
    EXPECT_EQ(dev->mem_stats().in_use, 0u);  // lazy: nothing written yet
    t.SetValue(0.f);
    EXPECT_GE(dev->mem_stats().in_use, 4000u);
  }
  EXPECT_EQ(dev->mem_stats().in_use, 0u);
  EXPECT_GE(dev->mem_stats().peak_in_use, 4000u);
  dev->ResetPeak();
  EXPECT_EQ(dev->mem_stats().peak_in_use, 0u);
}

TEST(Device, SeedMakesRandomReproducible) {
  auto dev = std::make_shared<CppCPU>();
  Tensor a({16}, dev), b({16}, dev);
  dev->SetRandSeed(7);
  Gaussian(0.f, 1.f, &a);
  dev->SetRandSeed(7);
  Gaussian(0.f, 1.f, &b);
  EXPECT_EQ(a.ToVector<float>(), b.ToVector<float>());
}

TEST(Device, ThreadCountIsOneKnob) {
  int before = GetNumThreads();
  SetNumThreads(1);
  EXPECT_EQ(GetNumThreads(), 1);
  SetNumThreads(before);
  EXPECT_EQ(GetNumThreads(), before);
}
