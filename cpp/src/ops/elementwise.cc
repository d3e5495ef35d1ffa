// CPU kernels for the elementwise table (singa/ops/elementwise.def). Each table line becomes a
// functor; four generic drivers (unary, tensor-tensor, tensor-scalar, scalar-tensor) validate the
// operands, pick the element type and submit one Exec. See strided.h for the loop structure.
#include "singa/ops/elementwise.h"

#include <cmath>
#include <cstdint>

#include "../core/dispatch.h"
#include "singa/ops/shape.h"
#include "strided.h"

namespace singa {
namespace {

constexpr bool kF = false, kFI = true;  // may the op run on int32?

// Promotes int32 operands to float32 when mixed with float32, and rejects storage-only dtypes.
DataType CommonType(const char* op, DataType a, DataType b) {
  SINGA_CHECK_DTYPE(a != kFloat16 && b != kFloat16,
                    op << ": float16 tensors are storage only; convert with as_type(float32)");
  if (a == b) return a;
  if ((a == kFloat32 && b == kInt) || (a == kInt && b == kFloat32)) return kFloat32;
  SINGA_THROW(DTypeError, op << ": unsupported dtype combination " << DataTypeName(a) << " and "
                             << DataTypeName(b));
}

Tensor Cast(const Tensor& t, DataType d) { return t.data_type() == d ? t : t.AsType(d); }

// The destination of an op: `out` if given (checked), else a new tensor. Returns the tensor to
// write, which is a temporary when `out` aliases an input with a different layout.
Tensor PrepareOut(const char* op, const Shape& shape, DataType dtype, const Tensor& like,
                  Tensor* out, std::initializer_list<const Tensor*> inputs) {
  if (out == nullptr) return Tensor(shape, like.device(), dtype);
  SINGA_CHECK_SHAPE(out->shape() == shape, op << ": the output has shape " << out->shape()
                                               << " but the result has shape " << shape);
  SINGA_CHECK_DTYPE(out->data_type() == dtype, op << ": the output has dtype "
                                                  << out->data_type() << " but the result is "
                                                  << DataTypeName(dtype));
  SINGA_CHECK_DEVICE(out->device() == like.device(), op << ": the output is on another device");
  bool alias = !out->IsContiguous();  // computed contiguously, then written through the strides
  for (const Tensor* in : inputs)
    alias = alias || (in->block() == out->block() && in->stride() != out->stride());
  return alias ? Tensor(shape, like.device(), dtype) : *out;
}

void Finish(const Tensor& result, Tensor* out) {
  if (out != nullptr && result.block() != out->block()) out->CopyData(result);
}

// Returns the result: a new tensor when out is null, else *out after writing it.
template <typename Op, bool kAllowInt>
Tensor RunUnary(const char* name, const Tensor& in_raw, Tensor* out, Op op = Op{}) {
  SINGA_CHECK(in_raw.block() != nullptr, ValueError, name << ": the input tensor is empty");
  DataType dt = CommonType(name, in_raw.data_type(), in_raw.data_type());
  if (!kAllowInt && dt == kInt) dt = kFloat32;  // numpy: exp(int array) is a float array
  const Tensor in = Cast(in_raw, dt);
  Tensor res = PrepareOut(name, in.shape(), dt, in, out, {&in});
  auto run = [&](auto tag) {
    using T = decltype(tag);
    in.device()->Exec(
        [in, res, op](Context*) mutable {
          const T* x = static_cast<const T*>(in.block()->data());
          T* y = static_cast<T*>(res.block()->mutable_data());
          ForEachRow<2>(in.shape(), {&in.stride(), &res.stride()},
                        [&](const Offsets<2>& o, size_t n, const Offsets<2>& s) {
                          const T* xp = x + o[0];
                          T* yp = y + o[1];
                          if (s[0] == 1)
                            for (size_t i = 0; i < n; ++i) yp[i] = op(xp[i]);
                          else
                            for (size_t i = 0; i < n; ++i)
                              yp[i * s[1]] = op(xp[i * s[0]]);
                        });
        },
        {in.block()}, {res.block()}, name);
  };
  if (dt == kFloat32) run(float{});
  else if constexpr (kAllowInt) run(int32_t{});
  Finish(res, out);
  return out ? *out : res;
}

// The inner loop of a binary op, specialised for the common stride patterns so that the
// compiler vectorises contiguous and broadcast rows.
template <typename Op, typename T>
inline void BinaryRow(const Op& op, const T* a, const T* b, T* y, size_t n, std::ptrdiff_t sa,
                      std::ptrdiff_t sb) {
  if (sa == 1 && sb == 1) {
    for (size_t i = 0; i < n; ++i) y[i] = op(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const T bv = b[0];
    for (size_t i = 0; i < n; ++i) y[i] = op(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    const T av = a[0];
    for (size_t i = 0; i < n; ++i) y[i] = op(av, b[i]);
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = op(a[i * sa], b[i * sb]);
  }
}

template <typename Op, bool kAllowInt>
Tensor RunBinary(const char* name, const Tensor& a_raw, const Tensor& b_raw, Tensor* out,
                 Op op = Op{}) {
  SINGA_CHECK(a_raw.block() != nullptr && b_raw.block() != nullptr, ValueError,
              name << ": an input tensor is empty");
  CheckSameDevice(name, {&a_raw, &b_raw});
  DataType dt = CommonType(name, a_raw.data_type(), b_raw.data_type());
  if (!kAllowInt && dt == kInt) dt = kFloat32;
  const Shape shape = BroadcastShapes(a_raw.shape(), b_raw.shape(), name);
  const Tensor a = Broadcast(Cast(a_raw, dt), shape), b = Broadcast(Cast(b_raw, dt), shape);
  Tensor res = PrepareOut(name, shape, dt, a, out, {&a, &b});
  auto run = [&](auto tag) {
    using T = decltype(tag);
    a.device()->Exec(
        [a, b, res, op](Context*) mutable {
          const T* ap = static_cast<const T*>(a.block()->data());
          const T* bp = static_cast<const T*>(b.block()->data());
          T* y = static_cast<T*>(res.block()->mutable_data());
          ForEachRow<3>(res.shape(), {&a.stride(), &b.stride(), &res.stride()},
                        [&](const Offsets<3>& o, size_t n, const Offsets<3>& s) {
                          BinaryRow(op, ap + o[0], bp + o[1], y + o[2], n, s[0], s[1]);
                        });
        },
        {a.block(), b.block()}, {res.block()}, name);
  };
  if (dt == kFloat32) run(float{});
  else if constexpr (kAllowInt) run(int32_t{});
  Finish(res, out);
  return out ? *out : res;
}

// A scalar operand becomes a 0-stride view of a one-element tensor: one code path, no copies.
Tensor ScalarLike(const Tensor& t, float x) {
  bool integral = std::nearbyint(x) == x && std::fabs(x) < 2147483647.f;
  DataType dt = t.data_type() == kInt && integral ? kInt : kFloat32;
  Tensor s(Shape{}, t.device(), dt);
  if (dt == kInt) s.SetValue(static_cast<int32_t>(x));
  else s.SetValue(x);
  return s;
}

}  // namespace

#define SINGA_UNARY(Name, kinds, expr)                                        \
  namespace {                                                                 \
  struct Name##Op {                                                           \
    template <typename T>                                                     \
    T operator()(T x) const { return (expr); }                                \
  };                                                                          \
  }                                                                           \
  Tensor Name(const Tensor& in) {                                             \
    return RunUnary<Name##Op, k##kinds>(#Name, in, nullptr);                  \
  }                                                                           \
  void Name(const Tensor& in, Tensor* out) { RunUnary<Name##Op, k##kinds>(#Name, in, out); }

#define SINGA_BINARY(Name, kinds, expr)                                            \
  namespace {                                                                      \
  struct Name##Op {                                                                \
    template <typename T>                                                          \
    T operator()(T a, T b) const { return (expr); }                                \
  };                                                                               \
  }                                                                                \
  Tensor Name(const Tensor& a, const Tensor& b) {                                  \
    return RunBinary<Name##Op, k##kinds>(#Name, a, b, nullptr);                    \
  }                                                                                \
  void Name(const Tensor& a, const Tensor& b, Tensor* out) {                       \
    RunBinary<Name##Op, k##kinds>(#Name, a, b, out);                               \
  }                                                                                \
  Tensor Name(const Tensor& a, float x) { return Name(a, ScalarLike(a, x)); }      \
  void Name(const Tensor& a, float x, Tensor* out) { Name(a, ScalarLike(a, x), out); } \
  Tensor Name(float x, const Tensor& b) { return Name(ScalarLike(b, x), b); }      \
  void Name(float x, const Tensor& b, Tensor* out) { Name(ScalarLike(b, x), b, out); }

#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY

namespace {
struct ClampOp {
  float low, high;
  template <typename T>
  T operator()(T x) const { return x < T(low) ? T(low) : (x > T(high) ? T(high) : x); }
};
struct LeakyReLUOp {
  float slope;
  template <typename T>
  T operator()(T x) const { return x > T(0) ? x : T(slope * x); }
};
}  // namespace

Tensor Clamp(const Tensor& in, float low, float high) {
  SINGA_CHECK_VALUE(low <= high, "Clamp: low " << low << " is greater than high " << high);
  return RunUnary<ClampOp, kFI>("Clamp", in, nullptr, ClampOp{low, high});
}
void Clamp(const Tensor& in, float low, float high, Tensor* out) {
  SINGA_CHECK_VALUE(low <= high, "Clamp: low " << low << " is greater than high " << high);
  RunUnary<ClampOp, kFI>("Clamp", in, out, ClampOp{low, high});
}
Tensor LeakyReLU(const Tensor& in, float slope) {
  return RunUnary<LeakyReLUOp, kF>("LeakyReLU", in, nullptr, LeakyReLUOp{slope});
}

}  // namespace singa
