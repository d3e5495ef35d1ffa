"""Tensors: n-dimensional arrays on a device (Apache SINGA 3.x's singa.tensor).

Example::

    import numpy as np
    from singa import tensor, device

    x = tensor.Tensor((2, 3))                  # float32 on the default host device
    x.set_value(0.4)
    y = tensor.from_numpy(np.ones((3, 3), np.float32))
    y.uniform(-1, 1)                            # in place
    z = tensor.mult(x, y)                       # matrix product, shape (2, 3)
    x += z                                      # in place, element-wise
    a = tensor.to_numpy(x)                      # or np.asarray(x)

A ``Tensor`` is a Python handle around a core tensor (``singa_wrap.Tensor``, its ``data``
attribute); all math runs in the C++ core. Two kinds of functions exist, as in SINGA: methods that
change a tensor in place (``set_value``, ``uniform``, ``+=``, ``to_device``...) and module
functions that return new tensors (``tensor.exp(x)``, ``tensor.mult(a, b)``...).

dtypes are the constants ``float32``, ``float16`` and ``int32`` (SINGA's codes). float16 math runs
on a CUDA GPU (SINGA 3.3's ``-p float16`` training: tests/python/test_gpu_float16.py); on the CPU
float16 tensors are storage only (create, ``as_type``/``to_type``, copy, read; math raises
DTypeError): convert with ``as_type(float32)`` first. numpy float64 data becomes float32 and int64
becomes int32, as in SINGA.

``bfloat16`` (ours, not SINGA 3.3's) is a compute dtype on every device: elementwise ops and
reductions compute in float32 and round once; matmul and convolution run natively in bf16
through oneDNN on a CPU with AVX512_BF16 (float32 accumulation; a CPU without it raises
NotImplementedError naming the instruction set; see ``device.cpu_features()``); pooling, batch
norm and softmax go through float32. Mixed with float32 it promotes to float32. ``to_numpy``
gives ``ml_dtypes.bfloat16`` values when ml_dtypes is installed, else the uint16 bit patterns
(``singa_wrap.BFLOAT16_NUMPY`` says which); ``copy_from_numpy`` rounds floats to nearest even.

Semantics worth knowing:
  * operators broadcast like numpy; mixing int32 and float32 gives float32; ``/`` gives float32.
  * views: ``T()``, ``transpose()``, ``reshape()`` (of a contiguous tensor) and ``copy()`` share
    memory with their source; ``clone()``, ``t[...]`` and every math result are new memory.
  * ``t[i]`` keeps the indexed axis with size 1, as in SINGA (numpy would drop it).
  * every tensor is true in a boolean context (SINGA code writes ``if labels:``); read a
    one-element tensor's value with float(t). ``tensor.sum(t)`` of all elements is (1, 1).
  * where SINGA asserts on sizes (reshape, copy_from_numpy, copy_data) the error is a
    CheckShapeError: a ShapeError (ValueError) and an AssertionError.
  * errors are Python exceptions from singa_wrap: ShapeError (a ValueError), AxisError (a
    ValueError and an IndexError), DTypeError (a TypeError), DeviceError...
"""
# The public module: the Tensor class and its helpers live in _core, the module functions in
# _tensor_funcs (both below this module; see tests/python/test_imports.py for the layering).
from functools import reduce  # noqa: F401  (Apache SINGA's tensor module had these names)

import numpy as np  # noqa: F401

from . import singa_wrap as singa  # noqa: F401
from ._core import (CTensor, Tensor, PlaceHolder, float32, float16, int32, product,  # noqa: F401
                    get_default_device, bfloat16)
from ._tensor_funcs import *  # noqa: F401,F403  (the module functions, see its __all__)
from .errors import CheckShapeError, CheckTypeError, CheckValueError  # noqa: F401

# repr, pickle and help() name the class where users find it
Tensor.__module__ = __name__
