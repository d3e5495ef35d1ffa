// CPU reference kernels of the elementwise table (singa/ops/elementwise.def): one unary and one
// binary loop, templated on the table's functors (elementwise_functors.h), so each op's loop is
// inlined and vectorised. The fronts are in ../elementwise.cc; see ../strided.h for the loops.
//
// elementwise_avx512.cc compiles this file a second time with SINGA_ELEM_AVX512 (GCC on x86-64):
// the loops defined below then become AVX-512 code (16 floats a step where the library's
// x86-64-v2 baseline has 4), and the kernels of the rows that gain from it (kWideRow) run that
// copy on a CPU with AVX-512.
// Both copies are built with -ffp-contract=off (CMakeLists.txt): the baseline has no FMA, so
// the wide copy contracts nothing either and computes the same bits.
#include <cstdint>
#include <type_traits>

#include "../kernel_slots.h"
#include "../strided.h"
#include "singa/core/cpu_features.h"
#include "singa/ops/elementwise_functors.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SINGA_ELEM_HAS_AVX512 1
#else
#define SINGA_ELEM_HAS_AVX512 0
#endif
#ifdef SINGA_ELEM_AVX512
#pragma GCC target("arch=x86-64-v4")
#endif

namespace singa {
namespace cpu {
namespace {

constexpr bool kF = false, kFI = true;  // does the op have an int32 kernel?

// bfloat16 is computed in float and rounded once per element, inside the loop (no float32
// temporaries): Load/Store are the identity for float32 and int32.
template <typename T>
using MathOf = std::conditional_t<std::is_same_v<T, BFloat16>, float, T>;
template <typename T>
inline MathOf<T> Load(T x) {
  if constexpr (std::is_same_v<T, BFloat16>) return BFloat16ToFloat(x);
  else return x;
}
template <typename T>
inline T Store(MathOf<T> x) {
  if constexpr (std::is_same_v<T, BFloat16>) return FloatToBFloat16(x);
  else return x;
}

template <typename T, typename Op>
void UnaryLoop(const Op& op, const Tensor& in, const Tensor& out) {
  const T* x = static_cast<const T*>(in.block()->data());
  T* y = static_cast<T*>(out.block()->mutable_data());
  ForEachRow<2>(in.shape(), {&in.stride(), &out.stride()},
                [&](const Offsets<2>& o, size_t n, const Offsets<2>& s) {
                  const T* xp = x + o[0];
                  T* yp = y + o[1];
                  if (s[0] == 1)
                    for (size_t i = 0; i < n; ++i) yp[i] = Store<T>(op(Load(xp[i])));
                  else
                    for (size_t i = 0; i < n; ++i)
                      yp[i * s[1]] = Store<T>(op(Load(xp[i * s[0]])));
                });
}

// The front has picked the dtype (float32, bfloat16, or int32 where the op allows it).
template <typename Op, bool kAllowInt>
void Unary(const Op& op, const Tensor& in, const Tensor& out) {
  if constexpr (kAllowInt)
    if (in.data_type() == kInt) return UnaryLoop<int32_t>(op, in, out);
  if (in.data_type() == kBFloat16) return UnaryLoop<BFloat16>(op, in, out);
  UnaryLoop<float>(op, in, out);
}

template <typename Op, bool kAllowInt>
void UnaryKernel(const Tensor& in, const Tensor& out, Context*) {
  Unary<Op, kAllowInt>(Op{}, in, out);
}

// The inner loop of a binary op, specialised for the common stride patterns so that the
// compiler vectorises contiguous and broadcast rows.
template <typename Op, typename T>
inline void BinaryRow(const Op& op, const T* a, const T* b, T* y, size_t n, std::ptrdiff_t sa,
                      std::ptrdiff_t sb) {
  if (sa == 1 && sb == 1) {
    for (size_t i = 0; i < n; ++i) y[i] = Store<T>(op(Load(a[i]), Load(b[i])));
  } else if (sa == 1 && sb == 0) {
    const MathOf<T> bv = Load(b[0]);
    for (size_t i = 0; i < n; ++i) y[i] = Store<T>(op(Load(a[i]), bv));
  } else if (sa == 0 && sb == 1) {
    const MathOf<T> av = Load(a[0]);
    for (size_t i = 0; i < n; ++i) y[i] = Store<T>(op(av, Load(b[i])));
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = Store<T>(op(Load(a[i * sa]), Load(b[i * sb])));
  }
}

template <typename T, typename Op>
void BinaryLoop(const Op& op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const T* ap = static_cast<const T*>(a.block()->data());
  const T* bp = static_cast<const T*>(b.block()->data());
  T* y = static_cast<T*>(out.block()->mutable_data());
  ForEachRow<3>(out.shape(), {&a.stride(), &b.stride(), &out.stride()},
                [&](const Offsets<3>& o, size_t n, const Offsets<3>& s) {
                  BinaryRow(op, ap + o[0], bp + o[1], y + o[2], n, s[0], s[1]);
                });
}

template <typename Op, bool kAllowInt>
void Binary(const Op& op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if constexpr (kAllowInt)
    if (out.data_type() == kInt) return BinaryLoop<int32_t>(op, a, b, out);
  if (out.data_type() == kBFloat16) return BinaryLoop<BFloat16>(op, a, b, out);
  BinaryLoop<float>(op, a, b, out);
}

template <typename Op, bool kAllowInt>
void BinaryKernel(const Tensor& a, const Tensor& b, const Tensor& out, Context*) {
  Binary<Op, kAllowInt>(Op{}, a, b, out);
}

#ifndef SINGA_ELEM_AVX512
void Clamp(const Tensor& in, float low, float high, const Tensor& out, Context*) {
  Unary<fn::ClampOp, kFI>(fn::ClampOp{low, high}, in, out);
}
void MaskedFill(const Tensor& x, const Tensor& mask, float value, const Tensor& out, Context*) {
  Binary<fn::MaskedFillOp, kFI>(fn::MaskedFillOp{value}, x, mask, out);
}
#endif

}  // namespace

// The rows the AVX-512 copy runs: those whose expression is the vectorisable math of
// elementwise_functors.h (vec::Exp, Phi, Tanh), 3x faster there (benchmarks/bench_elementwise.py).
// The others gain nothing: memory-bound rows (Add, ReLU, Maximum...) measured 0.85-1.0x the
// baseline with 2 threads on an AMD EPYC, and libm's calls (tanh, fmod, pow) do not vectorise.
template <typename Op>
constexpr bool kWideRow = false;
template <> constexpr bool kWideRow<fn::ExpOp> = true;
template <> constexpr bool kWideRow<fn::SigmoidOp> = true;
template <> constexpr bool kWideRow<fn::TanhOp> = true;
template <> constexpr bool kWideRow<fn::GELUOp> = true;
template <> constexpr bool kWideRow<fn::GELUTanhOp> = true;
template <> constexpr bool kWideRow<fn::GELUBackwardOp> = true;
template <> constexpr bool kWideRow<fn::GELUTanhBackwardOp> = true;

// The table's kernels of the AVX-512 copy, one per row (defined by elementwise_avx512.cc; empty
// for the rows that are not kWideRow, which never call them).
namespace elem_avx512 {
#define SINGA_UNARY(Name, kinds, expr) void Name(const Tensor& in, const Tensor& out, Context* ctx);
#define SINGA_BINARY(Name, kinds, expr) \
  void Name(const Tensor& a, const Tensor& b, const Tensor& out, Context* ctx);
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
}  // namespace elem_avx512

#ifdef SINGA_ELEM_AVX512
#define SINGA_UNARY(Name, kinds, expr)                                                   \
  void elem_avx512::Name(const Tensor& in, const Tensor& out, Context* ctx) {            \
    if constexpr (kWideRow<fn::Name##Op>) UnaryKernel<fn::Name##Op, k##kinds>(in, out, ctx); \
  }
#define SINGA_BINARY(Name, kinds, expr)                                                  \
  void elem_avx512::Name(const Tensor& a, const Tensor& b, const Tensor& out, Context* ctx) { \
    if constexpr (kWideRow<fn::Name##Op>) BinaryKernel<fn::Name##Op, k##kinds>(a, b, out, ctx); \
  }
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
#else
#if SINGA_ELEM_HAS_AVX512
namespace {
// AVX-512F/BW/DQ/VL: x86-64-v4's set (SINGA_CPU_FEATURES_MASK=avx512f forces the baseline).
bool Avx512() {
  static const bool has = CpuHas("avx512f") && CpuHas("avx512bw") && CpuHas("avx512dq") &&
                          CpuHas("avx512vl");
  return has;
}
template <typename Op, bool kAllowInt, void (*kWide)(const Tensor&, const Tensor&, Context*)>
void UnaryOf(const Tensor& in, const Tensor& out, Context* ctx) {
  if constexpr (kWideRow<Op>)
    if (Avx512()) return kWide(in, out, ctx);
  UnaryKernel<Op, kAllowInt>(in, out, ctx);
}
template <typename Op, bool kAllowInt,
          void (*kWide)(const Tensor&, const Tensor&, const Tensor&, Context*)>
void BinaryOf(const Tensor& a, const Tensor& b, const Tensor& out, Context* ctx) {
  if constexpr (kWideRow<Op>)
    if (Avx512()) return kWide(a, b, out, ctx);
  BinaryKernel<Op, kAllowInt>(a, b, out, ctx);
}
}  // namespace
#endif

// oneDNN's eltwise primitives would not beat these loops on the shapes we run: a oneDNN device
// runs them too (its default fallback, singa/core/kernel.h).
#if SINGA_ELEM_HAS_AVX512
#define SINGA_UNARY(Name, kinds, expr) \
  SINGA_REGISTER_KERNEL(Name, kCpuRef, (&UnaryOf<fn::Name##Op, k##kinds, &elem_avx512::Name>));
#define SINGA_BINARY(Name, kinds, expr) \
  SINGA_REGISTER_KERNEL(Name, kCpuRef, (&BinaryOf<fn::Name##Op, k##kinds, &elem_avx512::Name>));
#else
#define SINGA_UNARY(Name, kinds, expr) \
  SINGA_REGISTER_KERNEL(Name, kCpuRef, (&UnaryKernel<fn::Name##Op, k##kinds>));
#define SINGA_BINARY(Name, kinds, expr) \
  SINGA_REGISTER_KERNEL(Name, kCpuRef, (&BinaryKernel<fn::Name##Op, k##kinds>));
#endif
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY
SINGA_REGISTER_KERNEL(Clamp, kCpuRef, &Clamp);
SINGA_REGISTER_KERNEL(MaskedFill, kCpuRef, &MaskedFill);
#endif  // SINGA_ELEM_AVX512

}  // namespace cpu
}  // namespace singa

#ifndef SINGA_ELEM_AVX512
// The schema's activations (schema/activations.py) on the loops above (baseline copy only).
#include "activation_cpu.inc"
#endif
