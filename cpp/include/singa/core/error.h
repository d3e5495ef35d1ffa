// singa/core/error.h: the exceptions libsinga throws, and the check macros that throw them.
//
//   SINGA_CHECK_SHAPE(a.shape() == b.shape(),
//                     "Add: shapes " << a.shape() << " and " << b.shape() << " differ");
//   try { ... } catch (const singa::ShapeError& e) { std::cerr << e.what(); }
//
// Why a hierarchy instead of glog CHECKs: a failed check must never kill the host process (a Python
// interpreter, usually). The Cython layer maps each class to one Python exception:
//   ShapeError -> ValueError, AxisError -> IndexError+ValueError, DTypeError -> TypeError,
//   OutOfMemoryError -> MemoryError, NotImplementedError -> NotImplementedError,
//   ValueError -> ValueError, DeviceError and plain Error -> RuntimeError,
//   NonFiniteError -> FloatingPointError.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace singa {

/// Root of every exception thrown by libsinga.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// Shapes do not fit the operation (mismatched sizes, bad reshape, wrong rank).
class ShapeError : public Error {
 public:
  using Error::Error;
};
/// An axis or index is out of range, or repeated.
class AxisError : public ShapeError {
 public:
  using ShapeError::ShapeError;
};
/// The data type is not supported by the operation, or two operands disagree.
class DTypeError : public Error {
 public:
  using Error::Error;
};
/// An argument has a bad value that is not about shapes (negative std, p outside [0, 1]...).
class ValueError : public Error {
 public:
  using Error::Error;
};
/// Operands live on different devices, or the device cannot do what was asked.
class DeviceError : public Error {
 public:
  using Error::Error;
};
/// The allocator could not find memory even after releasing its cache.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};
/// The feature exists in the API but not for this device, dtype or build.
class NotImplementedError : public Error {
 public:
  using Error::Error;
};
/// An operation wrote NaN or Inf while its device checks outputs (Device::SetCheckFinite).
class NonFiniteError : public Error {
 public:
  using Error::Error;
};

}  // namespace singa

/// Throws `Kind` with a message built by streaming `msg` (`"a " << x << " b"`).
#define SINGA_THROW(Kind, msg)                \
  do {                                        \
    std::ostringstream singa_msg_stream_;     \
    singa_msg_stream_ << msg;                 \
    throw ::singa::Kind(singa_msg_stream_.str()); \
  } while (0)

/// Throws `Kind` with `msg` unless `cond` holds.
#define SINGA_CHECK(cond, Kind, msg) \
  do {                               \
    if (!(cond)) SINGA_THROW(Kind, msg); \
  } while (0)

#define SINGA_CHECK_SHAPE(cond, msg) SINGA_CHECK(cond, ShapeError, msg)
#define SINGA_CHECK_AXIS(cond, msg) SINGA_CHECK(cond, AxisError, msg)
#define SINGA_CHECK_DTYPE(cond, msg) SINGA_CHECK(cond, DTypeError, msg)
#define SINGA_CHECK_VALUE(cond, msg) SINGA_CHECK(cond, ValueError, msg)
#define SINGA_CHECK_DEVICE(cond, msg) SINGA_CHECK(cond, DeviceError, msg)
