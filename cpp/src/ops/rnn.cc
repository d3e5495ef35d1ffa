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

Shape Steps(const RnnArgs& a, int64_t width) {
  return {size_t(a.T), size_t(a.N), size_t(width)};
}
Shape State(const RnnArgs& a) { return {size_t(a.N), size_t(a.H)}; }
Shape MaskShape(const RnnArgs& a) { return {size_t(a.T), size_t(a.N)}; }

// One tensor operand: checked against `shape` (float32; an optional one may be empty: absent),
// stored contiguous in the member of RnnArgs it names.
struct Operand {
  const char* name;
  const Tensor& t;
  Shape shape;
  Tensor RnnArgs::*member;
  bool optional;
};

// Checks the operands and their device and stores them in a; returns the blocks the op reads.
std::vector<Block*> TakeOperands(const char* op, const std::vector<Operand>& operands,
                                 RnnArgs* a) {
  std::vector<const Tensor*> given;
  for (const Operand& o : operands) {
    if (o.optional && o.t.empty()) continue;
    CheckShape(op, o.name, o.t, o.shape);
    given.push_back(&o.t);
  }
  CheckSameDevice(op, given);
  std::vector<Block*> reads;
  for (const Operand& o : operands) {
    if (o.optional && o.t.empty()) continue;
    a->*o.member = o.t.Contiguous();
    reads.push_back((a->*o.member).block());
  }
  return reads;
}

// The forward's operands: gx, h0 (and an LSTM's c0), w_hh, b_hh and the mask, checked against
// G = gates * H; returns the blocks the op reads.
std::vector<Block*> ForwardOperands(const char* op, int gates, const Tensor& gx, const Tensor& h0,
                                    const Tensor* c0, const Tensor& w_hh, const Tensor& b_hh,
                                    bool reverse, const Tensor& mask, RnnArgs* a) {
  CheckSizes(op, gx, w_hh, gates, a);
  CheckBias(op, b_hh, gates * a->H);  // any shape of G values
  a->reverse = reverse;
  std::vector<Operand> operands{{"gx", gx, gx.shape(), &RnnArgs::gx, false},
                                {"h0", h0, State(*a), &RnnArgs::h0, false},
                                {"w_hh", w_hh, w_hh.shape(), &RnnArgs::w, false},
                                {"b_hh", b_hh, b_hh.shape(), &RnnArgs::b, true},
                                {"mask", mask, MaskShape(*a), &RnnArgs::mask, true}};
  if (c0) operands.push_back({"c0", *c0, State(*a), &RnnArgs::c0, false});
  return TakeOperands(op, operands, a);
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
  const auto reads = TakeOperands(op,
                                  {{"dhs", dhs, steps, &RnnArgs::dhs, false},
                                   {"gates", gates, gates.shape(), &RnnArgs::gates, false},
                                   {"hs", hs, steps, &RnnArgs::hs, false},
                                   {"cs", cs, steps, &RnnArgs::cs, false},
                                   {"h0", h0, state, &RnnArgs::h0, false},
                                   {"c0", c0, state, &RnnArgs::c0, false},
                                   {"w_hh", w_hh, w_hh.shape(), &RnnArgs::w, false},
                                   {"dhT", dhT, state, &RnnArgs::dhT, true},
                                   {"dcT", dcT, state, &RnnArgs::dcT, true},
                                   {"mask", mask, MaskShape(a), &RnnArgs::mask, true}},
                                  &a);
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
  const Shape steps = Steps(a, a.H), state = State(a);
  const auto reads = TakeOperands(op,
                                  {{"dhs", dhs, steps, &RnnArgs::dhs, false},
                                   {"gates", gates, gates.shape(), &RnnArgs::gates, false},
                                   {"ghn", ghn, steps, &RnnArgs::ghn, false},
                                   {"hs", hs, steps, &RnnArgs::hs, false},
                                   {"h0", h0, state, &RnnArgs::h0, false},
                                   {"w_hh", w_hh, w_hh.shape(), &RnnArgs::w, false},
                                   {"dhT", dhT, state, &RnnArgs::dhT, true},
                                   {"mask", mask, MaskShape(a), &RnnArgs::mask, true}},
                                  &a);
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
  const Shape steps = Steps(a, a.H), state = State(a);
  const auto reads = TakeOperands(op,
                                  {{"dhs", dhs, steps, &RnnArgs::dhs, false},
                                   {"hs", hs, steps, &RnnArgs::hs, false},
                                   {"h0", h0, state, &RnnArgs::h0, false},
                                   {"w_hh", w_hh, w_hh.shape(), &RnnArgs::w, false},
                                   {"dhT", dhT, state, &RnnArgs::dhT, true},
                                   {"mask", mask, MaskShape(a), &RnnArgs::mask, true}},
                                  &a);
  std::vector<Tensor> out;
  const auto writes = GradientOutputs(1, false, has_bias, &a, &out);
  if (a.H == 0) return out;
  auto* k = RNNBackwardKernel().For(*a.w.device());
  a.w.device()->Exec({.id = id, .reads = reads, .writes = writes},
                     [k, a](Context* ctx) { k(a, ctx); });
  return out;
}

}  // namespace singa
