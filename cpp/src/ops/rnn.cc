// One LSTM or GRU layer over a sequence (see singa/ops/rnn.h): the device-independent fronts.
// Kernels: cpu/rnn.cc (reference, OpenBLAS), dnnl/rnn.cc (the same walk with oneDNN's sgemm
// where the process chose it), cuda/rnn.cu (cuBLAS).
#include <string>
#include <vector>

#include "singa/ops/rnn.h"
#include "rnn_kernels.h"

namespace singa {

SINGA_KERNEL_SLOT(LSTMForward, void(const RnnArgs&, Context*));
SINGA_KERNEL_SLOT(LSTMBackward, void(const RnnArgs&, Context*));
SINGA_KERNEL_SLOT(GRUForward, void(const RnnArgs&, Context*));
SINGA_KERNEL_SLOT(GRUBackward, void(const RnnArgs&, Context*));

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

}  // namespace

std::vector<Tensor> LSTMForward(const Tensor& gx, const Tensor& h0, const Tensor& c0,
                                const Tensor& w_hh, const Tensor& b_hh, bool reverse) {
  const OpId id = OpId::kLSTMForward;
  const char* op = OpName(id);
  RnnArgs a;
  CheckSizes(op, gx, w_hh, 4, &a);
  CheckShape(op, "h0", h0, State(a));
  CheckShape(op, "c0", c0, State(a));
  CheckBias(op, b_hh, 4 * a.H);
  std::vector<const Tensor*> all{&gx, &h0, &c0, &w_hh};
  if (!b_hh.empty()) all.push_back(&b_hh);
  CheckSameDevice(op, all);
  a.reverse = reverse;
  a.gx = gx.Contiguous();
  a.h0 = h0.Contiguous();
  a.c0 = c0.Contiguous();
  a.w = w_hh.Contiguous();
  if (!b_hh.empty()) a.b = b_hh.Contiguous();
  const auto& dev = a.gx.device();
  a.hs = Tensor(Steps(a, a.H), dev);
  a.cs = Tensor(Steps(a, a.H), dev);
  a.gates = Tensor(Steps(a, 4 * a.H), dev);
  if (a.N == 0 || a.H == 0) return {a.hs, a.cs, a.gates};
  std::vector<Block*> reads{a.gx.block(), a.h0.block(), a.c0.block(), a.w.block()};
  if (!a.b.empty()) reads.push_back(a.b.block());
  auto* k = LSTMForwardKernel().For(*dev);
  dev->Exec({.id = id, .reads = reads, .writes = {a.hs.block(), a.cs.block(), a.gates.block()}},
            [k, a](Context* ctx) { k(a, ctx); });
  return {a.hs, a.cs, a.gates};
}

std::vector<Tensor> LSTMBackward(const Tensor& dhs, const Tensor& dhT, const Tensor& dcT,
                                 const Tensor& gates, const Tensor& hs, const Tensor& cs,
                                 const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                                 bool has_bias, bool reverse) {
  const OpId id = OpId::kLSTMBackward;
  const char* op = OpName(id);
  RnnArgs a;
  CheckSizes(op, gates, w_hh, 4, &a);
  CheckShape(op, "dhs", dhs, Steps(a, a.H));
  CheckShape(op, "hs", hs, Steps(a, a.H));
  CheckShape(op, "cs", cs, Steps(a, a.H));
  CheckShape(op, "h0", h0, State(a));
  CheckShape(op, "c0", c0, State(a));
  std::vector<const Tensor*> all{&dhs, &gates, &hs, &cs, &h0, &c0, &w_hh};
  CheckOptionalState(op, "dhT", dhT, State(a), &all);
  CheckOptionalState(op, "dcT", dcT, State(a), &all);
  CheckSameDevice(op, all);
  a.reverse = reverse;
  a.dhs = dhs.Contiguous();
  a.gates = gates.Contiguous();
  a.hs = hs.Contiguous();
  a.cs = cs.Contiguous();
  a.h0 = h0.Contiguous();
  a.c0 = c0.Contiguous();
  a.w = w_hh.Contiguous();
  if (!dhT.empty()) a.dhT = dhT.Contiguous();
  if (!dcT.empty()) a.dcT = dcT.Contiguous();
  const auto& dev = a.gates.device();
  a.dgx = Tensor(Steps(a, 4 * a.H), dev);
  a.dh0 = Tensor(State(a), dev);
  a.dc0 = Tensor(State(a), dev);
  a.dw = Tensor({size_t(a.H), size_t(4 * a.H)}, dev);
  if (has_bias) a.db = Tensor({size_t(4 * a.H)}, dev);
  std::vector<Tensor> out{a.dgx, a.dh0, a.dc0, a.dw, has_bias ? a.db : Tensor()};
  if (a.H == 0) return out;
  std::vector<Block*> reads{a.dhs.block(), a.gates.block(), a.hs.block(), a.cs.block(),
                            a.h0.block(),  a.c0.block(),    a.w.block()};
  for (const Tensor* t : {&a.dhT, &a.dcT})
    if (!t->empty()) reads.push_back(t->block());
  std::vector<Block*> writes{a.dgx.block(), a.dh0.block(), a.dc0.block(), a.dw.block()};
  if (has_bias) writes.push_back(a.db.block());
  auto* k = LSTMBackwardKernel().For(*dev);
  dev->Exec({.id = id, .reads = reads, .writes = writes}, [k, a](Context* ctx) { k(a, ctx); });
  return out;
}

std::vector<Tensor> GRUForward(const Tensor& gx, const Tensor& h0, const Tensor& w_hh,
                               const Tensor& b_hh, bool reverse) {
  const OpId id = OpId::kGRUForward;
  const char* op = OpName(id);
  RnnArgs a;
  CheckSizes(op, gx, w_hh, 3, &a);
  CheckShape(op, "h0", h0, State(a));
  CheckBias(op, b_hh, 3 * a.H);
  std::vector<const Tensor*> all{&gx, &h0, &w_hh};
  if (!b_hh.empty()) all.push_back(&b_hh);
  CheckSameDevice(op, all);
  a.reverse = reverse;
  a.gx = gx.Contiguous();
  a.h0 = h0.Contiguous();
  a.w = w_hh.Contiguous();
  if (!b_hh.empty()) a.b = b_hh.Contiguous();
  const auto& dev = a.gx.device();
  a.hs = Tensor(Steps(a, a.H), dev);
  a.gates = Tensor(Steps(a, 3 * a.H), dev);
  a.ghn = Tensor(Steps(a, a.H), dev);
  if (a.N == 0 || a.H == 0) return {a.hs, a.gates, a.ghn};
  a.gh = Tensor({size_t(a.N), size_t(3 * a.H)}, dev);  // one step's h w_hh + b_hh
  std::vector<Block*> reads{a.gx.block(), a.h0.block(), a.w.block()};
  if (!a.b.empty()) reads.push_back(a.b.block());
  auto* k = GRUForwardKernel().For(*dev);
  dev->Exec({.id = id,
             .reads = reads,
             .writes = {a.hs.block(), a.gates.block(), a.ghn.block(), a.gh.block()}},
            [k, a](Context* ctx) { k(a, ctx); });
  return {a.hs, a.gates, a.ghn};
}

std::vector<Tensor> GRUBackward(const Tensor& dhs, const Tensor& dhT, const Tensor& gates,
                                const Tensor& ghn, const Tensor& hs, const Tensor& h0,
                                const Tensor& w_hh, bool has_bias, bool reverse) {
  const OpId id = OpId::kGRUBackward;
  const char* op = OpName(id);
  RnnArgs a;
  CheckSizes(op, gates, w_hh, 3, &a);
  CheckShape(op, "dhs", dhs, Steps(a, a.H));
  CheckShape(op, "ghn", ghn, Steps(a, a.H));
  CheckShape(op, "hs", hs, Steps(a, a.H));
  CheckShape(op, "h0", h0, State(a));
  std::vector<const Tensor*> all{&dhs, &gates, &ghn, &hs, &h0, &w_hh};
  CheckOptionalState(op, "dhT", dhT, State(a), &all);
  CheckSameDevice(op, all);
  a.reverse = reverse;
  a.dhs = dhs.Contiguous();
  a.gates = gates.Contiguous();
  a.ghn = ghn.Contiguous();
  a.hs = hs.Contiguous();
  a.h0 = h0.Contiguous();
  a.w = w_hh.Contiguous();
  if (!dhT.empty()) a.dhT = dhT.Contiguous();
  const auto& dev = a.gates.device();
  a.dgx = Tensor(Steps(a, 3 * a.H), dev);
  a.dh0 = Tensor(State(a), dev);
  a.dw = Tensor({size_t(a.H), size_t(3 * a.H)}, dev);
  if (has_bias) a.db = Tensor({size_t(3 * a.H)}, dev);
  std::vector<Tensor> out{a.dgx, a.dh0, a.dw, has_bias ? a.db : Tensor()};
  if (a.H == 0) return out;
  a.dgh = Tensor(Steps(a, 3 * a.H), dev);  // every step's gradient of h w_hh + b_hh
  std::vector<Block*> reads{a.dhs.block(), a.gates.block(), a.ghn.block(), a.hs.block(),
                            a.h0.block(), a.w.block()};
  if (!a.dhT.empty()) reads.push_back(a.dhT.block());
  std::vector<Block*> writes{a.dgx.block(), a.dh0.block(), a.dw.block(), a.dgh.block()};
  if (has_bias) writes.push_back(a.db.block());
  auto* k = GRUBackwardKernel().For(*dev);
  dev->Exec({.id = id, .reads = reads, .writes = writes}, [k, a](Context* ctx) { k(a, ctx); });
  return out;
}

}  // namespace singa
