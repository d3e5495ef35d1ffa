// Batch normalisation with oneDNN (backend kCpuDnnl): training and inference forward (ReLU fused
// through fuse_norm_relu), backward with the scale and shift gradients. x (N, C, ...) is viewed
// as a plain (N, C, S, 1) NCHW tensor. oneDNN returns the batch mean and biased variance, which
// are our outputs as they are; the running statistics are then updated with nn.h's conventions
// (UpdateRunningStats, the reference kernel's code), on C values. A graph recomputing the
// training forward under a memory budget runs the same primitive again into scratch statistics
// (nn_kernels.h: RerunOf): oneDNN does not promise that its use_global_stats normalisation gives
// the training forward's bits, the same primitive on the same input does. Unless BatchNormEnabled()
// (dnnl/common.h: measured slower than the reference kernel), each kernel returns an empty
// Prepared and the front runs the reference kernel; so does a bfloat16 activation (the reference
// kernel reads it natively, statistics in float32).
#include <string>
#include <unordered_map>

#include "../nn_kernels.h"
#include "common.h"

namespace singa {
namespace dnnl_kernel {
namespace {

using dnnl::normalization_flags;
using dnnl::prop_kind;
using BnFwd = dnnl::batch_normalization_forward;
using BnBwd = dnnl::batch_normalization_backward;

memory::desc DataOf(size_t N, size_t C, size_t S) {
  using D = memory::dim;
  return memory::desc({D(N), D(C), D(S), 1}, memory::data_type::f32, tag::nchw);
}
memory::desc VecOf(size_t C) {
  return memory::desc({memory::dim(C)}, memory::data_type::f32, tag::x);
}

std::string KeyOf(const char* op, size_t N, size_t C, size_t S, float eps, int flags) {
  return KeyStart(op) + "," + std::to_string(N) + "," + std::to_string(C) + "," +
         std::to_string(S) + "," + std::to_string(eps) + "," + std::to_string(flags);
}

normalization_flags Flags(bool global, bool relu) {
  normalization_flags f = normalization_flags::use_scale | normalization_flags::use_shift;
  if (global) f = f | normalization_flags::use_global_stats;
  if (relu) f = f | normalization_flags::fuse_norm_relu;
  return f;
}

BnFwd::primitive_desc ForwardPd(const memory::desc& data, float eps, bool training, bool relu) {
  BnFwd::desc d(training ? prop_kind::forward_training : prop_kind::forward_inference, data, eps,
                Flags(!training, relu));
  return BnFwd::primitive_desc(d, Attr(), Engine());
}

struct BnEntry {
  dnnl::primitive prim;
  memory::desc data, vec, scratch, workspace;
  size_t scratch_off = 0, workspace_off = 0;
  WsLayout ws;
};

memory Vec(const BnEntry& e, const Tensor& t) {
  return memory(e.vec, Engine(), const_cast<float*>(InPtr(t)));
}
memory Data(const BnEntry& e, const Tensor& t) {
  return memory(e.data, Engine(), const_cast<float*>(InPtr(t)));
}

template <typename Args, typename PD, typename P>
std::shared_ptr<BnEntry> EntryOf(const Args& a, const PD& pd, bool with_workspace) {
  auto r = std::make_shared<BnEntry>();
  r->data = DataOf(a.N, a.C, a.S);
  r->vec = VecOf(a.C);
  r->scratch = pd.scratchpad_desc();
  r->scratch_off = r->ws.Add(r->scratch.get_size());
  if (with_workspace) {  // fuse_norm_relu in training: the ReLU mask (unused by our backward)
    r->workspace = pd.workspace_desc();
    r->workspace_off = r->ws.Add(r->workspace.get_size());
  }
  r->prim = Make<P>(pd);
  return r;
}

void RunTraining(const BnEntry& e, const BnTrainArgs& a, char* w) {
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, Data(e, a.x)},         {DNNL_ARG_DST, memory(e.data, Engine(), OutPtr(a.y))},
      {DNNL_ARG_SCALE, Vec(e, a.scale)},    {DNNL_ARG_SHIFT, Vec(e, a.bias)},
      {DNNL_ARG_MEAN, Vec(e, a.mean)},      {DNNL_ARG_VARIANCE, Vec(e, a.var)},
      {DNNL_ARG_SCRATCHPAD, Scratch(e.scratch, w, e.scratch_off)}};
  if (a.relu) args[DNNL_ARG_WORKSPACE] = memory(e.workspace, Engine(), w + e.workspace_off);
  e.prim.execute(Stream(), args);
  Stream().wait();
  UpdateRunningStats(a, InPtr(a.mean), InPtr(a.var));
}

Prepared<BnTrainArgs> ForwardTraining(const BnTrainArgs& a) {
  if (!BatchNormEnabled() || a.x.data_type() != kFloat32) return {};
  return PreparedOf<BnEntry, BnTrainArgs>(
      KeyOf("bn_train", a.N, a.C, a.S, a.eps, a.relu),
      [&] {
        return EntryOf<BnTrainArgs, BnFwd::primitive_desc, BnFwd>(
            a, ForwardPd(DataOf(a.N, a.C, a.S), a.eps, true, a.relu), a.relu);
      },
      &RunTraining);
}

void RunInference(const BnEntry& e, const BnInferArgs& a, char* w) {
  e.prim.execute(Stream(), {{DNNL_ARG_SRC, Data(e, a.x)},
                            {DNNL_ARG_DST, memory(e.data, Engine(), OutPtr(a.y))},
                            {DNNL_ARG_SCALE, Vec(e, a.scale)},
                            {DNNL_ARG_SHIFT, Vec(e, a.bias)},
                            {DNNL_ARG_MEAN, Vec(e, a.running_mean)},
                            {DNNL_ARG_VARIANCE, Vec(e, a.running_var)},
                            {DNNL_ARG_SCRATCHPAD, Scratch(e.scratch, w, e.scratch_off)}});
  Stream().wait();
}

Prepared<BnInferArgs> ForwardInference(const BnInferArgs& a) {
  if (!BatchNormEnabled() || a.x.data_type() != kFloat32) return {};
  return PreparedOf<BnEntry, BnInferArgs>(
      KeyOf("bn_infer", a.N, a.C, a.S, a.eps, a.relu),
      [&] {
        return EntryOf<BnInferArgs, BnFwd::primitive_desc, BnFwd>(
            a, ForwardPd(DataOf(a.N, a.C, a.S), a.eps, false, a.relu), false);
      },
      &RunInference);
}

void RunBackward(const BnEntry& e, const BnBwdArgs& a, char* w) {
  e.prim.execute(Stream(), {{DNNL_ARG_SRC, Data(e, a.x)},
                            {DNNL_ARG_DIFF_DST, Data(e, a.dy)},
                            {DNNL_ARG_SCALE, Vec(e, a.scale)},
                            // oneDNN 2.6 rejects the call without a shift, which the backward
                            // never reads (dx does not depend on it): any C floats will do.
                            {DNNL_ARG_SHIFT, Vec(e, a.scale)},
                            {DNNL_ARG_MEAN, Vec(e, a.mean)},
                            {DNNL_ARG_VARIANCE, Vec(e, a.var)},
                            {DNNL_ARG_DIFF_SRC, memory(e.data, Engine(), OutPtr(a.dx))},
                            {DNNL_ARG_DIFF_SCALE, memory(e.vec, Engine(), OutPtr(a.dscale))},
                            {DNNL_ARG_DIFF_SHIFT, memory(e.vec, Engine(), OutPtr(a.dbias))},
                            {DNNL_ARG_SCRATCHPAD, Scratch(e.scratch, w, e.scratch_off)}});
  Stream().wait();
}

Prepared<BnBwdArgs> Backward(const BnBwdArgs& a) {
  // N * S == 0: nothing to normalise, the reference kernel writes the zeros.
  if (!BatchNormEnabled() || a.N * a.S == 0 || a.x.data_type() != kFloat32) return {};
  return PreparedOf<BnEntry, BnBwdArgs>(
      KeyOf("bn_bwd", a.N, a.C, a.S, a.eps, 0),
      [&] {
        const memory::desc data = DataOf(a.N, a.C, a.S);
        BnBwd::desc d(prop_kind::backward, data, data, a.eps, Flags(false, false));
        const BnBwd::primitive_desc pd(d, Attr(), Engine(),
                                       ForwardPd(data, a.eps, true, false));
        return EntryOf<BnBwdArgs, BnBwd::primitive_desc, BnBwd>(a, pd, false);
      },
      &RunBackward);
}

}  // namespace
}  // namespace dnnl_kernel

SINGA_REGISTER_KERNEL(BatchNormForwardTraining, kCpuDnnl, dnnl_kernel::ForwardTraining);
SINGA_REGISTER_KERNEL(BatchNormForwardInference, kCpuDnnl, dnnl_kernel::ForwardInference);
SINGA_REGISTER_KERNEL(BatchNormBackward, kCpuDnnl, dnnl_kernel::Backward);

}  // namespace singa
