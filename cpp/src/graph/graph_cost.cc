// The memory-budget planner's cost of each operation (singa/graph/graph.h: "Cost model"):
// the fastest of its timed replays, or a roofline estimate when nothing was timed.
//
//   double ms = StepCost(node, /*measured=*/false);   // the estimate
//   double rerun = RerunCost(node, true);             // a recomputation, by measured times
#include <algorithm>

#include "singa/graph/graph.h"

namespace singa {

namespace {

// The estimate's machine, in round numbers fitted to the fastest timed runs of the GPT's
// operations on 2 cores of an AVX-512 Xeon (BENCHMARKS.md, issue 20: cost model): streaming
// elementwise kernels move ~25 bytes/ns (Add, Clone, layer norm: 22-31), matrix products and
// convolutions (oneDNN, 2 threads) do ~150 flop/ns (GEMM 125-185, attention's forward 185,
// its backward 50), and a launch (an OpenMP region, a kernel call) costs ~2 us. Transcendental
// kernels (GELU: 4x the estimate) and poor reductions are what it misses; measured times fix
// both.
constexpr double kBytesPerNs = 25;
constexpr double kFlopsPerNs = 150;
constexpr double kLaunchNs = 2000;

double Bytes(const std::vector<Block*>& blocks) {
  double b = 0;
  for (const Block* x : blocks) b += static_cast<double>(x->size());
  return b;
}

// A roofline: the bytes moved and the declared arithmetic (OpDesc::flops) overlap, the launch
// does not. Milliseconds, the unit of measured times.
double EstimateMs(double bytes, double flops) {
  return (std::max(bytes / kBytesPerNs, flops / kFlopsPerNs) + kLaunchNs) * 1e-6;
}

double EstimateMs(const Graph::Node& n) {
  return EstimateMs(Bytes(n.reads) + Bytes(n.fused_reads) + Bytes(n.writes), n.flops);
}

}  // namespace

double Graph::StepCost(const Node& n, bool measured) const {
  return measured ? n.best_ms + 1e-9 : EstimateMs(n);
}

// A rerun form moves less than the operation (batch norm's normalisation reads x once where the
// training forward also reduces it twice for the statistics): its own timed rerun when one ran,
// else the operation's time scaled by the estimate's ratio of the two.
double Graph::RerunCost(const Node& n, bool measured) const {
  const double guess = EstimateMs(Bytes(n.rerun.reads) + Bytes(n.rerun.writes), 0);
  if (!measured) return guess;
  if (n.best_rerun_ms > 0) return n.best_rerun_ms;
  return StepCost(n, true) * std::min(1.0, guess / EstimateMs(n));
}

}  // namespace singa
