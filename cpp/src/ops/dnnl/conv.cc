// Convolution with oneDNN (backend kCpuDnnl): forward (+ bias, + fused ReLU), backward
// data and backward weights. Primitives are cached per shape (dnnl/common.h); each computes in
// the layout oneDNN picks (format_tag::any), with our plain NCHW / OIHW tensors reordered in and
// out through the op's workspace when that layout is blocked. Anything oneDNN rejects (no
// implementation for a shape) returns an empty kernel, and the front runs the reference one.
//
// Why blocked inside the op: the conv layers of ResNet-18 (CIFAR, batch 32), forward + both
// backwards, one thread, process CPU time per step (robust on a shared machine; AVX-512 host):
// reference im2col + OpenBLAS 1014 ms, oneDNN on plain NCHW / OIHW 1163 ms (its plain-layout
// backward-weights is slow), oneDNN blocked with the reorders inside the op 769 ms. Inside a
// recorded graph the reorders of activations go too: each kernel offers the operands its
// primitive computes in a kept layout (Prepared::layouts: nChw16c for float32 here, NHWC for
// bfloat16 on AMX, ResNet-18's 20 convolutions in all three directions alike), the graph's
// layout pass (graph/layouts.cc) keeps a block in it when every operation touching it accepts
// that, and Run reads such a block in place instead of reordering it. Eager calls and the
// weights stay plain.
//
// One path for the three directions (forward, backward data, backward weights): they differ in
// the primitive and in which of the geometry's tensors (src, weights, dst) each operand is
// (kDirections); the cache, the reorders and the run are shared. A bfloat16 backward-weights
// may write a float32 dW (the gradient of AMP's float32 master weight: oneDNN accumulates in
// float32 anyway), and bfloat16 1x1 convolutions run as matrix products (the note above
// PointwiseMatmul).
//
// The fused ReLU (and the rest of a graph's epilogue: a folded inference batch norm, a residual
// add; ops/epilogue_cpu.h) is our own pass over y right after the primitive, not oneDNN's eltwise_relu
// post-op, which maps NaN to 0 (a NaN pixel then looked like a normal activation while it
// poisoned the weights' gradient). Cost, conv 64 -> 64, 3x3, 56x56, batch 32, two threads:
// 147 ms without ReLU, 156 ms with the pass (min of 15 runs on a loaded 2-core host: about +6%,
// one more read and write of y; the post-op cost nothing measurable).
#include <string>
#include <unordered_map>

#include "../env_flag.h"
#include "../epilogue_cpu.h"
#include "../nn_kernels.h"
#include "common.h"
#include "singa/core/cpu_features.h"
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

// dt: src, dst, bias; wdt: the weights (f32 for the float32 dW of a bfloat16 backward-weights).
struct Geometry {
  memory::dims src, wei, bias, dst, strides, dil, pad;
  memory::data_type dt = memory::data_type::f32, wdt = memory::data_type::f32;
  memory::desc Src() const { return memory::desc(src, dt, tag::nchw); }
  memory::desc Dst() const { return memory::desc(dst, dt, tag::nchw); }
  memory::desc Wei() const {
    return memory::desc(wei, wdt, wei.size() == 5 ? tag::goihw : tag::oihw);
  }
  memory::desc Bias() const { return memory::desc(bias, dt, tag::x); }
  // The primitive's choice: any layout, or ours.
  memory::desc Any(const memory::desc& plain) const {
    return ConvBlockedLayout() ? memory::desc(plain.dims(), plain.data_type(), tag::any) : plain;
  }
};

Geometry GeometryOf(const ConvHandle& h, size_t N, memory::data_type dt, memory::data_type wdt) {
  using D = memory::dim;
  Geometry g;
  g.dt = dt;
  g.wdt = wdt;
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

// SINGA_DNNL_CONV_MATMUL=0 (read when a primitive is made) keeps 1x1 convolutions on oneDNN's
// convolution primitives (PointwiseMatmul below), for side-by-side benchmark rows.
bool PointwiseAsMatmul() { return EnvFlag("SINGA_DNNL_CONV_MATMUL", true); }

std::string KeyOf(const char* op, const ConvHandle& h, size_t N, int flags,
                  memory::data_type dt, memory::data_type wdt) {
  std::string k = KeyStart(op) + (dt == memory::data_type::bf16 ? ",bf16" : "") +
                  (wdt != dt ? ",wf32" : "");
  for (size_t v : {N, h.channels, h.height, h.width, h.num_filters, h.group, h.kernel_h,
                   h.kernel_w, h.stride_h, h.stride_w, h.pad_h, h.pad_w, h.dilation_h,
                   h.dilation_w, size_t(flags), size_t(ConvBlockedLayout()),
                   size_t(PointwiseAsMatmul())})
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

// The three directions differ only in the primitive and in which of the geometry's tensors each
// operand is: in0 and in1 are read, out is written (row of kDirections below).
enum Direction { kForward, kBackwardData, kBackwardWeights };
enum Role { kSrc, kWei, kDst };
struct DirectionInfo {
  const char* key;    // the cache key's start
  const char* op;     // the front's name, for messages
  Role in0, in1, out;
  int in0_arg, in1_arg, out_arg;
};
constexpr DirectionInfo kDirections[] = {
    {"fwd", "Conv2dForward", kSrc, kWei, kDst, DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
    {"bwd_data", "Conv2dBackwardX", kDst, kWei, kSrc, DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS,
     DNNL_ARG_DIFF_SRC},
    {"bwd_weights", "Conv2dBackwardW", kSrc, kDst, kWei, DNNL_ARG_SRC, DNNL_ARG_DIFF_DST,
     DNNL_ARG_DIFF_WEIGHTS},
};

// One cached primitive with its operands: in0 and in1 are read, out written; the scratchpad lies
// at scratch_off of the workspace; bias (forward only) is read in place. A matrix product
// standing in for the convolution (PointwiseMatmul) reads and writes the same memory through
// its own 2-d descriptors (view, per operand), in0 first gathered into the workspace at
// gather_off when the convolution is strided.
struct ConvEntry {
  dnnl::primitive prim;
  Operand in0, in1, out;
  int in0_arg = 0, in1_arg = 0, out_arg = 0;
  memory::desc bias, scratch, view[3], gather_src, gather_dst;
  dnnl::reorder gather;
  bool viewed = false, gathered = false;
  size_t scratch_off = 0, gather_off = 0;
  WsLayout ws;

  memory Viewed(const memory& m, int i) const {
    return viewed ? memory(view[i], Engine(), m.get_data_handle()) : m;
  }
  memory Gathered(const memory& m, char* w) const {
    if (!gathered) return m;
    memory src(gather_src, Engine(), m.get_data_handle()), g(gather_dst, Engine(), w + gather_off);
    gather.execute(Stream(), src, g);
    return g;
  }

  // in0, in1 read, out written, each in the layout the graph chose for its block.
  void Run(const Tensor& t0, const Tensor& t1, const float* b, const Tensor& to,
           float* wsf) const {
    char* w = reinterpret_cast<char*>(wsf);
    std::unordered_map<int, memory> args;
    args[in0_arg] =
        Viewed(Gathered(in0.Input(t0.block()->data(), w, t0.block()->mem_layout()), w), 0);
    args[in1_arg] = Viewed(in1.Input(t1.block()->data(), w, t1.block()->mem_layout()), 1);
    const MemLayout out_kept = to.block()->mem_layout();
    void* o = to.block()->mutable_data();
    const memory target = out.Target(o, w, out_kept);
    args[out_arg] = Viewed(target, 2);
    args[DNNL_ARG_SCRATCHPAD] = Scratch(scratch, w, scratch_off);
    if (b) args[DNNL_ARG_BIAS] = memory(bias, Engine(), const_cast<float*>(b));
    prim.execute(Stream(), args);
    out.Output(target, o, out_kept);
    Stream().wait();
  }
};

// The primitive of direction d on geometry g and the layouts it chose, per role; a matrix
// product in its place also names its own view of in0, in1, out and their arguments.
struct Chosen {
  dnnl::primitive prim;
  memory::desc role[3], scratch;
  memory::desc view[3], gather_src, gather_dst;  // gather_src empty: in0 read as it is
  int arg[3] = {0, 0, 0};  // 0: the direction's (kDirections)
};
// A backward primitive B; roles(pd, role) names the layouts it chose.
template <typename B, typename Roles>
Chosen ChooseBackward(const Geometry& g, const dnnl::convolution_forward::primitive_desc& fpd,
                      Roles roles) {
  typename B::desc bd(algorithm::convolution_direct, g.Any(g.Src()), g.Any(g.Wei()),
                      g.Any(g.Dst()), g.strides, g.dil, g.pad, g.pad);
  const typename B::primitive_desc pd(bd, Attr(), Engine(), fpd);
  Chosen c;
  c.prim = Make<B>(pd);
  c.scratch = pd.scratchpad_desc();
  roles(pd, c.role);
  return c;
}

// Note: 1x1 convolutions as matrix products.
// A 1x1 convolution without padding on channels-last operands is a matrix product over the
// output's N*OH*OW positions, each operand read in place as a (positions, channels) matrix:
//   forward          y (M, Co) = x (M, Ci) W^T (Ci, Co)
//   backward data    dx (M, Ci) = dy (M, Co) W (Co, Ci)                  (stride 1)
//   backward weights dW (Co, Ci) = dy^T (Co, M) x (M, Ci)    (stride s: x's rows gathered first)
// W and dW stay plain (OIHW is (Co, Ci) row-major): no weight reorders either. oneDNN 2.6's
// bfloat16 convolutions run these shapes slower than its matmul (AMX, one thread, ResNet-50's
// 1x1 layers at batch 16): backward weights 2.5-4x (2048 -> 512 at 7x7: 24 ms against 6;
// PyTorch's newer oneDNN 6 ms), stride 2 ~60 ms against ~10, backward data 1.1-2x; the forward's
// brgconv_1x1 wins only where Co > Ci on many positions (64 -> 256 at 56x56: 6.1 against
// 6.6 ms), so those stay convolutions. ResNet-50 has 36 such layers among its 53. Without AMX
// (oneDNN's avx512_core_bf16 kernels, measured here with ONEDNN_MAX_CPU_ISA) the two are within
// 10% of each other, backward data a little slower as a matmul: only backward weights goes
// through the matmul there.
bool PointwiseMatmul(Direction d, const Geometry& g, bool bias) {
  static const bool amx = CpuHas("amx_bf16");
  const bool pointwise = g.dt == memory::data_type::bf16 && ConvBlockedLayout() &&
                         PointwiseAsMatmul() &&
                         g.wei.size() == 4 && g.wei[2] == 1 && g.wei[3] == 1 && g.pad[0] == 0 &&
                         g.pad[1] == 0;
  const bool strided = g.strides[0] != 1 || g.strides[1] != 1;
  // oneDNN's strided view of x takes no overlapping extents: an odd height (7 -> 4 at stride 2)
  // would reach into the next image's rows
  const bool gatherable = g.src[2] >= g.dst[2] * g.strides[0] &&
                          g.strides[0] * g.src[3] >= g.dst[3] * g.strides[1];
  const memory::dim M = g.dst[0] * g.dst[2] * g.dst[3];
  if (!pointwise || (strided && (d != kBackwardWeights || !gatherable))) return false;
  if (d != kBackwardWeights && !amx) return false;
  return d != kForward || (!bias && (g.dst[1] <= g.src[1] || M <= 8192));
}

// An (r, c) matrix stored row-major, or (transposed) the (r, c) view of a stored (c, r) one.
memory::desc Matrix(memory::dim r, memory::dim c, memory::data_type t, bool transposed = false) {
  return memory::desc({r, c}, t, transposed ? memory::dims{1, r} : memory::dims{c, 1});
}

Chosen PointwiseChoice(Direction d, const Geometry& g) {
  const memory::dim M = g.dst[0] * g.dst[2] * g.dst[3], Ci = g.src[1], Co = g.dst[1];
  const memory::desc x = Matrix(M, Ci, g.dt), dy = Matrix(M, Co, g.dt),
                     W = Matrix(Co, Ci, g.wdt);
  Chosen c;
  // views and arguments of in0, in1, out in the direction's row of kDirections
  if (d == kForward) {
    c.view[0] = x, c.view[1] = Matrix(Ci, Co, g.wdt, true), c.view[2] = dy;
    c.arg[0] = DNNL_ARG_SRC, c.arg[1] = DNNL_ARG_WEIGHTS, c.arg[2] = DNNL_ARG_DST;
  } else if (d == kBackwardData) {
    c.view[0] = dy, c.view[1] = W, c.view[2] = x;
    c.arg[0] = DNNL_ARG_SRC, c.arg[1] = DNNL_ARG_WEIGHTS, c.arg[2] = DNNL_ARG_DST;
  } else {
    c.view[0] = x, c.view[1] = Matrix(Co, M, g.dt, true), c.view[2] = W;
    c.arg[0] = DNNL_ARG_WEIGHTS, c.arg[1] = DNNL_ARG_SRC, c.arg[2] = DNNL_ARG_DST;
  }
  const memory::desc& a = c.arg[0] == DNNL_ARG_SRC ? c.view[0] : c.view[1];
  const memory::desc& b = c.arg[0] == DNNL_ARG_SRC ? c.view[1] : c.view[0];
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c.view[2]), Attr(), Engine());
  c.prim = Make<dnnl::matmul>(pd);
  c.scratch = pd.scratchpad_desc();
  c.role[kSrc] = ChannelsLast(g.Src());
  c.role[kWei] = g.Wei();
  c.role[kDst] = ChannelsLast(g.Dst());
  if (g.strides[0] != 1 || g.strides[1] != 1) {  // x's rows at the strided positions
    const memory::dim N = g.src[0], H = g.src[2], Wd = g.src[3];
    c.gather_src = memory::desc({N, Ci, g.dst[2], g.dst[3]}, g.dt,
                                memory::dims{H * Wd * Ci, 1, g.strides[0] * Wd * Ci,
                                             g.strides[1] * Ci});
    c.gather_dst = memory::desc({N, Ci, g.dst[2], g.dst[3]}, g.dt, tag::nhwc);
  }
  return c;
}

Chosen Choose(Direction d, const Geometry& g, bool bias) {
  if (PointwiseMatmul(d, g, bias)) return PointwiseChoice(d, g);
  Geometry hint = g;  // the forward a backward is hinted with computes in src's dtype
  hint.wdt = g.dt;
  const auto fpd = ForwardPd(hint, bias && d == kForward);
  if (d == kForward) {
    Chosen c;
    c.prim = Make<dnnl::convolution_forward>(fpd);
    c.role[kSrc] = fpd.src_desc();
    c.role[kWei] = fpd.weights_desc();
    c.role[kDst] = fpd.dst_desc();
    c.scratch = fpd.scratchpad_desc();
    return c;
  }
  if (d == kBackwardData)
    return ChooseBackward<dnnl::convolution_backward_data>(
        g, fpd, [](const auto& pd, memory::desc* r) {
          r[kSrc] = pd.diff_src_desc();
          r[kWei] = pd.weights_desc();
          r[kDst] = pd.diff_dst_desc();
        });
  return ChooseBackward<dnnl::convolution_backward_weights>(
      g, fpd, [](const auto& pd, memory::desc* r) {
        r[kSrc] = pd.src_desc();
        r[kWei] = pd.diff_weights_desc();
        r[kDst] = pd.diff_dst_desc();
      });
}

// The cached entry of direction d for this call, or null when oneDNN has no implementation
// (the front then runs the reference kernel; bfloat16, which that kernel lacks, throws here).
// W: the weights' tensor (W or dW): a bfloat16 backward-weights may write a float32 dW.
std::shared_ptr<ConvEntry> EntryOf(Direction d, const ConvHandle& h, const Tensor& x,
                                   const Tensor& W, size_t N, bool bias) {
  const DirectionInfo& info = kDirections[d];
  const memory::data_type dt = DnnlType(x), wdt = DnnlType(W);
  auto e = Cached<ConvEntry>(KeyOf(info.key, h, N, bias, dt, wdt), [&] {
    std::shared_ptr<ConvEntry> r;
    try {
      const Geometry g = GeometryOf(h, N, dt, wdt);
      const memory::desc plain[3] = {g.Src(), g.Wei(), g.Dst()};
      Chosen c = Choose(d, g, bias);
      r = std::make_shared<ConvEntry>();
      r->in0.Init(plain[info.in0], c.role[info.in0], true, &r->ws);
      r->in1.Init(plain[info.in1], c.role[info.in1], true, &r->ws);
      r->out.Init(plain[info.out], c.role[info.out], false, &r->ws);
      r->scratch = c.scratch;
      r->scratch_off = r->ws.Add(c.scratch.get_size());
      r->in0_arg = c.arg[0] ? c.arg[0] : info.in0_arg;
      r->in1_arg = c.arg[1] ? c.arg[1] : info.in1_arg;
      r->out_arg = c.arg[2] ? c.arg[2] : info.out_arg;
      r->viewed = c.arg[0] != 0;
      for (int i = 0; i < 3; ++i) r->view[i] = c.view[i];
      r->gathered = !c.gather_src.is_zero();
      if (r->gathered) {
        r->gather_src = c.gather_src;
        r->gather_dst = c.gather_dst;
        r->gather_off = r->ws.Add(c.gather_dst.get_size());
        r->gather = Make<dnnl::reorder>(
            dnnl::reorder::primitive_desc(Engine(), c.gather_src, Engine(), c.gather_dst));
      }
      r->bias = g.Bias();
      r->prim = std::move(c.prim);
    } catch (const dnnl::error&) {
      r = nullptr;
    }
    return r;
  });
  SINGA_CHECK(e || x.data_type() != kBFloat16, NotImplementedError,
              info.op << ": oneDNN has no bfloat16 kernel for this convolution (input "
                      << x.shape() << "); convert it with as_type(float32)");
  return e;
}

// What the graph may keep t in for this operand: the kept layout the primitive computes it in
// (bit 0 of the mask of that layout).
struct Offered {
  uint32_t c16 = 0, last = 0;
};
Offered Offer(const Operand& o, const Tensor& t) {
  if (!OffersChannels16(t)) return {};
  return {o.Keeps() == MemLayout::kChannels16 ? 1u : 0u,
          o.Keeps() == MemLayout::kChannelsLast ? 1u : 0u};
}
// reads {r0, r1 (shifted by shift)}, writes {w}: each operand in its primitive's layout.
LayoutHooks Hooks(Offered r0, Offered r1, unsigned shift, Offered w) {
  LayoutHooks h;
  h.reads = r0.c16 | r1.c16 << shift;
  h.reads_last = r0.last | r1.last << shift;
  h.writes = w.c16;
  h.writes_last = w.last;
  return h;
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
  auto e = EntryOf(kForward, a.h, a.x, a.W, a.x.shape(0), !a.b.empty());
  auto p = PreparedOf<ConvFwdArgs>(e, [](const ConvEntry& e, const ConvFwdArgs& a, float* ws) {
    e.Run(a.x, a.W, a.b.empty() ? nullptr : InPtr(a.b), a.y, ws);
    const CpuEpilogue epi(a.epi, a.relu, a.h.num_filters, a.h.conv_height * a.h.conv_width);
    if (epi.relu_only()) {
      if (a.relu) ReluInPlace(a.y);  // float32 or bfloat16
    } else if (IsChannels16(a.y)) {  // float32: y is never offered channels-last (below)
      epi.ApplyChannels16(OutPtr(a.y), a.y.shape(0), true);
    } else {
      epi.Apply(OutPtr(a.y), 0, a.y.shape(0) * a.h.num_filters, true);  // float32 only: below
    }
  });
  // The epilogue pass (epilogue_cpu.h) reads and writes float32; a bfloat16 convolution offers
  // the ReLU only.
  p.epilogue = a.x.data_type() == kFloat32 ? kEpiBatchNorm | kEpiAdd : 0u;
  // reads {x, W, b}, writes {y}: x and y may stay in their primitive's layout; the epilogue
  // follows y's, and its float32 pass has no channels-last path (bfloat16 offers the ReLU only,
  // which does not care)
  if (e) {
    Offered y = Offer(e->out, a.y);
    if (a.y.data_type() == kFloat32) y.last = 0;
    p.layouts = Hooks(Offer(e->in0, a.x), {}, 0, y);
  }
  return p;
}

Prepared<ConvBwdXArgs> BackwardX(const ConvBwdXArgs& a) {
  auto e = EntryOf(kBackwardData, a.h, a.dy, a.W, a.dy.shape(0), false);
  auto p = PreparedOf<ConvBwdXArgs>(e, [](const ConvEntry& e, const ConvBwdXArgs& a, float* ws) {
    e.Run(a.dy, a.W, nullptr, a.dx, ws);
  });
  if (e) p.layouts = Hooks(Offer(e->in0, a.dy), {}, 0, Offer(e->out, a.dx));  // reads {dy, W}
  return p;
}

Prepared<ConvBwdWArgs> BackwardW(const ConvBwdWArgs& a) {
  if (a.x.shape(0) == 0) return {};  // dW = 0: the reference kernel writes the zeros
  auto e = EntryOf(kBackwardWeights, a.h, a.x, a.dW, a.x.shape(0), false);
  auto p = PreparedOf<ConvBwdWArgs>(e, [](const ConvEntry& e, const ConvBwdWArgs& a, float* ws) {
    e.Run(a.x, a.dy, nullptr, a.dW, ws);
  });
  if (e) p.layouts = Hooks(Offer(e->in1, a.dy), Offer(e->in0, a.x), 1, {});  // reads {dy, x}
  return p;
}

}  // namespace
}  // namespace dnnl_kernel

SINGA_REGISTER_KERNEL(Conv2dForward, kCpuDnnl, dnnl_kernel::Forward);
SINGA_REGISTER_KERNEL(Conv2dBackwardX, kCpuDnnl, dnnl_kernel::BackwardX);
SINGA_REGISTER_KERNEL(Conv2dBackwardW, kCpuDnnl, dnnl_kernel::BackwardW);

}  // namespace singa
