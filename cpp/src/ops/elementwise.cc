// The fronts of the elementwise table (singa/ops/elementwise.def): each table line becomes a kernel
// slot and the API functions; generic drivers (unary, tensor-tensor; a scalar operand becomes a
// 0-d tensor) validate the operands, pick the element type and the output, look the kernel up
// for the device's backend and submit one Exec. The kernels are in cpu/elementwise.cc.
#include "singa/ops/elementwise.h"

#include <cmath>
#include <cstdint>

#include "singa/ops/shape.h"
#include "kernel_slots.h"

namespace singa {
namespace {

constexpr bool kF = false, kFI = true;  // may the op run on int32?

// Promotes int32 operands to float32 when mixed with float32. float16 computes only on CUDA
// devices (their kernels compute in float and round once to half); on the CPU it is storage
// only. Mixed with another dtype, float16 is promoted to float32 (as numpy does for float32).
// bfloat16 computes on every backend (in float, rounded once per op); mixed with another dtype
// it is promoted to float32, as torch does.
DataType CommonType(const char* op, DataType a, DataType b, const Device& dev) {
  if (a == kBFloat16 || b == kBFloat16) {
    const auto ok = [](DataType t) {
      return t == kBFloat16 || t == kFloat32 || t == kInt || t == kFloat16;
    };
    SINGA_CHECK_DTYPE(ok(a) && ok(b), op << ": unsupported dtype combination " << DataTypeName(a)
                                         << " and " << DataTypeName(b)
                                         << " (bfloat16 mixes with float32, float16, int32)");
    if (a == b) return kBFloat16;
    if (a == kFloat16 || b == kFloat16) return CommonType(op, kFloat32, kFloat16, dev);
    return kFloat32;
  }
  if (a == kFloat16 || b == kFloat16) {
    SINGA_CHECK_DTYPE(DeviceBackend(dev) == Backend::kCuda,
                      op << ": float16 tensors are storage only on this device; convert with "
                            "as_type(float32) (float16 math runs on CUDA devices)");
    SINGA_CHECK_DTYPE((a == kFloat16 || a == kFloat32 || a == kInt) &&
                          (b == kFloat16 || b == kFloat32 || b == kInt),
                      op << ": unsupported dtype combination " << DataTypeName(a) << " and "
                         << DataTypeName(b));
    return a == b ? kFloat16 : kFloat32;
  }
  if (a == b) return a;
  if ((a == kFloat32 && b == kInt) || (a == kInt && b == kFloat32)) return kFloat32;
  SINGA_THROW(DTypeError, op << ": unsupported dtype combination " << DataTypeName(a) << " and "
                             << DataTypeName(b));
}

Tensor Cast(const Tensor& t, DataType d) { return t.data_type() == d ? t : t.AsType(d); }

// Operands of one shape, each contiguous over its whole block: the kernel maps element i to
// element i, so a graph may keep them in any one layout (singa/core/layout.h).
LayoutHooks FlatLayouts(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (!t->IsContiguous() || t->shape() != (*ts.begin())->shape() || t->block() == nullptr ||
        t->Size() * SizeOf(t->data_type()) != t->block()->size())
      return {};
  return LayoutHooks::Flat();
}

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

// Returns the result: a new tensor when out is null, else *out after writing it. `launch`
// (x, y, ctx) calls the kernel, which was looked up once, at the call: a replay calls it directly.
// `recomputable`: OpDesc's (a schema row's, for the schema's activations).
template <typename Launch>
Tensor RunUnaryWith(OpId id, bool allow_int, const Tensor& in_raw, Tensor* out, Launch launch,
                    bool recomputable = true) {
  const char* name = OpName(id);
  SINGA_CHECK(in_raw.block() != nullptr, ValueError, name << ": the input tensor is empty");
  DataType dt = CommonType(name, in_raw.data_type(), in_raw.data_type(), *in_raw.device());
  if (!allow_int && dt == kInt) dt = kFloat32;  // numpy: exp(int array) is a float array
  const Tensor in = Cast(in_raw, dt);
  Tensor res = PrepareOut(name, in.shape(), dt, in, out, {&in});
  in.device()->Exec({.id = id,
                     .reads = {in.block()},
                     .writes = {res.block()},
                     .recomputable = recomputable,
                     .layouts = FlatLayouts({&in, &res})},
                    [launch, in, res](Context* ctx) { launch(in, res, ctx); });
  Finish(res, out);
  return out ? *out : res;
}

// Ceil, floor and both roundings of an int32 tensor are the tensor itself, kept in int32 as
// numpy (>= 2) and torch keep it: through the float32 kernel the result changed dtype and lost
// every value past 2^24 (16777217 came back 16777216).
bool RoundsToInteger(OpId id) {
  return id == OpId::kCeil || id == OpId::kFloor || id == OpId::kRound || id == OpId::kRoundE;
}

Tensor RunUnary(OpId id, bool allow_int, const KernelSlot<UnaryKernelFn>& slot, const Tensor& in,
                Tensor* out) {
  if (in.block() != nullptr && in.data_type() == kInt && RoundsToInteger(id)) {
    auto* copy = StridedCopyKernel().For(*in.device());
    return RunUnaryWith(id, true, in, out,
                        [copy](const Tensor& x, const Tensor& y, Context* ctx) { copy(x, y, ctx); });
  }
  return RunUnaryWith(id, allow_int, in, out, slot.For(*in.device()));
}

// As RunUnaryWith, for two operands of dtype `dt` broadcast against each other.
template <typename Launch>
Tensor RunBinaryWith(OpId id, DataType dt, const Tensor& a_raw, const Tensor& b_raw, Tensor* out,
                     Launch launch, bool recomputable = true) {
  const char* name = OpName(id);
  const Shape shape = BroadcastShapes(a_raw.shape(), b_raw.shape(), name);
  const Tensor a = Broadcast(Cast(a_raw, dt), shape), b = Broadcast(Cast(b_raw, dt), shape);
  Tensor res = PrepareOut(name, shape, dt, a, out, {&a, &b});
  a.device()->Exec({.id = id,
                    .reads = {a.block(), b.block()},
                    .writes = {res.block()},
                    .recomputable = recomputable,
                    .layouts = FlatLayouts({&a, &b, &res})},
                   [launch, a, b, res](Context* ctx) { launch(a, b, res, ctx); });
  Finish(res, out);
  return out ? *out : res;
}

Tensor RunBinary(OpId id, bool allow_int, const KernelSlot<BinaryKernelFn>& slot,
                 const Tensor& a_raw, const Tensor& b_raw, Tensor* out) {
  const char* name = OpName(id);
  SINGA_CHECK(a_raw.block() != nullptr && b_raw.block() != nullptr, ValueError,
              name << ": an input tensor is empty");
  CheckSameDevice(name, {&a_raw, &b_raw});
  DataType dt = CommonType(name, a_raw.data_type(), b_raw.data_type(), *a_raw.device());
  if (!allow_int && dt == kInt) dt = kFloat32;
  return RunBinaryWith(id, dt, a_raw, b_raw, out, slot.For(*a_raw.device()));
}

// A scalar operand becomes a 0-stride view of a one-element tensor: one code path, no copies.
// The scalar arrives as a double so that every int32 value is exact (as a float, int32 t + 16777217
// added 16777216); an integral value in int32's range keeps an int32 tensor int32.
Tensor ScalarLike(const Tensor& t, double x) {
  bool integral = std::nearbyint(x) == x && x >= -2147483648.0 && x <= 2147483647.0;
  DataType dt = t.data_type() == kInt && integral ? kInt : kFloat32;
  // A float16 tensor keeps its dtype with a scalar (x rounded to half), as in numpy and torch.
  if (t.data_type() == kFloat16) dt = kFloat16;
  if (t.data_type() == kBFloat16) dt = kBFloat16;
  Tensor s(Shape{}, t.device(), dt);
  if (dt == kInt) s.SetValue(static_cast<int32_t>(x));
  else s.SetValue(static_cast<float>(x));  // converted to the dtype (float16 included) by the Fill kernel
  return s;
}

}  // namespace

// The slots (one per table line) and the fronts. The CPU kernels are in cpu/elementwise.cc.
#define SINGA_UNARY(Name, kinds, expr)                                                    \
  SINGA_KERNEL_SLOT(Name, UnaryKernelFn);                                                 \
  Tensor Name(const Tensor& in) {                                                         \
    return RunUnary(OpId::k##Name, k##kinds, Name##Kernel(), in, nullptr);      \
  }                                                                                       \
  void Name(const Tensor& in, Tensor* out) {                                              \
    RunUnary(OpId::k##Name, k##kinds, Name##Kernel(), in, out);                 \
  }

#define SINGA_BINARY(Name, kinds, expr)                                                    \
  SINGA_KERNEL_SLOT(Name, BinaryKernelFn);                                                 \
  Tensor Name(const Tensor& a, const Tensor& b) {                                          \
    return RunBinary(OpId::k##Name, k##kinds, Name##Kernel(), a, b, nullptr);     \
  }                                                                                        \
  void Name(const Tensor& a, const Tensor& b, Tensor* out) {                               \
    RunBinary(OpId::k##Name, k##kinds, Name##Kernel(), a, b, out);                \
  }                                                                                        \
  Tensor Name(const Tensor& a, double x) { return Name(a, ScalarLike(a, x)); }             \
  void Name(const Tensor& a, double x, Tensor* out) { Name(a, ScalarLike(a, x), out); }    \
  Tensor Name(double x, const Tensor& b) { return Name(ScalarLike(b, x), b); }             \
  void Name(double x, const Tensor& b, Tensor* out) { Name(ScalarLike(b, x), b, out); }

#include "singa/ops/elementwise.def"
#undef SINGA_UNARY
#undef SINGA_BINARY

SINGA_KERNEL_SLOT(Clamp, void(const Tensor&, float, float, const Tensor&, Context*));

namespace {
Tensor RunClamp(const Tensor& in, float low, float high, Tensor* out) {
  SINGA_CHECK_VALUE(low <= high, "Clamp: low " << low << " is greater than high " << high);
  auto* k = ClampKernel().For(*in.device());
  return RunUnaryWith(OpId::kClamp, kFI, in, out,
                  [k, low, high](const Tensor& x, const Tensor& y, Context* ctx) {
                    k(x, low, high, y, ctx);
                  });
}
}  // namespace

Tensor Clamp(const Tensor& in, float low, float high) { return RunClamp(in, low, high, nullptr); }
void Clamp(const Tensor& in, float low, float high, Tensor* out) { RunClamp(in, low, high, out); }
SINGA_KERNEL_SLOT(MaskedFill, void(const Tensor&, const Tensor&, float, const Tensor&, Context*));

Tensor MaskedFill(const Tensor& x, const Tensor& mask_in, float value) {
  const OpId id = OpId::kMaskedFill;
  const char* op = OpName(id);
  SINGA_CHECK(x.block() != nullptr && mask_in.block() != nullptr, ValueError,
              op << ": an input tensor is empty");
  CheckSameDevice(op, {&x, &mask_in});
  const DataType dt = x.data_type();
  SINGA_CHECK_DTYPE(dt == kFloat32 || dt == kInt || dt == kBFloat16 ||
                        (dt == kFloat16 && DeviceBackend(*x.device()) == Backend::kCuda),
                    op << ": dtype " << DataTypeName(dt)
                       << " is not supported (float32, int32, bfloat16, float16 on CUDA devices)");
  const bool int_value = std::fabs(value) < 2147483647.f && std::nearbyint(value) == value;
  SINGA_CHECK_VALUE(dt != kInt || int_value,
                    op << ": value " << value << " is not an int32 for an int32 tensor");
  // a mask of another dtype becomes 0/1 first, so that converting it keeps every nonzero
  const Tensor mask = mask_in.data_type() == dt ? mask_in : Cast(NE(mask_in, 0.f), dt);
  auto* k = MaskedFillKernel().For(*x.device());
  return RunBinaryWith(id, dt, x, mask, nullptr,
                       [k, value](const Tensor& a, const Tensor& b, const Tensor& y,
                                  Context* ctx) { k(a, b, value, y, ctx); });
}

}  // namespace singa

// The schema's activations (schema/activations.py): slots and fronts on the helpers above.
#include "activation_fronts.inc"
