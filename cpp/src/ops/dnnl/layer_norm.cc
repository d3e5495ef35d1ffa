// Layer normalisation with oneDNN 2.6's layer_normalization primitives (backend kCpuDnnl), x
// viewed as a plain (M, N) matrix. oneDNN keeps the variance where our API returns rstd = 1 /
// sqrt(var + eps): the forward writes the variance into rstd and converts it in place (M
// values); the backward hands oneDNN var' = 1 / rstd^2 with eps 0, whose 1 / sqrt(var' + 0) is
// the same rstd. Unless LayerNormEnabled() (common.h: measured against the reference kernel in
// BENCHMARKS.md), each kernel returns an empty Prepared and the front runs the reference one.
#include <cmath>
#include <string>
#include <unordered_map>

#include "../transformer_kernels.h"
#include "common.h"

namespace singa {
namespace dnnl_kernel {
namespace {

using dnnl::normalization_flags;
using dnnl::prop_kind;
using LnFwd = dnnl::layer_normalization_forward;
using LnBwd = dnnl::layer_normalization_backward;

struct LnEntry {
  dnnl::primitive prim;
  memory::desc data, stat, vec, scratch;
  size_t scratch_off = 0, var_off = 0;  // var: the backward's variance, M floats
  WsLayout ws;
};

memory::desc Matrix(size_t M, size_t N) {
  return memory::desc({memory::dim(M), memory::dim(N)}, memory::data_type::f32, tag::ab);
}
memory::desc Vector(size_t n) {
  return memory::desc({memory::dim(n)}, memory::data_type::f32, tag::a);
}

normalization_flags Flags(bool scale, bool shift) {
  normalization_flags f = normalization_flags::none;
  if (scale) f = f | normalization_flags::use_scale;
  if (shift) f = f | normalization_flags::use_shift;
  return f;
}

LnFwd::primitive_desc ForwardPd(size_t M, size_t N, float eps, normalization_flags f) {
  LnFwd::desc d(prop_kind::forward_training, Matrix(M, N), Vector(M), eps, f);
  return LnFwd::primitive_desc(d, Attr(), Engine());
}

std::string KeyOf(const char* op, size_t M, size_t N, float eps, bool scale, bool shift) {
  return KeyStart(op) + "," + std::to_string(M) + "," + std::to_string(N) + "," +
         std::to_string(eps) + "," + std::to_string(int(scale) * 2 + int(shift));
}

template <typename PD, typename P>
std::shared_ptr<LnEntry> EntryOf(size_t M, size_t N, const PD& pd, bool backward) {
  auto e = std::make_shared<LnEntry>();
  e->data = Matrix(M, N);
  e->stat = Vector(M);
  e->vec = Vector(N);
  e->scratch = pd.scratchpad_desc();
  e->scratch_off = e->ws.Add(e->scratch.get_size());
  if (backward) e->var_off = e->ws.Add(M * sizeof(float));
  e->prim = Make<P>(pd);
  return e;
}

memory In(const memory::desc& md, const Tensor& t) {
  return memory(md, Engine(), const_cast<float*>(InPtr(t)));
}
memory Out(const memory::desc& md, const Tensor& t) { return memory(md, Engine(), OutPtr(t)); }

void RunForward(const LnEntry& e, const LnFwdArgs& a, char* w) {
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, In(e.data, a.x)},
                                       {DNNL_ARG_DST, Out(e.data, a.y)},
                                       {DNNL_ARG_MEAN, Out(e.stat, a.mean)},
                                       {DNNL_ARG_VARIANCE, Out(e.stat, a.rstd)},
                                       {DNNL_ARG_SCRATCHPAD, Scratch(e.scratch, w, e.scratch_off)}};
  if (!a.weight.empty()) args[DNNL_ARG_SCALE] = In(e.vec, a.weight);
  if (!a.bias.empty()) args[DNNL_ARG_SHIFT] = In(e.vec, a.bias);
  e.prim.execute(Stream(), args);
  Stream().wait();
  float* r = OutPtr(a.rstd);
  for (size_t m = 0; m < a.M; ++m) r[m] = 1.f / std::sqrt(r[m] + a.eps);
}

Prepared<LnFwdArgs> PrepareForward(const LnFwdArgs& a) {
  if (!LayerNormEnabled()) return {};
  const bool scale = !a.weight.empty(), shift = !a.bias.empty();
  return PreparedOf<LnEntry, LnFwdArgs>(
      KeyOf("ln_fwd", a.M, a.N, a.eps, scale, shift),
      [&] {
        return EntryOf<LnFwd::primitive_desc, LnFwd>(a.M, a.N,
                                                     ForwardPd(a.M, a.N, a.eps, Flags(scale, shift)),
                                                     false);
      },
      &RunForward);
}

void RunBackward(const LnEntry& e, const LnBwdArgs& a, char* w) {
  float* var = reinterpret_cast<float*>(w + e.var_off);
  const float* rs = InPtr(a.rstd);
  for (size_t m = 0; m < a.M; ++m) var[m] = 1.f / (rs[m] * rs[m]);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, In(e.data, a.x)},
                                       {DNNL_ARG_DIFF_DST, In(e.data, a.dy)},
                                       {DNNL_ARG_MEAN, In(e.stat, a.mean)},
                                       {DNNL_ARG_VARIANCE, memory(e.stat, Engine(), var)},
                                       {DNNL_ARG_DIFF_SRC, Out(e.data, a.dx)},
                                       {DNNL_ARG_SCRATCHPAD, Scratch(e.scratch, w, e.scratch_off)}};
  if (!a.weight.empty()) {
    args[DNNL_ARG_SCALE] = In(e.vec, a.weight);
    args[DNNL_ARG_SHIFT] = In(e.vec, a.weight);  // never read by the backward
    args[DNNL_ARG_DIFF_SCALE] = Out(e.vec, a.dweight);
    args[DNNL_ARG_DIFF_SHIFT] = Out(e.vec, a.dbias);
  }
  e.prim.execute(Stream(), args);
  Stream().wait();
}

Prepared<LnBwdArgs> PrepareBackward(const LnBwdArgs& a) {
  if (!LayerNormEnabled()) return {};
  const bool affine = !a.weight.empty();
  return PreparedOf<LnEntry, LnBwdArgs>(
      KeyOf("ln_bwd", a.M, a.N, 0.f, affine, affine),
      [&] {
        const normalization_flags f = Flags(affine, affine);
        LnBwd::desc d(affine ? prop_kind::backward : prop_kind::backward_data, Matrix(a.M, a.N),
                      Matrix(a.M, a.N), Vector(a.M), 0.f, f);
        const LnBwd::primitive_desc pd(d, Attr(), Engine(), ForwardPd(a.M, a.N, 0.f, f));
        return EntryOf<LnBwd::primitive_desc, LnBwd>(a.M, a.N, pd, true);
      },
      &RunBackward);
}

}  // namespace
}  // namespace dnnl_kernel

SINGA_REGISTER_KERNEL(LayerNormForward, kCpuDnnl, dnnl_kernel::PrepareForward);
SINGA_REGISTER_KERNEL(LayerNormBackward, kCpuDnnl, dnnl_kernel::PrepareBackward);

}  // namespace singa
