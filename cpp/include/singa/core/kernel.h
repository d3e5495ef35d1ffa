// singa/core/kernel.h: one op, a kernel per backend (ChainerX's routine + kernel + registration).
//
//   // The op's front (cpp/src/ops/cumsum.cc) declares one slot with the kernel's signature
//   // (a schema row's slot is generated: schema/nn.py):
//   SINGA_KERNEL_SLOT(CumSum, void(const Tensor&, const Dims3&, bool, bool, const Tensor&, Context*));
//   // Each backend registers its kernel in one line, in its own file:
//   SINGA_REGISTER_KERNEL(CumSum, kCpuRef, cpu::CumSum);    // cpp/src/ops/cpu/
//   SINGA_REGISTER_KERNEL(CumSum, kCuda, cuda::CumSum);     // cpp/src/ops/cuda/
//   // The front validates, makes the outputs, then picks the kernel once, at the call, and
//   // captures the plain function pointer (a graph replay does no lookup):
//   auto* k = CumSumKernel().For(*x.device());
//   x.device()->Exec({.id = OpId::kCumSum, .reads = {x.block()}, .writes = {y.block()}},
//                    [k, x, d, y](Context* ctx) { k(x, d, false, false, y, ctx); });
//
// A device computes with one backend at a time (Device::backend(); CppCPU: kCpuDnnl when built
// with oneDNN, else kCpuRef; Device::set_backend switches, e.g. to compare with the reference).
// Fallback, the one mechanism: a backend without a kernel of its own for an op runs its fallback
// backend's, repeatedly: by default kCpuDnnl -> kCpuRef (oneDNN runs the reference kernels of the
// ops it does not accelerate; kCuda has none: its memory is not the host's), or for one slot what
// SINGA_KERNEL_FALLBACK states. A kernel that may decline a call it cannot do (the NN ops'
// Prepare kernels, nn_kernels.h) passes the call along the same chain (FallbackOf). When the
// chain ends: NotImplementedError naming the op and the backend. ListKernels() reports every
// slot and backend as "kernel", "fallback -> X" or "missing", which the registry test checks.
//
// Kernels compute only: the front has checked everything a user can get wrong. A kernel never
// reads device memory on the host: scalars that change between replays (learning rate, step,
// labels, indices) arrive as tensors and are read inside the kernel, on the device.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "singa/core/error.h"

namespace singa {

class Device;

/// The kernel families. kCpuRef: our OpenMP loops + OpenBLAS; kCpuDnnl: oneDNN; kCuda: CUDA.
enum class Backend : int { kCpuRef = 0, kCpuDnnl = 1, kCuda = 2 };
constexpr int kNumBackends = 3;
const char* BackendName(Backend b);

/// One row of ListKernels(): what runs for `op` on `backend`.
struct KernelInfo {
  std::string op;
  Backend backend;
  bool has_kernel;       ///< a kernel of its own
  bool has_fallback;     ///< else a fallback (its default or a stated one) to `fallback`
  Backend fallback;
};

/// The type-independent part of a slot: name, per-backend entries, the process-wide list.
class KernelSlotBase {
 public:
  explicit KernelSlotBase(const char* op);
  KernelSlotBase(const KernelSlotBase&) = delete;
  KernelSlotBase& operator=(const KernelSlotBase&) = delete;
  const char* op() const { return op_; }
  void SetFallback(Backend from, Backend to);
  /// The backend whose kernel runs for `b` (following fallbacks); throws NotImplementedError.
  Backend Resolve(Backend b) const;
  /// The backend that takes over from `b` (whose kernel is missing or declined a call); throws
  /// NotImplementedError naming the op when `b` has no fallback.
  Backend FallbackOf(Backend b) const;

 protected:
  void SetRaw(Backend b, void* fn);
  void* Raw(Backend b) const { return fns_[static_cast<int>(b)]; }

 private:
  friend std::vector<KernelInfo> ListKernels();
  const char* op_;
  std::array<void*, kNumBackends> fns_{};
  std::array<int, kNumBackends> fallback_;  // per backend: the one it falls back to, or -1
};

/// A slot for kernels of function type Fn, e.g. void(const Args&, Context*).
template <typename Fn>
class KernelSlot : public KernelSlotBase {
 public:
  using KernelSlotBase::KernelSlotBase;
  void Register(Backend b, Fn* fn) { SetRaw(b, reinterpret_cast<void*>(fn)); }
  /// The kernel for backend `b` (following fallbacks); throws NotImplementedError if none.
  Fn* Get(Backend b) const { return reinterpret_cast<Fn*>(Raw(Resolve(b))); }
  /// The kernel for the device's current backend.
  Fn* For(const Device& dev) const;
};

/// Every slot and backend, in slot-name order.
std::vector<KernelInfo> ListKernels();

/// The backend a device computes with (defined in device.cc; here to keep this header light).
Backend DeviceBackend(const Device& dev);

template <typename Fn>
Fn* KernelSlot<Fn>::For(const Device& dev) const {
  return Get(DeviceBackend(dev));
}

}  // namespace singa

/// Declares (in one .cc or a private header + .cc) the slot `Name##Kernel()` for Fn. The slot is
/// created at load time, so ListKernels() sees it even before the first call.
#define SINGA_KERNEL_SLOT_DECL(Name, ...) ::singa::KernelSlot<__VA_ARGS__>& Name##Kernel()
#define SINGA_KERNEL_SLOT(Name, ...)                                          \
  ::singa::KernelSlot<__VA_ARGS__>& Name##Kernel() {                          \
    static ::singa::KernelSlot<__VA_ARGS__> slot(#Name);                      \
    return slot;                                                              \
  }                                                                           \
  static const bool singa_slot_touch_##Name [[maybe_unused]] = (Name##Kernel(), true)

#define SINGA_KERNEL_CAT2(a, b) a##b
#define SINGA_KERNEL_CAT(a, b) SINGA_KERNEL_CAT2(a, b)
/// Registers `fn` as the kernel of slot `Name` for backend `B` (kCpuRef, kCpuDnnl, kCuda).
#define SINGA_REGISTER_KERNEL(Name, B, fn)                                              \
  static const bool SINGA_KERNEL_CAT(singa_kernel_reg_##Name##_##B, __LINE__)          \
      [[maybe_unused]] = (Name##Kernel().Register(::singa::Backend::B, fn), true)
/// States that backend `From` runs backend `To`'s kernel for slot `Name`.
#define SINGA_KERNEL_FALLBACK(Name, From, To)                                           \
  static const bool SINGA_KERNEL_CAT(singa_kernel_fb_##Name##_##From, __LINE__)         \
      [[maybe_unused]] =                                                                \
          (Name##Kernel().SetFallback(::singa::Backend::From, ::singa::Backend::To), true)
