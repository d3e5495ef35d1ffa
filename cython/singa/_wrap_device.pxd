# What the other extension modules cimport from singa._wrap_device (CuPy's way: one .pxd per
# module that others build on, instead of one namespace assembled by `include`).
#
#   from singa._wrap_device cimport Device, wrap_device, as_device
from libcpp.memory cimport shared_ptr

from csinga cimport CDevice


cdef class Device:
    cdef shared_ptr[CDevice] c


# A new Python handle of d.
cdef Device wrap_device(shared_ptr[CDevice] d)
# The C++ device of a Python argument: None means the default host device.
cdef shared_ptr[CDevice] as_device(dev) except *
