// The batch-norm backward reading its incoming gradient through a ReLU's mask (a graph's
// kEpiReLUGrad, singa/core/fusion.h): the kernel called directly in every layout and dtype
// against ReLUBackward then the backward, and the graph's pattern check (graph.cc:
// FuseReLUGrad) on recorded steps, each variant one that a dropped rule would get wrong.
#include <cmath>
#include <cstring>
#include <string>

#include "layout_test_util.h"
#include "ops/nn_kernels.h"  // the backward's kernel, called directly
#include "test_helpers.h"

using namespace singa;
using layout_test::ToLayout;
using layout_test::Values;

namespace {

// got has want's bits, or is NaN where want is.
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const bool same = std::isnan(want[i]) ? std::isnan(got[i])
                                          : std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
    if (!same) {
      ++bad;
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << ", expected " << want[i];
    }
  }
}

std::vector<float> AsFloats(const Tensor& t) {
  return Values(t.data_type() == kFloat32 ? t : t.AsType(kFloat32));
}

// (N, C, H, W) = (3, 32, 5, 7): S = 35, two rounds of the kernel's lanes and a tail.
struct BwdData {
  std::shared_ptr<Device> dev = std::make_shared<CppCPU>();
  Shape sh{3, 32, 5, 7};
  size_t N = 3, C = 32, S = 35, n = 3 * 32 * 35;
  std::vector<float> x, dy, mask;
  Tensor scale, mean, var;

  BwdData() {
    dev->set_backend(Backend::kCpuRef);
    x.resize(n);
    dy.resize(n);
    mask.resize(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = std::sin(0.37f * float(i)) * 3.f + float(i % 7);
      dy[i] = std::cos(0.11f * float(i));
      mask[i] = std::sin(0.23f * float(i) + 1.f);  // about half <= 0
    }
    mask[3] = 0.f;
    mask[4] = -0.f;
    mask[9] = std::nanf("");      // passes dy
    dy[12] = std::nanf("");       // channel 0: masked away when mask <= 0 ...
    mask[12] = -1.f;
    dy[5 * S + 2] = std::nanf("");  // ... and spreads over channel 5 where it passes
    mask[5 * S + 2] = 1.f;
    std::vector<float> sv(C);
    for (size_t c = 0; c < C; ++c) sv[c] = 0.5f + 0.03f * float(c);
    scale = On(sv, {C});
    auto f = BatchNormForwardTraining(On(x, sh), scale, On(std::vector<float>(C, 0.f), {C}),
                                      nullptr, nullptr, 0.1f, 1e-5f);
    mean = f[1];
    var = f[2];
  }
  Tensor On(const std::vector<float>& v, const Shape& s) const {
    return singa_test::FromVector(v, s).ToDevice(dev);
  }
  // v in layout l and dtype t.
  Tensor Stored(const std::vector<float>& v, MemLayout l, DataType t) const {
    Tensor f = On(ToLayout(v, l, sh, false), sh);
    return t == kFloat32 ? f : f.AsType(t);
  }
  // The reference kernel on x (tagged l) with dy, or through epi: dx (plain), dscale, dbias.
  std::vector<std::vector<float>> Run(const Tensor& x_in, const Tensor& dy_in, MemLayout l,
                                      const Epilogue& epi) const {
    BnBwdArgs a;
    a.dy = dy_in;
    a.x = x_in;
    a.scale = scale;
    a.mean = mean;
    a.var = var;
    a.dx = Tensor(sh, dev, x_in.data_type());
    a.dscale = Tensor(Shape{C}, dev, kFloat32);
    a.dbias = Tensor(Shape{C}, dev, kFloat32);
    a.eps = 1e-5f;
    a.N = N;
    a.C = C;
    a.S = S;
    a.epi = epi;
    a.x.block()->set_mem_layout(l);
    const Prepared<BnBwdArgs> p = Prepare(BatchNormBackwardKernel(), a, *dev);
    EXPECT_TRUE(p.epilogue & kEpiReLUGrad) << "the reference kernel offers the variant";
    p.run(a, nullptr);
    a.x.block()->set_mem_layout(MemLayout::kPlain);
    return {ToLayout(AsFloats(a.dx), l, sh, true), Values(a.dscale), Values(a.dbias)};
  }
};

}  // namespace

TEST(GraphReluGrad, TheBackwardThroughAMaskGivesTheUnfusedBitsInEveryLayoutAndDtype) {
  const BwdData d;
  for (DataType t : {kFloat32, kBFloat16}) {
    // Unfused, plain: dz = ReLUBackward(dy, mask) materialised, then the backward.
    const Tensor x = d.Stored(d.x, MemLayout::kPlain, t);
    const Tensor dz = ReLUBackward(d.Stored(d.dy, MemLayout::kPlain, t),
                                   d.Stored(d.mask, MemLayout::kPlain, t));
    const auto want = d.Run(x, dz, MemLayout::kPlain, Epilogue{});
    EXPECT_TRUE(std::isnan(want[1][5]) && std::isnan(want[2][5]) && !std::isnan(want[1][0]))
        << "the data: one NaN gradient passes (channel 5), one is masked (channel 0)";
    for (MemLayout l : {MemLayout::kPlain, MemLayout::kChannels16, MemLayout::kChannelsLast}) {
      const Tensor dy = d.Stored(d.dy, l, t), mask = d.Stored(d.mask, l, t);
      Epilogue e;
      e.relu_dy = dy.block();
      e.relu_mask = mask.block();
      // dz's place holds garbage: the fused kernel must not read it
      const Tensor junk = d.Stored(std::vector<float>(d.n, 1e30f), l, t);
      const auto got = d.Run(d.Stored(d.x, l, t), junk, l, e);
      const std::string what = std::string(t == kFloat32 ? "float32" : "bfloat16") + " layout " +
                               std::to_string(int(l));
      ExpectSameBits(got[0], want[0], what + " dx");
      ExpectSameBits(got[1], want[1], what + " dscale");
      ExpectSameBits(got[2], want[2], what + " dbias");
    }
  }
}

namespace {

// One recorded step around ResNet's bn -> relu: mask = relu(bn(x)) (the forward's fused ReLU),
// dy = -g written inside the step, dz = ReLUBackward(dy, mask), then the batch-norm backward.
enum class Variant { kPlain, kSecondReader, kHeld, kMaskWrittenBetween };

struct StepResult {
  std::vector<std::vector<float>> outs;
  Graph::FusionCounts counts;
  GraphMemoryPlan plan;
};

StepResult RunStep(Variant v, bool graph, bool fusion = true, bool sequential = false) {
  auto dev = std::make_shared<CppCPU>();
  dev->set_backend(Backend::kCpuRef);
  const Shape sh{3, 16, 4, 5};
  const size_t n = 3 * 16 * 20;
  std::vector<float> xv(n), gv(n);
  for (size_t i = 0; i < n; ++i) {
    xv[i] = std::sin(0.31f * float(i)) * 2.f + float(i % 3);
    gv[i] = std::cos(0.17f * float(i));
  }
  auto on = [&](const std::vector<float>& v, const Shape& s) {
    return singa_test::FromVector(v, s).ToDevice(dev);
  };
  const Tensor x = on(xv, sh), g = on(gv, sh);
  const Tensor scale = on(std::vector<float>(16, 1.5f), {16}),
               bias = on(std::vector<float>(16, 0.1f), {16});
  dev->graph()->SetFusion(fusion);
  dev->EnableGraph(graph);
  auto f = BatchNormForwardTraining(x, scale, bias, nullptr, nullptr, 0.1f, 1e-5f, true);
  Tensor mask = f[0];
  const Tensor dy = Negative(g);
  const Tensor dz = ReLUBackward(dy, mask);
  if (v == Variant::kMaskWrittenBetween) Negative(mask, &mask);
  std::vector<Tensor> outs = BatchNormBackward(dz, x, scale, f[1], f[2], 1e-5f);
  if (v == Variant::kSecondReader) outs.push_back(Negative(dz));
  if (v == Variant::kHeld) outs.push_back(dz);
  dev->EnableGraph(false);
  std::vector<std::unique_ptr<singa_test::Hold>> holds;
  for (const Tensor& t : outs) holds.push_back(std::make_unique<singa_test::Hold>(t));
  StepResult r;
  if (graph) {
    dev->RunGraph(sequential);
    dev->RunGraph(sequential);  // a replay gives the same
    r.counts = dev->graph()->fusion_counts();
    r.plan = dev->graph()->memory_plan();
  }
  for (const Tensor& t : outs) r.outs.push_back(Values(t));
  if (v == Variant::kHeld && graph) EXPECT_EQ(dz.block()->external_refs(), 1);
  holds.clear();
  dev->ResetGraph();
  return r;
}

void ExpectSameOutputs(const StepResult& got, const StepResult& want, const char* what) {
  ASSERT_EQ(got.outs.size(), want.outs.size());
  for (size_t i = 0; i < got.outs.size(); ++i)
    ExpectSameBits(got.outs[i], want.outs[i], std::string(what) + " output " + std::to_string(i));
}

}  // namespace

TEST(GraphReluGrad, TheBatchNormBackwardReadsThroughTheReluBackwardItAloneReads) {
  const StepResult eager = RunStep(Variant::kPlain, false);
  const StepResult fused = RunStep(Variant::kPlain, true);
  const StepResult unfused = RunStep(Variant::kPlain, true, /*fusion=*/false);
  EXPECT_EQ(fused.counts.relu_backward, 1u);
  EXPECT_EQ(unfused.counts.relu_backward, 0u);
  ExpectSameOutputs(fused, eager, "fused");
  ExpectSameOutputs(unfused, eager, "unfused");
  ExpectSameOutputs(RunStep(Variant::kPlain, true, true, /*sequential=*/true), eager, "serial");
  // dz is never materialised: one activation less alive at the backward
  EXPECT_LT(fused.plan.lower_bound_bytes, unfused.plan.lower_bound_bytes);
  EXPECT_LE(fused.plan.arena_bytes, unfused.plan.arena_bytes);
}

TEST(GraphReluGrad, NotFusedWhenTheGradientHasAnotherReaderOrAUserHoldsIt) {
  for (Variant v : {Variant::kSecondReader, Variant::kHeld}) {
    const StepResult graph = RunStep(v, true);
    EXPECT_EQ(graph.counts.relu_backward, 0u) << int(v);
    ExpectSameOutputs(graph, RunStep(v, false), v == Variant::kHeld ? "held" : "second reader");
  }
}

TEST(GraphReluGrad, NotFusedWhenTheMaskIsWrittenBeforeTheBackwardRuns) {
  // Serial order: the in-place write of the mask runs between the ReLU backward and the batch
  // norm's; read at the batch norm, the mask would be the negated one.
  const StepResult graph = RunStep(Variant::kMaskWrittenBetween, true, true, true);
  EXPECT_EQ(graph.counts.relu_backward, 0u);
  ExpectSameOutputs(graph, RunStep(Variant::kMaskWrittenBetween, false), "mask written");
}
