# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
"""singa_wrap: the Python face of libsinga (the name Apache SINGA gave its SWIG module).

    from singa import singa_wrap as sw
    dev = sw.get_default_device()
    t = sw.Tensor((2, 3), dev, sw.kFloat32)
    sw.Gaussian(0.0, 1.0, t)
    y = sw.ReLU(t)                 # every op of elementwise.def, reduce.h, blas.h, shape.h
    arr = sw.to_numpy(y)

Layout: csinga.pxd declares the C++ API; this module and the files it includes hold the Python
classes (device.pxi, tensor.pxi), the hand-written op wrappers (ops.pxi) and the generated
elementwise wrappers (elementwise_ops.pxi, from cpp/include/singa/ops/elementwise.def) and the
op schema's (activation_ops.pxi and nn_ops.pxi, from schema/activations.py and nn.py).
"""
cimport numpy as cnp
import numpy as np
from libc.stdint cimport uint64_t, int32_t
from libc.string cimport memcpy
from libcpp cimport bool
from libcpp.memory cimport shared_ptr, make_shared
from libcpp.vector cimport vector
from libcpp.utility cimport pair
from libcpp.string cimport string
from cython.operator cimport dereference as deref

from csinga cimport *

cnp.import_array()

# Data types and device kinds (the numbers of Apache SINGA's core.proto).
# (The C enums of the same names are cimported, so the Python attributes go through globals().)
for _name, _value in (("kFloat32", <int>kFloat32), ("kFloat16", <int>kFloat16), ("kInt", <int>kInt),
                      ("kChar", <int>kChar), ("kDouble", <int>kDouble), ("kUChar", <int>kUChar),
                      ("kBFloat16", <int>kBFloat16),
                      ("kCpp", <int>kCpp), ("kCuda", <int>kCuda), ("kOpencl", <int>kOpencl)):
    globals()[_name] = _value

# Build flags, as Apache SINGA exposes them.
USE_CUDA = False  # set from libsinga by device.pxi
USE_DIST = False  # set from libsinga by dist.pxi
USE_DNNL = False  # set below from libsinga itself (built_with_dnnl, device.pxi)
USE_PYTHON3 = True
USE_OPENCL = False

# Exceptions: each derives from the builtin a user would catch.
class SingaError(RuntimeError):
    """Base class of the errors raised by libsinga."""
class ShapeError(SingaError, ValueError):
    """Shapes do not fit the operation."""
class AxisError(ShapeError, IndexError):
    """An axis or index is out of range, or repeated."""
class DTypeError(SingaError, TypeError):
    """The dtype is not supported by the operation."""
class ArgumentError(SingaError, ValueError):
    """An argument has a bad value."""
class DeviceError(SingaError, RuntimeError):
    """Operands on different devices, or a device that cannot do this."""
class OutOfMemoryError(SingaError, MemoryError):
    """A device ran out of memory."""
class SingaNotImplementedError(SingaError, NotImplementedError):
    """Not available for this device, dtype or build."""
class NonFiniteError(SingaError, FloatingPointError):
    """An operation produced NaN or Inf while its device checked outputs
    (Device.SetCheckFinite(True), Model.compile(..., check_finite=True)); the message names it."""

for _kind, _cls in enumerate((SingaError, ShapeError, AxisError, DTypeError, ArgumentError,
                              DeviceError, OutOfMemoryError, SingaNotImplementedError,
                              NonFiniteError)):
    register_exception(_kind, _cls)

include "device.pxi"
include "tensor.pxi"
include "dlpack.pxi"
include "ops.pxi"
include "elementwise_ops.pxi"
include "activation_ops.pxi"
include "nn.pxi"
include "nn_ops.pxi"
include "transformer.pxi"
include "kernels.pxi"
include "dist.pxi"
include "attention.pxi"

USE_DNNL = built_with_dnnl()
