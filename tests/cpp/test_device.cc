// Device: Exec contract, host copies, memory statistics, seeding, thread control, handles and
// the graph cycle, zero-on-first-allocation, serialised submission from threads.
#include "test_helpers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

using namespace singa;

TEST(Device, ExecRunsWithContextAndBlocks) {
  auto dev = std::make_shared<CppCPU>();
  auto b = dev->NewBlock(sizeof(float));
  Context* seen = nullptr;
  dev->Exec({.writes = {b.get()}, .label = "Write"},
            [&](Context* ctx) { seen = ctx; *static_cast<float*>(b->mutable_data()) = 3.f; });
  EXPECT_EQ(seen, dev->context());
  float out = 0;
  dev->CopyDataToHostPtr(b.get(), &out, sizeof(float));
  EXPECT_EQ(out, 3.f);
}

// A kernel may reach its outputs from several OpenMP threads at once: Exec (and a graph's
// replay) must hand it blocks that already have memory, or each thread could allocate its own.
TEST(Device, ExecAllocatesTheWritesBeforeTheKernelRuns) {
  auto dev = std::make_shared<CppCPU>();
  for (bool graph : {false, true}) {
    auto out = dev->NewBlock(64), in = dev->NewBlock(64);
    bool out_ready = false;
    if (graph) dev->EnableGraph(true);
    // The closure holds its blocks, as every op's does (a graph's nodes keep what they touch
    // alive; with `[&]` the blocks died at the end of the iteration while the graph still
    // listed them, and the device's destructor read them: ASan's heap-use-after-free).
    dev->Exec({.reads = {in.get()}, .writes = {out.get()}, .label = "Probe"},
              [&out_ready, out, in](Context*) { out_ready = out->allocated(); });
    if (graph) {
      dev->EnableGraph(false);
      dev->RunGraph();
    }
    EXPECT_TRUE(out_ready) << (graph ? "graph" : "eager");
  }
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

// A recorded graph holds tensors that hold the device: a cycle. The last handle going resets it.
TEST(Device, LastHandleResetsTheGraphAndFreesTheDevice) {
  std::weak_ptr<Device> weak;
  std::weak_ptr<Block> block;
  {
    std::shared_ptr<Device> dev = std::make_shared<CppCPU>(3);
    weak = dev;
    dev->AddHandle();
    Tensor x({64, 64}, dev);
    block = x.block_ptr();
    dev->EnableGraph(true);
    Tensor y = Add(x, 1.f);
    dev->EnableGraph(false);
    dev->RunGraph();
    EXPECT_GT(dev->graph()->num_nodes(), 0u);
    // The graph's operations keep x's block and the device alive beyond our own references.
    EXPECT_GT(dev.use_count(), 1);
    EXPECT_EQ(dev->RemoveHandle(), 0);
    EXPECT_EQ(dev->graph()->num_nodes(), 0u);
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_TRUE(block.expired());
}

TEST(Device, WithoutHandlesTheCycleRemainsUntilResetGraph) {
  std::weak_ptr<Device> weak;
  {
    std::shared_ptr<Device> dev = std::make_shared<CppCPU>(4);
    weak = dev;
    Tensor x({8}, dev);
    dev->EnableGraph(true);
    Tensor y = Add(x, 1.f);
    dev->EnableGraph(false);
  }
  // The documented C++ contract (device.h): call ResetGraph before dropping such a device.
  auto dev = weak.lock();
  ASSERT_NE(dev, nullptr);
  dev->ResetGraph();
  dev.reset();
  EXPECT_TRUE(weak.expired());
}

TEST(Device, DefaultDeviceKeepsItsGraphWhenHandlesGo) {
  auto dev = defaultDevice();
  dev->ResetGraph();
  Tensor x({4}, dev);
  dev->EnableGraph(true);
  Tensor y = Add(x, 1.f);
  dev->EnableGraph(false);
  const size_t n = dev->graph()->num_nodes();
  dev->AddHandle();
  dev->RemoveHandle();
  EXPECT_EQ(dev->graph()->num_nodes(), n);
  dev->ResetGraph();
}

TEST(Device, PrintTimeProfilingWithProfilingOffIsAHint) {
  auto dev = std::make_shared<CppCPU>(5);
  testing::internal::CaptureStdout();
  dev->PrintTimeProfiling();
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("SetVerbosity(1)"), std::string::npos) << out;
}

TEST(Device, ZeroOnFirstAllocOnlyOnce) {
  auto dev = std::make_shared<CppCPU>(6);
  // Dirty a piece of the pool, give it back, then take it again through a flagged block.
  {
    auto dirty = dev->NewBlock(4096);
    std::memset(dirty->mutable_data(), 0xAB, 4096);
  }
  auto b = dev->NewBlock(4096);
  b->ZeroOnFirstAlloc();
  EXPECT_TRUE(b->zero_on_alloc());
  const auto* p = static_cast<const unsigned char*>(b->data());
  EXPECT_TRUE(std::all_of(p, p + 4096, [](unsigned char c) { return c == 0; }));
  EXPECT_FALSE(b->zero_on_alloc());   // spent: no later allocation pays for zeroing
  EXPECT_FALSE(b->initialized());     // zeroing is not a write by the user
  std::memset(b->mutable_data(), 0xCD, 4096);
  b->Release();                       // a graph recycling the block ...
  p = static_cast<const unsigned char*>(b->data());
  EXPECT_EQ(p[0], 0xCD);              // ... gets the pool's memory back as it was, not zeroed
  // Operation outputs (C++ Tensor constructor) are not flagged.
  Tensor t({16}, dev);
  EXPECT_FALSE(t.block()->zero_on_alloc());
}

TEST(Device, ThreadsSubmittingToOneDeviceAreSerialised) {
  auto dev = std::make_shared<CppCPU>(8);
  auto b = dev->NewBlock(sizeof(long));
  *static_cast<long*>(b->mutable_data()) = 0;
  auto work = [&] {
    for (int i = 0; i < 20000; ++i)
      dev->Exec({.reads = {b.get()}, .writes = {b.get()}, .label = "Inc"},
                [&](Context*) { ++*static_cast<long*>(b->mutable_data()); });
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  long out = 0;
  dev->CopyDataToHostPtr(b.get(), &out, sizeof(long));
  EXPECT_EQ(out, 40000);
}

// Device::SetCheckFinite: the first operation writing NaN or Inf throws NonFiniteError naming it,
// eagerly and in a graph replay; integer outputs, scratch and copies are not scanned.
TEST(Device, CheckFiniteNamesTheOperationEagerly) {
  auto dev = std::make_shared<CppCPU>();
  Tensor x(Shape{2, 2}, dev);
  const std::vector<float> v = {-1.f, 1.f, 0.f, 2.f};
  x.CopyDataFromHostPtr(v.data(), v.size());
  EXPECT_FALSE(dev->check_finite());
  EXPECT_NO_THROW(Log(x));  // off: NaN and -Inf flow, as in numpy
  dev->SetCheckFinite(true);
  EXPECT_NO_THROW(Exp(x));
  try {
    Log(x);
    FAIL() << "Log(-1) and Log(0) did not raise";
  } catch (const NonFiniteError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'Log'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1 NaN and 1 Inf"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(2, 2)"), std::string::npos) << msg;
  }
  // A NaN copied in is reported by the first operation computing with it, not the copy.
  Tensor y(Shape{2, 2}, dev);
  const std::vector<float> w = {std::nanf(""), 1.f, 2.f, 3.f};
  y.CopyDataFromHostPtr(w.data(), w.size());
  Tensor z(Shape{2, 2}, dev);
  EXPECT_NO_THROW(CopyDataToFrom(&z, y, 4, 0, 0));
  EXPECT_THROW(ReLU(z), NonFiniteError);
  // int32 -1 has a NaN's bit pattern: not scanned, the block holds ints.
  Tensor i(Shape{2}, dev, kInt);
  const std::vector<int> iv = {-1, 3};
  i.CopyDataFromHostPtr(iv.data(), iv.size());
  EXPECT_NO_THROW(Abs(i));
}

TEST(Device, CheckFiniteNamesTheOperationInAGraphReplay) {
  auto dev = std::make_shared<CppCPU>();
  Tensor x(Shape{3}, dev);
  const std::vector<float> v = {1.f, 4.f, 9.f};
  x.CopyDataFromHostPtr(v.data(), v.size());
  dev->EnableGraph(true);
  Tensor s = Sqrt(x);
  Tensor d = Log(Sub(s, s));  // log(0) = -Inf
  dev->EnableGraph(false);
  dev->RunGraph();  // check off: replays
  dev->SetCheckFinite(true);
  try {
    dev->RunGraph();
    FAIL() << "the replay did not raise";
  } catch (const NonFiniteError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'Log'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0 NaN and 3 Inf"), std::string::npos) << msg;
  }
  EXPECT_FALSE(dev->capture_enabled());
  dev->SetCheckFinite(false);
  EXPECT_NO_THROW(dev->RunGraph());
  dev->ResetGraph();
}
