// The graph's layout pass (cpp/src/graph/layouts.cc): which blocks it keeps channel-blocked,
// checked with operations that declare their layouts and record what they see when they run,
// and the batch norm kernels in each layout.
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "layout_test_util.h"
#include "ops/nn_kernels.h"  // the batch norm's fused kernel, called directly
#include "test_helpers.h"

using namespace singa;

namespace {

// A recorded step: "produce" writes a, "relu" (flat) reads a and writes b, "consume" reads b.
// Each operation notes the layout of the blocks it touches when it runs.
struct Chain {
  std::shared_ptr<Device> dev = std::make_shared<CppCPU>();
  Shape shape{2, 32, 3, 5};
  std::map<std::string, MemLayout> seen;

  void Op(const std::string& name, std::vector<Block*> reads, std::vector<Block*> writes,
          LayoutHooks layouts) {
    Block* b = writes.empty() ? reads[0] : writes[0];
    dev->Exec({.reads = reads, .writes = writes, .label = "op", .layouts = layouts},
              [this, name, b](Context*) { seen[name] = b->mem_layout(); });
  }

  // Records the chain (consume accepts its input blocked when consumer_accepts) and runs it.
  Graph::LayoutCounts Run(bool consumer_accepts, bool hold_b = false, bool layouts = true) {
    Tensor x(shape, dev), a(shape, dev), b(shape, dev), out(Shape{2}, dev);
    if (hold_b) b.block()->AddExternalRef();
    dev->graph()->SetLayouts(layouts);
    dev->EnableGraph(true);
    Op("produce", {x.block()}, {a.block()}, {.reads = 0, .writes = 1});
    Op("relu", {a.block()}, {b.block()}, LayoutHooks::Flat());
    Op("consume", {b.block()}, {out.block()}, {.reads = consumer_accepts ? 1u : 0u});
    dev->EnableGraph(false);
    dev->RunGraph(false);
    const Graph::LayoutCounts counts = dev->graph()->layout_counts();
    dev->ResetGraph();
    if (hold_b) b.block()->RemoveExternalRef();
    EXPECT_EQ(a.block()->mem_layout(), MemLayout::kPlain) << "a reset graph leaves blocks plain";
    return counts;
  }
};

}  // namespace

TEST(GraphLayouts, AChainOfAcceptingOperationsStaysBlocked) {
  Chain c;
  const auto counts = c.Run(true);
  EXPECT_EQ(counts.blocks, 2u);
  EXPECT_EQ(counts.bytes, 2 * 2 * 32 * 3 * 5 * sizeof(float));
  EXPECT_EQ(c.seen["produce"], MemLayout::kChannels16);
  EXPECT_EQ(c.seen["relu"], MemLayout::kChannels16);
}

TEST(GraphLayouts, AReaderWithoutABlockedKernelKeepsTheWholeGroupPlain) {
  Chain c;
  EXPECT_EQ(c.Run(false).blocks, 0u);  // b must be plain, and relu reads a in b's layout
  EXPECT_EQ(c.seen["produce"], MemLayout::kPlain);
}

TEST(GraphLayouts, BlocksAUserHoldsStayPlain) {
  Chain c;
  EXPECT_EQ(c.Run(true, /*hold_b=*/true).blocks, 0u);
}

TEST(GraphLayouts, SwitchedOffEverythingIsPlainUnderABudgetNot) {
  Chain c;
  EXPECT_EQ(c.Run(true, false, /*layouts=*/false).blocks, 0u);
  c.dev->graph()->SetFusion(false);
  EXPECT_EQ(c.Run(true).blocks, 0u);
  c.dev->graph()->SetFusion(true);
  // a recomputation reruns the operation on its blocks, tagged as for the run (test_graph_budget)
  c.dev->graph()->SetMemoryBudgetFraction(1.0);
  EXPECT_EQ(c.Run(true).blocks, 2u);
  c.dev->graph()->SetMemoryBudgetFraction(0);
  EXPECT_EQ(c.Run(true).blocks, 2u);
}

TEST(GraphLayouts, ChannelsNotAMultipleOf16OrOneByOneImagesStayPlain) {
  Chain c;
  c.shape = {2, 24, 3, 5};
  EXPECT_EQ(c.Run(true).blocks, 0u);
  c.shape = {2, 32, 1, 1};  // the same bytes in both layouts: never tagged
  EXPECT_EQ(c.Run(true).blocks, 0u);
}

TEST(GraphLayouts, OneLayoutOperandsOfDifferentShapesStayPlain) {
  Chain c;
  Tensor x(c.shape, c.dev), a(c.shape, c.dev), b(Shape{2, 32, 5, 3}, c.dev),
      s(c.shape, c.dev), out(Shape{2}, c.dev);
  c.dev->EnableGraph(true);
  c.Op("produce", {x.block()}, {a.block()}, {.writes = 1});
  c.Op("produce2", {x.block()}, {b.block()}, {.writes = 1});
  c.Op("add", {a.block(), b.block()}, {s.block()}, LayoutHooks::Flat());
  c.Op("consume", {s.block()}, {out.block()}, {.reads = 1});
  c.dev->EnableGraph(false);
  c.dev->RunGraph(false);
  EXPECT_EQ(c.dev->graph()->layout_counts().blocks, 0u);
  c.dev->ResetGraph();
}

TEST(GraphLayouts, IndependentOperandsEachChooseTheirOwn) {
  // A convolution-like operation reorders what it does not get blocked: its input may be plain
  // (read by a plain-only operation too) while its output stays blocked.
  Chain c;
  Tensor x(c.shape, c.dev), a(c.shape, c.dev), y(c.shape, c.dev), out(Shape{2}, c.dev),
      out2(Shape{2}, c.dev);
  c.dev->EnableGraph(true);
  c.Op("produce", {x.block()}, {a.block()}, {.writes = 1});
  c.Op("plain_reader", {a.block()}, {out2.block()}, {});
  c.Op("conv", {a.block()}, {y.block()}, {.reads = 1, .writes = 1});
  c.Op("consume", {y.block()}, {out.block()}, {.reads = 1});
  c.dev->EnableGraph(false);
  c.dev->RunGraph(false);
  EXPECT_EQ(c.dev->graph()->layout_counts().blocks, 1u);
  EXPECT_EQ(c.seen["produce"], MemLayout::kPlain);
  EXPECT_EQ(c.seen["conv"], MemLayout::kChannels16);
  c.dev->ResetGraph();
}

TEST(GraphLayouts, AChainOfChannelsLastOperationsStaysChannelsLast) {
  // the bfloat16 convolutions' case: the producer and consumer take NHWC only
  Chain c;
  Tensor x(c.shape, c.dev), a(c.shape, c.dev), b(c.shape, c.dev), out(Shape{2}, c.dev);
  c.dev->EnableGraph(true);
  c.Op("produce", {x.block()}, {a.block()}, {.writes_last = 1});
  c.Op("relu", {a.block()}, {b.block()}, LayoutHooks::Flat());
  c.Op("consume", {b.block()}, {out.block()}, {.reads_last = 1});
  c.dev->EnableGraph(false);
  c.dev->RunGraph(false);
  const Graph::LayoutCounts counts = c.dev->graph()->layout_counts();
  EXPECT_EQ(counts.blocks, 2u);
  EXPECT_EQ(counts.channels_last, 2u);
  EXPECT_EQ(c.seen["produce"], MemLayout::kChannelsLast);
  EXPECT_EQ(c.seen["relu"], MemLayout::kChannelsLast);
  c.dev->ResetGraph();
  EXPECT_EQ(a.block()->mem_layout(), MemLayout::kPlain);
}

TEST(GraphLayouts, AGroupTakesTheLayoutAllItsOperationsAllow) {
  // nChw16c where every operation allows it; channels-last where one allows only that; plain
  // where two allow disjoint layouts
  struct Case {
    LayoutHooks produce, consume;
    MemLayout expected;
  };
  const Case cases[] = {
      {LayoutHooks::Both(0, 1, false), LayoutHooks::Both(1, 0, false), MemLayout::kChannels16},
      {LayoutHooks::Both(0, 1, false), {.reads_last = 1}, MemLayout::kChannelsLast},
      {{.writes = 1}, {.reads_last = 1}, MemLayout::kPlain},
  };
  for (const Case& k : cases) {
    Chain c;
    Tensor x(c.shape, c.dev), a(c.shape, c.dev), b(c.shape, c.dev), out(Shape{2}, c.dev);
    c.dev->EnableGraph(true);
    c.Op("produce", {x.block()}, {a.block()}, k.produce);
    c.Op("relu", {a.block()}, {b.block()}, LayoutHooks::Flat());
    c.Op("consume", {b.block()}, {out.block()}, k.consume);
    c.dev->EnableGraph(false);
    c.dev->RunGraph(false);
    EXPECT_EQ(c.seen["produce"], k.expected);
    EXPECT_EQ(c.seen["relu"], k.expected);
    c.dev->ResetGraph();
  }
}

using layout_test::ToLayout;
using layout_test::Values;

TEST(GraphLayouts, BatchNormKernelsGiveThePlainBitsInEveryLayout) {
  // The reference kernels read the layout the graph chose from x's block; tagged by hand here
  // (eager), with x and dy stored in it. S = 5 * 7 = 35: two rounds of lanes and a tail.
  auto dev = std::make_shared<CppCPU>();
  dev->set_backend(Backend::kCpuRef);
  const Shape sh{3, 32, 5, 7};
  const size_t C = sh[1], n = 3 * 32 * 35;
  std::vector<float> xv(n), dyv(n), sv(C), bv(C);
  for (size_t i = 0; i < n; ++i) {
    xv[i] = std::sin(0.37f * float(i)) * 3.f + float(i % 7);
    dyv[i] = std::cos(0.11f * float(i));
  }
  for (size_t c = 0; c < C; ++c) {
    sv[c] = 0.5f + 0.03f * float(c);
    bv[c] = 0.1f * float(c) - 1.f;
  }
  auto on = [&](const std::vector<float>& v, const Shape& s) {
    Tensor t = singa_test::FromVector(v, s);
    return t.ToDevice(dev);
  };
  const Tensor scale = on(sv, {C}), bias = on(bv, {C});
  struct Out {
    std::vector<float> y, mean, var, dx, dscale, dbias, yinf;
  };
  auto run = [&](MemLayout l) {
    Tensor x = on(ToLayout(xv, l, sh, false), sh), dy = on(ToLayout(dyv, l, sh, false), sh);
    x.block()->set_mem_layout(l);
    dy.block()->set_mem_layout(l);
    auto f = BatchNormForwardTraining(x, scale, bias, nullptr, nullptr, 0.1f, 1e-5f, true);
    auto b = BatchNormBackward(dy, x, scale, f[1], f[2], 1e-5f);
    Tensor yi = BatchNormForwardInference(x, scale, bias, f[1], f[2], 1e-5f);
    dev->Sync();
    Out o{ToLayout(Values(f[0]), l, sh, true), Values(f[1]), Values(f[2]),
          ToLayout(Values(b[0]), l, sh, true), Values(b[1]), Values(b[2]),
          ToLayout(Values(yi), l, sh, true)};
    x.block()->set_mem_layout(MemLayout::kPlain);
    dy.block()->set_mem_layout(MemLayout::kPlain);
    return o;
  };
  const Out plain = run(MemLayout::kPlain);
  for (MemLayout l : {MemLayout::kChannels16, MemLayout::kChannelsLast}) {
    const Out o = run(l);
    const char* name = l == MemLayout::kChannels16 ? "nChw16c" : "channels-last";
    EXPECT_EQ(o.y, plain.y) << name;  // bit for bit: the same lanes in the same order
    EXPECT_EQ(o.mean, plain.mean) << name;
    EXPECT_EQ(o.var, plain.var) << name;
    EXPECT_EQ(o.dx, plain.dx) << name;
    EXPECT_EQ(o.dscale, plain.dscale) << name;
    EXPECT_EQ(o.dbias, plain.dbias) << name;
    EXPECT_EQ(o.yinf, plain.yinf) << name;
  }
}

TEST(GraphLayouts, FusedBatchNormEpiloguesGiveTheUnfusedBitsInEveryLayout) {
  // The training kernel with the epilogue a graph fuses into it (the residual add, the ReLU),
  // run directly in each layout, against the unfused operations in plain NCHW: batch norm, then
  // + residual, then the ReLU (NaN kept: two residual values are NaN). S = 35: lanes and a tail.
  auto dev = std::make_shared<CppCPU>();
  dev->set_backend(Backend::kCpuRef);
  const Shape sh{3, 32, 5, 7};
  const size_t N = 3, C = sh[1], S = 35, n = N * C * S;
  std::vector<float> xv(n), rv(n), sv(C), bv(C);
  for (size_t i = 0; i < n; ++i) {
    xv[i] = std::sin(0.29f * float(i)) * 2.f + float(i % 5);
    rv[i] = std::cos(0.13f * float(i)) * 3.f;
  }
  rv[7] = rv[n - 3] = std::nanf("");
  for (size_t c = 0; c < C; ++c) {
    sv[c] = 0.7f + 0.02f * float(c);
    bv[c] = 0.05f * float(c) - 0.8f;
  }
  auto on = [&](const std::vector<float>& v, const Shape& s) {
    return singa_test::FromVector(v, s).ToDevice(dev);
  };
  const Tensor scale = on(sv, {C}), bias = on(bv, {C});
  const std::vector<float> bn =
      Values(BatchNormForwardTraining(on(xv, sh), scale, bias, nullptr, nullptr, 0.1f, 1e-5f)[0]);
  for (const bool residual : {false, true}) {
    for (const bool relu : {false, true}) {
      if (!residual && !relu) continue;
      std::vector<float> want(n);
      for (size_t i = 0; i < n; ++i) {
        float v = residual ? bn[i] + rv[i] : bn[i];
        want[i] = relu ? fn::ReLUOp{}(v) : v;
      }
      for (MemLayout l : {MemLayout::kPlain, MemLayout::kChannels16, MemLayout::kChannelsLast}) {
        BnTrainArgs a;
        a.x = on(ToLayout(xv, l, sh, false), sh);
        const Tensor res = on(ToLayout(rv, l, sh, false), sh);
        a.x.block()->set_mem_layout(l);
        a.scale = scale;
        a.bias = bias;
        a.y = Tensor(sh, dev, kFloat32);
        a.mean = Tensor(Shape{C}, dev, kFloat32);
        a.var = Tensor(Shape{C}, dev, kFloat32);
        a.eps = 1e-5f;
        a.relu = relu;
        a.N = N;
        a.C = C;
        a.S = S;
        if (residual) a.epi.residual = res.block();
        a.epi.relu = relu;
        Prepare(BatchNormForwardTrainingKernel(), a, *dev).run(a, nullptr);
        const std::vector<float> got = ToLayout(Values(a.y), l, sh, true);
        a.x.block()->set_mem_layout(MemLayout::kPlain);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), n * sizeof(float)))
            << "layout " << int(l) << ", residual " << residual << ", relu " << relu;
        EXPECT_TRUE(std::isnan(got[7]) == residual && std::isnan(got[n - 3]) == residual);
      }
    }
  }
}

#ifdef SINGA_USE_DNNL
namespace {

// a and b hold the same values (up to 4 ulps: oneDNN's kernels for each layout may add the
// gradients of overlapping windows in their own order), NaN where the other has NaN.
void ExpectSameWithNaN(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i])) EXPECT_TRUE(std::isnan(a[i])) << what << " at " << i;
    else EXPECT_FLOAT_EQ(a[i], b[i]) << what << " at " << i;
  }
}

}  // namespace

TEST(GraphLayouts, OneDnnMaxPoolingInAKeptLayoutGivesThePlainResultNaNIncluded) {
  // A recorded step: "fill" writes x and dy (from plain host values, into whatever layout the
  // graph chose), oneDNN's max pooling forward and backward, "read" converts y and dx back. The
  // fill and read operations allow one kept layout, so the pooling's group takes it.
  auto dev = std::make_shared<CppCPU>();
  ASSERT_EQ(dev->backend(), Backend::kCpuDnnl);
  const Shape sh{2, 32, 7, 9};
  const PoolingHandle h(sh, {3, 3}, {2, 2}, {1, 1}, /*is_max=*/true);
  const Shape ysh = h.OutputShape(2);
  const size_t n = 2 * 32 * 7 * 9, m = 2 * 32 * 4 * 5;
  std::vector<float> xv(n), dyv(m);
  for (size_t i = 0; i < n; ++i) xv[i] = std::sin(0.71f * float(i)) * float(1 + i % 5);
  for (size_t i = 0; i < m; ++i) dyv[i] = std::cos(0.3f * float(i));
  // NaN in a window's corner, in a plane's first pixel, in the last plane's last pixel
  for (size_t at : {size_t(3 * 63 + 2 * 9 + 4), size_t((32 + 17) * 63), n - 1})
    xv[at] = std::nanf("");
  struct Out {
    MemLayout seen = MemLayout::kPlain;
    std::vector<float> y, dx;
  };
  auto run = [&](MemLayout l) {
    Out o;
    const LayoutHooks fill = l == MemLayout::kChannels16 ? LayoutHooks{.writes = 1}
                             : l == MemLayout::kChannelsLast ? LayoutHooks{.writes_last = 1}
                                                             : LayoutHooks{};
    const LayoutHooks read = {.reads = fill.writes * 3, .reads_last = fill.writes_last * 3};
    Tensor src(sh, dev), x(sh, dev), dysrc(ysh, dev), dy(ysh, dev), out(Shape{1}, dev);
    auto put = [](const std::vector<float>& v, const Tensor& t, const Shape& s) {
      const std::vector<float> in = ToLayout(v, t.block()->mem_layout(), s, false);
      std::memcpy(t.block()->mutable_data(), in.data(), in.size() * sizeof(float));
    };
    dev->EnableGraph(true);
    dev->Exec({.reads = {src.block()}, .writes = {x.block()}, .label = "fill", .layouts = fill},
              [&](Context*) { put(xv, x, sh); });
    dev->Exec({.reads = {dysrc.block()}, .writes = {dy.block()}, .label = "fill", .layouts = fill},
              [&](Context*) { put(dyv, dy, ysh); });
    Tensor y = Pool2dForward(x, h);
    Tensor dx = Pool2dBackward(dy, x, y, h);
    dev->Exec({.reads = {y.block(), dx.block()}, .writes = {out.block()}, .label = "read",
               .layouts = read},
              [&](Context*) {
                o.seen = x.block()->mem_layout();
                o.y = ToLayout(Values(y), y.block()->mem_layout(), ysh, true);
                o.dx = ToLayout(Values(dx), dx.block()->mem_layout(), sh, true);
              });
    dev->EnableGraph(false);
    dev->RunGraph(false);
    dev->ResetGraph();
    return o;
  };
  const Out plain = run(MemLayout::kPlain);
  EXPECT_TRUE(std::isnan(plain.y[3 * 20 + 1 * 5 + 2]));  // the window around (2, 4)
  for (MemLayout l : {MemLayout::kChannels16, MemLayout::kChannelsLast}) {
    const Out o = run(l);
    EXPECT_EQ(o.seen, l);
    ExpectSameWithNaN(o.y, plain.y, "y");
    ExpectSameWithNaN(o.dx, plain.dx, "dx");
  }
}
#endif  // SINGA_USE_DNNL
