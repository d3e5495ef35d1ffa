// The kernel registry (see singa/core/kernel.h).
#include "singa/core/kernel.h"

#include <algorithm>
#include <cstring>
#include <mutex>

namespace singa {
namespace {

// Slots register during static initialisation of libsinga (one thread); the mutex covers slots
// of libraries loaded later.
std::mutex& RegistryMutex() {
  static std::mutex m;
  return m;
}
std::vector<KernelSlotBase*>& Slots() {
  static std::vector<KernelSlotBase*> slots;
  return slots;
}

}  // namespace

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kCpuRef: return "cpu";
    case Backend::kCpuDnnl: return "dnnl";
    case Backend::kCuda: return "cuda";
  }
  return "unknown";
}

// Each backend's default fallback (see "Fallback" in kernel.h): oneDNN -> the reference kernels.
constexpr std::array<int, kNumBackends> kDefaultFallback{
    {-1, static_cast<int>(Backend::kCpuRef), -1}};

KernelSlotBase::KernelSlotBase(const char* op) : op_(op), fallback_(kDefaultFallback) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Slots().push_back(this);
}

void KernelSlotBase::SetRaw(Backend b, void* fn) { fns_[static_cast<int>(b)] = fn; }

void KernelSlotBase::SetFallback(Backend from, Backend to) {
  SINGA_CHECK_VALUE(from != to, op_ << ": a backend cannot fall back to itself");
  fallback_[static_cast<int>(from)] = static_cast<int>(to);
}

Backend KernelSlotBase::Resolve(Backend b) const {
  int cur = static_cast<int>(b);
  for (int hops = 0; hops <= kNumBackends; ++hops) {
    if (fns_[cur] != nullptr) return static_cast<Backend>(cur);
    if (fallback_[cur] < 0) break;
    cur = fallback_[cur];
  }
  SINGA_THROW(NotImplementedError, op_ << ": no kernel for the " << BackendName(b)
                                       << " backend (and no fallback)");
}

Backend KernelSlotBase::FallbackOf(Backend b) const {
  const int to = fallback_[static_cast<int>(b)];
  SINGA_CHECK(to >= 0, NotImplementedError,
              op_ << ": the " << BackendName(b)
                  << " kernel cannot do this call and that backend has no fallback");
  return static_cast<Backend>(to);
}

std::vector<KernelInfo> ListKernels() {
  std::vector<KernelSlotBase*> slots;
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    slots = Slots();
  }
  std::sort(slots.begin(), slots.end(),
            [](const KernelSlotBase* a, const KernelSlotBase* b) {
              return std::strcmp(a->op(), b->op()) < 0;
            });
  std::vector<KernelInfo> out;
  for (const KernelSlotBase* s : slots)
    for (int b = 0; b < kNumBackends; ++b) {
      KernelInfo info{s->op(), static_cast<Backend>(b), s->fns_[b] != nullptr,
                      s->fallback_[b] >= 0, static_cast<Backend>(std::max(0, s->fallback_[b]))};
      out.push_back(info);
    }
  return out;
}

}  // namespace singa
