# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_elementwise: one wrapper per line of cpp/include/singa/ops/elementwise.def, and the
# table itself (ELEMENTWISE_OPS). The body is build output: cython/gen_ops.py writes
# elementwise_ops.pxi from the .def (build/cython/gen/); this file states what it builds on.
from csinga cimport *
from singa._wrap_tensor cimport Tensor, wrap, as_real

register_error_classes()

include "elementwise_ops.pxi"
