# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_activations: the op schema's wrappers (schema/activations.py: LeakyReLU, Elu,
# SeLU...) and its rows (ACTIVATION_OPS), which singa/autograd/schema_ops.py reads. The body is
# build output: schema/gen_schema.py writes activation_ops.pxi (build/cython/gen/); this file
# states what it builds on.
from csinga cimport *
from singa._wrap_tensor cimport Tensor, wrap

register_error_classes()

include "activation_ops.pxi"
