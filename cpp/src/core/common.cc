// Vocabulary helpers of singa/core/common.h: dtype sizes, shapes, broadcasting, half floats.
#include "singa/core/common.h"

#include <cstring>

#include "singa/core/error.h"

namespace singa {

size_t SizeOf(DataType t) {
  switch (t) {
    case kFloat32: return 4;
    case kFloat16: return 2;
    case kInt: return 4;
    case kChar: return 1;
    case kDouble: return 8;
    case kUChar: return 1;
    case kBFloat16: return 2;
  }
  SINGA_THROW(DTypeError, "unknown data type " << int(t));
}

std::string DataTypeName(DataType t) {
  switch (t) {
    case kFloat32: return "float32";
    case kFloat16: return "float16";
    case kInt: return "int32";
    case kChar: return "int8";
    case kDouble: return "float64";
    case kUChar: return "uint8";
    case kBFloat16: return "bfloat16";
  }
  return "dtype(" + std::to_string(int(t)) + ")";
}

namespace {
// Elements are addressed with ptrdiff_t strides, so a tensor holds at most PTRDIFF_MAX elements
// and bytes. Past that the product would wrap (3 x 2^63 elements of 4 bytes is 0 bytes: a block
// of nothing, written past its end), so the sizes are checked where they are computed.
constexpr size_t kMaxCount = static_cast<size_t>(PTRDIFF_MAX);

bool HasZero(const Shape& shape, size_t begin, size_t end) {
  for (size_t i = begin; i < shape.size() && i < end; ++i)
    if (shape[i] == 0) return true;
  return false;
}
}  // namespace

size_t Product(const Shape& shape, size_t begin, size_t end) {
  size_t n = 1;
  for (size_t i = begin; i < shape.size() && i < end; ++i) {
    if (__builtin_mul_overflow(n, shape[i], &n) || n > kMaxCount) {
      if (HasZero(shape, begin, end)) return 0;  // numpy: (2^62, 2^62, 0) holds nothing
      SINGA_THROW(ValueError, "shape " << shape << " is too big: it has more than 2^63 - 1 "
                                          "elements");
    }
  }
  return n;
}

size_t NBytes(const Shape& shape, DataType t) {
  const size_t n = Product(shape), width = SizeOf(t);
  size_t bytes = 0;
  SINGA_CHECK_VALUE(!__builtin_mul_overflow(n, width, &bytes) && bytes <= kMaxCount,
                    "shape " << shape << " of " << DataTypeName(t)
                             << " is too big: its size in bytes exceeds 2^63 - 1");
  return bytes;
}

Strides ContiguousStrides(const Shape& shape) {
  // Product throws where a stride would pass 2^63 - 1, except in an empty tensor (a 0 axis):
  // there the outer strides may wrap, harmlessly (they address nothing), in unsigned
  // arithmetic, whose wrap is defined (a signed overflow, as before, is undefined behaviour).
  Product(shape);
  Strides s(shape.size());
  size_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = static_cast<std::ptrdiff_t>(acc);
    acc *= shape[i];
  }
  return s;
}

Shape BroadcastShapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    size_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    size_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SINGA_CHECK_SHAPE(da == db || da == 1 || db == 1,
                      op << ": shapes " << a << " and " << b
                         << " cannot be broadcast together (dimension " << i << ": " << da
                         << " vs " << db << ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

size_t NormalizeAxis(int axis, size_t ndim, const char* op) {
  int n = static_cast<int>(ndim);
  SINGA_CHECK_AXIS(axis >= -n && axis < n, op << ": axis " << axis
                                              << " is out of range for a tensor of rank " << n
                                              << " (expected " << -n << " <= axis < " << n << ")");
  return static_cast<size_t>(axis < 0 ? axis + n : axis);
}

template <typename V>
static std::ostream& PrintTuple(std::ostream& os, const V& v) {
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << (v.size() == 1 ? ",)" : ")");
}
std::ostream& operator<<(std::ostream& os, const Shape& shape) { return PrintTuple(os, shape); }
std::ostream& operator<<(std::ostream& os, const Strides& s) { return PrintTuple(os, s); }
std::ostream& operator<<(std::ostream& os, DataType t) { return os << DataTypeName(t); }

// IEEE 754 binary16 conversions with round-to-nearest-even; handles subnormals, inf and nan.
float HalfToFloat(Half h) {
  uint32_t sign = uint32_t(h.bits & 0x8000) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1f;
  uint32_t mant = h.bits & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

Half FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  Half h;
  if (absx >= 0x7f800000u) {  // inf or nan
    h.bits = sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
  } else if (absx >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    h.bits = sign | 0x7c00;
  } else if (absx < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (absx < 0x33000000u) {
      h.bits = sign;
    } else {
      uint32_t e = absx >> 23;
      uint32_t m = (absx & 0x7fffff) | 0x800000;
      uint32_t shift = 126 - e;  // 14..24
      uint32_t half_m = m >> shift;
      uint32_t rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
      if (rem > mid || (rem == mid && (half_m & 1))) ++half_m;
      h.bits = sign | uint16_t(half_m);
    }
  } else {
    uint32_t r = absx + 0xfff + ((absx >> 13) & 1);  // round to nearest even
    h.bits = sign | uint16_t(((r >> 13) - ((127 - 15) << 10)) & 0x7fff);
  }
  return h;
}

}  // namespace singa
