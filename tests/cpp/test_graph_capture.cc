// Graph::Run's capture protocol (CUDA Graphs on a CudaGPU), checked here on the CPU with a device
// that "captures" like CUDA does: between BeginCapture and EndCapture operations are recorded,
// not run; LaunchCaptured runs what was recorded. So the numbers below come out right only if
// Graph::Run drives the protocol correctly: which replay is captured, when a capture is launched,
// dropped or refused (random ops, collectives, profiling, dynamic memory, the switch).
#include <cmath>
#include <functional>
#include <vector>

#include "singa/graph/graph.h"
#include "test_helpers.h"

using namespace singa;
using singa_test::Hold;

namespace {

class FakeCapturingCPU : public CppCPU {
 public:
  bool CanCapture() const override { return true; }
  void BeginCapture() override {
    ++begins;
    DropCaptured();
    capturing = true;
  }
  void EndCapture() override {
    capturing = false;
    ++ends;
    launchable = true;
  }
  void LaunchCaptured() override {
    ASSERT_TRUE(launchable) << "launch without a capture";
    ++launches;
    for (auto& f : captured) f();
  }
  void DropCaptured() override {
    captured.clear();
    launchable = false;
  }
  // The graph's operations are submitted through the OpFunc of each node; while capturing, the
  // test's operations record themselves instead of running (see Recorded below).
  bool capturing = false, launchable = false;
  int begins = 0, ends = 0, launches = 0;
  std::vector<std::function<void()>> captured;
};

// y <- y * 2 + x as one operation that honours the fake capture (a real kernel enqueues on the
// stream, which capture records instead of running).
void DoubleAdd(const std::shared_ptr<FakeCapturingCPU>& dev, Tensor x, Tensor y,
               bool rand = false) {
  dev->Exec({.reads = {x.block(), y.block()},
             .writes = {y.block()},
             .label = "DoubleAdd",
             .use_rand_generator = rand},
            [dev, x, y](Context*) {
              auto run = [x, y]() {
                const float* a = static_cast<const float*>(x.block()->data());
                float* b = static_cast<float*>(y.block()->mutable_data());
                for (size_t i = 0; i < y.Size(); ++i) b[i] = b[i] * 2.f + a[i];
              };
              if (dev->capturing)
                dev->captured.push_back(run);
              else
                run();
            });
}

float Value(const Tensor& t) { return t.ToVector<float>()[0]; }

struct CaptureRig {
  std::shared_ptr<FakeCapturingCPU> dev = std::make_shared<FakeCapturingCPU>();
  Tensor x{Shape{4}, dev}, y{Shape{4}, dev};
  CaptureRig() {
    x.SetValue(1.f);
    y.SetValue(0.f);
  }
};

}  // namespace

TEST(GraphCapture, SecondReplayIsCapturedLaterOnesLaunch) {
  CaptureRig s;
  Hold hx(s.x), hy(s.y);
  s.dev->EnableGraph(true);
  DoubleAdd(s.dev, s.x, s.y);
  DoubleAdd(s.dev, s.x, s.y);
  s.dev->EnableGraph(false);
  s.dev->RunGraph();  // first replay: op by op (persistent blocks get their memory)
  EXPECT_FALSE(s.dev->graph()->captured());
  EXPECT_EQ(Value(s.y), 3.f);  // 0 -> 1 -> 3
  s.dev->RunGraph();  // captured, then launched once
  EXPECT_TRUE(s.dev->graph()->captured());
  EXPECT_EQ(s.dev->begins, 1);
  EXPECT_EQ(s.dev->ends, 1);
  EXPECT_EQ(s.dev->launches, 1);
  EXPECT_EQ(Value(s.y), 15.f);  // 3 -> 7 -> 15: the capture ran exactly once
  s.dev->RunGraph();
  s.dev->RunGraph();
  EXPECT_EQ(s.dev->begins, 1);  // no new capture
  EXPECT_EQ(s.dev->launches, 3);
  EXPECT_EQ(Value(s.y), 255.f);
  s.dev->ResetGraph();
  EXPECT_FALSE(s.dev->graph()->captured());
  EXPECT_FALSE(s.dev->launchable);  // Reset dropped the capture
}

TEST(GraphCapture, RandomOpsSwitchOffAndProfilingRefuseCapture) {
  for (int why = 0; why < 4; ++why) {
    CaptureRig s;
    Hold hx(s.x), hy(s.y);
    if (why == 1) s.dev->SetCaptureEnabled(false);
    if (why == 2) s.dev->SetVerbosity(1);
    if (why == 3) s.dev->graph()->SetPlanning(false);  // dynamic memory moves blocks
    s.dev->EnableGraph(true);
    DoubleAdd(s.dev, s.x, s.y, /*rand=*/why == 0);
    s.dev->EnableGraph(false);
    for (int i = 0; i < 4; ++i) s.dev->RunGraph();
    EXPECT_EQ(s.dev->begins, 0) << "case " << why;
    EXPECT_FALSE(s.dev->graph()->captured()) << "case " << why;
    EXPECT_EQ(Value(s.y), 15.f) << "case " << why;  // 0 1 3 7 15, op by op
  }
}

TEST(GraphCapture, SwitchingOffAfterCaptureDropsIt) {
  CaptureRig s;
  Hold hx(s.x), hy(s.y);
  s.dev->EnableGraph(true);
  DoubleAdd(s.dev, s.x, s.y);
  s.dev->EnableGraph(false);
  s.dev->RunGraph();
  s.dev->RunGraph();
  ASSERT_TRUE(s.dev->graph()->captured());
  s.dev->SetCaptureEnabled(false);
  s.dev->RunGraph();
  EXPECT_FALSE(s.dev->graph()->captured());
  EXPECT_EQ(s.dev->launches, 1);
  EXPECT_EQ(Value(s.y), 7.f);
}

TEST(GraphCapture, NewOperationsRebuildAndRecapture) {
  CaptureRig s;
  Hold hx(s.x), hy(s.y);
  s.dev->EnableGraph(true);
  DoubleAdd(s.dev, s.x, s.y);
  s.dev->EnableGraph(false);
  s.dev->RunGraph();
  s.dev->RunGraph();
  ASSERT_TRUE(s.dev->graph()->captured());
  s.dev->EnableGraph(true);  // buffering more operations invalidates the build
  DoubleAdd(s.dev, s.x, s.y);
  s.dev->EnableGraph(false);
  s.dev->RunGraph();  // rebuilt: first run after the build is op by op
  EXPECT_FALSE(s.dev->graph()->captured());
  s.dev->RunGraph();
  EXPECT_TRUE(s.dev->graph()->captured());
  EXPECT_EQ(s.dev->begins, 2);
}

TEST(GraphCapture, HostDeviceNeverCaptures) {
  auto dev = std::make_shared<CppCPU>();
  EXPECT_FALSE(dev->CanCapture());
  EXPECT_FALSE(dev->capture_enabled());
  Tensor x({4}, dev);
  x.SetValue(1.f);
  Hold hx(x);
  dev->EnableGraph(true);
  Tensor y = Exp(x);
  dev->EnableGraph(false);
  Hold hy(y);
  for (int i = 0; i < 3; ++i) dev->RunGraph();
  EXPECT_FALSE(dev->graph()->captured());
  EXPECT_FLOAT_EQ(Value(y), std::exp(1.f));
}
