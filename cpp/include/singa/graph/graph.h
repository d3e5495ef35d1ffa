// singa/graph/graph.h: the computational graph: buffered operations replayed from C++.
//
//   dev->EnableGraph(true);             // Exec now records (fn, reads, writes) instead of running
//   ... submit the ops of one training step (forward, backward, update) ...
//   dev->RunGraph(/*sequential=*/false);  // builds the graph once, then runs it (BFS order)
//   dev->RunGraph(false);               // later iterations replay it: no Python, no allocation
//   dev->graph()->ToDot();              // Graphviz: nodes = operations, edges = blocks
//
// Analysis (Build): an edge for every read-after-write, write-after-read and write-after-write on
// the same block; operations that draw random numbers are chained in submission order so that
// the generator is used in the same order as in eager mode. Blocks fall into kinds:
//   input        first accessed by a read (data placeholders, constants, parameters before update)
//   intermediate first accessed by a write and read later
//   end          written and never read
// A block is *recyclable* when it is an intermediate or end block that no user handle holds
// (Block::external_refs() == 0 when the graph is built): it lives from its first access to its
// last, in execution order.
//
// Memory (the invariant of this file): two recyclable blocks whose lifetimes overlap never share
// bytes. Two strategies keep it, chosen by SetPlanning():
//   - planned (default): offsets in one arena, assigned once by greedy-by-size placement over the
//     lifetimes of the chosen order; replay then allocates nothing;
//   - dynamic (Apache SINGA's way): allocate from the pool at first access, free after the last
//     read (automatic recycling); the pool shares the memory.
// Non-recyclable blocks (inputs, parameters, optimizer state, tensors Python holds) keep their own
// memory and are never freed by the graph.
//
// Capture (devices that can, i.e. a CudaGPU with Device::capture_enabled()): with planned memory,
// no profiling and no operation that draws random numbers or is a collective, the second replay
// after a build is captured (the first one allocates the persistent blocks and lets cuBLAS/cuDNN
// settle their workspaces) and later replays launch the capture in one call. The arena and every
// block keep their addresses between replays, which is what makes a capture valid; a rebuild or
// Reset drops it.
//
// Epilogue fusion (planned memory only; SetFusion(false) turns it off): an operation submitted
// with an epilogue variant (FusionHooks, singa/core/fusion.h: convolution and batch-norm
// forwards) absorbs the chain of operations that follows its first written block y when each
// link is the only reader of the block before it, and the parts come in the epilogue's order:
//   [BatchNormForwardInference] -> [Add(., r)] -> [ReLU]  (kEpilogueOps in graph.cc, by OpId)
// e.g. conv -> bn -> add -> relu in inference, bn -> add -> relu when training, conv -> relu.
// Each link's output is an alias of y (one offset, y's lifetime extended to the last alias),
// no block of the chain is held by a user handle or written twice, and what the absorbed
// operations read besides the chain (the residual r, the batch norm's parameters) is written
// before the producer runs and not between it and the link: the producer reads it (its
// fused_reads) and runs its variant; the links become no-ops. No backward reads a chain's
// intermediate (the batch norm's backward reads its input x, the ReLU's its output, the add's
// nothing), which is why a second reader stops the chain. The values are those of the unfused
// operations within float rounding (a folded batch norm rounds as the batch-norm kernel does;
// NaN propagates as in numpy).
// In backward, an operation whose variant accepts kEpiReLUGrad (the batch-norm backward) reads
// its incoming gradient through the ReLU backward that produces it: dz = ReLUBackward(dy, mask)
// read by it alone, written by that ReLU backward alone, held by no user handle, dy and mask
// (blocks of dz's shape and dtype) not written between the two (FuseReLUGrad in graph.cc). The
// ReLU backward becomes a no-op, dz an alias of dy that nothing touches (no memory of its own);
// the consumer reads dy and mask (fused_reads) and gives the unfused bits. ResNet's bn -> relu
// (the stem and each block's first) fuses; bn -> add -> relu does not (dz has two readers).
//
// Layouts (SetLayouts(false) turns them off; cpp/src/graph/layouts.cc states the rules): a 4-d
// activation stays in the layout its convolutions compute in, oneDNN's channel-blocked nChw16c
// or channels-last NHWC (singa/core/layout.h), from the operation that writes it to the ones
// that read it when all of them accept that layout, no user handle holds it and it is not an
// input of the step; kernels then skip the reorders to and from NCHW.
// A memory budget keeps them: a recomputation reruns the same operation (or its rerun form,
// which reads and writes a subset of its operands in the layouts chosen for them) on the same
// blocks, whose tags one build sets once, so a recomputed block has its original's layout.
//
// Memory budget (planned memory only; SetMemoryBudget): when the unconstrained plan (persistent
// blocks + arena) exceeds the budget, activations are dropped after a use and recomputed before
// a later one, chosen by singa/graph/remat.h (its header states the algorithm and guarantees).
// The recomputations join the execution order (order(); IsRecomputeAt(pos) tells them); a
// recomputed block has a range per (re)computation, each placed on its own, and its pointer is
// rebound to the range's offset when the range begins. An operation may be
// recomputed when it is a pure function of its reads: submitted with recomputable = true (the
// default), no random numbers (the generator would advance: dropout's mask draw is kept, the
// multiply that applies it is recomputed, reading the kept mask), no collective, nothing both
// read and written. An operation that is none of these may still carry a rerun form
// (OpDesc::rerun): the batch-norm training forward updates its running statistics in place,
// and is recomputed by a rerun that normalises x with the batch statistics it saved.
// A budget no plan reaches throws OutOfMemoryError at build time stating the least budget that
// works. Without a budget, or one at least the unconstrained plan, the plan is unchanged. What
// the budget bounds is persistent_bytes + arena_bytes; the pool adds its rounding on top (each
// persistent block and the arena rounded up to the pool's 64-byte alignment).
//
// Cost model (what the planner minimises: remat::Step::cost, in milliseconds; SetCostModel).
// Measured (default): a budget that makes the plan recompute is first planned by the estimate
// below; the replays after that build then time every operation (a steady_clock pair around
// it, after Device::Sync), except the first replay, which allocates the persistent blocks,
// touches the arena's pages for the first time and lets oneDNN/cuBLAS fill their caches: its
// times would charge an operation for memory it happens to touch first. After kTimedRuns
// timed replays the next Run rebuilds with each operation's fastest time (the one least
// disturbed by other processes), keeping the estimate's plan when it is the cheaper by those
// times (or the measured greedy finds nothing within the budget). So a training loop runs the
// estimate's plan for steps 1-5 (2-5 timed: the fastest of four runs shrugs off most of what a
// loaded machine does to a few of them) and the measured plan from step 6 (whose replay
// allocates the new arena). The times stay with the recorded operations until the graph is reset, so a new
// budget replans at once. Timed replays are not captured. Profiling (SetVerbosity) times the
// same replays and feeds the same minimum. A budget the step fits times nothing.
// Estimate (CostModel::kEstimate, and before anything was timed): a roofline per operation,
// max(bytes read and written / 25 B/ns, OpDesc::flops / 150 flop/ns) + 2 us per launch
// (graph_cost.cc); products declare their flops (matrix products, convolutions in every
// direction, attention; schema/nn.py's rows say theirs: batch norm's stay below its bytes),
// everything else counts bytes. A rerun form costs its own bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "singa/core/device.h"
#include "singa/graph/remat.h"

namespace singa {

/// What the planner decided, for tests, benchmarks and PrintTimeProfiling.
struct GraphMemoryPlan {
  size_t arena_bytes = 0;        ///< bytes of the planned arena (0 when planning is off)
  size_t lower_bound_bytes = 0;  ///< max over time of the bytes of live recyclable blocks
  size_t recyclable_bytes = 0;   ///< sum of the sizes of all recyclable blocks
  size_t persistent_bytes = 0;   ///< bytes of blocks the graph never frees
  size_t num_recyclable = 0;
  // With a memory budget (0 when none):
  size_t budget_bytes = 0;               ///< the budget in bytes (a fraction resolved)
  size_t unconstrained_arena_bytes = 0;  ///< the arena this step needs without recomputation
  size_t num_recomputed = 0;             ///< recomputations per step
  double recompute_cost = 0;             ///< their cost per step in ms, by the cost model
  bool cost_measured = false;            ///< that cost (and the plan) from timed runs
};

class Graph {
 public:
  enum BlockKind { kInput = 0, kIntermediate = 1, kEnd = 2 };

  struct Node {
    OpFunc fn;
    std::vector<Block*> reads, writes;
    OpId id = OpId::kCustom;   ///< what the graph's rewrites key on (never the printed name)
    std::string name;          ///< the printed name (OpDesc::name())
    bool use_rand = false;
    bool collective = false;   ///< an MPI/NCCL collective: chained in submission order
    FusionHooks fusion;        ///< its epilogue variant, if it has one (singa/core/fusion.h)
    bool run_fused = false;    ///< runs fusion.with_epilogue(epilogue)
    Epilogue epilogue;         ///< what the build fused into it
    std::vector<Block*> fused_reads;  ///< blocks the epilogue reads (residual, bn parameters)
    bool skip = false;         ///< fused into its producer: nothing to run
    bool recomputable = true;  ///< its submitter says it is a pure function of its reads
    OpRerun rerun;             ///< how it is recomputed, when not by fn (OpDesc::rerun)
    LayoutHooks layouts;       ///< the layouts its kernel accepts (singa/core/layout.h)
    std::vector<size_t> succ;  ///< nodes that depend on this one
    size_t num_pred = 0;
    double total_ms = 0;       ///< accumulated run time, when profiling
    double recompute_ms = 0;   ///< accumulated time of its recomputations, when profiling
    double flops = 0;          ///< OpDesc::flops
    double best_ms = 0;        ///< its fastest timed run (cost model; 0: not timed)
    double best_rerun_ms = 0;  ///< its fastest timed recomputation (0: none timed)
  };

  struct BlockInfo {
    Block* block = nullptr;
    BlockKind kind = kInput;
    bool recyclable = false;
    size_t first = 0, last = 0;  ///< positions in the execution order
    size_t offset = 0;           ///< in the arena, when planned
    Block* alias_of = nullptr;   ///< a fused link's output, stored in its producer's block
    bool recomputed = false;     ///< BlockList: this entry is a range after a recomputation
  };

  explicit Graph(Device* device);
  ~Graph();

  /// Records one operation (called by Device::Exec while buffering).
  void AddOperation(OpDesc desc, OpFunc fn);
  /// Runs every recorded operation; builds the graph first if it changed.
  void Run(bool sequential);
  /// Drops every recorded operation and releases planned memory.
  void Reset();

  /// Planned arena (true, default) or dynamic recycling through the pool (false).
  void SetPlanning(bool planned);
  bool planning() const { return planned_; }
  /// Epilogue fusion (see the file comment), on by default; takes effect at the next build.
  void SetFusion(bool on);
  bool fusion() const { return fusion_; }
  /// Whether replays are currently launched from a capture (see the file comment).
  bool captured() const { return captured_; }
  /// A memory budget in bytes for the graph's memory (persistent blocks + arena), met by
  /// recomputation; 0 removes it. Takes effect at the next build.
  void SetMemoryBudget(size_t bytes);
  /// The same as a fraction in (0, 1] of the unconstrained plan (persistent + arena); 0 removes.
  void SetMemoryBudgetFraction(double fraction);
  size_t memory_budget() const { return budget_bytes_; }
  double memory_budget_fraction() const { return budget_fraction_; }
  /// How recomputations are chosen (remat::Strategy: the greedy planner, or Chen's sqrt(N)
  /// checkpoints for comparison); takes effect at the next build.
  void SetRecomputeStrategy(remat::Strategy s);
  remat::Strategy recompute_strategy() const { return strategy_; }
  /// Where the planner's per-operation costs come from (see "Cost model" in the file comment):
  /// times measured on this graph's own replays (default) or the estimate alone. Takes effect
  /// at the next build.
  enum class CostModel { kMeasured = 0, kEstimate = 1 };
  void SetCostModel(CostModel m);
  CostModel cost_model() const { return cost_model_; }
  /// Replays that timed every operation (the first after each build not counted); the times
  /// are used once there are kTimedRuns of them.
  int timed_runs() const { return timed_runs_; }
  static constexpr int kTimedRuns = 4;
  /// Whether position `pos` of the execution order reruns an operation (a recomputation).
  bool IsRecomputeAt(size_t pos) const { return pos < recompute_at_.size() && recompute_at_[pos]; }
  /// Operations the last build fused into their producers, by kind, and in all.
  struct FusionCounts {
    size_t batch_norm = 0, add = 0, relu = 0;
    size_t relu_backward = 0;  ///< ReLU backwards read through by their consumer (kEpiReLUGrad)
  };
  const FusionCounts& fusion_counts() const { return fused_; }
  /// Blocked layouts (see the file comment), on by default; takes effect at the next build.
  void SetLayouts(bool on);
  bool layouts() const { return layouts_; }
  /// What the last build kept in a layout other than plain: blocks and their bytes, and how
  /// many of those blocks are channels-last (the others: nChw16c).
  struct LayoutCounts {
    size_t blocks = 0, bytes = 0;
    size_t channels_last = 0;
  };
  const LayoutCounts& layout_counts() const { return layout_counts_; }
  size_t num_fused() const {
    return fused_.batch_norm + fused_.add + fused_.relu + fused_.relu_backward;
  }

  size_t num_nodes() const { return nodes_.size(); }
  const std::vector<Node>& nodes() const { return nodes_; }
  /// The execution order used by the last Run (BFS or serial), recomputations included.
  const std::vector<size_t>& order() const { return order_; }
  const std::unordered_map<Block*, BlockInfo>& blocks() const { return blocks_; }
  const GraphMemoryPlan& memory_plan() const { return plan_; }

  /// For pictures of memory (singa.graph.plot_memory): every block the last build analysed
  /// (a fused link's output is part of its producer's block, not listed), ordered by first use,
  /// then offset; a recomputed block appears once per range (recomputed = true after the
  /// first). Empty before the first Run.
  std::vector<BlockInfo> BlockList() const;
  /// The name of the operation at position `pos` of the execution order.
  const std::string& OpNameAt(size_t pos) const;

  /// Graphviz source: operations as boxes, blocks as labelled edges (and input/end blocks as
  /// ellipses). A block is labelled with Block::name() when it has one ("conv1.W", "input[0]"),
  /// else with a short id (b0, b1, ...).
  std::string ToDot() const;
  /// Per-operation times, averaged over the iterations after `skip` warm-up runs.
  std::string TimeProfile(int skip) const;
  void EnableProfiling(bool on) { profiling_ = on; }
  bool profiling() const { return profiling_; }
  int iterations() const { return iterations_; }

 private:
  void Build(bool sequential);
  void ComputeOrder(bool sequential);
  void FuseEpilogues();
  void FuseChain(size_t producer, const std::vector<size_t>& pos,
                 std::unordered_map<Block*, std::vector<size_t>>& writers,
                 std::unordered_map<Block*, std::vector<size_t>>& readers);
  void FuseReLUGrad(size_t consumer, const std::vector<size_t>& pos,
                    std::unordered_map<Block*, std::vector<size_t>>& writers,
                    std::unordered_map<Block*, std::vector<size_t>>& readers);
  void ChooseLayouts();
  void ClearLayouts();
  void AnalyseBlocks();
  void PlanArena(bool replan);
  remat::Plan KeptPlan(const remat::Problem& p, size_t room) const;
  remat::Problem MakeProblem(std::vector<Block*>* ids, bool measured) const;
  double StepCost(const Node& n, bool measured) const;
  double RerunCost(const Node& n, bool measured) const;
  void ApplyPlan(const remat::Plan& plan, const std::vector<Block*>& ids);
  void ReleaseArena();
  void RunNode(size_t i, bool recompute = false);
  void RunAll();
  bool Capturable() const;
  void DropCapture();

  Device* device_;
  std::vector<Node> nodes_;
  std::vector<size_t> order_;
  std::unordered_map<Block*, BlockInfo> blocks_;
  /// Recyclable blocks whose last access is at each position (dynamic recycling releases them
  /// right after that position runs; computed once per build, not per replay).
  std::vector<std::vector<Block*>> release_after_;
  GraphMemoryPlan plan_;
  bool built_ = false;
  bool built_sequential_ = false;
  bool planned_ = true;
  bool built_planned_ = true;
  bool fusion_ = true;
  FusionCounts fused_;
  bool layouts_ = true;
  LayoutCounts layout_counts_;
  std::unordered_map<Block*, Block*> aliases_;  ///< fused link's output -> its producer's block
  bool profiling_ = false;
  int iterations_ = 0;
  int profiled_runs_ = 0;  // replays timed for the profile (TimeProfile's divisor)
  int runs_since_build_ = 0;
  bool captured_ = false;
  bool ops_capturable_ = false;  ///< no random op, no collective (set by Build)
  void* arena_ = nullptr;
  size_t budget_bytes_ = 0;
  double budget_fraction_ = 0;
  remat::Strategy strategy_ = remat::Strategy::kGreedy;
  CostModel cost_model_ = CostModel::kMeasured;
  int timed_runs_ = 0;
  bool timing_ = false;  ///< this build's replays are timed for a replan (cost model)
  bool replan_ = false;  ///< the next build replans with the times just taken
  std::vector<int> applied_dropped_;  ///< the dropped candidates of the plan in use
  std::vector<char> applied_early_;   ///< and which of them rerun early (remat::Plan::early)
  std::vector<char> recompute_at_;  ///< per position of order_
  /// Blocks with several ranges are pointed at the range's offset when it begins.
  std::vector<std::vector<std::pair<Block*, size_t>>> rebind_before_;
  std::vector<BlockInfo> later_ranges_;  ///< BlockList's entries after recomputations
};

}  // namespace singa
