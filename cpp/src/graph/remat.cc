// Rematerialisation planning (see singa/graph/remat.h for the model and its guarantees).
#include "singa/graph/remat.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

namespace singa {
namespace remat {

namespace {

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Whether block b is written by some step in the open interval (lo, hi).
bool WrittenBetween(const Analysis& a, int b, size_t lo, size_t hi) {
  const auto& w = a.writes_at[b];
  auto it = std::upper_bound(w.begin(), w.end(), lo);
  return it != w.end() && *it < hi;
}

// What a recomputation of step s reads and writes, and what it costs.
const std::vector<int>& RerunReads(const Step& s) { return s.has_rerun ? s.rerun_reads : s.reads; }
const std::vector<int>& RerunWrites(const Step& s) {
  return s.has_rerun ? s.rerun_writes : s.writes;
}
double RerunCost(const Step& s) { return s.has_rerun ? s.rerun_cost : s.cost; }

}  // namespace

Analysis Analyse(const Problem& p) {
  const size_t nb = p.size.size(), ns = p.steps.size();
  Analysis a;
  a.candidate_of.assign(nb, -1);
  a.first.assign(nb, SIZE_MAX);
  a.last.assign(nb, 0);
  a.writes_at.assign(nb, {});
  std::vector<std::vector<size_t>> reads_at(nb);
  for (size_t s = 0; s < ns; ++s) {
    auto touch = [&](int b) {
      a.first[b] = std::min(a.first[b], s);
      a.last[b] = std::max(a.last[b], s);
    };
    for (int b : p.steps[s].reads) {
      touch(b);
      reads_at[b].push_back(s);
    }
    for (int b : p.steps[s].writes) {
      touch(b);
      a.writes_at[b].push_back(s);
    }
  }
  a.producer_of.assign(nb, -1);
  a.scratch_of.assign(ns, {});
  for (size_t s = 0; s < ns; ++s) {
    const Step& st = p.steps[s];
    if (!st.recomputable && !st.has_rerun) continue;
    // The producer must own one output that is read later; the rest must be pure scratch.
    int out = -1;
    bool ok = true;
    std::vector<int> scratch;
    for (int b : RerunWrites(st)) {
      if (!p.planned[b] || a.writes_at[b].size() != 1 || !Contains(st.writes, b) ||
          Contains(RerunReads(st), b)) {
        ok = false;
        break;
      }
      if (reads_at[b].empty()) {
        scratch.push_back(b);
      } else if (out < 0) {
        out = b;
      } else {
        ok = false;  // two outputs read later: one rerun would refill both; not modelled
        break;
      }
    }
    if (!ok || out < 0) continue;
    a.producer_of[out] = static_cast<long>(s);
    a.scratch_of[s] = std::move(scratch);
    // The longest gap between consecutive accesses (the write, then the reads).
    std::vector<size_t> acc{s};
    for (size_t r : reads_at[out])
      if (r != acc.back()) acc.push_back(r);
    if (acc.size() < 2) continue;  // never read after its write
    size_t best = 0;
    for (size_t i = 1; i + 1 < acc.size(); ++i)
      if (acc[i + 1] - acc[i] > acc[best + 1] - acc[best]) best = i;
    if (acc[best + 1] - acc[best] < 2) continue;  // nothing runs in between
    Candidate c;
    c.block = out;
    c.producer = s;
    c.gap_lo = acc[best];
    c.gap_hi = acc[best + 1];
    a.candidate_of[out] = static_cast<int>(a.candidates.size());
    a.candidates.push_back(std::move(c));
  }
  return a;
}

namespace {

// One rerun of a producer. A dropped candidate has a main rerun before its first use after the
// gap; a recomputation that needs a block while it is gone (inside a candidate's gap, or after
// the last access of a block whose producer can rerun) gets a transient rerun of its own, right
// before it, which lives only until that reader has run (Chen's segments: recompute forward
// from the nearest kept value, use, free) -- unless the block is a dropped candidate marked
// early: its main rerun then moves to the first such need. Needs are all known before a main
// rerun is visited (later producers first), so moving it never strands a served reader.
struct Rerun {
  int block;
  size_t producer, at;      // rerun before original step `at`
  bool main;
  size_t pos = 0, end = 0;  // schedule position of the rerun; last position needing the value
};

// The reruns a set of dropped candidates implies, and which rerun serves each read of a rerun.
struct Reruns {
  std::vector<Rerun> list;
  std::vector<int> drop_of;  // block -> candidate when dropped, else -1
  // (reader's index in list, block read, index of the rerun serving it, or SIZE_MAX for the
  // block's original range, extended if needed)
  std::vector<std::tuple<size_t, int, size_t>> needs;
};

// False when a rerun would read a value overwritten since its producer's original run.
bool CollectReruns(const Problem& p, const Analysis& a, const std::vector<int>& dropped,
                   const std::vector<char>& early, Reruns* out) {
  std::vector<Rerun>& reruns = out->list;
  std::map<std::pair<int, size_t>, size_t> rerun_at;  // (block, at) -> index in reruns
  out->drop_of.assign(p.size.size(), -1);
  // Later producers first: a rerun's needs are then all known when it is visited.
  std::priority_queue<std::pair<size_t, size_t>> todo;  // (producer, rerun index)
  auto add = [&](int b, size_t producer, size_t at, bool main) {
    auto key = std::make_pair(b, at);
    auto it = rerun_at.find(key);
    if (it != rerun_at.end()) return it->second;
    reruns.push_back({b, producer, at, main});
    rerun_at.emplace(key, reruns.size() - 1);
    todo.emplace(producer, reruns.size() - 1);
    return reruns.size() - 1;
  };
  std::vector<size_t> main_of(p.size.size(), SIZE_MAX);
  std::vector<char> early_of(p.size.size(), 0);
  for (size_t k = 0; k < dropped.size(); ++k) {
    const Candidate& cd = a.candidates[dropped[k]];
    out->drop_of[cd.block] = dropped[k];
    early_of[cd.block] = k < early.size() && early[k];
    main_of[cd.block] = add(cd.block, cd.producer, cd.gap_hi, true);
  }
  while (!todo.empty()) {
    const size_t i = todo.top().second;
    todo.pop();
    const size_t producer = reruns[i].producer, t = reruns[i].at;
    for (int r : RerunReads(p.steps[producer])) {
      if (WrittenBetween(a, r, producer, t)) return false;
      if (!p.planned[r]) continue;
      size_t serve = SIZE_MAX;
      const int c = out->drop_of[r];
      if (c >= 0 && t > a.candidates[c].gap_lo) {
        const Candidate& cr = a.candidates[c];
        const size_t m = main_of[r];
        if (t >= reruns[m].at) {
          serve = m;
        } else if (early_of[r]) {
          reruns[m].at = t;
          serve = m;
        } else {
          serve = add(r, cr.producer, t, false);
        }
      } else if (c < 0 && t > a.last[r] && a.producer_of[r] >= 0) {
        serve = add(r, static_cast<size_t>(a.producer_of[r]), t, false);
      }
      out->needs.emplace_back(i, r, serve);
    }
  }
  return true;
}

}  // namespace

Plan Simulate(const Problem& p, const Analysis& a, const std::vector<int>& dropped,
              const std::vector<char>& early) {
  const size_t nb = p.size.size(), ns = p.steps.size();
  Plan plan;
  plan.dropped = dropped;
  plan.early = early;
  plan.early.resize(dropped.size(), 0);
  Reruns rs;
  if (!CollectReruns(p, a, dropped, plan.early, &rs)) {
    plan.feasible = false;
    return plan;
  }
  std::vector<Rerun>& reruns = rs.list;
  const std::vector<int>& drop_of = rs.drop_of;
  // The schedule: each step preceded by the reruns due before it (producers in order).
  std::vector<std::vector<size_t>> due(ns);
  for (size_t i = 0; i < reruns.size(); ++i) due[reruns[i].at].push_back(i);
  std::vector<size_t> pos_of_step(ns);
  for (size_t s = 0; s < ns; ++s) {
    std::sort(due[s].begin(), due[s].end(),
              [&](size_t x, size_t y) { return reruns[x].producer < reruns[y].producer; });
    for (size_t i : due[s]) {
      reruns[i].pos = reruns[i].end = plan.schedule.size();
      plan.schedule.push_back({reruns[i].producer, true});
      plan.added_cost += RerunCost(p.steps[reruns[i].producer]);
    }
    pos_of_step[s] = plan.schedule.size();
    plan.schedule.push_back({s, false});
  }
  // Live ranges: `end` is the last schedule position needing a block's original range.
  std::vector<size_t> end(nb, 0);
  for (size_t b = 0; b < nb; ++b)
    if (p.planned[b] && a.first[b] != SIZE_MAX) end[b] = pos_of_step[a.last[b]];
  for (Rerun& rr : reruns)
    if (rr.main) rr.end = pos_of_step[a.last[rr.block]];
  for (auto& [reader, r, serve] : rs.needs) {
    const size_t at = reruns[reader].pos;
    if (serve == SIZE_MAX) {
      if (drop_of[r] < 0) end[r] = std::max(end[r], at);  // a dropped one: in its first range
    } else {
      reruns[serve].end = std::max(reruns[serve].end, at);
    }
  }
  for (size_t b = 0; b < nb; ++b) {
    if (!p.planned[b] || a.first[b] == SIZE_MAX) continue;
    const int c = drop_of[b];
    const size_t last = c >= 0 ? pos_of_step[a.candidates[c].gap_lo] : end[b];
    plan.segments.push_back({static_cast<int>(b), pos_of_step[a.first[b]], last, false});
  }
  for (const Rerun& rr : reruns) {
    plan.segments.push_back({rr.block, rr.pos, rr.end, true});
    for (int sc : a.scratch_of[rr.producer]) plan.segments.push_back({sc, rr.pos, rr.pos, true});
  }
  std::vector<long long> delta(plan.schedule.size() + 1, 0);
  for (const Segment& g : plan.segments) {
    delta[g.first] += static_cast<long long>(p.size[g.block]);
    delta[g.last + 1] -= static_cast<long long>(p.size[g.block]);
  }
  long long live = 0;
  for (long long d : delta) {
    live += d;
    plan.peak = std::max(plan.peak, static_cast<size_t>(live));
  }
  return plan;
}

namespace {
// First fit in the given order: each segment at the lowest offset free of every placed segment
// whose range overlaps its own. Returns the arena.
size_t PlaceInOrder(const Problem& p, const std::vector<Segment*>& order) {
  std::vector<Segment*> placed;
  size_t arena = 0;
  std::vector<std::pair<size_t, size_t>> busy;
  for (Segment* g : order) {
    const size_t sz = p.size[g->block];
    busy.clear();  // byte ranges of placed segments whose ranges overlap this one's
    for (Segment* q : placed)
      if (q->first <= g->last && g->first <= q->last)
        busy.emplace_back(q->offset, q->offset + p.size[q->block]);
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (auto& [lo, hi] : busy) {
      if (offset + sz <= lo) break;
      offset = std::max(offset, hi);
    }
    g->offset = offset;
    arena = std::max(arena, offset + sz);
    placed.push_back(g);
  }
  return arena;
}

std::vector<Segment*> BySize(const Problem& p, Plan* plan) {
  std::vector<Segment*> order;
  for (Segment& g : plan->segments) order.push_back(&g);
  const std::vector<size_t>& key = p.raw_size.empty() ? p.size : p.raw_size;
  std::sort(order.begin(), order.end(), [&](const Segment* x, const Segment* y) {
    if (key[x->block] != key[y->block]) return key[x->block] > key[y->block];
    return x->first < y->first;
  });
  return order;
}
}  // namespace

void Place(const Problem& p, Plan* plan) { plan->arena = PlaceInOrder(p, BySize(p, plan)); }

// Greedy by size leaves holes that cost ~10% over the peak at tight budgets (ResNet-50 b64):
// also try segments by bytes x positions (a long-lived large block first) and by positions
// alone, and keep the least arena of the three.
void PlaceTight(const Problem& p, Plan* plan) {
  Place(p, plan);
  auto length = [](const Segment* x) { return double(x->last - x->first + 1); };
  auto area = [&](const Segment* x) { return double(p.size[x->block]) * length(x); };
  std::vector<size_t> offsets;
  for (const Segment& g : plan->segments) offsets.push_back(g.offset);
  for (int key = 0; key < 2; ++key) {
    std::vector<Segment*> order;
    for (Segment& g : plan->segments) order.push_back(&g);
    std::stable_sort(order.begin(), order.end(), [&](const Segment* x, const Segment* y) {
      return key == 0 ? area(x) > area(y) : length(x) > length(y);
    });
    const size_t arena = PlaceInOrder(p, order);
    if (arena < plan->arena) {
      plan->arena = arena;
      for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = plan->segments[i].offset;
    }
  }
  for (size_t i = 0; i < offsets.size(); ++i) plan->segments[i].offset = offsets[i];
}

namespace {

// Bytes live at each original step, counting the recomputations that run just before it.
std::vector<size_t> LiveAtSteps(const Problem& p, const Plan& plan) {
  std::vector<long long> delta(plan.schedule.size() + 1, 0);
  for (const Segment& g : plan.segments) {
    delta[g.first] += static_cast<long long>(p.size[g.block]);
    delta[g.last + 1] -= static_cast<long long>(p.size[g.block]);
  }
  std::vector<size_t> out(p.steps.size(), 0);
  long long live = 0;
  size_t worst = 0;
  for (size_t i = 0; i < plan.schedule.size(); ++i) {
    live += delta[i];
    worst = std::max(worst, static_cast<size_t>(live));
    if (!plan.schedule[i].recompute) {
      out[plan.schedule[i].step] = worst;
      worst = 0;
    }
  }
  return out;
}

// The next candidate of the greedy sequence, or -1 when none frees bytes at the peak.
int NextGreedy(const Problem& p, const Analysis& a, const Plan& cur, const std::vector<char>& used,
               Plan* next) {
  const std::vector<size_t> live = LiveAtSteps(p, cur);
  const size_t peak_step = std::max_element(live.begin(), live.end()) - live.begin();
  int best = -1;
  double best_score = 0;
  size_t best_freed = 0;
  std::vector<int> trial = cur.dropped;
  trial.push_back(-1);
  std::vector<char> early = cur.early;
  early.push_back(0);
  for (size_t c = 0; c < a.candidates.size(); ++c) {
    const Candidate& cd = a.candidates[c];
    if (used[c] || cd.gap_lo >= peak_step || cd.gap_hi <= peak_step) continue;
    trial.back() = static_cast<int>(c);
    Plan t = Simulate(p, a, trial, early);
    if (!t.feasible) continue;
    const size_t after = LiveAtSteps(p, t)[peak_step];
    if (after >= live[peak_step]) continue;
    const size_t freed = live[peak_step] - after;
    const double score = freed / std::max(t.added_cost - cur.added_cost, 1e-12);
    if (best < 0 || score > best_score || (score == best_score && freed > best_freed)) {
      best = static_cast<int>(c);
      best_score = score;
      best_freed = freed;
      *next = std::move(t);
    }
  }
  return best;
}

// The prefix `plan` with main reruns moved early where that saves a transient rerun without
// raising the peak (see the file comment of remat.h: "Early reruns"), dropped candidates in
// the order chosen. Depends on the prefix alone, never on a budget.
Plan Refine(const Problem& p, const Analysis& a, const Plan& plan) {
  Plan best = plan;
  // reruns per producer: a candidate whose producer reruns more than once has a transient
  std::vector<int> runs(p.steps.size(), 0);
  for (const Event& e : plan.schedule) runs[e.step] += e.recompute;
  for (size_t k = 0; k < plan.dropped.size(); ++k) {
    if (best.early[k] || runs[a.candidates[plan.dropped[k]].producer] < 2) continue;
    std::vector<char> early = best.early;
    early[k] = 1;
    Plan t = Simulate(p, a, best.dropped, early);
    if (t.feasible && t.added_cost < best.added_cost && t.peak <= best.peak) best = std::move(t);
  }
  return best;
}

Plan SqrtN(const Problem& p, const Analysis& a) {
  std::vector<int> order(a.candidates.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = static_cast<int>(c);
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    return a.candidates[x].producer < a.candidates[y].producer;
  });
  const size_t k = std::max<size_t>(
      1, static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(order.size())))));
  std::vector<int> dropped;
  Plan plan = Simulate(p, a, dropped);
  for (size_t i = 0; i < order.size(); ++i) {
    if (i % k == k - 1) continue;  // a checkpoint: kept
    dropped.push_back(order[i]);
    Plan t = Simulate(p, a, dropped);
    if (t.feasible) {
      plan = std::move(t);
    } else {
      dropped.pop_back();
    }
  }
  return plan;
}

}  // namespace

Plan PlanForBudget(const Problem& p, size_t arena_budget, Strategy strategy, size_t* min_arena) {
  const Analysis a = Analyse(p);
  if (strategy == Strategy::kSqrtN) {
    Plan plan = SqrtN(p, a);
    Place(p, &plan);
    if (min_arena) *min_arena = plan.arena;
    plan.feasible = plan.arena <= arena_budget;
    return plan;
  }
  Plan cur = Simulate(p, a, {});
  std::vector<char> used(a.candidates.size(), 0);
  Plan best_seen;  // the smallest placed arena, reported when nothing fits
  best_seen.arena = std::numeric_limits<size_t>::max();
  std::vector<Plan> unplaced;  // prefixes skipped because their peak alone exceeded the budget
  while (true) {
    // This prefix's refined plan first (it recomputes less), then the prefix as it is.
    Plan refined = Refine(p, a, cur);
    for (Plan* q : {&refined, &cur}) {
      if (q == &refined && (strategy == Strategy::kGreedyUnrefined ||
                            refined.added_cost >= cur.added_cost))
        continue;
      if (q->peak > arena_budget) {
        unplaced.push_back(*q);
        continue;
      }
      PlaceTight(p, q);
      if (q->arena <= arena_budget) {
        if (min_arena) *min_arena = q->arena;
        return std::move(*q);
      }
      if (q->arena < best_seen.arena) best_seen = *q;
    }
    Plan next;
    const int c = NextGreedy(p, a, cur, used, &next);
    if (c < 0) break;
    used[c] = 1;
    cur = std::move(next);
  }
  // Nothing fits: the least arena over the whole sequence (a placed arena is at least its peak,
  // so prefixes are placed in rising peak order until none can do better).
  std::sort(unplaced.begin(), unplaced.end(),
            [](const Plan& x, const Plan& y) { return x.peak < y.peak; });
  for (Plan& u : unplaced) {
    if (u.peak >= best_seen.arena) break;
    PlaceTight(p, &u);
    if (u.arena < best_seen.arena) best_seen = std::move(u);
  }
  if (min_arena) *min_arena = best_seen.arena;
  best_seen.feasible = false;
  return best_seen;
}

}  // namespace remat
}  // namespace singa
