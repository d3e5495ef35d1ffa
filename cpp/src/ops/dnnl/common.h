// dnnl/common.h (private): what the oneDNN kernels share: the engine and stream, the primitive
// cache, the workspace layout and operands that a primitive may want in a blocked layout.
//
//   auto e = dnnl_kernel::Cached<ConvEntry>(key, [&] { ...; return entry; });  // once per shape
//   p.workspace = e->ws.floats();      // oneDNN's scratchpad + blocked copies, one tensor
//
// Primitives are created only when a kernel is prepared (the front's call, i.e. when a graph
// records the op) and only for a key not seen before: a replay or a repeated eager call with
// the same shapes creates none (PrimitiveCreations() counts them, for the tests). The scratchpad
// is user-managed: it lives in the op's workspace tensor, which the graph plans.
#pragma once

#include <dnnl.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "../nn_kernels.h"

namespace singa {
namespace dnnl_kernel {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

dnnl::engine& Engine();
dnnl::stream& Stream();  ///< one per calling thread

/// Primitives (and reorders) created so far in this process.
size_t PrimitiveCreations();
void CountCreation();
/// Counts a creation: every primitive is made through this.
template <typename P, typename PD>
P Make(const PD& pd) {
  CountCreation();
  return P(pd);
}

/// Convolutions compute in the layout oneDNN prefers (blocked, e.g. nChw16c) and reorder from and
/// to our plain NCHW / OIHW tensors inside the op when it differs (true, the default), or compute
/// on the plain tensors directly (false): for measurements and tests.
void SetConvBlockedLayout(bool blocked);
bool ConvBlockedLayout();

/// Batch norm runs oneDNN's kernels (true) or, by default, hands the call back to the front,
/// which runs the reference kernel: on our plain NCHW tensors oneDNN's batch norm measured
/// slower than the reference one (ResNet-18 CIFAR b32, 2 threads: 74 vs 42 ms per step for
/// the forward + backward of its 20 batch norms), and a blocked layout would cost reorders.
/// The tests switch it on to check oneDNN's kernels.
void SetBatchNormEnabled(bool enabled);
bool BatchNormEnabled();
/// The same switch for layer norm (dnnl/layer_norm.cc): off, since oneDNN 2.6's backward measured
/// 3-4x slower than the reference kernel on transformer rows (BENCHMARKS.md); the environment
/// variable SINGA_DNNL_LAYER_NORM=1 turns it on at start-up, for that comparison.
void SetLayerNormEnabled(bool enabled);
bool LayerNormEnabled();

/// Byte offsets into the op's workspace, each region 64-byte aligned.
struct WsLayout {
  size_t bytes = 0;
  size_t Add(size_t b) {
    const size_t off = bytes;
    bytes += (b + 63) / 64 * 64;
    return off;
  }
  size_t floats() const { return (bytes + 3) / 4; }
};

/// A primitive attribute with a user-managed scratchpad. (No ReLU post-op: oneDNN's eltwise_relu
/// maps NaN to 0; conv.cc applies its fused ReLU itself.)
dnnl::primitive_attr Attr();

/// One tensor operand of a primitive: our plain layout (`user`) and the primitive's (`prim`);
/// when they differ, a reorder (cached with the primitive) through a workspace region. A block
/// the graph keeps in another layout (its MemLayout, singa/core/layout.h) is already in the
/// primitive's layout when Keeps() names that layout, which is the only case where a kernel
/// offers it to the graph.
struct Operand {
  memory::desc user, prim;
  bool reorder = false;
  MemLayout keeps = MemLayout::kPlain;
  dnnl::reorder r;
  size_t off = 0;
  /// input: reorder user -> prim before the primitive; else prim -> user after it.
  void Init(const memory::desc& user_md, const memory::desc& prim_md, bool input, WsLayout* ws);
  /// The kept layout the primitive computes this operand in (kPlain: neither of them).
  MemLayout Keeps() const { return keeps; }
  /// The memory the primitive reads: data itself, or its reordered copy in the workspace.
  memory Input(const void* data, char* ws, MemLayout kept = MemLayout::kPlain) const;
  /// The memory the primitive writes: data itself, or a workspace region (then call Output).
  memory Target(void* data, char* ws, MemLayout kept = MemLayout::kPlain) const;
  /// Reorders a workspace result back into data (when the layouts differ).
  void Output(const memory& target, void* data, MemLayout kept = MemLayout::kPlain) const;
};

/// nChw16c over the dims of a 4-d plain descriptor (MemLayout::kChannels16).
memory::desc Blocked16(const memory::desc& plain);
/// NHWC (oneDNN's acdb) over the dims of a 4-d plain descriptor (MemLayout::kChannelsLast).
memory::desc ChannelsLast(const memory::desc& plain);
/// plain as stored in the kept layout l (plain itself for kPlain).
memory::desc InLayout(const memory::desc& plain, MemLayout l);
/// The scratchpad memory of a primitive whose scratchpad lies at `ws + off`.
memory Scratch(const memory::desc& md, char* ws, size_t off);

/// The start of a cache key: the op and the thread count (oneDNN sizes a primitive's scratchpad
/// for the threads it was created with: a different count gets its own primitives).
std::string KeyStart(const char* op);

std::shared_ptr<void> CachedRaw(const std::string& key,
                                const std::function<std::shared_ptr<void>()>& make);
/// The cache entry for key, made by make() the first time (thread-safe).
template <typename Entry, typename Make>
std::shared_ptr<Entry> Cached(const std::string& key, Make&& make) {
  return std::static_pointer_cast<Entry>(
      CachedRaw(key, [&]() -> std::shared_ptr<void> { return make(); }));
}

/// The cached entry of key (built by build() the first time; null when oneDNN rejects the call)
/// as a kernel: run(entry, args, workspace) with the entry's workspace size, or an empty
/// Prepared for null, and the front runs the reference kernel.
template <typename Entry, typename Args, typename Build>
Prepared<Args> PreparedOf(const std::string& key, Build&& build,
                          void (*run)(const Entry&, const Args&, char*)) {
  auto e = Cached<Entry>(key, [&] {
    try {
      return build();
    } catch (const dnnl::error&) {
      return std::shared_ptr<Entry>();
    }
  });
  Prepared<Args> p;
  if (!e) return p;
  p.workspace = e->ws.floats();
  p.run = [e, run](const Args& a, float* ws) { run(*e, a, reinterpret_cast<char*>(ws)); };
  return p;
}

}  // namespace dnnl_kernel
}  // namespace singa
