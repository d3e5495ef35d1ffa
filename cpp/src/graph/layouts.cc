// The graph's layout pass (Graph::ChooseLayouts; the model: singa/core/layout.h).
//
// Why: every oneDNN convolution computes in a layout of its own choosing (nChw16c for float32
// on AVX-512, NHWC for bfloat16 on AMX) and used to reorder its NCHW input in and its output out
// at each call: about 10% of its time in float32, more for small CIFAR layers, and a sixth of a
// bfloat16 ResNet-18 step. Within a recorded step the graph knows every reader and writer of an
// activation, so it can let one stay in the convolution's layout from the convolution that
// writes it, through the batch norm, ReLU and residual add that follow, to the convolution that
// reads it.
//
// The rules, decided once per build from what each operation declared (OpDesc::layouts):
//   1. A candidate is a block of a 4-d float32 / bfloat16 tensor (N, C, H, W) with C % 16 == 0
//      and H * W > 1, first written inside the step (not an input, parameter or optimizer
//      state), that no user handle holds (Python never sees a kept layout; the step's outputs
//      are held, so they stay plain).
//   2. Blocks that must share a layout are joined (union-find): the flagged operands of an
//      operation with one_layout (elementwise ops, batch norm, pooling), a fused link's output
//      and its producer's block (one memory), a fused residual and the block it is added to, a
//      ReLU backward's mask and the gradient its consumer now reads through it.
//      Joined blocks of different shapes could not share a kept layout where a kernel reads
//      them as flat arrays (elementwise ops: a broadcast; LayoutHooks::flat): their group stays
//      plain (pooling's x and y differ in H and W only: fine).
//   3. Each group starts allowed both kept layouts; every operation touching one of its blocks
//      narrows that to the layouts it accepts for the operand (none: the group stays plain, a
//      reorder would be needed and the pass keeps the block plain instead); a one_layout
//      operation mixing it with a non-candidate operand keeps it plain. (A fused epilogue
//      follows its output's layout: the kernel that accepts y kept applies its batch-norm fold,
//      residual add and ReLU in that layout.)
//   4. Every other group takes the layout its operations allow: nChw16c when it may (the float32
//      convolutions' choice), else channels-last (the bfloat16 ones'). Kernels read the tag
//      when they run: a convolution skips the reorder of a kept operand, batch norm and pooling
//      pick their path for that layout, elementwise kernels need nothing.
// Sizes are the same in every layout, so the memory plan and its invariant are untouched.
// Eager mode and a graph with SetLayouts(false) (or SetFusion(false), which turns every
// rewrite off) leave every block plain. A memory budget does not: a recomputation reruns an
// operation on blocks tagged here, so a recomputed block has the layout of its original.
#include <unordered_map>
#include <vector>

#include "singa/graph/graph.h"

namespace singa {
namespace {

bool FourD(const Block* b) {
  return b->has_layout() && b->shape().size() == 4 &&
         (b->dtype() == kFloat32 || b->dtype() == kBFloat16) && b->shape()[1] % 16 == 0 &&
         b->shape()[1] > 0;
}
// Stored alike in both layouts: never tagged, never joins a group.
bool Neutral(const Block* b) { return FourD(b) && b->shape()[2] * b->shape()[3] == 1; }

// The kept layouts an operation allows: bit 0 kChannels16, bit 1 kChannelsLast.
constexpr uint8_t k16 = 1, kLast = 2;

// Union-find over candidate blocks, with the kept layouts each group still allows.
class Groups {
 public:
  int Add() {
    parent_.push_back(static_cast<int>(parent_.size()));
    allowed_.push_back(k16 | kLast);
    return parent_.back();
  }
  int Find(int i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void Join(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return;
    parent_[b] = a;
    allowed_[a] &= allowed_[b];
  }
  void Allow(int i, uint8_t layouts) { allowed_[Find(i)] &= layouts; }
  void KeepPlain(int i) { Allow(i, 0); }
  uint8_t Allowed(int i) { return allowed_[Find(i)]; }

 private:
  std::vector<int> parent_;
  std::vector<uint8_t> allowed_;
};

// The kept layouts an operation's hooks allow for its operand k (m16 / mlast: the masks of k's
// direction).
uint8_t AllowedBy(uint32_t m16, uint32_t mlast, size_t k) {
  if (k >= 32) return 0;
  return uint8_t((m16 >> k & 1u ? k16 : 0) | (mlast >> k & 1u ? kLast : 0));
}

}  // namespace

void Graph::SetLayouts(bool on) {
  if (on != layouts_) {
    layouts_ = on;
    built_ = false;
  }
}

void Graph::ClearLayouts() {
  for (Node& n : nodes_) {
    for (Block* b : n.reads) b->set_mem_layout(MemLayout::kPlain);
    for (Block* b : n.writes) b->set_mem_layout(MemLayout::kPlain);
  }
  layout_counts_ = LayoutCounts{};
}

void Graph::ChooseLayouts() {
  ClearLayouts();
  if (!layouts_ || !fusion_ || !planned_) return;
  // Rule 1: candidates, in execution order (a block read before any write is an input; a
  // fused link, which does not run, still writes its output first: y's memory).
  std::unordered_map<Block*, int> id;
  std::unordered_map<Block*, bool> written_first;
  Groups groups;
  for (size_t i : order_) {
    const Node& n = nodes_[i];
    for (Block* b : n.reads) written_first.emplace(b, false);
    for (Block* b : n.fused_reads) written_first.emplace(b, false);
    for (Block* b : n.writes)
      if (written_first.emplace(b, true).second && FourD(b) && !Neutral(b) &&
          b->external_refs() == 0)
        id.emplace(b, groups.Add());
  }
  auto candidate = [&](Block* b) { return id.count(b) > 0; };
  auto keep_plain = [&](Block* b) {
    if (candidate(b)) groups.KeepPlain(id.at(b));
  };
  // Blocks that must share a layout: one group, plain unless all are candidates (of one shape
  // when they are flat arrays, else of one channel count).
  auto share = [&](const std::vector<Block*>& bs, bool flat = true) {
    bool ok = true;
    for (Block* b : bs)
      ok = ok && candidate(b) &&
           (flat ? b->shape() == bs[0]->shape() : b->shape()[1] == bs[0]->shape()[1]);
    for (Block* b : bs) {
      if (!ok) keep_plain(b);
      else groups.Join(id.at(bs[0]), id.at(b));
    }
  };
  // Rules 2 and 3.
  for (auto& [z, y] : aliases_)
    if (!Neutral(z) || !Neutral(y)) share({y, z});
  for (const Node& n : nodes_) {
    if (n.skip) continue;
    std::vector<Block*> one;  // the operands of a one-layout operation
    auto visit = [&](Block* b, uint8_t allowed) {
      if (Neutral(b)) return;
      if (candidate(b)) groups.Allow(id.at(b), allowed);
      if (allowed && n.layouts.one_layout) one.push_back(b);
    };
    const LayoutHooks& h = n.layouts;
    for (size_t k = 0; k < n.reads.size(); ++k)
      visit(n.reads[k], AllowedBy(h.reads, h.reads_last, k));
    for (size_t k = 0; k < n.writes.size(); ++k)
      visit(n.writes[k], AllowedBy(h.writes, h.writes_last, k));
    if (!one.empty()) share(one, h.flat);
    if (!n.run_fused) continue;
    // A ReLU backward read through (kEpiReLUGrad): its mask as the dz it replaces (dy is
    // dz's alias, joined above).
    if (Block* m = n.epilogue.relu_mask) share({n.reads[0], m});
    if (n.writes.empty()) continue;
    Block* y = n.writes[0];
    if (Block* r = n.epilogue.residual)
      if (!Neutral(r) || !Neutral(y)) share({y, r});
  }
  // Rule 4.
  for (auto& [b, i] : id) {
    const uint8_t allowed = groups.Allowed(i);
    if (!allowed) continue;
    const bool last = !(allowed & k16);
    b->set_mem_layout(last ? MemLayout::kChannelsLast : MemLayout::kChannels16);
    layout_counts_.blocks++;
    layout_counts_.bytes += b->size();
    if (last) layout_counts_.channels_last++;
  }
}

}  // namespace singa
