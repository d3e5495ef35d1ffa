// Max / average pooling with oneDNN (backend kCpuDnnl), on our plain NCHW tensors (no reorders:
// pooling is bandwidth-bound, a layout change would cost what it saves), float32 or bfloat16, or,
// for average pooling, on a block a graph keeps in nChw16c (Graph: layouts). Average pooling maps
// count_include_pad to pooling_avg_include_padding (divisor kh * kw) or _exclude_padding. Max
// pooling's backward needs the forward's argmax workspace, which our API does not carry from the
// forward: the backward reruns the forward (training mode) into its own workspace first, as the
// reference kernel rescans each window.
//
// NaN: oneDNN's max pooling skips NaN ([[nan, 1], [2, 3]] pooled to 3, an all-NaN window to
// -3.4e38). After each max pooling primitive, the planes whose input holds a NaN are recomputed
// by the reference per-plane loops (../cpu/pool_plane.h): NaN propagates as in numpy and
// PyTorch, and the gradient goes to the window's first NaN. The scan reads x once more
// (vectorised, in parallel over planes): 3.7 ms on one thread for a (32, 64, 56, 56) input,
// against about 4 ms for oneDNN's pooling forward itself on two threads (a max pooling layer costs
// up to about 1.5x what it did; average pooling propagates NaN by itself and pays nothing).
#include <algorithm>
#include <string>
#include <unordered_map>

#include "../cpu/pool_plane.h"
#include "../nn_kernels.h"
#include "common.h"

namespace singa {
namespace dnnl_kernel {
namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

struct PoolGeometry {
  memory::desc src, dst;
  memory::dims strides, kernel, pad;
  algorithm alg;
};

// dt: the activations' type (float32 or bfloat16: oneDNN averages bf16 in float32).
PoolGeometry GeometryOf(const PoolingHandle& h, size_t N, memory::data_type dt, bool blocked) {
  using D = memory::dim;
  PoolGeometry g;
  const tag t = blocked ? tag::nChw16c : tag::nchw;
  g.src = memory::desc({D(N), D(h.channels), D(h.height), D(h.width)}, dt, t);
  g.dst = memory::desc({D(N), D(h.channels), D(h.pooled_height), D(h.pooled_width)}, dt, t);
  g.strides = {D(h.stride_h), D(h.stride_w)};
  g.kernel = {D(h.kernel_h), D(h.kernel_w)};
  g.pad = {D(h.pad_h), D(h.pad_w)};  // symmetric, as for convolution (floor mode)
  g.alg = h.is_max_pooling      ? algorithm::pooling_max
          : h.count_include_pad ? algorithm::pooling_avg_include_padding
                                : algorithm::pooling_avg_exclude_padding;
  return g;
}

memory::data_type TypeOf(const Tensor& t) {
  return t.data_type() == kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

std::string KeyOf(const char* op, const PoolingHandle& h, size_t N, memory::data_type dt,
                  bool blocked) {
  std::string k = KeyStart(op) + (dt == memory::data_type::bf16 ? ",bf16" : "") +
                  (blocked ? ",16c" : "");
  for (size_t v : {N, h.channels, h.height, h.width, h.kernel_h, h.kernel_w, h.stride_h,
                   h.stride_w, h.pad_h, h.pad_w, size_t(h.is_max_pooling),
                   size_t(h.count_include_pad)})
    k += "," + std::to_string(v);
  return k;
}

dnnl::pooling_forward::primitive_desc ForwardPd(const PoolGeometry& g, prop_kind prop) {
  dnnl::pooling_forward::desc d(prop, g.alg, g.src, g.dst, g.strides, g.kernel, g.pad, g.pad);
  return dnnl::pooling_forward::primitive_desc(d, Attr(), Engine());
}

// Reruns fix(plane) on each (n, c) plane of x that holds a NaN (max pooling only).
template <typename T, typename Fix>
void FixNaNPlanes(const PoolingHandle& h, size_t N, const T* px, Fix fix) {
  if (!h.is_max_pooling) return;
  const size_t in = h.height * h.width;
  const std::ptrdiff_t planes = std::ptrdiff_t(N * h.channels);
#pragma omp parallel for schedule(static) if (size_t(planes) * in >= (1 << 14))
  for (std::ptrdiff_t p = 0; p < planes; ++p)
    if (cpu::PlaneHasNaN(px + size_t(p) * in, in)) fix(size_t(p));
}

// Average pooling may run on nChw16c for a graph's blocked layout (Graph: layouts); max pooling
// stays plain, where FixNaNPlanes can find a NaN's plane.
bool Offers16Pool(const PoolingHandle& h, const Tensor& x) {
  return !h.is_max_pooling && OffersChannels16(x);
}
// The pooled image has more than one pixel (else both layouts store it alike).
bool Spatial(const PoolingHandle& h) { return h.pooled_height * h.pooled_width > 1; }

struct PoolEntry {
  dnnl::primitive fwd, bwd;  // bwd (backward entries): fwd is then the training forward
  memory::desc src, dst, fwd_scratch, bwd_scratch, workspace;
  size_t fwd_scratch_off = 0, bwd_scratch_off = 0, y_off = 0, workspace_off = 0;
  WsLayout ws;
};

std::shared_ptr<PoolEntry> ForwardEntry(const PoolFwdArgs& a, bool blocked) {
  const size_t N = a.x.shape(0);
  const memory::data_type dt = TypeOf(a.x);
  return Cached<PoolEntry>(KeyOf("pool_fwd", a.h, N, dt, blocked), [&] {
    std::shared_ptr<PoolEntry> r;
    try {
      const PoolGeometry g = GeometryOf(a.h, N, dt, blocked);
      const auto pd = ForwardPd(g, prop_kind::forward_inference);
      r = std::make_shared<PoolEntry>();
      r->src = g.src;
      r->dst = g.dst;
      r->fwd_scratch = pd.scratchpad_desc();
      r->fwd_scratch_off = r->ws.Add(r->fwd_scratch.get_size());
      r->fwd = Make<dnnl::pooling_forward>(pd);
    } catch (const dnnl::error&) {
      r = nullptr;
    }
    return r;
  });
}

Prepared<PoolFwdArgs> Forward(const PoolFwdArgs& a) {
  auto e = ForwardEntry(a, false);
  Prepared<PoolFwdArgs> p;
  if (!e) return p;
  auto b = Offers16Pool(a.h, a.x) ? ForwardEntry(a, true) : nullptr;
  p.workspace = std::max(e->ws.floats(), b ? b->ws.floats() : 0);
  // reads {x}, writes {y}: one layout; a 1x1 y is stored alike in both (layout.h) and may be
  // any block's view (flattened for a linear layer's gradient, say): not flagged
  if (b) p.layouts = {1u, Spatial(a.h) ? 1u : 0u, true};
  p.run = [plain = e, b](const PoolFwdArgs& a, float* wsf) {
    const auto& e = b && IsChannels16(a.x) ? b : plain;
    char* w = reinterpret_cast<char*>(wsf);
    e->fwd.execute(Stream(),
                   {{DNNL_ARG_SRC, memory(e->src, Engine(), const_cast<float*>(InPtr(a.x)))},
                    {DNNL_ARG_DST, memory(e->dst, Engine(), OutPtr(a.y))},
                    {DNNL_ARG_SCRATCHPAD, Scratch(e->fwd_scratch, w, e->fwd_scratch_off)}});
    Stream().wait();
    cpu::ByElemType(a.x, [&](auto t) {
      using T = decltype(t);
      const PoolGeom g = PoolGeom::Of(a.h);
      const size_t in = size_t(g.H) * g.W, out = size_t(g.PH) * g.PW;
      const T* px = cpu::In<T>(a.x);
      T* py = cpu::Out<T>(a.y);
      FixNaNPlanes(a.h, a.x.shape(0), px, [&](size_t plane) {
        cpu::PoolPlaneForward(g, px + plane * in, py + plane * out);
      });
    });
  };
  return p;
}

std::shared_ptr<PoolEntry> BackwardEntry(const PoolBwdArgs& a, bool blocked) {
  const size_t N = a.x.shape(0);
  const memory::data_type dt = TypeOf(a.x);
  return Cached<PoolEntry>(KeyOf("pool_bwd", a.h, N, dt, blocked), [&] {
    std::shared_ptr<PoolEntry> r;
    try {
      const PoolGeometry g = GeometryOf(a.h, N, dt, blocked);
      const auto fpd = ForwardPd(g, prop_kind::forward_training);
      dnnl::pooling_backward::desc d(g.alg, g.src, g.dst, g.strides, g.kernel, g.pad, g.pad);
      const dnnl::pooling_backward::primitive_desc bpd(d, Attr(), Engine(), fpd);
      r = std::make_shared<PoolEntry>();
      r->src = g.src;
      r->dst = g.dst;
      r->bwd_scratch = bpd.scratchpad_desc();
      r->bwd_scratch_off = r->ws.Add(r->bwd_scratch.get_size());
      if (a.h.is_max_pooling) {  // the forward again, for its argmax workspace
        r->fwd_scratch = fpd.scratchpad_desc();
        r->fwd_scratch_off = r->ws.Add(r->fwd_scratch.get_size());
        r->workspace = fpd.workspace_desc();
        r->workspace_off = r->ws.Add(r->workspace.get_size());
        r->y_off = r->ws.Add(g.dst.get_size());
        r->fwd = Make<dnnl::pooling_forward>(fpd);
      }
      r->bwd = Make<dnnl::pooling_backward>(bpd);
    } catch (const dnnl::error&) {
      r = nullptr;
    }
    return r;
  });
}

Prepared<PoolBwdArgs> Backward(const PoolBwdArgs& a) {
  auto e = BackwardEntry(a, false);
  Prepared<PoolBwdArgs> p;
  if (!e) return p;
  auto b = Offers16Pool(a.h, a.x) ? BackwardEntry(a, true) : nullptr;
  p.workspace = std::max(e->ws.floats(), b ? b->ws.floats() : 0);
  if (b) p.layouts = {(Spatial(a.h) ? 1u : 0u) | 2u, 1u, true};  // reads {dy, x}, writes {dx}
  p.run = [plain = e, b, is_max = a.h.is_max_pooling](const PoolBwdArgs& a, float* wsf) {
    const auto& e = b && IsChannels16(a.x) ? b : plain;
    char* w = reinterpret_cast<char*>(wsf);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_DIFF_DST, memory(e->dst, Engine(), const_cast<float*>(InPtr(a.dy)))},
        {DNNL_ARG_DIFF_SRC, memory(e->src, Engine(), OutPtr(a.dx))},
        {DNNL_ARG_SCRATCHPAD, Scratch(e->bwd_scratch, w, e->bwd_scratch_off)}};
    if (is_max) {
      const memory ws(e->workspace, Engine(), w + e->workspace_off);
      e->fwd.execute(Stream(),
                     {{DNNL_ARG_SRC, memory(e->src, Engine(), const_cast<float*>(InPtr(a.x)))},
                      {DNNL_ARG_DST, memory(e->dst, Engine(), w + e->y_off)},
                      {DNNL_ARG_WORKSPACE, ws},
                      {DNNL_ARG_SCRATCHPAD, Scratch(e->fwd_scratch, w, e->fwd_scratch_off)}});
      args[DNNL_ARG_WORKSPACE] = ws;
    }
    e->bwd.execute(Stream(), args);
    Stream().wait();
    cpu::ByElemType(a.x, [&](auto t) {
      using T = decltype(t);
      const PoolGeom g = PoolGeom::Of(a.h);
      const size_t in = size_t(g.H) * g.W, out = size_t(g.PH) * g.PW;
      const T *px = cpu::In<T>(a.x), *pdy = cpu::In<T>(a.dy);
      T* pdx = cpu::Out<T>(a.dx);
      FixNaNPlanes(a.h, a.x.shape(0), px, [&](size_t plane) {
        cpu::PoolPlaneBackward(g, px + plane * in, pdy + plane * out, pdx + plane * in);
      });
    });
  };
  return p;
}

}  // namespace
}  // namespace dnnl_kernel

SINGA_REGISTER_KERNEL(Pool2dForward, kCpuDnnl, dnnl_kernel::Forward);
SINGA_REGISTER_KERNEL(Pool2dBackward, kCpuDnnl, dnnl_kernel::Backward);

}  // namespace singa
