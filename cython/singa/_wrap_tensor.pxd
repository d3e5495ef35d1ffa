# What the op modules cimport from singa._wrap_tensor: the Tensor class and the converters
# every wrapper uses (defined in _wrap_tensor.pyx).
#
#   from singa._wrap_tensor cimport Tensor, wrap, as_shape
from libcpp.memory cimport shared_ptr
from libcpp.vector cimport vector

from csinga cimport CBlock, CTensor, DataType


cdef class Tensor:
    cdef CTensor c
    cdef shared_ptr[CBlock] held
    cdef void _hold(self)


# A new Python handle of c (which marks c's block as held by Python).
cdef Tensor wrap(CTensor c)
# t's C++ tensor, or an empty one for None or a never-written 0-d Tensor().
cdef CTensor opt_tensor(Tensor t)
# Argument converters: TypeError / ValueError naming `op` for a bad value.
cdef vector[size_t] as_shape(str op, shape) except *
cdef double as_real(str op, x) except? -1
cdef float as_float(str op, x) except? -1
cdef DataType as_dtype(dtype) except *
cdef str _dtype_name(int dt)
# BufferError when t's memory cannot be handed out (recording graph, planned arena block).
cdef void check_not_graph_owned(Tensor t, str op=*) except *
