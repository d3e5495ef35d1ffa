// Max / average pooling with oneDNN (backend kCpuDnnl), on our plain NCHW tensors (no reorders:
// pooling is bandwidth-bound, a layout change would cost what it saves), float32 or bfloat16, or
// on a block a graph keeps in nChw16c or NHWC (Graph: layouts): one primitive per layout, the
// run picks x's. Average pooling maps
// count_include_pad to pooling_avg_include_padding (divisor kh * kw) or _exclude_padding. Max
// pooling's backward needs the forward's argmax workspace, which our API does not carry from the
// forward: the backward reruns the forward (training mode) into its own workspace first, as the
// reference kernel rescans each window.
//
// NaN: oneDNN's max pooling skips NaN ([[nan, 1], [2, 3]] pooled to 3, an all-NaN window to
// -3.4e38). After each max pooling primitive, the planes whose input holds a NaN are recomputed
// by the reference per-plane loops (../cpu/pool_plane.h; a kept layout's plane is gathered into a
// plain one and its result scattered back): NaN propagates as in numpy and PyTorch, and the
// gradient goes to the window's first NaN. The scan reads x once more (vectorised, in parallel
// over images, plane by plane only in an image holding a NaN): 3.7 ms on one thread for a
// (32, 64, 56, 56) input,
// against about 4 ms for oneDNN's pooling forward itself on two threads (a max pooling layer costs
// up to about 1.5x what it did; average pooling propagates NaN by itself and pays nothing).
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

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
PoolGeometry GeometryOf(const PoolingHandle& h, size_t N, memory::data_type dt, MemLayout l) {
  using D = memory::dim;
  PoolGeometry g;
  g.src = InLayout(memory::desc({D(N), D(h.channels), D(h.height), D(h.width)}, dt, tag::nchw), l);
  g.dst = InLayout(
      memory::desc({D(N), D(h.channels), D(h.pooled_height), D(h.pooled_width)}, dt, tag::nchw),
      l);
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
                  MemLayout l) {
  std::string k = KeyStart(op) + (dt == memory::data_type::bf16 ? ",bf16" : "") + ",l" +
                  std::to_string(int(l));
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

// Reruns the reference loops on each (n, c) plane of x that holds a NaN (max pooling only), in
// x's layout: fwd(g, x plane, y plane) or bwd(g, x plane, dy plane, dx plane) on contiguous
// copies, the results scattered back.
template <typename T>
void FixNaNForward(const PoolingHandle& h, MemLayout l, size_t N, const T* px, T* py) {
  if (!h.is_max_pooling) return;
  const PoolGeom g = PoolGeom::Of(h);
  const size_t C = h.channels, in = size_t(g.H) * g.W, out = size_t(g.PH) * g.PW;
  cpu::ForEachNaNPlane(l, N, C, in, px, [&](size_t n, size_t c) {
    thread_local std::vector<T> x, y;
    x.resize(in);
    y.resize(out);
    cpu::Gather(px, cpu::PlaneOf(l, C, in, n, c), in, x.data());
    cpu::PoolPlaneForward(g, x.data(), y.data());
    cpu::Scatter(y.data(), cpu::PlaneOf(l, C, out, n, c), out, py);
  });
}
template <typename T>
void FixNaNBackward(const PoolingHandle& h, MemLayout l, size_t N, const T* px, const T* pdy,
                    T* pdx) {
  if (!h.is_max_pooling) return;
  const PoolGeom g = PoolGeom::Of(h);
  const size_t C = h.channels, in = size_t(g.H) * g.W, out = size_t(g.PH) * g.PW;
  cpu::ForEachNaNPlane(l, N, C, in, px, [&](size_t n, size_t c) {
    thread_local std::vector<T> x, dy, dx;
    x.resize(in);
    dy.resize(out);
    dx.resize(in);
    cpu::Gather(px, cpu::PlaneOf(l, C, in, n, c), in, x.data());
    cpu::Gather(pdy, cpu::PlaneOf(l, C, out, n, c), out, dy.data());
    cpu::PoolPlaneBackward(g, x.data(), dy.data(), dx.data());
    cpu::Scatter(dx.data(), cpu::PlaneOf(l, C, in, n, c), in, pdx);
  });
}

// The graph may keep x (and y, dy, dx: one layout) in either kept layout: a primitive for each.
bool OffersKept(const Tensor& x) { return OffersChannels16(x); }
// The pooled image has more than one pixel (else both layouts store it alike).
bool Spatial(const PoolingHandle& h) { return h.pooled_height * h.pooled_width > 1; }

struct PoolEntry {
  dnnl::primitive fwd, bwd;  // bwd (backward entries): fwd is then the training forward
  memory::desc src, dst, fwd_scratch, bwd_scratch, workspace;
  size_t fwd_scratch_off = 0, bwd_scratch_off = 0, y_off = 0, workspace_off = 0;
  WsLayout ws;
};

std::shared_ptr<PoolEntry> ForwardEntry(const PoolFwdArgs& a, MemLayout l) {
  const size_t N = a.x.shape(0);
  const memory::data_type dt = TypeOf(a.x);
  return Cached<PoolEntry>(KeyOf("pool_fwd", a.h, N, dt, l), [&] {
    std::shared_ptr<PoolEntry> r;
    try {
      const PoolGeometry g = GeometryOf(a.h, N, dt, l);
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

// The entries of a call, by MemLayout: plain always, the kept layouts when the graph may keep
// x in them (null where oneDNN has no primitive for one).
struct Entries {
  std::shared_ptr<PoolEntry> by[3];
  const PoolEntry& Of(const Tensor& x) const {
    const auto& e = by[int(x.block()->mem_layout())];
    return e ? *e : *by[0];
  }
  size_t WorkspaceFloats() const {
    size_t w = 0;
    for (const auto& e : by) w = std::max(w, e ? e->ws.floats() : 0);
    return w;
  }
  // reads / writes masks for the kept layouts that have a primitive
  LayoutHooks Hooks(uint32_t reads, uint32_t writes) const {
    LayoutHooks h;
    h.one_layout = true;
    if (by[int(MemLayout::kChannels16)]) h.reads = reads, h.writes = writes;
    if (by[int(MemLayout::kChannelsLast)]) h.reads_last = reads, h.writes_last = writes;
    return h;
  }
};

// A backward whose windows overlap adds several gradients into one dx element: oneDNN's
// bfloat16 kernels for the kept layouts round between those adds (a ResNet stem's parameters
// drifted by up to 6% from the plain run's in three steps), the plain one rounds once. Such a
// backward stays plain (and with it its x: one group).
bool RoundsOnce(const PoolBwdArgs& a) {
  const PoolingHandle& h = a.h;  // one window along an axis (global pooling) overlaps nothing
  const bool overlap_h = h.kernel_h > h.stride_h && h.pooled_height > 1,
             overlap_w = h.kernel_w > h.stride_w && h.pooled_width > 1;
  return a.x.data_type() != kBFloat16 || (!overlap_h && !overlap_w);
}
bool RoundsOnce(const PoolFwdArgs&) { return true; }

template <typename Args, typename Make>
Entries EntriesOf(const Args& a, Make make) {
  Entries es;
  es.by[0] = make(a, MemLayout::kPlain);
  if (es.by[0] && OffersKept(a.x) && RoundsOnce(a))
    for (MemLayout l : {MemLayout::kChannels16, MemLayout::kChannelsLast})
      es.by[int(l)] = make(a, l);
  return es;
}

Prepared<PoolFwdArgs> Forward(const PoolFwdArgs& a) {
  const Entries es = EntriesOf(a, ForwardEntry);
  Prepared<PoolFwdArgs> p;
  if (!es.by[0]) return p;
  p.workspace = es.WorkspaceFloats();
  // reads {x}, writes {y}: one layout; a 1x1 y is stored alike in all (layout.h) and may be
  // any block's view (flattened for a linear layer's gradient, say): not flagged
  p.layouts = es.Hooks(1u, Spatial(a.h) ? 1u : 0u);
  p.run = [es](const PoolFwdArgs& a, float* wsf) {
    const PoolEntry& e = es.Of(a.x);
    char* w = reinterpret_cast<char*>(wsf);
    e.fwd.execute(Stream(),
                  {{DNNL_ARG_SRC, memory(e.src, Engine(), const_cast<float*>(InPtr(a.x)))},
                   {DNNL_ARG_DST, memory(e.dst, Engine(), OutPtr(a.y))},
                   {DNNL_ARG_SCRATCHPAD, Scratch(e.fwd_scratch, w, e.fwd_scratch_off)}});
    Stream().wait();
    cpu::ByElemType(a.x, [&](auto t) {
      using T = decltype(t);
      FixNaNForward(a.h, a.x.block()->mem_layout(), a.x.shape(0), cpu::In<T>(a.x),
                    cpu::Out<T>(a.y));
    });
  };
  return p;
}

std::shared_ptr<PoolEntry> BackwardEntry(const PoolBwdArgs& a, MemLayout l) {
  const size_t N = a.x.shape(0);
  const memory::data_type dt = TypeOf(a.x);
  return Cached<PoolEntry>(KeyOf("pool_bwd", a.h, N, dt, l), [&] {
    std::shared_ptr<PoolEntry> r;
    try {
      const PoolGeometry g = GeometryOf(a.h, N, dt, l);
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
  const Entries es = EntriesOf(a, BackwardEntry);
  Prepared<PoolBwdArgs> p;
  if (!es.by[0]) return p;
  p.workspace = es.WorkspaceFloats();
  p.layouts = es.Hooks((Spatial(a.h) ? 1u : 0u) | 2u, 1u);  // reads {dy, x}, writes {dx}
  p.run = [es, is_max = a.h.is_max_pooling](const PoolBwdArgs& a, float* wsf) {
    const PoolEntry& e = es.Of(a.x);
    char* w = reinterpret_cast<char*>(wsf);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_DIFF_DST, memory(e.dst, Engine(), const_cast<float*>(InPtr(a.dy)))},
        {DNNL_ARG_DIFF_SRC, memory(e.src, Engine(), OutPtr(a.dx))},
        {DNNL_ARG_SCRATCHPAD, Scratch(e.bwd_scratch, w, e.bwd_scratch_off)}};
    if (is_max) {
      const memory ws(e.workspace, Engine(), w + e.workspace_off);
      e.fwd.execute(Stream(),
                    {{DNNL_ARG_SRC, memory(e.src, Engine(), const_cast<float*>(InPtr(a.x)))},
                     {DNNL_ARG_DST, memory(e.dst, Engine(), w + e.y_off)},
                     {DNNL_ARG_WORKSPACE, ws},
                     {DNNL_ARG_SCRATCHPAD, Scratch(e.fwd_scratch, w, e.fwd_scratch_off)}});
      args[DNNL_ARG_WORKSPACE] = ws;
    }
    e.bwd.execute(Stream(), args);
    Stream().wait();
    cpu::ByElemType(a.x, [&](auto t) {
      using T = decltype(t);
      FixNaNBackward(a.h, a.x.block()->mem_layout(), a.x.shape(0), cpu::In<T>(a.x),
                     cpu::In<T>(a.dy), cpu::Out<T>(a.dx));
    });
  };
  return p;
}

}  // namespace
}  // namespace dnnl_kernel

SINGA_REGISTER_KERNEL(Pool2dForward, kCpuDnnl, dnnl_kernel::Forward);
SINGA_REGISTER_KERNEL(Pool2dBackward, kCpuDnnl, dnnl_kernel::Backward);

}  // namespace singa
