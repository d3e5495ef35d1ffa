// The computational graph (see singa/graph/graph.h for the model and its invariant).
#include "singa/graph/graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <iomanip>
#include <map>
#include <sstream>
#include <unordered_set>

#include "singa/core/error.h"

namespace singa {

namespace {
constexpr size_t kArenaAlign = 64;
size_t AlignUp(size_t n) { return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }
// A user-given name inside a double-quoted Graphviz label.
std::string DotEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
// " (with its fused BatchNormForwardInference, Add, ReLU)": what a check_finite message adds.
std::string FusedSuffix(const Epilogue& e) {
  std::string s;
  for (const char* part : {e.relu_mask ? "ReLUBackward" : nullptr,
                           e.bn_scale ? "BatchNormForwardInference" : nullptr,
                           e.residual ? "Add" : nullptr, e.relu ? "ReLU" : nullptr})
    if (part) s += (s.empty() ? " (with its fused " : ", ") + std::string(part);
  return s + ")";
}
}  // namespace

Graph::Graph(Device* device) : device_(device) {}

Graph::~Graph() {
  // Nodes hold the tensors (and so the blocks) they captured; detach planned memory first so that
  // no block outlives the arena while pointing into it.
  ReleaseArena();
}

void Graph::AddOperation(OpDesc desc, OpFunc fn) {
  Node n;
  n.fn = std::move(fn);
  n.fusion = std::move(desc.fusion);
  if (desc.writes.empty()) n.fusion.with_epilogue = nullptr;
  n.id = desc.id;
  n.name = desc.name();
  n.reads = std::move(desc.reads);
  n.writes = std::move(desc.writes);
  n.use_rand = desc.use_rand_generator;
  n.collective = desc.collective;
  n.recomputable = desc.recomputable;
  n.rerun = std::move(desc.rerun);
  n.flops = desc.flops;
  n.layouts = desc.layouts;
  nodes_.push_back(std::move(n));
  built_ = false;
  replan_ = false;  // the new operation was never timed
  timed_runs_ = 0;
}

void Graph::Reset() {
  DropCapture();
  ReleaseArena();
  ClearLayouts();
  nodes_.clear();
  order_.clear();
  blocks_.clear();
  release_after_.clear();
  recompute_at_.clear();
  rebind_before_.clear();
  later_ranges_.clear();
  plan_ = GraphMemoryPlan{};
  built_ = false;
  iterations_ = 0;
  profiled_runs_ = 0;
  timed_runs_ = 0;
  timing_ = replan_ = false;
  applied_dropped_.clear();
  applied_early_.clear();
}

void Graph::SetFusion(bool on) {
  if (on != fusion_) {
    fusion_ = on;
    built_ = false;
    replan_ = false;  // other operations: the plan in use does not carry over
  }
}

void Graph::SetMemoryBudget(size_t bytes) {
  budget_bytes_ = bytes;
  budget_fraction_ = 0;
  built_ = false;
}

void Graph::SetMemoryBudgetFraction(double fraction) {
  SINGA_CHECK_VALUE(fraction >= 0 && fraction <= 1,
                    "SetMemoryBudget: a fraction of the unconstrained plan must lie in (0, 1], got "
                        << fraction << " (give larger budgets in bytes)");
  budget_fraction_ = fraction;
  budget_bytes_ = 0;
  built_ = false;
}

void Graph::SetRecomputeStrategy(remat::Strategy s) {
  strategy_ = s;
  built_ = false;
}

void Graph::SetCostModel(CostModel m) {
  cost_model_ = m;
  built_ = false;
}

void Graph::SetPlanning(bool planned) {
  if (planned != planned_) {
    planned_ = planned;
    built_ = false;
    replan_ = false;
  }
}

void Graph::Build(bool sequential) {
  DropCapture();
  runs_since_build_ = 0;
  timing_ = false;
  // The plan in use is comparable with a replan only on the same execution order.
  const bool replan = replan_ && sequential == built_sequential_;
  replan_ = false;
  ReleaseArena();
  // Dependencies, in submission order.
  for (auto& n : nodes_) {
    n.succ.clear();
    n.num_pred = 0;
  }
  std::unordered_map<Block*, size_t> last_writer;
  std::unordered_map<Block*, std::vector<size_t>> readers_since_write;
  std::vector<std::unordered_set<size_t>> preds(nodes_.size());
  size_t last_rand = SIZE_MAX, last_collective = SIZE_MAX;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    auto add_edge = [&](size_t from) {
      if (from != i) preds[i].insert(from);
    };
    for (Block* b : nodes_[i].reads) {
      auto w = last_writer.find(b);
      if (w != last_writer.end()) add_edge(w->second);  // read after write
    }
    for (Block* b : nodes_[i].writes) {
      auto& rs = readers_since_write[b];
      for (size_t r : rs) add_edge(r);                   // write after read
      auto w = last_writer.find(b);
      if (w != last_writer.end()) add_edge(w->second);  // write after write
    }
    if (nodes_[i].use_rand) {
      if (last_rand != SIZE_MAX) add_edge(last_rand);    // same generator order as eager
      last_rand = i;
    }
    if (nodes_[i].collective) {  // every rank must enter its collectives in the same order
      if (last_collective != SIZE_MAX) add_edge(last_collective);
      last_collective = i;
    }
    for (Block* b : nodes_[i].reads) readers_since_write[b].push_back(i);
    for (Block* b : nodes_[i].writes) {
      last_writer[b] = i;
      readers_since_write[b].clear();
    }
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<size_t> p(preds[i].begin(), preds[i].end());
    std::sort(p.begin(), p.end());
    for (size_t from : p) nodes_[from].succ.push_back(i);
    nodes_[i].num_pred = p.size();
  }
  const bool budgeted = budget_bytes_ > 0 || budget_fraction_ > 0;
  SINGA_CHECK(!budgeted || planned_, Error,
              "Graph: a memory budget needs planned memory (SetPlanning(true)); dynamic recycling "
              "cannot recompute");
  ComputeOrder(sequential);
  recompute_at_.assign(order_.size(), 0);
  rebind_before_.assign(order_.size(), {});
  later_ranges_.clear();
  FuseEpilogues();
  ChooseLayouts();
  AnalyseBlocks();
  if (planned_) PlanArena(replan);
  // Whether the operations themselves allow a capture: fixed per build, so a replay does not
  // scan the nodes again. cuRAND advances its offset on the host at each call (a capture would
  // replay one draw forever); collectives synchronise with other processes outside the stream.
  ops_capturable_ = std::none_of(nodes_.begin(), nodes_.end(),
                                 [](const Node& n) { return n.use_rand || n.collective; });
  built_ = true;
  built_sequential_ = sequential;
  built_planned_ = planned_;
}

void Graph::ComputeOrder(bool sequential) {
  order_.clear();
  order_.reserve(nodes_.size());
  if (sequential) {
    for (size_t i = 0; i < nodes_.size(); ++i) order_.push_back(i);
    return;
  }
  // Kahn's algorithm with a FIFO queue: a breadth-first topological order.
  std::vector<size_t> pending(nodes_.size());
  std::deque<size_t> ready;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    pending[i] = nodes_[i].num_pred;
    if (pending[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    size_t i = ready.front();
    ready.pop_front();
    order_.push_back(i);
    for (size_t s : nodes_[i].succ)
      if (--pending[s] == 0) ready.push_back(s);
  }
  SINGA_CHECK(order_.size() == nodes_.size(), Error,
              "Graph: the dependencies form a cycle (" << nodes_.size() - order_.size()
                                                       << " operations unreachable)");
}

// The operations a producer's epilogue may absorb and the part each becomes; a batch norm takes
// its parameters from its own hooks (as_epilogue).
namespace {
struct EpiloguePattern {
  OpId op;
  EpiloguePart part;
};
constexpr EpiloguePattern kEpilogueOps[] = {
#include "epilogue_ops.inc"  // schema/nn.py's FUSABLE and the rows' fusable parts (generated)
};
unsigned PartOf(const Graph::Node& n) {
  for (const auto& p : kEpilogueOps)
    if (n.id == p.op) return p.part;
  return 0;
}
}  // namespace

void Graph::FuseEpilogues() {
  aliases_.clear();
  fused_ = FusionCounts{};
  for (auto& n : nodes_) {
    n.run_fused = n.skip = false;
    n.epilogue = Epilogue{};
    n.fused_reads.clear();
  }
  if (!fusion_ || !planned_) return;  // aliasing needs the planner's offsets
  std::unordered_map<Block*, std::vector<size_t>> writers, readers;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (Block* b : nodes_[i].writes) writers[b].push_back(i);
    for (Block* b : nodes_[i].reads) readers[b].push_back(i);
  }
  std::vector<size_t> pos(nodes_.size());
  for (size_t p = 0; p < order_.size(); ++p) pos[order_[p]] = p;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].fusion.with_epilogue && (nodes_[i].fusion.accepts & kEpiOutputParts) &&
        !nodes_[i].skip)
      FuseChain(i, pos, writers, readers);
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].fusion.with_epilogue && (nodes_[i].fusion.accepts & kEpiReLUGrad))
      FuseReLUGrad(i, pos, writers, readers);
}

// The input side (fusion.h: kEpiReLUGrad): `consumer` reads dz = ReLUBackward(dy, mask) as its
// first operand. It may read dy and mask instead when dz is one whole block of the shape and
// dtype of both (the ReLU backward's operands are flat, unbroadcast), written by that ReLU
// backward alone, read by the consumer alone and held by no user handle; and when neither dy
// nor mask is written between the two (the consumer now reads them later) nor by the consumer.
// dz becomes an alias of dy: never written, never read, it costs no memory; dy lives until
// the consumer, which reads it anyway.
void Graph::FuseReLUGrad(size_t consumer, const std::vector<size_t>& pos,
                         std::unordered_map<Block*, std::vector<size_t>>& writers,
                         std::unordered_map<Block*, std::vector<size_t>>& readers) {
  Node& c = nodes_[consumer];
  if (c.run_fused || c.reads.empty()) return;
  Block* const dz = c.reads[0];
  if (dz->external_refs() || writers[dz].size() != 1 || readers[dz].size() != 1) return;
  const size_t link = writers[dz][0];
  Node& r = nodes_[link];
  if (r.id != OpId::kReLUBackward || r.skip || !r.layouts.flat || r.reads.size() != 2 ||
      r.writes.size() != 1 || pos[link] >= pos[consumer])
    return;
  Block *dy = r.reads[0], *mask = r.reads[1];
  for (Block* b : {dy, mask})
    if (b == dz || !b->has_layout() || !dz->has_layout() || b->shape() != dz->shape() ||
        b->dtype() != dz->dtype() || b->size() != dz->size())
      return;
  // dy takes dz's place in memory: a block this step writes first, once, that no handle holds.
  if (dy->external_refs() || writers[dy].size() != 1 || pos[writers[dy][0]] >= pos[link]) return;
  for (Block* b : {dy, mask}) {
    if (std::find(c.writes.begin(), c.writes.end(), b) != c.writes.end()) return;
    for (size_t w : writers[b])
      if (pos[w] > pos[link] && pos[w] < pos[consumer]) return;
  }
  c.run_fused = true;
  c.epilogue.relu_dy = dy;
  c.epilogue.relu_mask = mask;
  c.fused_reads.insert(c.fused_reads.end(), {dy, mask});
  r.skip = true;
  auto root = aliases_.find(dy);  // dy may itself live in a producer's block
  aliases_[dz] = root == aliases_.end() ? dy : root->second;
  fused_.relu_backward++;
}

// Follows y = writes[0] of `producer` through the links the file comment allows.
void Graph::FuseChain(size_t producer, const std::vector<size_t>& pos,
                      std::unordered_map<Block*, std::vector<size_t>>& writers,
                      std::unordered_map<Block*, std::vector<size_t>>& readers) {
  Node& prod = nodes_[producer];
  Block* const y = prod.writes[0];
  // An extra read is safe when nobody writes it between the producer and the link.
  auto ready = [&](Block* b, size_t link) {
    if (std::find(prod.writes.begin(), prod.writes.end(), b) != prod.writes.end()) return false;
    for (size_t w : writers[b])
      if (pos[w] >= pos[producer] && pos[w] < pos[link]) return false;
    return true;
  };
  Epilogue e;
  Block* cur = y;
  for (;;) {
    if (cur->external_refs() || writers[cur].size() != 1 || readers[cur].size() != 1) break;
    const size_t link = readers[cur][0];
    Node& r = nodes_[link];
    const unsigned part = PartOf(r);
    // each part once, in the epilogue's order, and only what the producer's variant applies
    if (part == 0 || part <= e.parts() || !(prod.fusion.accepts & part)) break;
    if (r.writes.size() != 1) break;
    Block* out = r.writes[0];
    if (out == cur || out->size() != y->size() || out->external_refs() ||
        writers[out].size() != 1)
      break;
    std::vector<Block*> extra;
    Epilogue next = e;
    if (part == kEpiBatchNorm) {
      const Epilogue& bn = r.fusion.as_epilogue;
      if (!(bn.parts() & kEpiBatchNorm) || r.reads.empty() || r.reads[0] != cur) break;
      extra = {bn.bn_scale, bn.bn_bias, bn.bn_mean, bn.bn_var};
      next.bn_scale = bn.bn_scale;
      next.bn_bias = bn.bn_bias;
      next.bn_mean = bn.bn_mean;
      next.bn_var = bn.bn_var;
      next.bn_eps = bn.bn_eps;
    } else if (part == kEpiAdd) {
      if (r.reads.size() != 2) break;
      Block* res = r.reads[0] == cur ? r.reads[1] : r.reads[0];
      if (res == cur || res->size() != y->size() || !res->has_layout() || !y->has_layout() ||
          res->dtype() != y->dtype())
        break;
      extra = {res};
      next.residual = res;
    } else {
      if (r.reads.size() != 1) break;
      next.relu = true;
    }
    if (!std::all_of(extra.begin(), extra.end(), [&](Block* b) { return ready(b, link); }))
      break;
    e = next;
    prod.fused_reads.insert(prod.fused_reads.end(), extra.begin(), extra.end());
    r.skip = true;
    aliases_[out] = y;
    (part == kEpiBatchNorm ? fused_.batch_norm : part == kEpiAdd ? fused_.add : fused_.relu)++;
    cur = out;
  }
  if (e.parts() == 0) return;
  prod.run_fused = true;
  prod.epilogue = e;
}

void Graph::AnalyseBlocks() {
  blocks_.clear();
  for (size_t pos = 0; pos < order_.size(); ++pos) {
    const Node& n = nodes_[order_[pos]];
    auto touch = [&](Block* b, bool is_read) {
      auto it = blocks_.find(b);
      if (it == blocks_.end()) {
        BlockInfo info;
        info.block = b;
        info.first = info.last = pos;
        info.kind = is_read ? kInput : kEnd;
        blocks_.emplace(b, info);
        return;
      }
      it->second.last = pos;
      if (is_read && it->second.kind == kEnd) it->second.kind = kIntermediate;
    };
    for (Block* b : n.reads) touch(b, true);
    for (Block* b : n.fused_reads) touch(b, true);
    for (Block* b : n.writes) touch(b, false);
  }
  plan_ = GraphMemoryPlan{};
  // A fused link's output lives in its producer's block: one lifetime, from the producer's
  // write to the output's last read.
  for (auto& [z, y] : aliases_) {
    BlockInfo& zi = blocks_.at(z);
    BlockInfo& yi = blocks_.at(y);
    zi.alias_of = y;
    yi.last = std::max(yi.last, zi.last);
    yi.kind = kIntermediate;
  }
  // Lower bound: the largest total of recyclable blocks alive at one position.
  std::vector<long long> delta(order_.size() + 1, 0);
  for (auto& [b, info] : blocks_) {
    info.recyclable = info.kind != kInput && b->external_refs() == 0;
    if (info.recyclable && info.alias_of) continue;  // counted with its producer's block
    if (info.recyclable) {
      size_t sz = AlignUp(b->size());
      plan_.recyclable_bytes += sz;
      plan_.num_recyclable++;
      delta[info.first] += static_cast<long long>(sz);
      delta[info.last + 1] -= static_cast<long long>(sz);
    } else {
      plan_.persistent_bytes += b->size();
    }
  }
  release_after_.assign(order_.size(), {});
  for (auto& [b, info] : blocks_)
    if (info.recyclable && !info.alias_of) release_after_[info.last].push_back(b);
  long long live = 0;
  for (long long d : delta) {
    live += d;
    plan_.lower_bound_bytes = std::max(plan_.lower_bound_bytes, static_cast<size_t>(live));
  }
}

// The planner's view of this build: block ids in blocks_'s order (Place breaks ties of size by
// first use, then keeps this order: the placement this graph always had), a fused link's output
// as its producer's block, a skipped link reading but not writing.
remat::Problem Graph::MakeProblem(std::vector<Block*>* ids, bool measured) const {
  remat::Problem p;
  std::unordered_map<Block*, int> id_of;
  for (const auto& [b, info] : blocks_) {
    if (info.alias_of) continue;
    id_of.emplace(b, static_cast<int>(ids->size()));
    ids->push_back(b);
    p.size.push_back(AlignUp(b->size()));
    p.raw_size.push_back(b->size());
    p.planned.push_back(info.recyclable);
  }
  for (const auto& [z, y] : aliases_) id_of.emplace(z, id_of.at(y));
  p.steps.resize(order_.size());
  for (size_t pos = 0; pos < order_.size(); ++pos) {
    const Node& n = nodes_[order_[pos]];
    remat::Step& st = p.steps[pos];
    auto add = [&](std::vector<int>& v, Block* b) {
      const int id = id_of.at(b);
      if (std::find(v.begin(), v.end(), id) == v.end()) v.push_back(id);
    };
    for (Block* b : n.reads) add(st.reads, b);
    for (Block* b : n.fused_reads) add(st.reads, b);
    if (!n.skip)
      for (Block* b : n.writes) add(st.writes, b);
    st.recomputable = n.recomputable && !n.skip && !n.use_rand && !n.collective;
    st.cost = StepCost(n, measured);
    // A fused rerun needs its fused form (and reads what the epilogue reads); a skipped
    // follower is never rerun.
    if (n.rerun.fn && !n.skip && !n.collective && (!n.run_fused || n.rerun.with_epilogue)) {
      st.has_rerun = true;
      for (Block* b : n.rerun.reads) add(st.rerun_reads, b);
      if (n.run_fused)
        for (Block* b : n.fused_reads) add(st.rerun_reads, b);
      for (Block* b : n.rerun.writes) add(st.rerun_writes, b);
      st.rerun_cost = RerunCost(n, measured);
    }
  }
  return p;
}

// Unconstrained: greedy by size over the blocks' lifetimes (remat::Place). With a budget below
// that plan, the recomputations remat::PlanForBudget chooses, by the cost model's times (the
// file comment: "Cost model"); `replan`: the plan in use was chosen on the same order by the
// estimate, and is kept when it is cheaper by the times measured since.
void Graph::PlanArena(bool replan) {
  const bool measured = cost_model_ == CostModel::kMeasured && timed_runs_ >= kTimedRuns;
  std::vector<Block*> ids;
  const remat::Problem p = MakeProblem(&ids, measured);
  remat::Plan plan = remat::Simulate(p, remat::Analyse(p), {});
  remat::Place(p, &plan);
  plan_.unconstrained_arena_bytes = plan.arena;
  if (budget_bytes_ > 0 || budget_fraction_ > 0) {
    const size_t total = plan_.persistent_bytes + plan.arena;
    const size_t budget = budget_bytes_ > 0 ? budget_bytes_
                                            : static_cast<size_t>(budget_fraction_ * total);
    plan_.budget_bytes = budget;
    const bool greedy = strategy_ != remat::Strategy::kSqrtN;
    if (budget < total || !greedy) {
      const size_t room = budget > plan_.persistent_bytes ? budget - plan_.persistent_bytes : 0;
      size_t least = 0;
      remat::Plan fit = remat::PlanForBudget(p, room, strategy_, &least);
      if (replan && measured && greedy) {
        remat::Plan prev = KeptPlan(p, room);
        if (prev.feasible && (!fit.feasible || prev.added_cost < fit.added_cost))
          fit = std::move(prev);
      }
      SINGA_CHECK(fit.feasible, OutOfMemoryError,
                  "Graph: the memory budget of " << budget << " bytes cannot be met: this step "
                  "needs at least " << plan_.persistent_bytes + least << " bytes ("
                  << plan_.persistent_bytes << " in blocks the graph never frees: parameters, "
                  "optimizer state, inputs, tensors Python holds; plus an arena of " << least
                  << " bytes with the most recomputation the planner found); unconstrained it "
                  "takes " << total << " bytes. Give a budget of at least "
                  << plan_.persistent_bytes + least << " bytes (a fraction of at least "
                  << static_cast<double>(plan_.persistent_bytes + least) / total << ")");
      plan = std::move(fit);
      // Time this plan's replays, to replan by measured times (Run), when it recomputes.
      timing_ = cost_model_ == CostModel::kMeasured && !measured &&
                greedy && !plan.dropped.empty();
    }
  }
  plan_.cost_measured = measured;
  applied_dropped_ = plan.dropped;
  applied_early_ = plan.early;
  ApplyPlan(plan, ids);
}

// The plan in use (applied_dropped_) on problem p, placed; feasible = false when it no longer
// fits `room` (or is not a plan of p).
remat::Plan Graph::KeptPlan(const remat::Problem& p, size_t room) const {
  const remat::Analysis a = remat::Analyse(p);
  remat::Plan prev;
  prev.feasible = false;
  for (int c : applied_dropped_)
    if (c < 0 || static_cast<size_t>(c) >= a.candidates.size()) return prev;
  prev = remat::Simulate(p, a, applied_dropped_, applied_early_);
  if (!prev.feasible) return prev;
  // Placed as PlanForBudget placed it: a plan chosen at the least budget must still fit it.
  remat::PlaceTight(p, &prev);
  prev.feasible = prev.arena <= room;
  return prev;
}

// Turns a plan into this graph's state: the execution order with its recomputations, each
// block's ranges and offsets (BlockInfo holds the first; later_ranges_ the others), the
// pointer rebinds of multi-range blocks, and the arena.
void Graph::ApplyPlan(const remat::Plan& plan, const std::vector<Block*>& ids) {
  const std::vector<size_t> base = order_;
  std::vector<size_t> pos_of_step(base.size());
  order_.clear();
  recompute_at_.clear();
  for (const remat::Event& e : plan.schedule) {
    if (!e.recompute) pos_of_step[e.step] = order_.size();
    order_.push_back(base[e.step]);
    recompute_at_.push_back(e.recompute);
    plan_.num_recomputed += e.recompute;
  }
  plan_.recompute_cost = plan.added_cost;
  plan_.lower_bound_bytes = plan.peak;
  plan_.arena_bytes = plan.arena;
  rebind_before_.assign(order_.size(), {});
  later_ranges_.clear();
  for (auto& [b, info] : blocks_) {  // positions in the new order
    info.first = pos_of_step[info.first];
    info.last = pos_of_step[info.last];
  }
  std::unordered_map<Block*, std::vector<Block*>> aliases_of;
  for (auto& [z, y] : aliases_) aliases_of[y].push_back(z);
  std::vector<int> ranges(ids.size(), 0);
  for (const remat::Segment& g : plan.segments) ranges[g.block]++;
  for (const remat::Segment& g : plan.segments) {
    Block* b = ids[g.block];
    BlockInfo& info = blocks_.at(b);
    if (!g.recomputed) {
      info.first = g.first;
      info.last = g.last;
      info.offset = g.offset;
    } else {
      BlockInfo later = info;
      later.first = g.first;
      later.last = g.last;
      later.offset = g.offset;
      later.recomputed = true;
      later_ranges_.push_back(later);
    }
    if (ranges[g.block] > 1) {
      rebind_before_[g.first].emplace_back(b, g.offset);
      for (Block* z : aliases_of[b]) rebind_before_[g.first].emplace_back(z, g.offset);
    }
  }
  if (plan.arena == 0) return;
  arena_ = device_->Malloc(plan.arena);
  char* base_ptr = static_cast<char*>(arena_);
  for (auto& [b, info] : blocks_)
    if (info.recyclable && !info.alias_of) b->SetExternal(base_ptr + info.offset);
  for (auto& [z, y] : aliases_) {
    BlockInfo& zi = blocks_.at(z);
    zi.offset = blocks_.at(y).offset;
    z->SetExternal(base_ptr + zi.offset);
  }
}

void Graph::ReleaseArena() {
  if (arena_ == nullptr) return;
  for (auto& [b, info] : blocks_)
    if (info.recyclable) b->SetExternal(nullptr);
  device_->Free(arena_);
  arena_ = nullptr;
  // The pool would keep the arena's chunk cached; the next plan's arena (another size, after a
  // replan by measured times or a new budget) would then sit beside it, and a budgeted step's
  // RSS exceed its budget. Rebuilds are rare: giving wholly free chunks back costs nothing a
  // step sees.
  device_->pool()->ReleaseCache();
}

void Graph::RunNode(size_t i, bool recompute) {
  Node& n = nodes_[i];
  if (n.skip) return;
  // A recomputation runs the rerun form where the operation has one (MakeProblem: a fused one
  // has its fused form), else the operation itself; a fused operation applies its epilogue.
  const bool rerun = recompute && n.rerun.fn;
  AllocateBlocks(n.writes);  // as Device::Exec: never lazily from the kernel's threads
  auto run = [&] {
    Context* ctx = device_->context();
    if (n.run_fused)
      (rerun ? n.rerun.with_epilogue : n.fusion.with_epilogue)(ctx, n.epilogue);
    else
      (rerun ? n.rerun.fn : n.fn)(ctx);
  };
  if (!profiling_ && !timing_) {
    run();
  } else {
    auto t0 = std::chrono::steady_clock::now();
    run();
    device_->Sync();
    auto t1 = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    if (profiling_ && iterations_ >= device_->skip_iteration())
      (recompute ? n.recompute_ms : n.total_ms) += ms;
    if (runs_since_build_ >= 1) {  // the cost model's: never the first replay after a build
      double& best = recompute ? n.best_rerun_ms : n.best_ms;
      best = best > 0 ? std::min(best, ms) : ms;
    }
  }
  if (device_->check_finite())
    device_->CheckFinite(n.writes, n.run_fused ? n.name + FusedSuffix(n.epilogue) : n.name);
}

void Graph::RunAll() {
  const bool recycle = !planned_;
  char* base = static_cast<char*>(arena_);
  for (size_t pos = 0; pos < order_.size(); ++pos) {
    for (auto& [b, offset] : rebind_before_[pos]) b->SetExternal(base + offset);
    RunNode(order_[pos], recompute_at_[pos]);
    // Automatic recycling: a block goes back to the pool after its last access.
    if (recycle)
      for (Block* b : release_after_[pos]) b->Release();
  }
}

bool Graph::Capturable() const {
  return ops_capturable_ && planned_ && !profiling_ && !timing_ && device_->capture_enabled();
}

void Graph::DropCapture() {
  if (captured_) device_->DropCaptured();
  captured_ = false;
}

void Graph::Run(bool sequential) {
  if (!built_ || sequential != built_sequential_ || planned_ != built_planned_) Build(sequential);
  if (captured_ && !Capturable()) DropCapture();  // a switch turned off since the capture
  if (captured_) {
    device_->LaunchCaptured();
  } else if (runs_since_build_ >= 1 && Capturable()) {
    device_->BeginCapture();
    try {
      RunAll();
    } catch (...) {
      device_->DropCaptured();  // ends the capture; the exception is the operation's
      throw;
    }
    device_->EndCapture();
    captured_ = true;
    device_->LaunchCaptured();
  } else {
    RunAll();
  }
  // Every operation timed (RunNode): after enough such replays, the next Run replans with them.
  if ((profiling_ || timing_) && runs_since_build_ >= 1 && ++timed_runs_ >= kTimedRuns &&
      timing_) {
    timing_ = false;
    replan_ = true;
    built_ = false;
  }
  // The profile's divisor: the replays that were timed, not every replay since the build (a
  // profile switched on after warm-up replays was divided by all of them).
  if (profiling_ && iterations_ >= device_->skip_iteration()) ++profiled_runs_;
  ++runs_since_build_;
  ++iterations_;
}

std::vector<Graph::BlockInfo> Graph::BlockList() const {
  std::vector<BlockInfo> out;
  out.reserve(blocks_.size());
  for (const auto& entry : blocks_)
    if (!entry.second.alias_of) out.push_back(entry.second);  // listed as its producer's block
  out.insert(out.end(), later_ranges_.begin(), later_ranges_.end());
  std::sort(out.begin(), out.end(), [](const BlockInfo& a, const BlockInfo& b) {
    if (a.first != b.first) return a.first < b.first;
    if (a.offset != b.offset) return a.offset < b.offset;
    return a.last < b.last;
  });
  return out;
}

const std::string& Graph::OpNameAt(size_t pos) const {
  SINGA_CHECK(pos < order_.size(), AxisError,
              "OpNameAt: position " << pos << " is outside the execution order of "
                                    << order_.size() << " operations (run the graph first)");
  return nodes_[order_[pos]].name;
}

std::string Graph::ToDot() const {
  std::ostringstream os;
  os << "digraph singa {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n";
  for (size_t i = 0; i < nodes_.size(); ++i)
    os << "  op" << i << " [label=\"" << i << ": " << nodes_[i].name << "\"];\n";
  // Producer -> consumer edges labelled with the block (short id and size).
  std::unordered_map<const Block*, std::string> ids;
  auto id_of = [&](const Block* b) {
    auto it = ids.find(b);
    if (it != ids.end()) return it->second;
    std::string s = "b" + std::to_string(ids.size());
    ids.emplace(b, s);
    return s;
  };
  std::unordered_map<const Block*, size_t> writer;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const Block* b : nodes_[i].reads) {
      auto w = writer.find(b);
      std::string label = (b->name().empty() ? id_of(b) : DotEscape(b->name())) + " (" +
                          std::to_string(b->size()) + " B)";
      if (w != writer.end()) {
        os << "  op" << w->second << " -> op" << i << " [label=\"" << label << "\"];\n";
      } else {
        os << "  " << id_of(b) << " [shape=ellipse, label=\"" << label << "\"];\n";
        os << "  " << id_of(b) << " -> op" << i << ";\n";
      }
    }
    for (const Block* b : nodes_[i].writes) writer[b] = i;
  }
  os << "}\n";
  return os.str();
}

std::string Graph::TimeProfile(int skip) const {
  std::ostringstream os;
  const int runs = profiled_runs_;
  os << "Time profiling: " << nodes_.size() << " operations, " << runs
     << " iterations measured (after skipping " << skip << ")\n";
  if (runs == 0) return os.str();
  std::map<std::string, std::pair<double, int>> by_name;
  double total = 0, recomputed = 0;
  for (const Node& n : nodes_) {
    by_name[n.name].first += n.total_ms / runs;
    by_name[n.name].second += 1;
    total += n.total_ms / runs;
  }
  for (size_t pos = 0; pos < order_.size(); ++pos) {  // a node recomputed twice counts twice
    if (!recompute_at_[pos]) continue;
    by_name[nodes_[order_[pos]].name + " (recomputed)"].second += 1;
  }
  for (const Node& n : nodes_) {
    if (n.recompute_ms == 0) continue;
    by_name[n.name + " (recomputed)"].first += n.recompute_ms / runs;
    recomputed += n.recompute_ms / runs;
  }
  total += recomputed;
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_name.begin(), by_name.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  os << std::left << std::setw(28) << "operation" << std::right << std::setw(8) << "count"
     << std::setw(14) << "ms/iter" << std::setw(9) << "share\n";
  for (auto& [name, v] : rows)
    os << std::left << std::setw(28) << name << std::right << std::setw(8) << v.second
       << std::setw(14) << std::fixed << std::setprecision(3) << v.first << std::setw(8)
       << std::setprecision(1) << (total > 0 ? 100.0 * v.first / total : 0) << "%\n";
  if (plan_.num_recomputed > 0)
    os << "recomputed: " << plan_.num_recomputed << " operations per step (memory budget "
       << plan_.budget_bytes << " bytes), " << std::fixed << std::setprecision(3) << recomputed
       << " ms/iter, " << std::setprecision(1) << (total > 0 ? 100.0 * recomputed / total : 0)
       << "% of the step\n";
  os << "total " << std::fixed << std::setprecision(3) << total << " ms/iter\n";
  // Each operation's fastest timed run (the cost model's times), summed over the order: the
  // step as the least disturbed runs saw it, less sensitive to other processes than the means.
  double fastest = 0, fastest_recomputed = 0;
  for (size_t pos = 0; pos < order_.size(); ++pos) {
    const Node& n = nodes_[order_[pos]];
    if (!recompute_at_[pos]) {
      fastest += n.best_ms;
    } else {
      fastest_recomputed += n.best_rerun_ms > 0 ? n.best_rerun_ms : n.best_ms;
    }
  }
  fastest += fastest_recomputed;
  if (fastest > 0)
    os << "fastest runs: " << std::setprecision(3) << fastest
       << " ms/iter summed over each operation's fastest timed run, recomputations "
       << fastest_recomputed << " ms (" << std::setprecision(1)
       << 100.0 * fastest_recomputed / fastest << "%)\n";
  return os.str();
}

}  // namespace singa
