// The oneDNN kernels' shared pieces (dnnl/common.h).
#include "common.h"

#include <atomic>
#include <cstdlib>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace singa {
namespace dnnl_kernel {
namespace {
std::atomic<size_t> g_creations{0};
// A kept block given to a primitive computing another layout: a bug of the layout pass.
void CheckKeeps(MemLayout keeps, MemLayout kept) {
  SINGA_CHECK(keeps == kept, Error, "oneDNN kernel: an operand kept in layout "
                                        << int(kept) << " reached a primitive that computes it "
                                        << "in another (the graph's layout pass)");
}
std::atomic<bool> g_blocked{true};
std::atomic<bool> g_batchnorm{false};
// off unless SINGA_DNNL_LAYER_NORM=1 (for benchmarks/bench_transformer_ops.py's comparison)
std::atomic<bool> g_layernorm{std::getenv("SINGA_DNNL_LAYER_NORM") != nullptr &&
                              std::string(std::getenv("SINGA_DNNL_LAYER_NORM")) == "1"};
}  // namespace

void CountCreation() { ++g_creations; }
size_t PrimitiveCreations() { return g_creations.load(); }
void SetConvBlockedLayout(bool blocked) { g_blocked = blocked; }
bool ConvBlockedLayout() { return g_blocked.load(); }
void SetBatchNormEnabled(bool enabled) { g_batchnorm = enabled; }
bool BatchNormEnabled() { return g_batchnorm.load(); }
void SetLayerNormEnabled(bool enabled) { g_layernorm = enabled; }
bool LayerNormEnabled() { return g_layernorm.load(); }

dnnl::engine& Engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& Stream() {
  thread_local dnnl::stream s(Engine());
  return s;
}

dnnl::primitive_attr Attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void Operand::Init(const memory::desc& user_md, const memory::desc& prim_md, bool input,
                   WsLayout* ws) {
  user = user_md;
  prim = prim_md;
  reorder = user != prim;
  keeps = MemLayout::kPlain;
  if (prim.dims().size() == 4 && prim == Blocked16(user)) keeps = MemLayout::kChannels16;
  if (prim.dims().size() == 4 && prim == ChannelsLast(user)) keeps = MemLayout::kChannelsLast;
  if (!reorder) return;
  off = ws->Add(prim.get_size());
  dnnl::reorder::primitive_desc pd =
      input ? dnnl::reorder::primitive_desc(Engine(), user, Engine(), prim)
            : dnnl::reorder::primitive_desc(Engine(), prim, Engine(), user);
  r = Make<dnnl::reorder>(pd);
}

memory Operand::Input(const void* data, char* ws, MemLayout kept) const {
  if (kept != MemLayout::kPlain) {
    CheckKeeps(keeps, kept);
    return memory(prim, Engine(), const_cast<void*>(data));
  }
  memory u(user, Engine(), const_cast<void*>(data));
  if (!reorder) return u;
  memory m(prim, Engine(), ws + off);
  r.execute(Stream(), u, m);
  return m;
}

memory Operand::Target(void* data, char* ws, MemLayout kept) const {
  if (kept != MemLayout::kPlain) {
    CheckKeeps(keeps, kept);
    return memory(prim, Engine(), data);
  }
  return reorder ? memory(prim, Engine(), ws + off) : memory(user, Engine(), data);
}

void Operand::Output(const memory& target, void* data, MemLayout kept) const {
  if (!reorder || kept != MemLayout::kPlain) return;
  memory u(user, Engine(), data);
  r.execute(Stream(), const_cast<memory&>(target), u);
}

memory::desc Blocked16(const memory::desc& plain) {
  return memory::desc(plain.dims(), plain.data_type(), tag::nChw16c);
}

memory::desc ChannelsLast(const memory::desc& plain) {
  return memory::desc(plain.dims(), plain.data_type(), tag::nhwc);
}

memory::desc InLayout(const memory::desc& plain, MemLayout l) {
  if (l == MemLayout::kChannels16) return Blocked16(plain);
  if (l == MemLayout::kChannelsLast) return ChannelsLast(plain);
  return plain;
}

memory Scratch(const memory::desc& md, char* ws, size_t off) {
  return memory(md, Engine(), md.get_size() ? ws + off : nullptr);
}

std::string KeyStart(const char* op) {
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  return std::string(op) + ",t" + std::to_string(threads);
}

std::shared_ptr<void> CachedRaw(const std::string& key,
                                const std::function<std::shared_ptr<void>()>& make) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<void>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto e = make();
  cache.emplace(key, e);
  return e;
}

}  // namespace dnnl_kernel
}  // namespace singa
