// The graph's layout pass (Graph::ChooseLayouts; the model: singa/core/layout.h).
//
// Why: every oneDNN convolution computes in a channel-blocked layout (nChw16c) and used to
// reorder its NCHW input in and its output out at each call: about 10% of its time, more for
// small CIFAR layers. Within a recorded step the graph knows every reader and writer of an
// activation, so it can let one stay blocked from the convolution that writes it, through the
// batch norm, ReLU and residual add that follow, to the convolution that reads it.
//
// The rules, decided once per build from what each operation declared (OpDesc::layouts):
//   1. A candidate is a block of a 4-d float32 / bfloat16 tensor (N, C, H, W) with C % 16 == 0
//      and H * W > 1, first written inside the step (not an input, parameter or optimizer
//      state), that no user handle holds (Python never sees a blocked block; the step's outputs
//      are held, so they stay plain).
//   2. Blocks that must share a layout are joined (union-find): the flagged operands of an
//      operation with one_layout (elementwise ops, batch norm, pooling), a fused link's output
//      and its producer's block (one memory), a fused residual and the block it is added to.
//      Joined blocks of different shapes could not share a blocked layout: their group stays
//      plain.
//   3. A group stays plain when one of its blocks is read or written by an operation that does
//      not accept the blocked layout for it (no kernel for it: a reorder would be needed, and
//      the pass keeps the block plain instead), or when a one_layout operation mixes it with a
//      non-candidate operand. (A fused epilogue follows its output's layout: the kernel that
//      accepts y blocked applies its batch-norm fold, residual add and ReLU in that layout.)
//   4. Every other group is blocked. Kernels read the tag when they run: a convolution skips the
//      reorder of a blocked operand, batch norm and pooling pick their blocked primitive,
//      elementwise kernels need nothing.
// Sizes are the same in both layouts, so the memory plan and its invariant are untouched.
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

// Union-find over candidate blocks, with a "must stay plain" mark per group.
class Groups {
 public:
  int Add() {
    parent_.push_back(static_cast<int>(parent_.size()));
    plain_.push_back(0);
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
    plain_[a] |= plain_[b];
  }
  void KeepPlain(int i) { plain_[Find(i)] = 1; }
  bool Plain(int i) { return plain_[Find(i)] != 0; }

 private:
  std::vector<int> parent_;
  std::vector<char> plain_;
};

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
  // Blocks that must share a layout: one group, plain unless all are candidates of one shape.
  auto share = [&](const std::vector<Block*>& bs) {
    bool ok = true;
    for (Block* b : bs) ok = ok && candidate(b) && b->shape() == bs[0]->shape();
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
    auto visit = [&](Block* b, bool accepted) {
      if (Neutral(b)) return;
      if (!accepted) keep_plain(b);
      else if (n.layouts.one_layout) one.push_back(b);
    };
    for (size_t k = 0; k < n.reads.size(); ++k)
      visit(n.reads[k], k < 32 && (n.layouts.reads >> k & 1u));
    for (size_t k = 0; k < n.writes.size(); ++k)
      visit(n.writes[k], k < 32 && (n.layouts.writes >> k & 1u));
    if (!one.empty()) share(one);
    if (!n.run_fused || n.writes.empty()) continue;
    Block* y = n.writes[0];
    if (Block* r = n.epilogue.residual)
      if (!Neutral(r) || !Neutral(y)) share({y, r});
  }
  // Rule 4.
  for (auto& [b, i] : id) {
    if (groups.Plain(i)) continue;
    b->set_mem_layout(MemLayout::kChannels16);
    layout_counts_.blocks++;
    layout_counts_.bytes += b->size();
  }
}

}  // namespace singa
