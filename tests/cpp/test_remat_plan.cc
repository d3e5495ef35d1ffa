// The memory-budget planner alone (singa/graph/remat.h), on random problems: every plan it
// returns is a valid execution (each read finds its block written and unchanged), fits its
// budget, never shares bytes between live ranges, prices its recomputations as it says, and its
// arena falls with the budget; early reruns (a main rerun moved to a recomputation's need)
// happen and are among the plans checked. tests/cpp/test_graph_budget.cc runs the same planner
// through Graph, bit for bit.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "singa/graph/remat.h"

using namespace singa::remat;

namespace {

// A random training step: a forward chain (skips, scratch, steps recomputable or not, some with
// a rerun form that reads a saved statistic and leaves a running one alone), a backward that
// reads the forward values in reverse, and an update of the parameter.
Problem RandomProblem(unsigned seed) {
  std::mt19937 rng(seed);
  Problem p;
  auto block = [&](bool planned) {
    const size_t bytes = 64 * (1 + rng() % 64);
    p.size.push_back(bytes);
    p.raw_size.push_back(bytes);
    p.planned.push_back(planned);
    return static_cast<int>(p.size.size()) - 1;
  };
  auto cost = [&] { return 0.1 * (1 + rng() % 100); };
  const int x = block(false), w = block(false), running = block(false);
  std::vector<int> fwd{x}, stats;
  const int layers = 4 + rng() % 14;
  for (int l = 0; l < layers; ++l) {
    Step s;
    const int y = block(true);
    s.reads = {fwd.back(), w};
    if (fwd.size() > 2 && rng() % 3 == 0) s.reads.push_back(fwd[fwd.size() - 3]);
    s.writes = {y};
    s.cost = cost();
    if (rng() % 4 == 0) s.writes.push_back(block(true));  // scratch: never read
    if (rng() % 4 == 0) {  // batch norm in miniature: a rerun from the saved statistic
      const int stat = block(true);
      stats.push_back(stat);
      s.reads = {fwd.back(), running};
      s.writes = {y, stat, running};
      s.has_rerun = true;
      s.rerun_reads = {fwd.back(), stat};
      s.rerun_writes = {y};
      s.rerun_cost = s.cost / 3;
    } else {
      s.recomputable = rng() % 5 != 0;
    }
    p.steps.push_back(s);
    fwd.push_back(y);
  }
  int g = block(true);
  p.steps.push_back({{fwd.back()}, {g}, false, cost()});
  for (int l = layers; l >= 1; --l) {
    const int g2 = block(true);
    Step s{{g, fwd[l], fwd[l - 1]}, {g2}, true, cost()};
    if (!stats.empty() && l % 2 == 0) s.reads.push_back(stats[l % stats.size()]);
    p.steps.push_back(s);
    g = g2;
  }
  p.steps.push_back({{w, g}, {w}, false, cost()});
  return p;
}

const std::vector<int>& ReadsOf(const Step& s, bool rerun) {
  return rerun && s.has_rerun ? s.rerun_reads : s.reads;
}
const std::vector<int>& WritesOf(const Step& s, bool rerun) {
  return rerun && s.has_rerun ? s.rerun_writes : s.writes;
}

// The plan as an execution: every event's planned reads lie in a segment of theirs that an
// earlier event began by writing them; a recomputation's persistent reads were not written
// again since its step's original run; segments live at once never share bytes; the added cost
// is the sum of the reruns'.
void ExpectValid(const Problem& p, const Plan& plan, const std::string& where) {
  const size_t n = plan.schedule.size();
  std::vector<size_t> pos_of_step(p.steps.size());
  for (size_t i = 0; i < n; ++i)
    if (!plan.schedule[i].recompute) pos_of_step[plan.schedule[i].step] = i;
  double rerun_cost = 0;
  for (size_t i = 0; i < n; ++i) {
    const Event& e = plan.schedule[i];
    const Step& s = p.steps[e.step];
    if (e.recompute) rerun_cost += s.has_rerun ? s.rerun_cost : s.cost;
    for (int r : ReadsOf(s, e.recompute)) {
      if (!p.planned[r]) {
        for (size_t j = pos_of_step[e.step] + 1; e.recompute && j < i; ++j)
          if (!plan.schedule[j].recompute) {
            const auto& ws = p.steps[plan.schedule[j].step].writes;
            ASSERT_EQ(std::count(ws.begin(), ws.end(), r), 0)
                << where << ": a rerun at " << i << " reads block " << r << " written at " << j;
          }
        continue;
      }
      bool served = false;
      for (const Segment& g : plan.segments) {
        if (g.block != r || g.first >= i || g.last < i) continue;
        const Event& w = plan.schedule[g.first];
        const auto& ws = WritesOf(p.steps[w.step], w.recompute);
        served = served || std::count(ws.begin(), ws.end(), r) > 0;
      }
      ASSERT_TRUE(served) << where << ": block " << r << " read at " << i << " is not live";
    }
  }
  EXPECT_NEAR(plan.added_cost, rerun_cost, 1e-9 * (1 + rerun_cost)) << where;
  for (size_t a = 0; a < plan.segments.size(); ++a)
    for (size_t b = a + 1; b < plan.segments.size(); ++b) {
      const Segment &x = plan.segments[a], &y = plan.segments[b];
      const bool live = x.first <= y.last && y.first <= x.last;
      const bool bytes = x.offset < y.offset + p.size[y.block] &&
                         y.offset < x.offset + p.size[x.block];
      ASSERT_FALSE(live && bytes) << where << ": blocks " << x.block << " and " << y.block;
    }
}

}  // namespace

TEST(RematPlan, RandomProblemsGiveValidPlansWithinFallingBudgets) {
  int early = 0, recomputed = 0;
  for (unsigned seed = 1; seed <= 60; ++seed) {
    const Problem p = RandomProblem(seed);
    Plan free = Simulate(p, Analyse(p), {});
    Place(p, &free);
    ExpectValid(p, free, "unbudgeted " + std::to_string(seed));
    size_t budget = free.arena, last = free.arena;
    std::mt19937 rng(seed);
    for (int k = 0; k < 14; ++k) {
      const std::string where = "seed " + std::to_string(seed) + " budget " +
                                std::to_string(budget);
      size_t least = 0;
      const Plan plan = PlanForBudget(p, budget, Strategy::kGreedy, &least);
      if (!plan.feasible) {
        EXPECT_GT(least, budget) << where;
        EXPECT_LE(least, last) << where;
        const Plan at_least = PlanForBudget(p, least, Strategy::kGreedy);
        EXPECT_TRUE(at_least.feasible) << where;
        ExpectValid(p, at_least, where + " at the least");
        break;
      }
      ExpectValid(p, plan, where);
      EXPECT_LE(plan.arena, budget) << where;
      EXPECT_LE(plan.arena, last) << where;  // falls with the budget
      last = plan.arena;
      recomputed += !plan.dropped.empty();
      early += std::count(plan.early.begin(), plan.early.end(), 1) > 0;
      budget -= budget / (4 + rng() % 8);
    }
  }
  EXPECT_GT(recomputed, 100);
  EXPECT_GT(early, 20);  // the early reruns are among the plans checked
}

// Early reruns, by hand. A forward a = A(x) (dear), b = B(a) (cheap), then the peak, then a
// backward that reads b, later a. Dropping both: b's rerun needs a before a's own rerun is
// due; without moving it, A runs twice (once for B's rerun, once for its backward reader);
// moved early, once, at the price of a living a little longer, away from the peak.
TEST(RematPlan, AnEarlyRerunSavesATransientOne) {
  Problem p;
  auto block = [&](size_t kib, bool planned = true) {
    p.size.push_back(kib * 1024);
    p.planned.push_back(planned);
    return static_cast<int>(p.size.size()) - 1;
  };
  const int x = block(1, false), a = block(8), b = block(8), c = block(1), big = block(32),
            g = block(4), h = block(4), k = block(4), out = block(1, false);
  p.steps = {{{x}, {a}, true, 10},  {{a}, {b}, true, 1},    {{b}, {c}, true, 1},
             {{c}, {big}, true, 1}, {{big}, {g}, true, 1},  {{g, b}, {h}, true, 1},
             {{h, a}, {k}, true, 1}, {{k}, {out}, true, 1}};
  // The peak (a, b, big, g: 52 KiB) falls below 40 KiB only with both a and b dropped.
  const Plan plan = PlanForBudget(p, 40 * 1024, Strategy::kGreedy);
  ASSERT_TRUE(plan.feasible);
  ASSERT_EQ(plan.dropped.size(), 2u);
  EXPECT_EQ(std::count(plan.early.begin(), plan.early.end(), 1), 1);
  int runs_of_a = 0;
  for (const Event& e : plan.schedule) runs_of_a += e.recompute && e.step == 0;
  EXPECT_EQ(runs_of_a, 1);
  EXPECT_DOUBLE_EQ(plan.added_cost, 11);
  ExpectValid(p, plan, "by hand");
}
