// convert.h (private): element conversions between storage types, and the strided copy that
// Contiguous(), Clone(), AsType() and ToVector() share.
#pragma once

#include <type_traits>

#include "../ops/strided.h"
#include "singa/core/common.h"

namespace singa {

template <typename D, typename S>
inline D ConvertElement(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (std::is_same_v<S, Half>) {
    return ConvertElement<D>(HalfToFloat(x));
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return ConvertElement<D>(BFloat16ToFloat(x));
  } else if constexpr (std::is_same_v<D, Half>) {
    return FloatToHalf(static_cast<float>(x));
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    return FloatToBFloat16(static_cast<float>(x));
  } else {
    return static_cast<D>(x);
  }
}

/// dst[i] = convert(src[i]) over `shape`, each side with its own strides.
template <typename D, typename S>
void StridedConvert(const S* src, const Strides& src_strides, D* dst, const Strides& dst_strides,
                    const Shape& shape) {
  ForEachRow<2>(shape, {&src_strides, &dst_strides},
                [&](const Offsets<2>& off, size_t n, const Offsets<2>& step) {
                  const S* s = src + off[0];
                  D* d = dst + off[1];
                  if (step[0] == 1 && step[1] == 1) {
                    for (size_t i = 0; i < n; ++i) d[i] = ConvertElement<D>(s[i]);
                  } else {
                    for (size_t i = 0; i < n; ++i)
                      d[i * step[1]] = ConvertElement<D>(s[i * step[0]]);
                  }
                });
}

}  // namespace singa
