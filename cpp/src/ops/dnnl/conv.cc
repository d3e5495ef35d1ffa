// Convolution with oneDNN (backend kCpuDnnl): forward (+ bias, + fused ReLU), backward
// data and backward weights. Primitives are cached per shape (dnnl/common.h); each computes in
// the layout oneDNN picks (format_tag::any), with our plain NCHW / OIHW tensors reordered in and
// out through the op's workspace when that layout is blocked. Anything oneDNN rejects (no
// implementation for a shape) returns an empty kernel, and the front runs the reference one.
//
// Why blocked inside the op: the conv layers of ResNet-18 (CIFAR, batch 32), forward + both
// backwards, one thread, process CPU time per step (robust on a shared machine; AVX-512 host):
// reference im2col + OpenBLAS 1014 ms, oneDNN on plain NCHW / OIHW 1163 ms (its plain-layout
// backward-weights is slow), oneDNN blocked with the reorders inside the op 769 ms. Keeping
// activations blocked between ops would save the reorders too, but every other op and the graph
// would then have to know the layout; the op boundary stays plain.
//
// The fused ReLU is our own pass over y right after the primitive, not oneDNN's eltwise_relu
// post-op, which maps NaN to 0 (a NaN pixel then looked like a normal activation while it
// poisoned the weights' gradient). Cost, conv 64 -> 64, 3x3, 56x56, batch 32, two threads:
// 147 ms without ReLU, 156 ms with the pass (min of 15 runs on a loaded 2-core host: about +6%,
// one more read and write of y; the post-op cost nothing measurable).
#include <string>
#include <unordered_map>

#include "../nn_kernels.h"
#include "common.h"
#include "singa/ops/elementwise_functors.h"

namespace singa {
namespace dnnl_kernel {
namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

// y = max(0, y), NaN kept (the table's ReLU), split between threads.
void ReluInPlace(float* y, size_t n) {
  const fn::ReLUOp relu;
  const std::ptrdiff_t m = std::ptrdiff_t(n);
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
  for (std::ptrdiff_t i = 0; i < m; ++i) y[i] = relu(y[i]);
}
void ReluInPlace(const Tensor& y) {
  if (y.data_type() != kBFloat16) return ReluInPlace(OutPtr(y), y.Size());
  const fn::ReLUOp relu;
  auto* p = static_cast<BFloat16*>(y.block()->mutable_data());
  const std::ptrdiff_t m = std::ptrdiff_t(y.Size());
#pragma omp parallel for schedule(static) if (m >= (1 << 16))
  for (std::ptrdiff_t i = 0; i < m; ++i) p[i] = FloatToBFloat16(relu(BFloat16ToFloat(p[i])));
}

// bfloat16 tensors compute in bf16 (float32 accumulation inside oneDNN; the front checked the
// CPU); a dtype change is a different primitive.
memory::data_type DnnlType(const Tensor& t) {
  return t.data_type() == kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

struct Geometry {
  memory::dims src, wei, bias, dst, strides, dil, pad;
  memory::data_type dt = memory::data_type::f32;
  memory::desc Src() const { return memory::desc(src, dt, tag::nchw); }
  memory::desc Dst() const { return memory::desc(dst, dt, tag::nchw); }
  memory::desc Wei() const { return memory::desc(wei, dt, wei.size() == 5 ? tag::goihw : tag::oihw); }
  memory::desc Bias() const { return memory::desc(bias, dt, tag::x); }
  // The primitive's choice: any layout, or ours.
  memory::desc Any(const memory::desc& plain) const {
    return ConvBlockedLayout() ? memory::desc(plain.dims(), dt, tag::any) : plain;
  }
};

Geometry GeometryOf(const ConvHandle& h, size_t N, memory::data_type dt) {
  using D = memory::dim;
  Geometry g;
  g.dt = dt;
  const D G = D(h.group), OC = D(h.num_filters), IC = D(h.channels);
  g.src = {D(N), IC, D(h.height), D(h.width)};
  g.dst = {D(N), OC, D(h.conv_height), D(h.conv_width)};
  if (G > 1) g.wei = {G, OC / G, IC / G, D(h.kernel_h), D(h.kernel_w)};
  else g.wei = {OC, IC, D(h.kernel_h), D(h.kernel_w)};
  g.bias = {OC};
  g.strides = {D(h.stride_h), D(h.stride_w)};
  g.dil = {D(h.dilation_h) - 1, D(h.dilation_w) - 1};
  // Symmetric padding: oneDNN checks (H + 2p - extent) / stride + 1 == OH with floor division,
  // so the rows a floor-mode convolution drops need no negative right padding.
  g.pad = {D(h.pad_h), D(h.pad_w)};
  return g;
}

std::string KeyOf(const char* op, const ConvHandle& h, size_t N, int flags,
                  memory::data_type dt) {
  std::string k = KeyStart(op) + (dt == memory::data_type::bf16 ? ",bf16" : "");
  for (size_t v : {N, h.channels, h.height, h.width, h.num_filters, h.group, h.kernel_h,
                   h.kernel_w, h.stride_h, h.stride_w, h.pad_h, h.pad_w, h.dilation_h,
                   h.dilation_w, size_t(flags), size_t(ConvBlockedLayout())})
    k += "," + std::to_string(v);
  return k;
}

dnnl::convolution_forward::primitive_desc ForwardPd(const Geometry& g, bool bias) {
  using F = dnnl::convolution_forward;
  const memory::desc src = g.Any(g.Src()), wei = g.Any(g.Wei()), dst = g.Any(g.Dst());
  F::desc d = bias ? F::desc(prop_kind::forward_training, algorithm::convolution_direct, src, wei,
                             g.Bias(), dst, g.strides, g.dil, g.pad, g.pad)
                   : F::desc(prop_kind::forward_training, algorithm::convolution_direct, src, wei,
                             dst, g.strides, g.dil, g.pad, g.pad);
  return F::primitive_desc(d, Attr(), Engine());
}

// One cached primitive with its operands: in0 and in1 are read, out written; the scratchpad lies
// at scratch_off of the workspace; bias (forward only) is read in place.
struct ConvEntry {
  dnnl::primitive prim;
  Operand in0, in1, out;
  int in0_arg = 0, in1_arg = 0, out_arg = 0;
  memory::desc bias, scratch;
  size_t scratch_off = 0;
  WsLayout ws;

  // Operands, scratchpad: the layout of the workspace (after the primitive is made).
  template <typename PD>
  void Layout(const PD& pd, const memory::desc& u0, const memory::desc& p0,
              const memory::desc& u1, const memory::desc& p1, const memory::desc& uo,
              const memory::desc& po) {
    in0.Init(u0, p0, true, &ws);
    in1.Init(u1, p1, true, &ws);
    out.Init(uo, po, false, &ws);
    scratch = pd.scratchpad_desc();
    scratch_off = ws.Add(scratch.get_size());
  }

  void Run(const float* a0, const float* a1, const float* b, float* o, float* wsf) const {
    char* w = reinterpret_cast<char*>(wsf);
    std::unordered_map<int, memory> args;
    args[in0_arg] = in0.Input(a0, w);
    args[in1_arg] = in1.Input(a1, w);
    const memory target = out.Target(o, w);
    args[out_arg] = target;
    args[DNNL_ARG_SCRATCHPAD] = Scratch(scratch, w, scratch_off);
    if (b) args[DNNL_ARG_BIAS] = memory(bias, Engine(), const_cast<float*>(b));
    prim.execute(Stream(), args);
    out.Output(target, o);
    Stream().wait();
  }
};

// oneDNN rejected the call: the reference kernel takes float32 only, so bf16 stops here.
void NoBf16Fallback(const std::shared_ptr<ConvEntry>& e, const Tensor& t, const char* op) {
  SINGA_CHECK(e || t.data_type() != kBFloat16, NotImplementedError,
              op << ": oneDNN has no bfloat16 kernel for this convolution (input " << t.shape()
                 << "); convert it with as_type(float32)");
}

// The kernel of a cached entry (null: oneDNN has no implementation, the front falls back).
template <typename Args, typename F>
Prepared<Args> PreparedOf(const std::shared_ptr<ConvEntry>& e, F&& run) {
  Prepared<Args> p;
  if (!e) return p;
  p.workspace = e->ws.floats();
  p.run = [e, run](const Args& a, float* ws) { run(*e, a, ws); };
  return p;
}

Prepared<ConvFwdArgs> Forward(const ConvFwdArgs& a) {
  const size_t N = a.x.shape(0);
  const bool bias = !a.b.empty();
  auto e = Cached<ConvEntry>(KeyOf("fwd", a.h, N, bias, DnnlType(a.x)), [&] {
    std::shared_ptr<ConvEntry> r;
    try {
      const Geometry g = GeometryOf(a.h, N, DnnlType(a.x));
      const auto pd = ForwardPd(g, bias);
      r = std::make_shared<ConvEntry>();
      r->Layout(pd, g.Src(), pd.src_desc(), g.Wei(), pd.weights_desc(), g.Dst(), pd.dst_desc());
      r->bias = g.Bias();
      r->in0_arg = DNNL_ARG_SRC;
      r->in1_arg = DNNL_ARG_WEIGHTS;
      r->out_arg = DNNL_ARG_DST;
      r->prim = Make<dnnl::convolution_forward>(pd);
    } catch (const dnnl::error&) {
      r = nullptr;
    }
    return r;
  });
  NoBf16Fallback(e, a.x, "Conv2dForward");
  return PreparedOf<ConvFwdArgs>(e, [](const ConvEntry& e, const ConvFwdArgs& a, float* ws) {
    e.Run(InPtr(a.x), InPtr(a.W), a.b.empty() ? nullptr : InPtr(a.b), OutPtr(a.y), ws);
    if (a.relu) ReluInPlace(a.y);
  });
}

Prepared<ConvBwdXArgs> BackwardX(const ConvBwdXArgs& a) {
  const size_t N = a.dy.shape(0);
  auto e = Cached<ConvEntry>(KeyOf("bwd_data", a.h, N, 0, DnnlType(a.dy)), [&] {
    std::shared_ptr<ConvEntry> r;
    try {
      using B = dnnl::convolution_backward_data;
      const Geometry g = GeometryOf(a.h, N, DnnlType(a.dy));
      B::desc d(algorithm::convolution_direct, g.Any(g.Src()), g.Any(g.Wei()), g.Any(g.Dst()),
                g.strides, g.dil, g.pad, g.pad);
      const B::primitive_desc pd(d, Attr(), Engine(), ForwardPd(g, false));
      r = std::make_shared<ConvEntry>();
      r->Layout(pd, g.Dst(), pd.diff_dst_desc(), g.Wei(), pd.weights_desc(), g.Src(),
                pd.diff_src_desc());
      r->in0_arg = DNNL_ARG_DIFF_DST;
      r->in1_arg = DNNL_ARG_WEIGHTS;
      r->out_arg = DNNL_ARG_DIFF_SRC;
      r->prim = Make<B>(pd);
    } catch (const dnnl::error&) {
      r = nullptr;
    }
    return r;
  });
  NoBf16Fallback(e, a.dy, "Conv2dBackwardX");
  return PreparedOf<ConvBwdXArgs>(e, [](const ConvEntry& e, const ConvBwdXArgs& a, float* ws) {
    e.Run(InPtr(a.dy), InPtr(a.W), nullptr, OutPtr(a.dx), ws);
  });
}

Prepared<ConvBwdWArgs> BackwardW(const ConvBwdWArgs& a) {
  const size_t N = a.x.shape(0);
  if (N == 0) return {};  // dW = 0: the reference kernel writes the zeros
  auto e = Cached<ConvEntry>(KeyOf("bwd_weights", a.h, N, 0, DnnlType(a.x)), [&] {
    std::shared_ptr<ConvEntry> r;
    try {
      using B = dnnl::convolution_backward_weights;
      const Geometry g = GeometryOf(a.h, N, DnnlType(a.x));
      B::desc d(algorithm::convolution_direct, g.Any(g.Src()), g.Any(g.Wei()), g.Any(g.Dst()),
                g.strides, g.dil, g.pad, g.pad);
      const B::primitive_desc pd(d, Attr(), Engine(), ForwardPd(g, false));
      r = std::make_shared<ConvEntry>();
      r->Layout(pd, g.Src(), pd.src_desc(), g.Dst(), pd.diff_dst_desc(), g.Wei(),
                pd.diff_weights_desc());
      r->in0_arg = DNNL_ARG_SRC;
      r->in1_arg = DNNL_ARG_DIFF_DST;
      r->out_arg = DNNL_ARG_DIFF_WEIGHTS;
      r->prim = Make<B>(pd);
    } catch (const dnnl::error&) {
      r = nullptr;
    }
    return r;
  });
  NoBf16Fallback(e, a.x, "Conv2dBackwardW");
  return PreparedOf<ConvBwdWArgs>(e, [](const ConvEntry& e, const ConvBwdWArgs& a, float* ws) {
    e.Run(InPtr(a.x), InPtr(a.dy), nullptr, OutPtr(a.dW), ws);
  });
}

}  // namespace
}  // namespace dnnl_kernel

SINGA_REGISTER_KERNEL(Conv2dForward, kCpuDnnl, dnnl_kernel::Forward);
SINGA_REGISTER_KERNEL(Conv2dBackwardX, kCpuDnnl, dnnl_kernel::BackwardX);
SINGA_REGISTER_KERNEL(Conv2dBackwardW, kCpuDnnl, dnnl_kernel::BackwardW);

}  // namespace singa
