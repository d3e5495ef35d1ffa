// One LSTM, GRU or plain RNN layer over a sequence (see singa/ops/rnn.h): the
// device-independent fronts. Kernels: cpu/rnn.cc (reference, OpenBLAS), dnnl/rnn.cc (the same
// walk with oneDNN's sgemm where the process chose it), cuda/rnn.cu (cuBLAS).
#include <string>
#include <vector>

#include "singa/ops/rnn.h"
#include "rnn_kernels.h"

namespace singa {

SINGA_KERNEL_SLOT(LSTMForward, void(const RnnArgs&, Context*));
SINGA_KERNEL_SLOT(LSTMBackward, void(const RnnArgs&, Context*));
SINGA_KERNEL_SLOT(GRUForward, void(const RnnArgs&, Context*));
SINGA_KERNEL_SLOT(GRUBackward, void(const RnnArgs&, Context*));
SINGA_KERNEL_SLOT(RNNForward, void(const RnnArgs&, Context*));
SINGA_KERNEL_SLOT(RNNBackward, void(const RnnArgs&, Context*));

namespace {

void CheckF32(const char* op, const char* what, const Tensor& t) {
  SINGA_CHECK(t.block() != nullptr, ValueError, op << ": the " << what << " tensor is empty");
  SINGA_CHECK_DTYPE(t.data_type() == kFloat32,
                    op << ": expects a float32 " << what << ", got " << t.data_type());
}

void CheckShape(const char* op, const char* what, const Tensor& t, const Shape& want) {
  CheckF32(op, what, t);
  SINGA_CHECK_SHAPE(t.shape() == want, op << ": " << what << " has shape " << t.shape()
                                          << ", expected " << want);
}

// (T, N, H) from gx (T, N, gates * H) and w_hh (H, gates * H), then every other operand against
// them.
void CheckSizes(const char* op, const Tensor& gx, const Tensor& w, int gates, RnnArgs* a) {
  CheckF32(op, "gx", gx);
  SINGA_CHECK_SHAPE(gx.nDim() == 3 && gx.shape(0) > 0 && gx.shape(2) % gates == 0,
                    op << ": gx must be (T, N, " << gates << " * hidden) with T >= 1, got "
                       << gx.shape());
  a->T = int64_t(gx.shape(0));
  a->N = int64_t(gx.shape(1));
  a->H = int64_t(gx.shape(2) / gates);
  CheckShape(op, "w_hh", w, {size_t(a->H), size_t(gates * a->H)});
}

// b_hh: empty, or G values.
void CheckBias(const char* op, const Tensor& b, int64_t G) {
  if (b.empty()) return;
  CheckF32(op, "b_hh", b);
  SINGA_CHECK_SHAPE(b.Size() == size_t(G),
                    op << ": b_hh has shape " << b.shape() << ", expected (" << G << ",)");
}

// dhT (or dcT): empty, or a state.
void CheckOptionalState(const char* op, const char* what, const Tensor& t, const Shape& state,
                        std::vector<const Tensor*>* all) {
  if (t.empty()) return;
  CheckShape(op, what, t, state);
  all->push_back(&t);
}

Shape Steps(const RnnArgs& a, int64_t width) {
  return {size_t(a.T), size_t(a.N), size_t(width)};
}
Shape State(const RnnArgs& a) { return {size_t(a.N), size_t(a.H)}; }

// mask: empty, or (T, N) float32.
void CheckOptionalMask(const char* op, const Tensor& mask, const RnnArgs& a,
                       std::vector<const Tensor*>* all) {
  if (mask.empty()) return;
  CheckShape(op, "mask", mask, {size_t(a.T), size_t(a.N)});
  all->push_back(&mask);
}
void TakeMask(const Tensor& mask, RnnArgs* a, std::vector<Block*>* reads) {
  if (mask.empty()) return;
  a->mask = mask.Contiguous();
  reads->push_back(a->mask.block());
}

// The forward's operands: gx, h0 (and an LSTM's c0), w_hh and b_hh checked against G = gates *
// H, made contiguous into a; returns the blocks the op reads.
std::vector<Block*> ForwardOperands(const char* op, int gates, const Tensor& gx, const Tensor& h0,
                                    const Tensor* c0, const Tensor& w_hh, const Tensor& b_hh,
                                    bool reverse, const Tensor& mask, RnnArgs* a) {
  CheckSizes(op, gx, w_hh, gates, a);
  CheckShape(op, "h0", h0, State(*a));
  std::vector<const Tensor*> all{&gx, &h0, &w_hh};
  if (c0) {
    CheckShape(op, "c0", *c0, State(*a));
    all.push_back(c0);
  }
  CheckBias(op, b_hh, gates * a->H);
  if (!b_hh.empty()) all.push_back(&b_hh);
  CheckOptionalMask(op, mask, *a, &all);
  CheckSameDevice(op, all);
  a->reverse = reverse;
  a->gx = gx.Contiguous();
  a->h0 = h0.Contiguous();
  a->w = w_hh.Contiguous();
  std::vector<Block*> reads{a->gx.block(), a->h0.block(), a->w.block()};
  if (c0) {
    a->c0 = c0->Contiguous();
    reads.push_back(a->c0.block());
  }
  if (!b_hh.empty()) {
    a->b = b_hh.Contiguous();
    reads.push_back(a->b.block());
  }
  TakeMask(mask, a, &reads);
  return reads;
}

// The backward's saved forward tensors (each of `shapes` checked, made contiguous into the
// member of a it names) and incoming gradients dhs and dhT (and an LSTM's dcT); returns the
// blocks the op reads.
std::vector<Block*> BackwardOperands(const char* op, const std::vector<const Tensor*>& saved,
                                     const std::vector<const char*>& names,
                                     const std::vector<Shape>& shapes,
                                     const std::vector<Tensor RnnArgs::*>& members,
                                     const Tensor& dhT, const Tensor* dcT, const Tensor& mask,
                                     RnnArgs* a) {
  std::vector<const Tensor*> all(saved);
  for (size_t i = 0; i < saved.size(); ++i) CheckShape(op, names[i], *saved[i], shapes[i]);
  CheckOptionalState(op, "dhT", dhT, State(*a), &all);
  if (dcT) CheckOptionalState(op, "dcT", *dcT, State(*a), &all);
  CheckOptionalMask(op, mask, *a, &all);
  CheckSameDevice(op, all);
  std::vector<Block*> reads;
  for (size_t i = 0; i < saved.size(); ++i) {
    a->*members[i] = saved[i]->Contiguous();
    reads.push_back((a->*members[i]).block());
  }
  if (!dhT.empty()) {
    a->dhT = dhT.Contiguous();
    reads.push_back(a->dhT.block());
  }
  if (dcT && !dcT->empty()) {
    a->dcT = dcT->Contiguous();
    reads.push_back(a->dcT.block());
  }
  TakeMask(mask, a, &reads);
  return reads;
}

// The backward's outputs dgx (T, N, G), dh0 (and an LSTM's dc0), dw_hh (H, G) and db_hh (G,)
// when has_bias; returns the blocks the op writes and, in `out`, what it returns.
std::vector<Block*> GradientOutputs(int gates, bool lstm, bool has_bias, RnnArgs* a,
                                    std::vector<Tensor>* out) {
  const auto& dev = a->w.device();
  const size_t G = size_t(gates * a->H);
  a->dgx = Tensor(Steps(*a, int64_t(G)), dev);
  a->dh0 = Tensor(State(*a), dev);
  a->dw = Tensor({size_t(a->H), G}, dev);
  *out = {a->dgx, a->dh0};
  std::vector<Block*> writes{a->dgx.block(), a->dh0.block(), a->dw.block()};
  if (lstm) {
    a->dc0 = Tensor(State(*a), dev);
    out->push_back(a->dc0);
    writes.push_back(a->dc0.block());
  }
  out->push_back(a->dw);
  if (has_bias) {
    a->db = Tensor({G}, dev);
    writes.push_back(a->db.block());
  }
  out->push_back(has_bias ? a->db : Tensor());
  return writes;
}

}  // namespace

std::vector<Tensor> LSTMForward(const Tensor& gx, const Tensor& h0, const Tensor& c0,
                                const Tensor& w_hh, const Tensor& b_hh, bool reverse,
                                const Tensor& mask) {
  const OpId id = OpId::kLSTMForward;
  RnnArgs a;
  const auto reads = ForwardOperands(OpName(id), 4, gx, h0, &c0, w_hh, b_hh, reverse, mask,
                                     &a);
  const auto& dev = a.gx.device();
  a.hs = Tensor(Steps(a, a.H), dev);
  a.cs = Tensor(Steps(a, a.H), dev);
  a.gates = Tensor(Steps(a, 4 * a.H), dev);
  if (a.N == 0 || a.H == 0) return {a.hs, a.cs, a.gates};
  auto* k = LSTMForwardKernel().For(*dev);
  dev->Exec({.id = id, .reads = reads, .writes = {a.hs.block(), a.cs.block(), a.gates.block()}},
            [k, a](Context* ctx) { k(a, ctx); });
  return {a.hs, a.cs, a.gates};
}

std::vector<Tensor> LSTMBackward(const Tensor& dhs, const Tensor& dhT, const Tensor& dcT,
                                 const Tensor& gates, const Tensor& hs, const Tensor& cs,
                                 const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                                 bool has_bias, bool reverse, const Tensor& mask) {
  const OpId id = OpId::kLSTMBackward;
  const char* op = OpName(id);
  RnnArgs a;
  CheckSizes(op, gates, w_hh, 4, &a);
  a.reverse = reverse;
  const Shape steps = Steps(a, a.H), state = State(a);
  const auto reads = BackwardOperands(
      op, {&dhs, &gates, &hs, &cs, &h0, &c0, &w_hh},
      {"dhs", "gates", "hs", "cs", "h0", "c0", "w_hh"},
      {steps, gates.shape(), steps, steps, state, state, w_hh.shape()},
      {&RnnArgs::dhs, &RnnArgs::gates, &RnnArgs::hs, &RnnArgs::cs, &RnnArgs::h0, &RnnArgs::c0,
       &RnnArgs::w},
      dhT, &dcT, mask, &a);
  std::vector<Tensor> out;
  const auto writes = GradientOutputs(4, true, has_bias, &a, &out);
  if (a.H == 0) return out;
  auto* k = LSTMBackwardKernel().For(*a.w.device());
  a.w.device()->Exec({.id = id, .reads = reads, .writes = writes},
                     [k, a](Context* ctx) { k(a, ctx); });
  return out;
}

std::vector<Tensor> GRUForward(const Tensor& gx, const Tensor& h0, const Tensor& w_hh,
                               const Tensor& b_hh, bool reverse, const Tensor& mask) {
  const OpId id = OpId::kGRUForward;
  RnnArgs a;
  const auto reads = ForwardOperands(OpName(id), 3, gx, h0, nullptr, w_hh, b_hh, reverse, mask,
                                     &a);
  const auto& dev = a.gx.device();
  a.hs = Tensor(Steps(a, a.H), dev);
  a.gates = Tensor(Steps(a, 3 * a.H), dev);
  a.ghn = Tensor(Steps(a, a.H), dev);
  if (a.N == 0 || a.H == 0) return {a.hs, a.gates, a.ghn};
  a.gh = Tensor({size_t(a.N), size_t(3 * a.H)}, dev);  // one step's h w_hh + b_hh
  auto* k = GRUForwardKernel().For(*dev);
  dev->Exec({.id = id,
             .reads = reads,
             .writes = {a.hs.block(), a.gates.block(), a.ghn.block(), a.gh.block()}},
            [k, a](Context* ctx) { k(a, ctx); });
  return {a.hs, a.gates, a.ghn};
}

std::vector<Tensor> GRUBackward(const Tensor& dhs, const Tensor& dhT, const Tensor& gates,
                                const Tensor& ghn, const Tensor& hs, const Tensor& h0,
                                const Tensor& w_hh, bool has_bias, bool reverse,
                                const Tensor& mask) {
  const OpId id = OpId::kGRUBackward;
  const char* op = OpName(id);
  RnnArgs a;
  CheckSizes(op, gates, w_hh, 3, &a);
  a.reverse = reverse;
  const Shape steps = Steps(a, a.H);
  const auto reads = BackwardOperands(
      op, {&dhs, &gates, &ghn, &hs, &h0, &w_hh}, {"dhs", "gates", "ghn", "hs", "h0", "w_hh"},
      {steps, gates.shape(), steps, steps, State(a), w_hh.shape()},
      {&RnnArgs::dhs, &RnnArgs::gates, &RnnArgs::ghn, &RnnArgs::hs, &RnnArgs::h0, &RnnArgs::w},
      dhT, nullptr, mask, &a);
  std::vector<Tensor> out;
  auto writes = GradientOutputs(3, false, has_bias, &a, &out);
  if (a.H == 0) return out;
  a.dgh = Tensor(Steps(a, 3 * a.H), a.w.device());  // every step's gradient of h w_hh + b_hh
  writes.push_back(a.dgh.block());
  auto* k = GRUBackwardKernel().For(*a.w.device());
  a.w.device()->Exec({.id = id, .reads = reads, .writes = writes},
                     [k, a](Context* ctx) { k(a, ctx); });
  return out;
}

std::vector<Tensor> RNNForward(const Tensor& gx, const Tensor& h0, const Tensor& w_hh,
                               const Tensor& b_hh, bool relu, bool reverse, const Tensor& mask) {
  const OpId id = OpId::kRNNForward;
  RnnArgs a;
  const auto reads = ForwardOperands(OpName(id), 1, gx, h0, nullptr, w_hh, b_hh, reverse, mask,
                                     &a);
  a.relu = relu;
  const auto& dev = a.gx.device();
  a.hs = Tensor(Steps(a, a.H), dev);
  if (a.N == 0 || a.H == 0) return {a.hs};
  auto* k = RNNForwardKernel().For(*dev);
  dev->Exec({.id = id, .reads = reads, .writes = {a.hs.block()}},
            [k, a](Context* ctx) { k(a, ctx); });
  return {a.hs};
}

std::vector<Tensor> RNNBackward(const Tensor& dhs, const Tensor& dhT, const Tensor& hs,
                                const Tensor& h0, const Tensor& w_hh, bool has_bias, bool relu,
                                bool reverse, const Tensor& mask) {
  const OpId id = OpId::kRNNBackward;
  const char* op = OpName(id);
  RnnArgs a;
  CheckSizes(op, hs, w_hh, 1, &a);
  a.reverse = reverse;
  a.relu = relu;
  const auto reads = BackwardOperands(
      op, {&dhs, &hs, &h0, &w_hh}, {"dhs", "hs", "h0", "w_hh"},
      {Steps(a, a.H), hs.shape(), State(a), w_hh.shape()},
      {&RnnArgs::dhs, &RnnArgs::hs, &RnnArgs::h0, &RnnArgs::w}, dhT, nullptr, mask, &a);
  std::vector<Tensor> out;
  const auto writes = GradientOutputs(1, false, has_bias, &a, &out);
  if (a.H == 0) return out;
  auto* k = RNNBackwardKernel().For(*a.w.device());
  a.w.device()->Exec({.id = id, .reads = reads, .writes = writes},
                     [k, a](Context* ctx) { k(a, ctx); });
  return out;
}

}  // namespace singa
