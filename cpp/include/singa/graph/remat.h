// singa/graph/remat.h: a memory budget for a graph, met by recomputing activations.
//
//   remat::Problem p = ...;                        // the executed order: who reads/writes what
//   remat::Plan plan = remat::Simulate(p, remat::Analyse(p), {});   // nothing dropped
//   remat::Place(p, &plan);                        // offsets: greedy by size, as Graph always did
//   remat::Plan fit = remat::PlanForBudget(p, arena_budget, remat::Strategy::kGreedy);
//   // fit.schedule: the order with recomputations inserted; fit.segments: live ranges + offsets
//
// Graph (singa/graph/graph.h) builds the Problem from its recorded operations; this file knows
// nothing about devices or kernels (tests/cpp/test_graph_budget.cc drives it through Graph on
// random graphs, checking the results bit for bit).
//
// The model. A step runs a fixed order of operations. A block is "dropped" after a use and
// "recomputed" (its producer run again, with the same kernel on the same input values, so the
// bits are identical) right before a later use; in between its bytes are free for others. A
// block b is a candidate when
//   - it is planned (recyclable) and written by exactly one operation p, which is recomputable
//     (a pure function of its reads: no random numbers, no collective, no block both read and
//     written, not marked otherwise by its submitter), and p's other writes are scratch
//     (workspaces nobody reads); or p has a rerun form (Step::has_rerun) that is such a function
//     and writes b and scratch only (batch norm in training: b is its output y, recomputed from
//     x and the saved batch statistics, which stay as the backward reads them anyway);
//   - its uses leave a gap: b is dropped across the longest gap between two consecutive accesses
//     (for an activation: from its last forward reader to its first backward reader).
// Recomputing p needs p's reads alive with their original values. A read still in its range is
// used (a planned one that is not has its range extended, unless it can be recomputed too); a
// read that is gone by then (inside a dropped block's gap, or after the last access of a block
// whose producer may rerun) is recomputed transitively by a transient rerun right before, which
// lives only until p has rerun: recompute forward from the nearest kept values, use, free, as in
// Chen's segments. A read written again between p's run and its rerun (a parameter updated
// before backward reaches p, an accumulated gradient) makes the choice infeasible.
// Early reruns (Plan::early). A dropped block's main rerun may instead run at the first
// recomputation that needs it inside its gap and stay until its own readers: one rerun where
// a transient and the main one ran close together (in a ResNet, a convolution recomputed for
// a batch norm's recomputation and again for that batch norm's backward), for more bytes
// live in between.
//
// The planner (kGreedy). Choosing the set that minimises added compute under a byte budget is
// NP-hard in general (Checkmate, Jain et al. 2020, solves it as an integer program); we use a
// greedy that is exact about memory and heuristic about time:
//   repeat: find the position P where the most bytes are live; among the candidates whose gap
//   spans P, simulate dropping each (chains and extensions included) and take the one that
//   frees the most bytes at P per unit of recompute cost (Step::cost); stop when nothing frees
//   bytes at P.
// The cost of a step is the time one run of it takes, in milliseconds: Graph measures it on its
// own replays (the fastest of a few, after a warm-up replay) and falls back to a roofline
// estimate over bytes moved and declared flops (graph.h: "Cost model"). Only ratios between
// steps matter here; the added cost of a plan is the sum of its recomputations' costs.
// Each prefix of that sequence is a plan, tried in two forms: refined, then as chosen. The
// refined form takes the prefix's dropped blocks in their order and moves each one's main rerun
// early (above) when that removes a transient rerun, lowers the cost and does not raise the
// prefix's peak; it depends on the prefix alone, never on the budget. A form is placed three
// ways (first fit by size as Place does, by bytes x positions, by positions) and keeps the least
// arena: at tight budgets placement, not liveness, decides what fits. The first form, in that
// order, whose placed arena fits the budget is used. (ResNet-18 at half its arena: the estimate's
// plan went from 16 to 9 convolutions recomputed, 9.8% to 5.2% of the step by its own costs.)
// Guarantees:
//   - the planned arena never exceeds the budget (checked after placement, not estimated); when
//     no prefix fits, PlanForBudget says so (feasible = false) with the smallest arena it reached,
//     which Graph reports as OutOfMemoryError stating the minimum budget (the least this
//     planner reaches, not a proof that no schedule does better);
//   - the sequence of forms does not depend on the budget, so a smaller budget never gets a
//     larger arena (the first form fitting B2 < B1 is the one for B1 or a later one, below B2),
//     for the same costs (measured times differ from run to run: Graph's estimate is
//     deterministic);
//   - a budget at or above the unconstrained arena drops nothing: the plan is the unbudgeted one;
//   - recomputations replay the recorded kernels on identical inputs: results are bit-identical
//     (a rerun form is its submitter's promise of the same bits: batch norm's normalises through
//     the code its forward uses, or reruns the forward's kernel into scratch statistics).
// There is no approximation bound on the added time. kSqrtN is Chen et al. 2016's baseline for
// comparison: drop every candidate except one in every ceil(sqrt(n)) in forward order, whatever
// the budget (it fits or throws).
//
// Memory invariant (as in graph.h): segments whose position ranges overlap never share bytes.
// A recomputed block has one segment per rerun besides its original one (their ranges never
// overlap each other), each placed on its own; a rerun's scratch gets a one-position segment.
#pragma once

#include <cstddef>
#include <vector>

namespace singa {
namespace remat {

/// One operation of the executed order (block ids index Problem::size).
struct Step {
  std::vector<int> reads, writes;  ///< distinct ids; an aliased block is listed as its owner
  bool recomputable = false;
  double cost = 1;  ///< time of one run (Graph: ms, measured or estimated; only ratios matter)
  /// A rerun that differs from the run (batch norm in training reruns as a normalisation with
  /// its saved statistics, leaving the running ones alone): what a recomputation reads and
  /// writes instead of reads/writes (its writes a subset of the run's), at rerun_cost. The step
  /// is then recomputable through it, whatever `recomputable` says of the run.
  bool has_rerun = false;
  std::vector<int> rerun_reads, rerun_writes;
  double rerun_cost = 1;
};

struct Problem {
  std::vector<size_t> size;       ///< bytes per block, aligned as the arena aligns them
  std::vector<size_t> raw_size;   ///< unaligned bytes: Place's order (largest first); or empty
  std::vector<char> planned;      ///< 1: placed in the arena (recyclable); 0: persistent
  std::vector<Step> steps;        ///< in execution order
};

/// What may be dropped, computed once per problem.
struct Candidate {
  int block = -1;
  size_t producer = 0;      ///< the step that writes it
  size_t gap_lo = 0;        ///< last access before the drop
  size_t gap_hi = 0;        ///< first access after it (recomputed before this step at latest)
};

struct Analysis {
  std::vector<Candidate> candidates;
  std::vector<int> candidate_of;               ///< block -> index in candidates, or -1
  std::vector<long> producer_of;               ///< block -> its recomputable producer, or -1
  std::vector<std::vector<int>> scratch_of;    ///< step -> its scratch writes
  std::vector<size_t> first, last;             ///< each block's first and last access
  std::vector<std::vector<size_t>> writes_at;  ///< each block's writing steps, ascending
};

/// One entry of the schedule: an original step, or the rerun of one.
struct Event {
  size_t step;
  bool recompute;
};

/// A planned block's live range in schedule positions, and its place in the arena.
struct Segment {
  int block;
  size_t first, last;
  bool recomputed;  ///< the range after a recomputation
  size_t offset = 0;
};

struct Plan {
  bool feasible = true;
  std::vector<Event> schedule;
  std::vector<Segment> segments;  ///< every planned block: one segment, or more when dropped
  std::vector<int> dropped;       ///< candidate indices, in the order the planner chose them
  std::vector<char> early;        ///< per dropped: its main rerun moves to its first need
  size_t peak = 0;                ///< max bytes live: the liveness lower bound of this schedule
  size_t arena = 0;               ///< after Place
  double added_cost = 0;          ///< sum of the recomputed steps' costs
};

/// kGreedyUnrefined: kGreedy's prefixes as chosen, never refined (no early reruns): the planner
/// before early reruns, kept for comparison (bench_remat_cost.py).
enum class Strategy { kGreedy = 0, kSqrtN = 1, kGreedyUnrefined = 2 };

Analysis Analyse(const Problem& p);
/// The schedule and live ranges when the candidates `dropped` are dropped (feasible = false
/// when a recomputation would read a value overwritten since its original run).
Plan Simulate(const Problem& p, const Analysis& a, const std::vector<int>& dropped,
              const std::vector<char>& early = {});
/// Greedy by size: largest segment first, each at the lowest offset free of every placed
/// segment whose range overlaps its own. Sets the offsets and plan->arena.
void Place(const Problem& p, Plan* plan);
/// Place, or one of two other first-fit orders (by bytes x lifetime, by lifetime) where that
/// packs tighter: the least arena of the three. Every budgeted plan is placed this way, so a
/// plan kept across a replan (Graph) fits the arena it was chosen for.
void PlaceTight(const Problem& p, Plan* plan);
/// The placed plan whose arena fits `arena_budget` (see the file comment). When none does, the
/// plan with the least arena reached, with feasible = false (the caller reports it). `*min_arena`
/// receives the least arena reached when nothing fits, else the returned plan's arena.
Plan PlanForBudget(const Problem& p, size_t arena_budget, Strategy strategy,
                   size_t* min_arena = nullptr);

}  // namespace remat
}  // namespace singa
