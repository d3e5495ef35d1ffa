// singa/core/common.h: the small vocabulary types shared by every part of the core.
//
//   singa::Shape s{2, 3};
//   std::cout << s;                 // prints (2, 3)
//   size_t n = singa::Product(s);   // 6
//   size_t b = singa::SizeOf(singa::kFloat32) * n;
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

namespace singa {

/// Element types. The numbers match Apache SINGA's core.proto so saved files and Python code agree;
/// kBFloat16 is ours (after SINGA's last code, 5), so SINGA code never meets it unless it asks.
enum DataType {
  kFloat32 = 0, kFloat16 = 1, kInt = 2, kChar = 3, kDouble = 4, kUChar = 5, kBFloat16 = 6
};
/// Where a device computes.
enum LangType { kCpp = 0, kCuda = 1, kOpencl = 2 };
/// Direction of a copy between host and device memory.
enum CopyDirection { kHostToHost = 0, kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3 };

using Shape = std::vector<size_t>;
/// Strides are in elements, not bytes; 0 marks a broadcast axis.
using Strides = std::vector<std::ptrdiff_t>;

/// IEEE half precision, storage only: math converts to float first.
struct Half {
  uint16_t bits = 0;
};
float HalfToFloat(Half h);
Half FloatToHalf(float f);

/// bfloat16: the upper 16 bits of a float32 (8-bit exponent, 7-bit mantissa); storage only, math
/// converts to float first. Inline: the CPU's fused bf16 loops call these per element.
struct BFloat16 {
  uint16_t bits = 0;
};
inline float BFloat16ToFloat(BFloat16 h) {
  const uint32_t b = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
/// Round to nearest, ties to even; a NaN stays a NaN (quiet bit set: truncating a NaN whose
/// payload lies in the low bits would otherwise give an Inf).
inline BFloat16 FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return BFloat16{uint16_t((x >> 16) | 0x0040u)};
  x += 0x7fffu + ((x >> 16) & 1u);
  return BFloat16{uint16_t(x >> 16)};
}

/// The DataType of a C++ element type: DataTypeOf<float>() == kFloat32.
template <typename T>
constexpr DataType DataTypeOf();
template <>
constexpr DataType DataTypeOf<float>() { return kFloat32; }
template <>
constexpr DataType DataTypeOf<Half>() { return kFloat16; }
template <>
constexpr DataType DataTypeOf<BFloat16>() { return kBFloat16; }
template <>
constexpr DataType DataTypeOf<int32_t>() { return kInt; }
template <>
constexpr DataType DataTypeOf<double>() { return kDouble; }
template <>
constexpr DataType DataTypeOf<int8_t>() { return kChar; }
template <>
constexpr DataType DataTypeOf<uint8_t>() { return kUChar; }

size_t SizeOf(DataType t);
std::string DataTypeName(DataType t);
/// The number of elements of shape[begin:end]; throws ValueError when it exceeds 2^63 - 1.
size_t Product(const Shape& shape, size_t begin = 0, size_t end = SIZE_MAX);
/// Product(shape) * SizeOf(t); throws ValueError naming the shape when that exceeds 2^63 - 1.
size_t NBytes(const Shape& shape, DataType t);
/// Row-major strides of a contiguous tensor of this shape.
Strides ContiguousStrides(const Shape& shape);
/// numpy's broadcasting rule; throws ShapeError naming `op` when the shapes do not fit.
Shape BroadcastShapes(const Shape& a, const Shape& b, const char* op);
/// Turns a possibly negative axis into [0, ndim); throws AxisError naming `op` when out of range.
size_t NormalizeAxis(int axis, size_t ndim, const char* op);

std::ostream& operator<<(std::ostream& os, const Shape& shape);
std::ostream& operator<<(std::ostream& os, const Strides& strides);
std::ostream& operator<<(std::ostream& os, DataType t);

}  // namespace singa
