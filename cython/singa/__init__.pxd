# Marks cython/singa/ as the Cython sources of the package singa, so that a module here is
# named singa._wrap_NAME and `from singa._wrap_tensor cimport Tensor` finds _wrap_tensor.pxd.
