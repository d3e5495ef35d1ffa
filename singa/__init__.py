"""singa: a deep-learning library with a C++17 core, API-compatible with Apache SINGA 3.x.

    from singa import tensor, device
    dev = device.get_default_device()
    x = tensor.from_numpy(np.ones((2, 3), np.float32), dev)
"""
__version__ = "0.1.0"

from . import _cuda_libs

_cuda_libs.preload()  # a CUDA wheel's nvidia-* libraries, before anything loads the extension


def __getattr__(name):
    # singa.NonFiniteError without loading the extension at `import singa` (PEP 562).
    if name == "NonFiniteError":
        from .singa_wrap import NonFiniteError
        return NonFiniteError
    raise AttributeError("module 'singa' has no attribute %r" % (name,))
