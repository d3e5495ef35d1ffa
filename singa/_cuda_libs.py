"""Loads the CUDA libraries of the nvidia-* wheels before singa's CUDA extension needs them.

    from singa import _cuda_libs
    _cuda_libs.preload()   # singa/__init__.py does this; a no-op outside a CUDA wheel

A CUDA wheel of singa depends on the nvidia-* wheels (cuBLAS, cuRAND, cuDNN, NCCL) instead of
bundling them; they install under site-packages/nvidia/<part>/lib, where the loader would not
look. The wheel lists the files libsinga needs in _cuda_libs.txt; loading each one here, by path,
lets libsinga's dependencies resolve to them. Nothing here needs a GPU (the CUDA runtime is
linked statically and opens the driver at the first CUDA call), so `import singa` works on a
machine without one.
"""
import ctypes
import importlib.util
import os

_LISTING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_cuda_libs.txt")


def _library_dirs():
    # Located, not imported: `nvidia` is a namespace package that only the CUDA wheel's metadata
    # requires (tools/build_wheel.sh adds the pins); the source package declares no such thing.
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs = []
    for root in spec.submodule_search_locations:
        for part in sorted(os.listdir(root)):
            lib = os.path.join(root, part, "lib")
            if os.path.isdir(lib):
                dirs.append(lib)
    return dirs


def preload():
    """Loads every library _cuda_libs.txt names (none in a CPU or source build)."""
    if not os.path.exists(_LISTING):
        return
    with open(_LISTING) as f:
        names = [line.strip() for line in f if line.strip()]
    dirs = _library_dirs()
    for name in names:
        for d in dirs:
            path = os.path.join(d, name)
            if os.path.exists(path):
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                break
        else:
            raise ImportError(
                "singa (CUDA wheel): %s was not found in the nvidia-* wheels (looked in %s); "
                "install the wheel with its dependencies (pip install singa-...whl installs "
                "nvidia-cublas, nvidia-curand, nvidia-cudnn-cu13, nvidia-nccl-cu13)"
                % (name, dirs or "no site-packages/nvidia folder"))
