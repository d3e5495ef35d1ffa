// dispatch.h (private): turning a runtime DataType into a C++ element type.
//
//   SINGA_DISPATCH_FLOAT_INT(t.data_type(), "Add", T, { Kernel<T>(...); });
//
// Each macro names the op so that an unsupported dtype throws DTypeError with a useful message.
#pragma once

#include <cstdint>

#include "singa/core/common.h"
#include "singa/core/error.h"

#define SINGA_DTYPE_CASE(KIND, CTYPE, T, ...) \
  case ::singa::KIND: {                        \
    using T = CTYPE;                           \
    __VA_ARGS__;                               \
    break;                                     \
  }

#define SINGA_DTYPE_FAIL(dtype, op, supported)                                            \
  default:                                                                                \
    SINGA_THROW(DTypeError, op << ": dtype " << ::singa::DataTypeName(dtype)              \
                               << " is not supported (expected " supported ")");

/// float32 only.
#define SINGA_DISPATCH_FLOAT(dtype, op, T, ...)                 \
  switch (dtype) {                                              \
    SINGA_DTYPE_CASE(kFloat32, float, T, __VA_ARGS__)           \
    SINGA_DTYPE_FAIL(dtype, op, "float32; convert with as_type") \
  }

/// float32 or int32.
#define SINGA_DISPATCH_FLOAT_INT(dtype, op, T, ...)     \
  switch (dtype) {                                      \
    SINGA_DTYPE_CASE(kFloat32, float, T, __VA_ARGS__)   \
    SINGA_DTYPE_CASE(kInt, int32_t, T, __VA_ARGS__)     \
    SINGA_DTYPE_FAIL(dtype, op, "float32 or int32")     \
  }

/// float32, int32, float16 or bfloat16 (storage types: copies and conversions).
#define SINGA_DISPATCH_STORAGE(dtype, op, T, ...)                   \
  switch (dtype) {                                                  \
    SINGA_DTYPE_CASE(kFloat32, float, T, __VA_ARGS__)               \
    SINGA_DTYPE_CASE(kInt, int32_t, T, __VA_ARGS__)                 \
    SINGA_DTYPE_CASE(kFloat16, ::singa::Half, T, __VA_ARGS__)       \
    SINGA_DTYPE_CASE(kBFloat16, ::singa::BFloat16, T, __VA_ARGS__)  \
    SINGA_DTYPE_FAIL(dtype, op, "float32, int32, float16 or bfloat16") \
  }
