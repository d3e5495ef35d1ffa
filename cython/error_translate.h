// error_translate.h: turns the C++ exception in flight into a Python exception.
//
// Cython declarations use `except +singa_raise_py_error`; Cython calls this inside its catch(...)
// block, so `throw;` rethrows the exception being handled. The Python classes come from
// singa/_wrap_errors.py, each deriving from the builtin a Python user expects: ShapeError is a
// ValueError, DTypeError a TypeError... Every extension module compiles this header, so each
// registers the classes at import (csinga.pxd: register_error_classes): GCC happens to merge the
// inline table across the modules (a unique symbol), other toolchains need not.
#pragma once

#include <Python.h>

#include <exception>
#include <new>
#include <stdexcept>
#include <utility>

#include "singa/core/error.h"

enum SingaPyErrorKind {
  kSingaPyError = 0,
  kSingaPyShape,
  kSingaPyAxis,
  kSingaPyDType,
  kSingaPyValue,
  kSingaPyDevice,
  kSingaPyOutOfMemory,
  kSingaPyNotImplemented,
  kSingaPyNonFinite,
  kSingaPyKinds
};

inline PyObject* singa_py_error_types[kSingaPyKinds] = {nullptr};

inline void singa_register_exception(int kind, PyObject* type) {
  if (kind < 0 || kind >= kSingaPyKinds) return;
  Py_XINCREF(type);
  singa_py_error_types[kind] = type;
}

inline void singa_set_error(int kind, PyObject* fallback, const char* msg) {
  PyObject* t = singa_py_error_types[kind] ? singa_py_error_types[kind] : fallback;
  PyErr_SetString(t, msg);
}

inline void singa_raise_py_error() {
  try {
    throw;
  } catch (const singa::AxisError& e) {
    singa_set_error(kSingaPyAxis, PyExc_IndexError, e.what());
  } catch (const singa::ShapeError& e) {
    singa_set_error(kSingaPyShape, PyExc_ValueError, e.what());
  } catch (const singa::DTypeError& e) {
    singa_set_error(kSingaPyDType, PyExc_TypeError, e.what());
  } catch (const singa::ValueError& e) {
    singa_set_error(kSingaPyValue, PyExc_ValueError, e.what());
  } catch (const singa::DeviceError& e) {
    singa_set_error(kSingaPyDevice, PyExc_RuntimeError, e.what());
  } catch (const singa::OutOfMemoryError& e) {
    singa_set_error(kSingaPyOutOfMemory, PyExc_MemoryError, e.what());
  } catch (const singa::NotImplementedError& e) {
    singa_set_error(kSingaPyNotImplemented, PyExc_NotImplementedError, e.what());
  } catch (const singa::NonFiniteError& e) {
    singa_set_error(kSingaPyNonFinite, PyExc_FloatingPointError, e.what());
  } catch (const singa::Error& e) {
    singa_set_error(kSingaPyError, PyExc_RuntimeError, e.what());
  } catch (const std::bad_alloc&) {
    singa_set_error(kSingaPyOutOfMemory, PyExc_MemoryError, "out of host memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

// Releases the GIL for the duration of one C++ call made with it held, and takes it back before
// the call returns or throws (so Cython's `except +` handler above runs with the GIL). Used in
// the C name of declarations whose call sites are not written with `with nogil:`:
//     CTensor c_Conv2dForward "SINGA_NOGIL(singa::Conv2dForward)"(...) except +raise_py_error
// A call made without the GIL (inside `with nogil:`) is left alone, so both styles mix safely.
namespace singa_py {
class GilRelease {
 public:
  GilRelease() : state_(PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
  ~GilRelease() {
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_;
};
}  // namespace singa_py

#define SINGA_NOGIL(fn)                                     \
  ([](auto&&... args) -> decltype(auto) {                   \
    ::singa_py::GilRelease singa_gil_release_;              \
    return fn(std::forward<decltype(args)>(args)...);       \
  })
