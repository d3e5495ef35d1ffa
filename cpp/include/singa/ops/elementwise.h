// singa/ops/elementwise.h: elementwise math with numpy broadcasting, generated from elementwise.def.
//
//   singa::Tensor y = singa::Exp(x);                 // unary
//   singa::Tensor z = singa::Add(x, bias);           // binary, shapes broadcast like numpy
//   singa::Tensor m = singa::GT(x, 0.5f);            // comparisons return 0/1 in x's dtype
//   singa::Tensor r = singa::Div(1.0f, x);           // scalar on the left
//   singa::Sub(x, y, &x);                            // into an existing tensor (may alias)
//
// Every function validates its operands (dtype, device, broadcastable shapes) and throws
// singa::ShapeError / DTypeError / DeviceError naming the op and the shapes. int32 operands mixed
// with float32 ones are converted to float32 (numpy's promotion).
#pragma once

#include "singa/core/tensor.h"
#include "singa/ops/activation.h"  // LeakyReLU, Elu...: generated from schema/activations.py

namespace singa {

#define SINGA_UNARY(Name, kinds, expr) \
  Tensor Name(const Tensor& in);       \
  void Name(const Tensor& in, Tensor* out);
#define SINGA_BINARY(Name, kinds, expr)                         \
  Tensor Name(const Tensor& a, const Tensor& b);                \
  void Name(const Tensor& a, const Tensor& b, Tensor* out);     \
  Tensor Name(const Tensor& a, double x);                       \
  void Name(const Tensor& a, double x, Tensor* out);            \
  Tensor Name(double x, const Tensor& b);                       \
  void Name(double x, const Tensor& b, Tensor* out);
#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY

/// Clips every element into [low, high].
Tensor Clamp(const Tensor& in, float low, float high);
void Clamp(const Tensor& in, float low, float high, Tensor* out);
/// value where mask is nonzero, else x; x and mask broadcast like numpy, the result has x's
/// dtype (float32 or int32; a mask of another dtype is compared with 0 first).
Tensor MaskedFill(const Tensor& x, const Tensor& mask, float value);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return Add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return Sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return EltwiseMult(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return Div(a, b); }
inline Tensor operator+(const Tensor& a, double x) { return Add(a, x); }
inline Tensor operator-(const Tensor& a, double x) { return Sub(a, x); }
inline Tensor operator*(const Tensor& a, double x) { return EltwiseMult(a, x); }
inline Tensor operator/(const Tensor& a, double x) { return Div(a, x); }

}  // namespace singa
