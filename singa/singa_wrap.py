"""singa_wrap: the Python face of libsinga (the name Apache SINGA gave its SWIG module).

    from singa import singa_wrap as sw
    dev = sw.get_default_device()
    t = sw.Tensor((2, 3), dev, sw.kFloat32)
    sw.Gaussian(0.0, 1.0, t)
    y = sw.ReLU(t)                 # every op of elementwise.def, reduce.h, blas.h, shape.h
    arr = sw.to_numpy(y)

This module only gathers the names of the extension modules, one per theme, each compiled from
cython/singa/_wrap_NAME.pyx and cimporting what it builds on (CuPy's layout): _wrap_device and
_wrap_tensor (the Device and Tensor classes, declared in their .pxd files for the others),
_wrap_dlpack, _wrap_ops (reductions, BLAS, shape, random, optimizer updates), _wrap_elementwise
(generated from cpp/include/singa/ops/elementwise.def), _wrap_activations (generated from
schema/activations.py), _wrap_nn, _wrap_transformer, _wrap_attention, _wrap_rnn (the LSTM layer),
_wrap_kernels (the kernel registry, the GEMM library) and _wrap_dist (collectives). The errors are plain Python classes
(_wrap_errors). Use the names from here: which module holds a name is not part of the API.
"""
from singa._wrap_errors import *  # noqa: F401,F403
from singa._wrap_device import *  # noqa: F401,F403
from singa._wrap_tensor import *  # noqa: F401,F403
from singa._wrap_dlpack import *  # noqa: F401,F403
from singa._wrap_ops import *  # noqa: F401,F403
from singa._wrap_elementwise import *  # noqa: F401,F403
from singa._wrap_activations import *  # noqa: F401,F403
from singa._wrap_nn import *  # noqa: F401,F403
from singa._wrap_transformer import *  # noqa: F401,F403
from singa._wrap_attention import *  # noqa: F401,F403
from singa._wrap_rnn import *  # noqa: F401,F403
from singa._wrap_kernels import *  # noqa: F401,F403
from singa._wrap_dist import *  # noqa: F401,F403
