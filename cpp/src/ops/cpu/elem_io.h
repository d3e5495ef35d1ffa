// elem_io.h (private): float and bfloat16 activations through one kernel body.
//
//   template <typename T> void Scale(const T* x, float k, T* y, size_t n) {
//     for (size_t i = 0; i < n; ++i) St(y, i, Ld(x, i) * k);   // bf16: widened, rounded once
//   }
//   ByElemType(x, [&](auto t) { using T = decltype(t); Scale(In<T>(x), 2.f, Out<T>(y), n); });
//
// A kernel reading bfloat16 this way does the float32 kernel's arithmetic on the widened values
// and rounds each output once: the bits of converting to float32, running the float32 kernel
// and rounding its outputs, without the two conversion passes over memory.
#pragma once

#include <cstddef>

#include "singa/core/common.h"
#include "singa/core/tensor.h"

namespace singa {
namespace cpu {

inline float ToF(float v) { return v; }
inline float ToF(BFloat16 v) { return BFloat16ToFloat(v); }
inline float Ld(const float* p, size_t i) { return p[i]; }
inline float Ld(const BFloat16* p, size_t i) { return BFloat16ToFloat(p[i]); }
inline void St(float* p, size_t i, float v) { p[i] = v; }
inline void St(BFloat16* p, size_t i, float v) { p[i] = FloatToBFloat16(v); }
/// v as an element of p's type holds it (what an unfused op's output would store).
inline float Rounded(float v, const float*) { return v; }
inline float Rounded(float v, const BFloat16*) { return BFloat16ToFloat(FloatToBFloat16(v)); }

template <typename T>
const T* In(const Tensor& t) { return static_cast<const T*>(t.block()->data()); }
template <typename T>
T* Out(const Tensor& t) { return static_cast<T*>(t.block()->mutable_data()); }

/// Calls f(T{}) with T the element type of t: BFloat16 for a bfloat16 tensor, else float.
template <typename F>
void ByElemType(const Tensor& t, F&& f) {
  if (t.data_type() == kBFloat16)
    f(BFloat16{});
  else
    f(float{});
}

}  // namespace cpu
}  // namespace singa
