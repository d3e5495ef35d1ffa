// Fused scaled dot-product attention: the device-independent fronts (see singa/ops/attention.h).
// They check every operand, lay out the batch broadcasting (AttnBatch), make the outputs and
// submit one operation each; the kernels (cpu/attention.cc, cuda/attention.cu) only compute.
#include "singa/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "attention_kernel.h"
#include "singa/ops/random.h"
#include "singa/ops/reduce.h"
#include "singa/ops/shape.h"

namespace singa {

SINGA_KERNEL_SLOT(AttentionForward, AttentionKernelFn);
SINGA_KERNEL_SLOT(AttentionBackward, AttentionKernelFn);

namespace {

constexpr OpId kOpId = OpId::kScaledDotProductAttention;
const char* const kOp = OpName(kOpId);

std::string Describe(const Tensor& q, const Tensor& k, const Tensor& v) {
  std::ostringstream s;
  s << "q " << q.shape() << ", k " << k.shape() << ", v " << v.shape();
  return s.str();
}

Shape BatchPart(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// The broadcast of the batch shapes (numpy rules), or ShapeError naming q, k and v.
Shape BatchShape(const std::vector<Shape>& parts, const std::string& what) {
  size_t n = 0;
  for (const Shape& p : parts) n = std::max(n, p.size());
  Shape out(n, 1);
  for (const Shape& p : parts)
    for (size_t i = 0; i < p.size(); ++i) {
      size_t& o = out[n - p.size() + i];
      SINGA_CHECK_SHAPE(p[i] == o || p[i] == 1 || o == 1,
                        kOp << ": the batch axes (all but the last two) of q, k and v do not "
                               "broadcast together; " << what);
      if (o == 1) o = p[i];
    }
  return out;
}

// Element strides of x's leading batch axes, aligned to the right of the broadcast batch shape
// `full` (0 where x has no such axis or size 1).
void BatchStrides(const Shape& x, const Shape& full, int64_t* out) {
  const size_t nb = full.size(), nx = x.size() - 2;
  int64_t stride = int64_t(x[x.size() - 1] * x[x.size() - 2]);
  for (size_t d = nb; d-- > 0;) {
    const size_t xd = d + nx >= nb ? d + nx - nb : SIZE_MAX;  // x's axis for full axis d
    if (xd == SIZE_MAX) {
      out[d] = 0;
      continue;
    }
    out[d] = x[xd] == 1 ? 0 : stride;
    stride *= int64_t(x[xd]);
  }
}

// Everything both fronts check and compute from q, k, v, mask and the options.
AttentionArgs Plan(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                   const Tensor& mask_in, const AttentionOptions& o, Shape* batch) {
  for (const Tensor* t : {&q_in, &k_in, &v_in})
    SINGA_CHECK(t->block() != nullptr, ValueError,
                kOp << ": an input tensor is empty (no memory); " << Describe(q_in, k_in, v_in));
  const bool has_mask = mask_in.block() != nullptr;
  std::vector<const Tensor*> all = {&q_in, &k_in, &v_in};
  if (has_mask) all.push_back(&mask_in);
  CheckSameDevice(kOp, all);
  for (const Tensor* t : {&q_in, &k_in, &v_in}) {
    SINGA_CHECK_DTYPE(t->data_type() == kFloat32,
                      kOp << ": q, k and v must be float32, got " << q_in.data_type() << ", "
                          << k_in.data_type() << ", " << v_in.data_type());
    SINGA_CHECK_SHAPE(t->nDim() >= 2, kOp << ": q, k and v need at least 2 axes (..., L, E); "
                                          << Describe(q_in, k_in, v_in));
  }
  const Shape &qs = q_in.shape(), &ks = k_in.shape(), &vs = v_in.shape();
  AttentionArgs a;
  a.L = int64_t(qs[qs.size() - 2]);
  a.E = int64_t(qs.back());
  a.S = int64_t(ks[ks.size() - 2]);
  a.Ev = int64_t(vs.back());
  SINGA_CHECK_SHAPE(int64_t(ks.back()) == a.E,
                    kOp << ": k's last axis must equal q's (E = " << a.E << "); "
                        << Describe(q_in, k_in, v_in));
  SINGA_CHECK_SHAPE(int64_t(vs[vs.size() - 2]) == a.S,
                    kOp << ": k and v must have the same number of keys (axis -2); "
                        << Describe(q_in, k_in, v_in));
  *batch = BatchShape({BatchPart(qs), BatchPart(ks), BatchPart(vs)}, Describe(q_in, k_in, v_in));
  SINGA_CHECK_SHAPE(batch->size() <= size_t(kAttnMaxBatchDims),
                    kOp << ": at most " << kAttnMaxBatchDims << " batch axes; "
                        << Describe(q_in, k_in, v_in));
  SINGA_CHECK_VALUE(o.dropout_p >= 0.f && o.dropout_p < 1.f,
                    kOp << ": dropout_p must be in [0, 1), got " << o.dropout_p);
  SINGA_CHECK_VALUE(std::isfinite(o.scale),
                    kOp << ": scale must be finite, got " << o.scale);
  SINGA_CHECK_VALUE(!(o.causal && has_mask),
                    kOp << ": give either a mask or causal=true, not both (as PyTorch)");
  a.q = q_in.Contiguous();
  a.k = k_in.Contiguous();
  a.v = v_in.Contiguous();
  a.nb = int64_t(Product(*batch));
  a.batch.ndim = int(batch->size());
  for (size_t d = 0; d < batch->size(); ++d) a.batch.shape[d] = int64_t((*batch)[d]);
  BatchStrides(qs, *batch, a.batch.q);
  BatchStrides(ks, *batch, a.batch.k);
  BatchStrides(vs, *batch, a.batch.v);
  if (has_mask) {
    SINGA_CHECK_DTYPE(mask_in.data_type() == kInt || mask_in.data_type() == kFloat32,
                      kOp << ": the mask must be int32 (nonzero: keep) or float32 (added to "
                             "the scores), got " << mask_in.data_type());
    Shape want = *batch;
    want.push_back(size_t(a.L));
    want.push_back(size_t(a.S));
    const Shape& ms = mask_in.shape();
    bool fits = ms.size() <= want.size();
    for (size_t i = 0; fits && i < ms.size(); ++i) {
      const size_t w = want[want.size() - ms.size() + i];
      fits = ms[i] == w || ms[i] == 1;
    }
    SINGA_CHECK_SHAPE(fits, kOp << ": the mask of shape " << ms
                                << " does not broadcast to (batch..., L, S) = " << want << "; "
                                << Describe(q_in, k_in, v_in));
    a.mask = mask_in.Contiguous();
    a.mask_kind = mask_in.data_type() == kInt ? kAttnKeepMask : kAttnAddMask;
    Shape padded(want.size() - ms.size(), 1);
    padded.insert(padded.end(), ms.begin(), ms.end());
    int64_t stride = 1;
    std::vector<int64_t> st(padded.size());
    for (size_t d = padded.size(); d-- > 0;) {
      st[d] = padded[d] == 1 ? 0 : stride;
      stride *= int64_t(padded[d]);
    }
    for (size_t d = 0; d < batch->size(); ++d) a.batch.m[d] = st[d];
    a.mask_row = st[st.size() - 2];
    a.mask_col = st[st.size() - 1];
  }
  a.scale = o.scale != 0.f ? o.scale : a.E > 0 ? 1.f / std::sqrt(float(a.E)) : 1.f;
  a.dropout_p = o.dropout_p;
  a.causal = o.causal;
  return a;
}

Shape With(const Shape& batch, std::initializer_list<int64_t> tail) {
  Shape s = batch;
  for (int64_t t : tail) s.push_back(size_t(t));
  return s;
}

// The gradient `full` (batch..., rows, cols) summed over the axes that x broadcast.
Tensor SumToShape(const Tensor& full, const Shape& x) {
  if (full.shape() == x) return full;
  const size_t n = full.nDim(), lead = n - x.size();
  std::vector<int> axes;
  for (size_t d = 0; d < n; ++d)
    if (d < lead || (x[d - lead] == 1 && full.shape()[d] != 1)) axes.push_back(int(d));
  return Reshape(ReduceSum(full, axes, /*keepdims=*/true), x);
}

std::vector<Block*> Reads(const AttentionArgs& a) {
  std::vector<Block*> r = {a.q.block(), a.k.block(), a.v.block()};
  if (a.mask.block() != nullptr) r.push_back(a.mask.block());
  if (a.seed.block() != nullptr) r.push_back(a.seed.block());
  return r;
}

}  // namespace

AttentionForwardResult ScaledDotProductAttention(const Tensor& q, const Tensor& k,
                                                 const Tensor& v, const Tensor& mask,
                                                 const AttentionOptions& o) {
  Shape batch;
  AttentionArgs a = Plan(q, k, v, mask, o, &batch);
  auto dev = q.device();
  AttentionForwardResult r;
  r.out = Tensor(With(batch, {a.L, a.Ev}), dev, kFloat32);
  r.lse = Tensor(With(batch, {a.L}), dev, kFloat32);
  if (a.dropout_p > 0.f) {
    r.seed = Tensor(Shape{2}, dev, kFloat32);
    Uniform(0.f, 1.f, &r.seed);  // a fresh seed per call, and per replay of a graph
    a.seed = r.seed;
  }
  a.out = r.out;
  a.lse = r.lse;
  if (r.out.Size() == 0 && r.lse.Size() == 0) return r;
  auto* fn = AttentionForwardKernel().For(*dev);
  // Two products of L x S pairs: q k^T (E each) and p v (Ev each).
  const double flops = 2.0 * a.nb * a.L * a.S * (a.E + a.Ev);
  dev->Exec({.id = kOpId,
             .reads = Reads(a),
             .writes = {a.out.block(), a.lse.block()},
             .flops = flops},
            [fn, a](Context* ctx) { fn(a, ctx); });
  return r;
}

std::vector<Tensor> ScaledDotProductAttentionBackward(const Tensor& dout, const Tensor& q,
                                                      const Tensor& k, const Tensor& v,
                                                      const Tensor& mask,
                                                      const AttentionForwardResult& fwd,
                                                      const AttentionOptions& o) {
  const OpId id = OpId::kScaledDotProductAttentionBackward;
  const char* op = OpName(id);
  Shape batch;
  AttentionArgs a = Plan(q, k, v, mask, o, &batch);
  const Shape out_shape = With(batch, {a.L, a.Ev});
  for (const Tensor* t : {&dout, &fwd.out, &fwd.lse})
    SINGA_CHECK(t->block() != nullptr, ValueError,
                op << ": dout, the forward's output or its lse is empty");
  CheckSameDevice(op, {&q, &dout, &fwd.out, &fwd.lse});
  SINGA_CHECK_SHAPE(dout.shape() == out_shape && fwd.out.shape() == out_shape,
                    op << ": dout " << dout.shape() << " and the forward's output "
                       << fwd.out.shape() << " must have the output's shape " << out_shape);
  SINGA_CHECK_SHAPE(fwd.lse.shape() == With(batch, {a.L}),
                    op << ": the forward's lse has shape " << fwd.lse.shape() << ", expected "
                       << With(batch, {a.L}));
  SINGA_CHECK_DTYPE(dout.data_type() == kFloat32 && fwd.out.data_type() == kFloat32 &&
                        fwd.lse.data_type() == kFloat32,
                    op << ": dout, out and lse must be float32");
  if (a.dropout_p > 0.f) {
    SINGA_CHECK_VALUE(fwd.seed.block() != nullptr && fwd.seed.Size() == 2,
                      op << ": dropout_p > 0 needs the forward's seed (2 floats)");
    a.seed = fwd.seed.Contiguous();
  }
  auto dev = q.device();
  a.dout = dout.Contiguous();
  a.out = fwd.out.Contiguous();
  a.lse = fwd.lse.Contiguous();
  a.dq = Tensor(With(batch, {a.L, a.E}), dev, kFloat32);
  a.dk = Tensor(With(batch, {a.S, a.E}), dev, kFloat32);
  a.dv = Tensor(With(batch, {a.S, a.Ev}), dev, kFloat32);
  a.work = Tensor(Shape{size_t(std::max<int64_t>(1, a.nb * a.L))}, dev, kFloat32);
  if (a.dq.Size() + a.dk.Size() + a.dv.Size() > 0) {
    std::vector<Block*> reads = Reads(a);
    for (const Tensor* t : {&a.dout, &a.out, &a.lse}) reads.push_back(t->block());
    auto* fn = AttentionBackwardKernel().For(*dev);
    // Five products of L x S pairs: the scores again, dv, dp, dq and dk.
    const double flops = 2.0 * a.nb * a.L * a.S * (3 * a.E + 2 * a.Ev);
    dev->Exec({.id = id,
               .reads = reads,
               .writes = {a.dq.block(), a.dk.block(), a.dv.block(), a.work.block()},
               .flops = flops},
              [fn, a](Context* ctx) { fn(a, ctx); });
  }
  return {SumToShape(a.dq, q.shape()), SumToShape(a.dk, k.shape()),
          SumToShape(a.dv, v.shape())};
}

}  // namespace singa
