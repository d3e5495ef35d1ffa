// A memory budget met by recomputation (singa/graph/remat.h), property-tested on random graphs:
// bit-identical results, no two live ranges sharing bytes, the arena within the budget and
// falling with it, and a clear error below the least budget; with 4-d blocks whose operations
// accept the channel-blocked layout, the same under every budget with the layouts kept.
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "singa/core/device.h"
#include "singa/core/error.h"
#include "singa/graph/graph.h"

using namespace singa;

namespace {

// A random "training step" on raw float blocks: a forward chain (some producers with a fused
// ReLU variant followed by a ReLU), then a backward chain that reads the forward values in
// reverse, with an in-place accumulation now and then; every op is a deterministic pure
// function of what it reads, so recomputing one gives the same bits.
//
// `shaped`: activations are 4-d (1, 16, 2, n / 32) float blocks and each operation accepts
// each of its operands in the channel-blocked layout at random (as a convolution does), so the
// graph's layout pass keeps some blocked (graph/layouts.cc); a kernel adds a term that depends
// on the layout its output has when it runs, so a recomputation that saw another layout than
// the original run would change the bits.
struct RandomStep {
  std::shared_ptr<Device> dev = std::make_shared<CppCPU>();
  std::vector<std::shared_ptr<Block>> keep;  // what the recorded lambdas point at
  Block* out = nullptr;
  bool shaped = false;
  std::mt19937 layout_rng;

  Block* NewFloats(size_t n) {
    // (activations only: a statistic's or scratch's other floats would be read unwritten)
    const bool image = shaped && n >= 16;
    if (image) n = (n + 31) / 32 * 32;
    keep.push_back(dev->NewBlock(n * sizeof(float)));
    if (image) keep.back()->set_layout(kFloat32, Shape{1, 16, 2, n / 32});
    return keep.back().get();
  }
  static size_t N(Block* b) { return b->size() / sizeof(float); }
  static float LayoutTerm(Block* y) {
    return y->mem_layout() == MemLayout::kChannels16 ? 1e-3f : 0.f;
  }
  // Each read and the first write accepted blocked with probability 3/4.
  LayoutHooks Accepts(size_t reads) {
    LayoutHooks h;
    if (!shaped) return h;
    for (size_t k = 0; k < reads; ++k) h.reads |= (layout_rng() % 4 != 0 ? 1u : 0u) << k;
    h.writes = layout_rng() % 4 != 0 ? 1u : 0u;
    return h;
  }

  // y = a * x0 (+ b * x1) + c, elementwise with wrap-around; `relu` applies max(0, .).
  void Combine(const std::vector<Block*>& in, Block* y, float c, bool relu, const char* name,
               bool with_fused = false, Block* also = nullptr) {
    auto make = [in, y, c, also](bool r) {
      return [in, y, c, r, also](Context*) {
        float* o = static_cast<float*>(y->mutable_data());
        for (size_t j = 0; j < N(y); ++j) {
          float v = c;
          for (size_t k = 0; k < in.size(); ++k) {
            const float* x = static_cast<const float*>(in[k]->data());
            v += (0.5f / (k + 1)) * x[(j * 7 + k) % N(in[k])];
          }
          v += LayoutTerm(y);
          o[j] = r ? (v > 0 ? v : 0.f) : v;
        }
        if (also) static_cast<float*>(also->mutable_data())[0] = c;  // scratch
      };
    };
    std::vector<Block*> writes{y};
    if (also) writes.push_back(also);
    FusionHooks hooks;
    if (with_fused) {  // a ReLU-only variant: the graph gives it e.relu alone
      hooks.accepts = kEpiReLU;
      hooks.with_epilogue = [f = make(true)](Context* c, const Epilogue&) { f(c); };
    }
    dev->Exec({.reads = in,
               .writes = writes,
               .label = name,
               .fusion = hooks,
               .layouts = Accepts(in.size())},
              make(relu));
  }

  // A batch norm in training, in miniature: y = (x - m) * 0.5 (+ ReLU) with m = mean(x) saved in
  // `stat` (read by the backward) and `running` += m in place, so the operation itself is not
  // recomputable; its rerun form reads x and the saved m and writes y alone, through the same
  // code, leaving `running` alone. `also`: a scratch block both forms write.
  void Norm(Block* x, Block* y, Block* stat, Block* running, bool with_fused, Block* also) {
    auto normalise = [x, y, stat](bool r) {
      const float* a = static_cast<const float*>(x->data());
      const float m = static_cast<const float*>(stat->data())[0];
      float* o = static_cast<float*>(y->mutable_data());
      for (size_t j = 0; j < N(y); ++j) {
        const float v = (a[j % N(x)] - m) * 0.5f + LayoutTerm(y);
        o[j] = r ? (v > 0 ? v : 0.f) : v;
      }
    };
    auto run = [=](bool r) {
      return [=](Context*) {
        const float* a = static_cast<const float*>(x->data());
        float m = 0;
        for (size_t j = 0; j < N(x); ++j) m += a[j];
        static_cast<float*>(stat->mutable_data())[0] = m / N(x);
        static_cast<float*>(running->mutable_data())[0] += m / N(x);
        normalise(r);
        if (also) static_cast<float*>(also->mutable_data())[0] = 1;
      };
    };
    auto rerun = [=](bool r) {
      return [=](Context*) {
        normalise(r);
        if (also) static_cast<float*>(also->mutable_data())[0] = 2;
      };
    };
    std::vector<Block*> writes{y, stat, running};
    if (also) writes.push_back(also);
    FusionHooks hooks;
    EpilogueFn rerun_fused;
    if (with_fused) {  // ReLU-only variants: the graph gives them e.relu alone
      hooks.accepts = kEpiReLU;
      hooks.with_epilogue = [f = run(true)](Context* c, const Epilogue&) { f(c); };
      rerun_fused = [f = rerun(true)](Context* c, const Epilogue&) { f(c); };
    }
    std::vector<Block*> rerun_writes{y};
    if (also) rerun_writes.push_back(also);
    dev->Exec({.reads = {x, running},
               .writes = writes,
               .label = "Norm",
               .fusion = hooks,
               .rerun = {rerun(false), rerun_fused, {x, stat}, rerun_writes},
               .layouts = Accepts(2)},
              run(false));
  }

  explicit RandomStep(unsigned seed, bool with_layouts = false)
      : shaped(with_layouts), layout_rng(seed + 1000) {
    std::mt19937 rng(seed);
    auto size = [&] { return static_cast<size_t>(16 + rng() % 400); };
    Block* x = NewFloats(size());
    Block* w = NewFloats(64);  // a parameter, updated in place at the end
    std::vector<float> host(N(x));
    for (size_t j = 0; j < host.size(); ++j) host[j] = std::sin(0.37f * j + seed);
    dev->CopyDataFromHostPtr(x, host.data(), x->size());
    std::vector<float> wh(64, 0.25f);
    dev->CopyDataFromHostPtr(w, wh.data(), w->size());
    Block* running = NewFloats(1);
    x->AddExternalRef();
    w->AddExternalRef();
    running->AddExternalRef();
    dev->EnableGraph(true);
    std::vector<Block*> fwd{x};
    std::vector<Block*> stats;  // read by the backward, as batch norm's saved statistics are
    const int layers = 4 + rng() % 12;
    for (int l = 0; l < layers; ++l) {
      std::vector<Block*> in{fwd.back(), w};
      if (fwd.size() > 2 && rng() % 3 == 0) in.push_back(fwd[fwd.size() - 3]);  // a skip
      Block* y = NewFloats(size());
      const bool fuse = rng() % 3 == 0;
      Block* ws = rng() % 4 == 0 ? NewFloats(8) : nullptr;
      if (rng() % 3 == 0) {
        stats.push_back(NewFloats(1));
        Norm(fwd.back(), y, stats.back(), running, fuse, ws);
      } else {
        Combine(in, y, 0.01f * l, false, fuse ? "Conv" : "Linear", fuse, ws);
      }
      if (fuse) {  // the ReLU that fusion folds into its producer
        Block* z = NewFloats(N(y));
        dev->Exec({.id = OpId::kReLU,
                   .reads = {y},
                   .writes = {z},
                   .layouts = shaped ? LayoutHooks::Flat() : LayoutHooks{}},
                  [y, z](Context*) {
                    const float* a = static_cast<const float*>(y->data());
                    float* o = static_cast<float*>(z->mutable_data());
                    for (size_t j = 0; j < N(z); ++j) o[j] = a[j] > 0 ? a[j] : 0.f;
                  });
        y = z;
      }
      fwd.push_back(y);
    }
    Block* g = NewFloats(size());
    Combine({fwd.back()}, g, 1.f, false, "Loss");
    Block* acc = NewFloats(32);
    Combine({g}, acc, 0.f, false, "AccInit");
    for (int l = layers; l >= 1; --l) {
      Block* g2 = NewFloats(size());
      std::vector<Block*> in{g, fwd[l], fwd[l - 1]};
      if (!stats.empty() && l % 2 == 0) in.push_back(stats[l % stats.size()]);
      Combine(in, g2, -0.02f * l, rng() % 2 == 0, "Backward");
      g = g2;
      if (rng() % 3 == 0)  // an in-place accumulation: read and written, never recomputed
        dev->Exec({.reads = {acc, g}, .writes = {acc}, .label = "Accumulate"},
                  [acc, g](Context*) {
                    float* a = static_cast<float*>(acc->mutable_data());
                    const float* v = static_cast<const float*>(g->data());
                    for (size_t j = 0; j < N(acc); ++j) a[j] += v[j % N(g)];
                  });
    }
    out = NewFloats(N(g) + N(acc));
    dev->Exec({.reads = {g, acc}, .writes = {out}, .label = "Result"},
              [g, acc, o = out](Context*) {
                float* d = static_cast<float*>(o->mutable_data());
                std::memcpy(d, g->data(), g->size());
                std::memcpy(d + N(g), acc->data(), acc->size());
              });
    // The update reads the parameter after backward, as an optimizer does.
    dev->Exec({.reads = {w, g}, .writes = {w}, .label = "Update"},
              [w, g](Context*) {
                float* p = static_cast<float*>(w->mutable_data());
                p[0] = p[0] * 0.5f + static_cast<const float*>(g->data())[0] * 0.f + 0.125f;
              });
    out->AddExternalRef();
    dev->EnableGraph(false);
  }
  ~RandomStep() { dev->ResetGraph(); }

  // The result, then the running statistic (a rerun that updated it would show there).
  std::vector<float> Run() {
    // The update changes w, a Norm `running`: put them back so that every run computes the same.
    std::vector<float> wh(64, 0.25f);
    dev->CopyDataFromHostPtr(keep[1].get(), wh.data(), keep[1]->size());
    const float zero = 0;
    dev->CopyDataFromHostPtr(keep[2].get(), &zero, sizeof(float));
    dev->RunGraph(false);
    std::vector<float> o(N(out) + 1);
    dev->CopyDataToHostPtr(out, o.data(), out->size());
    dev->CopyDataToHostPtr(keep[2].get(), &o.back(), sizeof(float));
    return o;
  }
};

// Ranges live at the same time never share bytes (BlockList lists every range of a block).
void ExpectNoOverlap(Graph* g, const std::string& where) {
  std::vector<Graph::BlockInfo> rec;
  for (const auto& b : g->BlockList())
    if (b.recyclable) rec.push_back(b);
  for (size_t p = 0; p < rec.size(); ++p)
    for (size_t q = p + 1; q < rec.size(); ++q) {
      const auto &a = rec[p], &b = rec[q];
      const bool live = a.first <= b.last && b.first <= a.last;
      const bool bytes = a.offset < b.offset + b.block->size() &&
                         b.offset < a.offset + a.block->size();
      ASSERT_FALSE(live && bytes) << where << ": ranges [" << a.first << "," << a.last << "] and ["
                                  << b.first << "," << b.last << "] share bytes";
    }
}

size_t Total(Graph* g) { return g->memory_plan().persistent_bytes + g->memory_plan().arena_bytes; }


// What the falling-budget runs of random steps covered.
struct Coverage {
  int recomputed = 0, fused = 0, norm_rerun = 0, blocked = 0;
};

// One random step under falling budgets: identical bits, within the budget, the arena never
// growing, no shared bytes; then the error, whose stated minimum works. The layouts the
// unbudgeted graph chose stay chosen under every budget.
void CheckFallingBudgets(unsigned seed, bool with_layouts, Coverage* cov) {
  RandomStep step(seed, with_layouts);
  Graph* g = step.dev->graph();
  const std::vector<float> ref = step.Run();
  const GraphMemoryPlan free_plan = g->memory_plan();
  const std::vector<Graph::BlockInfo> free_blocks = g->BlockList();
  const Graph::LayoutCounts free_layouts = g->layout_counts();
  ExpectNoOverlap(g, "unbudgeted seed " + std::to_string(seed));
  cov->fused += g->num_fused() > 0;
  cov->blocked += free_layouts.blocks > 0;
  const size_t total = Total(g);
  auto same_layouts = [&](const std::string& where) {
    EXPECT_EQ(g->layout_counts().blocks, free_layouts.blocks) << where;
    EXPECT_EQ(g->layout_counts().bytes, free_layouts.bytes) << where;
  };
  // A budget the step already fits changes nothing, to the byte.
  step.dev->SetMemoryBudget(total);
  EXPECT_EQ(step.Run(), ref);
  EXPECT_EQ(g->memory_plan().arena_bytes, free_plan.arena_bytes);
  EXPECT_EQ(g->memory_plan().num_recomputed, 0u);
  same_layouts("seed " + std::to_string(seed) + " at the unconstrained total");
  const auto same_blocks = g->BlockList();
  ASSERT_EQ(same_blocks.size(), free_blocks.size());
  for (size_t i = 0; i < same_blocks.size(); ++i)
    EXPECT_EQ(same_blocks[i].offset, free_blocks[i].offset);
  // Falling budgets: identical bits, within the budget, arena never growing; then the error.
  size_t last_arena = free_plan.arena_bytes;
  std::mt19937 rng(seed);
  size_t budget = total;
  for (int k = 0; k < 12; ++k) {
    budget -= budget / (3 + rng() % 8);
    step.dev->SetMemoryBudget(budget);
    const std::string where = "seed " + std::to_string(seed) + " budget " +
                              std::to_string(budget);
    try {
      ASSERT_EQ(step.Run(), ref) << where;
    } catch (const OutOfMemoryError& e) {
      const std::string msg = e.what();
      const size_t at = msg.find("needs at least ");
      ASSERT_NE(at, std::string::npos) << msg;
      const size_t least = std::stoull(msg.substr(at + 15));
      EXPECT_GT(least, budget) << msg;
      EXPECT_LE(least, last_arena + free_plan.persistent_bytes) << msg;
      step.dev->SetMemoryBudget(least);  // the stated minimum works
      EXPECT_EQ(step.Run(), ref) << where;
      EXPECT_LE(Total(g), least);
      same_layouts(where + " at the minimum");
      ExpectNoOverlap(g, where + " at the minimum");
      break;
    }
    EXPECT_LE(Total(g), budget) << where;
    EXPECT_LE(g->memory_plan().arena_bytes, last_arena) << where;
    last_arena = g->memory_plan().arena_bytes;
    cov->recomputed += g->memory_plan().num_recomputed > 0;
    for (size_t pos = 0; pos < g->order().size(); ++pos)
      if (g->IsRecomputeAt(pos) && g->OpNameAt(pos) == "Norm") {
        ++cov->norm_rerun;
        break;
      }
    same_layouts(where);
    ExpectNoOverlap(g, where);
  }
}

}  // namespace

TEST(GraphBudget, RandomGraphsBitIdenticalWithinBudgetAndMonotone) {
  Coverage cov;
  for (unsigned seed = 1; seed <= 30; ++seed) CheckFallingBudgets(seed, false, &cov);
  EXPECT_GT(cov.recomputed, 10);  // the property covers recomputed blocks
  EXPECT_GT(cov.fused, 10);       // and fused ReLUs
  EXPECT_GT(cov.norm_rerun, 5);   // and operations recomputed through their rerun form
}

// A budget keeps the blocked layouts (a recomputation reruns the same operation on the same
// blocks, whose layout tags a build sets once), and everything above still holds.
TEST(GraphBudget, RandomGraphsWithBlockedLayoutsKeepThemUnderEveryBudget) {
  Coverage cov;
  for (unsigned seed = 1; seed <= 30; ++seed) CheckFallingBudgets(seed, true, &cov);
  EXPECT_GT(cov.blocked, 20);  // the layout pass kept blocks blocked
  EXPECT_GT(cov.recomputed, 10);
  EXPECT_GT(cov.fused, 10);
  EXPECT_GT(cov.norm_rerun, 5);
}

// A rerun form must write the operation's first output first, and only what the operation
// writes; the same errors whether a graph records or not.
TEST(GraphBudget, RerunFormIsChecked) {
  auto dev = std::make_shared<CppCPU>();
  auto a = dev->NewBlock(16), b = dev->NewBlock(16), c = dev->NewBlock(16);
  auto nop = [](Context*) {};
  auto exec = [&](OpRerun r) {
    dev->Exec({.reads = {a.get()}, .writes = {b.get()}, .label = "Op", .rerun = std::move(r)},
              nop);
  };
  for (bool recording : {true, false}) {
    dev->EnableGraph(recording);
    EXPECT_THROW(exec({nop, nullptr, {a.get()}, {c.get()}}), ValueError);
    EXPECT_THROW(exec({nop, nullptr, {a.get()}, {b.get(), c.get()}}), ValueError);
    EXPECT_THROW(exec({nullptr, nullptr, {a.get()}, {b.get()}}), ValueError);
    EXPECT_NO_THROW(exec({nop, nullptr, {a.get()}, {b.get()}}));
    EXPECT_NO_THROW(exec({}));  // no rerun form
  }
  EXPECT_EQ(dev->graph()->num_nodes(), 2u);  // the two accepted while recording
  dev->ResetGraph();
}

TEST(GraphBudget, FractionAndChensBaseline) {
  RandomStep step(77);
  Graph* g = step.dev->graph();
  const std::vector<float> ref = step.Run();
  const size_t total = Total(g);
  step.dev->SetMemoryBudgetFraction(1.0);
  EXPECT_EQ(step.Run(), ref);
  EXPECT_EQ(g->memory_plan().budget_bytes, total);
  g->SetRecomputeStrategy(remat::Strategy::kSqrtN);  // one plan whatever the budget
  EXPECT_EQ(step.Run(), ref);
  EXPECT_GT(g->memory_plan().num_recomputed, 0u);
  EXPECT_LE(Total(g), total);
  ExpectNoOverlap(g, "sqrt(N)");
  EXPECT_THROW(step.dev->SetMemoryBudgetFraction(1.5), ValueError);
}

TEST(GraphBudget, NeedsPlannedMemory) {
  RandomStep step(5);
  step.dev->graph()->SetPlanning(false);
  step.dev->SetMemoryBudget(1 << 20);
  EXPECT_THROW(step.Run(), Error);
  step.dev->SetMemoryBudget(0);
  EXPECT_NO_THROW(step.Run());
}
