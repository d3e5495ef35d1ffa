// nn_kernels.h (private): the kernel interface of convolution, pooling and batch norm, shared by
// the fronts (ops/conv.cc, pooling.cc, batchnorm.cc), the reference kernels (ops/cpu/) and the
// oneDNN kernels (ops/dnnl/). The ops' Args, slots and launches are generated from
// schema/nn.py (nn_args.inc, nn_launch.inc); the helpers their rows name (BnAsEpilogue,
// RerunOf) are here.
//
//   // A backend's kernel prepares one call: it sees the checked operands and the outputs the
//   // front created, and returns the scratch it needs and the function Exec will run.
//   Prepared<ConvFwdArgs> Forward(const ConvFwdArgs& a);                   // in ops/cpu/...
//   SINGA_REGISTER_KERNEL(Conv2dForward, kCpuRef, cpu::Forward);          // its row's slot
//   // The front: checks, then one line (generated: outputs by the row's shape rules, launch)
//   return RunConv2dForward(x, W, b, h, relu);
//
// Why prepare + run rather than a plain run: what a kernel needs besides its operands (the
// im2col buffer's size, a oneDNN primitive and its scratchpad) depends on the shapes only, so it
// is settled once, when the front is called, i.e. when a graph records the operation. A replay
// then only runs: it creates no primitive and allocates nothing (the scratch is a tensor listed
// among the operation's writes, so the graph plans its memory like any other block).
#pragma once

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <type_traits>
#include <memory>
#include <utility>
#include <vector>

#include "singa/core/device.h"
#include "singa/core/kernel.h"
#include "singa/ops/nn.h"

namespace singa {

/// One prepared call: `workspace` floats of scratch (0: none) and the function to run, or an empty
/// `run` when this backend cannot do this call (Prepare then asks the backend it falls back to).
template <typename Args>
struct Prepared {
  size_t workspace = 0;
  std::function<void(const Args&, float* workspace)> run;
  /// Batch norm in training only, optional: the rerun of a recomputation (RerunOf below), whose
  /// y must be bit-identical to run's; empty: run into scratch statistics.
  std::function<void(const Args&, float* workspace)> rerun;
  /// Epilogue parts (singa/core/fusion.h) that run applies from Args::epi, besides the ReLU
  /// every kernel with a `relu` flag applies.
  unsigned epilogue = 0;
  /// The operands run accepts in a blocked layout (singa/core/layout.h), by their index in
  /// the front's reads and writes; run looks at each block's mem_layout() when it runs.
  LayoutHooks layouts;
};
template <typename Args>
using PrepareFn = Prepared<Args>(const Args&);
/// Makes an op's rerun form (OpDesc::rerun) from its call, its prepared kernel, the same with
/// the ReLU post-op (`fused`, empty when not prepared) and the workspace; adds the scratch the
/// rerun writes to `writes`. A schema row names its own (`rerun`), else StatsRerun applies.
template <typename Args>
struct RerunMakerOf {  // a struct, so that LaunchKernel deduces Args from its slot alone
  using type = OpRerun (*)(const Args& a, const Prepared<Args>& p, const Prepared<Args>& fused,
                           const Tensor& ws, std::vector<Block*>* writes);
};
template <typename Args>
using RerunMaker = typename RerunMakerOf<Args>::type;

// The schema's NN ops (schema/nn.py): their Args (the operands of each kernel: inputs checked
// and contiguous, outputs created and non-empty; an `epi` is set by a graph's epilogue fusion,
// whose ReLU is the Args' `relu`), slots and the flops their rows declare (build/gen/src).
#include "nn_args.inc"

/// float32, bfloat16 (bf16.h says where it runs natively), or float16 on a device that computes
/// with CUDA (half conv / pooling there; the CPU keeps float16 as storage only).
inline bool IsNnFloat(const Tensor& t) {
  return t.data_type() == kFloat32 || t.data_type() == kBFloat16 ||
         (t.data_type() == kFloat16 && t.device() && t.device()->backend() == Backend::kCuda);
}

/// Every operand of one call has the dtype of the first (float16 and float32 do not mix).
inline void CheckSameDtype(const char* op, std::initializer_list<const Tensor*> ts) {
  const DataType t = (*ts.begin())->data_type();
  for (const Tensor* x : ts)
    SINGA_CHECK_DTYPE(x->data_type() == t, op << ": operands of one dtype expected, got " << t
                                              << " and " << x->data_type());
}

/// A non-empty float tensor (IsNnFloat): the `what` operand of `op`.
inline void CheckNnFloat(const char* op, const char* what, const Tensor& t) {
  SINGA_CHECK(t.block() != nullptr, ValueError, op << ": the " << what << " tensor is empty");
  SINGA_CHECK_DTYPE(IsNnFloat(t), op << ": expects a float32 or bfloat16 " << what
                                    << " (or float16 on a CUDA device), got " << t.data_type());
}

/// A 2-d geometry argument given as (h, w) or one value for both.
inline void PairOf(const char* op, const char* what, const std::vector<size_t>& v, size_t* h,
                   size_t* w) {
  SINGA_CHECK_VALUE(v.size() == 1 || v.size() == 2,
                    op << ": " << what << " needs 1 or 2 values (h, w), got " << v.size());
  *h = v[0];
  *w = v.size() == 2 ? v[1] : v[0];
}

/// An image batch (N, c, hh, ww) as a handle expects it (x, or dy with the output's sizes).
inline void CheckImage(const char* op, const char* what, const Tensor& t, size_t c, size_t hh,
                       size_t ww) {
  SINGA_CHECK_SHAPE(t.nDim() == 4, op << ": expected a 4-d " << what << " (N, C, H, W), got "
                                      << t.shape());
  SINGA_CHECK_SHAPE(t.shape(1) == c, op << ": the " << what << " " << t.shape() << " has "
                                        << t.shape(1) << " channels but the handle expects "
                                        << c);
  SINGA_CHECK_SHAPE(t.shape(2) == hh && t.shape(3) == ww,
                    op << ": the " << what << " " << t.shape() << " has spatial size "
                       << t.shape(2) << "x" << t.shape(3) << " but the handle expects " << hh
                       << "x" << ww);
}

/// t may be offered to a recording graph in a kept layout (MemLayout::kChannels16 or
/// kChannelsLast, singa/core/layout.h): a
/// contiguous 4-d tensor (N, C, H, W) that is its whole block, C % 16 == 0, H * W > 1, float32
/// or bfloat16. A kernel offers it only where it can run on it (Prepared::layouts).
inline bool OffersChannels16(const Tensor& t) {
  const Block* b = t.block();
  return b && t.device()->graph_enabled() && t.nDim() == 4 && t.IsContiguous() &&
         (t.data_type() == kFloat32 || t.data_type() == kBFloat16) && b->has_layout() &&
         b->shape() == t.shape() && t.MemSize() == b->size() && t.shape(1) % 16 == 0 &&
         t.shape(1) > 0 && t.shape(2) * t.shape(3) > 1;
}
/// The graph keeps t's block in MemLayout::kChannels16 (decided at its build; eager: never).
inline bool IsChannels16(const Tensor& t) {
  return t.block()->mem_layout() == MemLayout::kChannels16;
}

/// Data pointers, fetched inside kernels (a replayed graph may move a block between runs).
inline const float* InPtr(const Tensor& t) { return static_cast<const float*>(t.block()->data()); }
inline float* OutPtr(const Tensor& t) { return static_cast<float*>(t.block()->mutable_data()); }

/// The running-statistics update of nn.h, shared by every backend: mean and var are the batch's
/// (var biased, over M = N * S values per channel).
inline void UpdateRunningStats(const BnTrainArgs& a, const float* mean, const float* var) {
  const float m = a.momentum;
  const double M = double(a.N * a.S), unbias = M / (M - 1.0);
  if (!a.running_mean.empty()) {
    float* r = OutPtr(a.running_mean);
    for (size_t c = 0; c < a.C; ++c) r[c] = (1.f - m) * r[c] + m * mean[c];
  }
  if (!a.running_var.empty()) {
    float* r = OutPtr(a.running_var);
    for (size_t c = 0; c < a.C; ++c) r[c] = (1.f - m) * r[c] + m * float(var[c] * unbias);
  }
}

/// What a batch norm in inference is as its producer's epilogue (schema/nn.py's `as_epilogue`:
/// it folds into the convolution that produced x); nothing with its own ReLU.
inline Epilogue BnAsEpilogue(const BnInferArgs& a) {
  Epilogue e;
  if (!a.relu) {
    e.bn_scale = a.scale.block();
    e.bn_bias = a.bias.block();
    e.bn_mean = a.running_mean.block();
    e.bn_var = a.running_var.block();
    e.bn_eps = a.eps;
  }
  return e;
}

/// Asks the device's backend to prepare the call. A kernel that cannot do this one (an empty
/// run: oneDNN without the primitive, say) passes it along the slot's fallback chain, the one a
/// missing kernel follows (singa/core/kernel.h: Fallback).
template <typename Args>
Prepared<Args> Prepare(const KernelSlot<PrepareFn<Args>>& slot, const Args& a,
                       const Device& dev) {
  Backend b = slot.Resolve(DeviceBackend(dev));
  for (int hops = 0;; ++hops) {
    Prepared<Args> p = slot.Get(b)(a);
    if (p.run) return p;
    SINGA_CHECK(hops < kNumBackends, NotImplementedError,
                slot.op() << ": every kernel along the fallback chain declined the call");
    b = slot.Resolve(slot.FallbackOf(b));
  }
}

/// Ops whose kernels can apply a ReLU to their output y (writes[0]) as a post-op, and more of
/// an epilogue (Prepared::epilogue says which parts).
template <typename Args, typename = void>
struct HasReluPostOp : std::false_type {};
template <typename Args>
struct HasReluPostOp<Args, std::void_t<decltype(std::declval<Args&>().relu)>> : std::true_type {};
/// Ops whose Args carry an epilogue (`epi`) without a ReLU flag: the batch-norm backward, whose
/// kernel may read its dy through a ReLU mask (kEpiReLUGrad; Prepared::epilogue says so).
template <typename Args, typename = void>
struct HasInputEpilogue : std::false_type {};
template <typename Args>
struct HasInputEpilogue<Args, std::void_t<decltype(std::declval<Args&>().epi)>>
    : std::bool_constant<!HasReluPostOp<Args>::value> {};

/// The rerun form (OpDesc::rerun) of a batch-norm training forward: y again from x without
/// touching the running statistics. With the kernel's own rerun (the reference kernel: a
/// normalisation with the saved batch mean and variance, from which its forward computes y too)
/// it reads those; else it runs the training kernel again with the statistics written into two
/// scratch tensors, listed among the operation's writes (`writes`): the same computation, so
/// the same bits, on every deterministic backend.
inline OpRerun RerunOf(const BnTrainArgs& a, const Prepared<BnTrainArgs>& p,
                       const Prepared<BnTrainArgs>& fused, const Tensor& ws,
                       std::vector<Block*>* writes) {
  OpRerun r;
  BnTrainArgs ra = a;
  ra.running_mean = ra.running_var = Tensor();
  r.reads = {a.x.block(), a.scale.block(), a.bias.block()};
  r.writes = {a.y.block()};
  if (p.rerun) {
    r.reads.insert(r.reads.end(), {a.mean.block(), a.var.block()});
  } else {
    ra.mean = Tensor(a.mean.shape(), a.mean.device(), kFloat32);
    ra.var = Tensor(a.var.shape(), a.var.device(), kFloat32);
    writes->insert(writes->end(), {ra.mean.block(), ra.var.block()});
    r.writes.insert(r.writes.end(), {ra.mean.block(), ra.var.block()});
  }
  if (!ws.empty()) r.writes.push_back(ws.block());
  // Both forms' kernel: the rerun when the kernel has one, else the forward; the fused form
  // (the epilogue the graph found: residual add, ReLU) only where both have the same kind.
  auto kernel = [&](const Prepared<BnTrainArgs>& q) {
    auto f = q.rerun ? q.rerun : q.run;
    return (p.rerun != nullptr) == (q.rerun != nullptr) ? f : nullptr;
  };
  if (auto f = kernel(p))
    r.fn = [ra, ws, f](Context*) { f(ra, ws.empty() ? nullptr : OutPtr(ws)); };
  if (auto f = fused.run ? kernel(fused) : nullptr)
    r.with_epilogue = [ra, ws, f](Context*, const Epilogue& e) {
      BnTrainArgs b = ra;
      b.relu = e.relu;
      b.epi = e;
      f(b, ws.empty() ? nullptr : OutPtr(ws));
    };
  return r;
}

/// Ops whose forward also writes statistics that their backward reads (layer norm's mean and
/// rstd: transformer_kernels.h specialises this) recompute under a memory budget by running
/// their kernel again with those written into scratch: SavedStats<Args>::Of lists them.
template <typename Args>
struct SavedStats {
  static std::vector<Tensor*> Of(Args&) { return {}; }
};

/// Such an op's rerun form (OpDesc::rerun): the same kernel on the same reads, y (the first of
/// `writes`) again with the same bits, the statistics into fresh scratch tensors (added to the
/// op's `writes`, as a rerun writes only what its op does); empty for the other ops.
template <typename Args>
OpRerun StatsRerun(const Args& a, const Prepared<Args>& p, const std::vector<Block*>& reads,
                   const Tensor& ws, std::vector<Block*>* writes) {
  Args ra = a;
  const std::vector<Tensor*> stats = SavedStats<Args>::Of(ra);
  if (stats.empty() || writes->empty()) return {};
  OpRerun r;
  r.reads = reads;
  r.writes = {writes->front()};
  for (Tensor* t : stats) {
    *t = Tensor(t->shape(), t->device(), t->data_type());
    writes->push_back(t->block());
    r.writes.push_back(t->block());
  }
  if (!ws.empty()) r.writes.push_back(ws.block());
  r.fn = [ra, ws, run = p.run](Context*) { run(ra, ws.empty() ? nullptr : OutPtr(ws)); };
  return r;
}

/// The arithmetic of a call (OpDesc::flops): what its schema row's `flops` says (nn_args.inc:
/// the convolutions, batch norm), else none (the bytes moved alone).
template <typename Args>
double FlopsOf(const Args&) {
  return 0;
}

/// `as_epilogue`: what this operation is as its input's producer's epilogue (FusionHooks);
/// `recomputable`, `rerun_of`: OpDesc's recomputable and the maker of its rerun form (null:
/// StatsRerun) (a schema row's, for the schema's ops: nn_launch.inc).
template <typename Args>
void LaunchKernel(KernelSlot<PrepareFn<Args>>& slot, const Args& a,
                  const std::shared_ptr<Device>& dev, std::vector<Block*> reads,
                  std::vector<Block*> writes, OpId id,
                  const Epilogue& as_epilogue = Epilogue{}, bool recomputable = true,
                  RerunMaker<Args> rerun_of = nullptr) {
  Prepared<Args> p = Prepare(slot, a, *dev);
  // While a graph records, also prepare the same call with the ReLU post-op: the graph runs it,
  // with the epilogue it found, when y's only reader is a ReLU, an Add or a batch norm (Graph:
  // epilogue fusion). Both share one workspace tensor.
  Prepared<Args> fused;
  Args fa = a;
  if constexpr (HasReluPostOp<Args>::value) {
    if (!a.relu && dev->graph_enabled()) {
      fa.relu = true;
      fused = Prepare(slot, fa, *dev);
    }
  }
  Tensor ws;
  if (size_t n = std::max(p.workspace, fused.run ? fused.workspace : 0)) {
    // Raw bytes (kChar), n floats' worth: scratch is not an output, so Device::SetCheckFinite
    // (which scans float blocks only) never reads whatever it happens to hold.
    ws = Tensor(Shape{n * sizeof(float)}, dev, kChar);
    writes.push_back(ws.block());
  }
  OpRerun rerun;
  if (dev->graph_enabled()) {
    rerun = rerun_of ? rerun_of(a, p, fused, ws, &writes) : StatsRerun(a, p, reads, ws, &writes);
  }
  FusionHooks hooks;
  hooks.as_epilogue = as_epilogue;
  if constexpr (HasReluPostOp<Args>::value) {
    if (fused.run) {
      hooks.accepts = kEpiReLU | fused.epilogue;
      hooks.with_epilogue = [fa, ws, run = std::move(fused.run)](Context*, const Epilogue& e) {
        Args b = fa;  // a ReLU-only kernel is only ever given e.relu (accepts says so)
        b.relu = e.relu;
        b.epi = e;
        run(b, ws.empty() ? nullptr : OutPtr(ws));
      };
    }
  }
  if constexpr (HasInputEpilogue<Args>::value) {
    // The same prepared kernel, given the epilogue the graph found (it reads Args::epi).
    if (p.epilogue && dev->graph_enabled()) {
      hooks.accepts = p.epilogue;
      hooks.with_epilogue = [a, ws, run = p.run](Context*, const Epilogue& e) {
        Args b = a;
        b.epi = e;
        run(b, ws.empty() ? nullptr : OutPtr(ws));
      };
    }
  }
  dev->Exec({.id = id,
             .reads = std::move(reads),
             .writes = std::move(writes),
             .fusion = std::move(hooks),
             .recomputable = recomputable,
             .rerun = std::move(rerun),
             .flops = FlopsOf(a),
             .layouts = p.layouts},
            [a, ws, run = std::move(p.run)](Context*) {
              run(a, ws.empty() ? nullptr : OutPtr(ws));
            });
}

// The schema's NN ops' Launch<Name>(args) (schema/nn.py): reads, writes, id, recomputable.
#include "nn_launch.inc"

}  // namespace singa
