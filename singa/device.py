"""Devices: where tensors live and where operations run (Apache SINGA 3.x's singa.device).

Example::

    from singa import device, tensor
    dev = device.get_default_device()          # the process-wide host (CPU) device
    dev.SetRandSeed(0)
    x = tensor.Tensor((2, 3), dev)
    device.get_memory_in_use(dev)               # bytes held by live tensors on dev

A device object is a ``singa_wrap.Device``; it offers ``id()``, ``lang()``, ``SetRandSeed(seed)``,
``Sync()``, ``mem_stats()`` and ``ResetPeak()``.

NaN hunting: ``dev.SetCheckFinite(True)`` makes every operation the device runs (eager, and each
graph replay) check its float outputs; the first one that produces NaN or Inf raises
``NonFiniteError`` (a ``FloatingPointError``) naming the operation, the output shape and the
counts. ``Model.compile(..., check_finite=True)`` sets it on the model's device.

This build may lack CUDA (``singa_wrap.USE_CUDA`` is False), or a CUDA build may run where no GPU
is usable. Then the GPU functions that report (``get_num_gpus``, ``get_gpu_ids``) answer "no GPU",
and those that would create or query a GPU raise ``DeviceUnavailableError``, which is a RuntimeError (and, for code written against Apache
SINGA, whose checks were assertions, also an AssertionError).
"""
from . import singa_wrap as singa
from .errors import DeviceUnavailableError

NonFiniteError = singa.NonFiniteError

__all__ = [
    "DeviceUnavailableError", "NonFiniteError", "get_default_device", "set_default_device", "create_cpu_device",
    "create_cuda_gpu", "create_cuda_gpus", "create_cuda_gpu_on", "create_cuda_gpus_on",
    "get_num_gpus", "get_gpu_ids", "get_gpu_mem_size", "device_query", "create_opencl_device",
    "get_num_opencl_platforms", "get_num_opencl_devices", "enable_lazy_alloc",
    "is_lazy_alloc_enabled", "get_memory_stats", "get_memory_in_use", "get_peak_memory",
    "reset_peak_memory", "default_device", "cpu_features",
]


def _require_cuda(what):
    if not singa.USE_CUDA:
        raise DeviceUnavailableError(
            "%s: singa was built without CUDA (singa_wrap.USE_CUDA is False); "
            "use device.create_cpu_device() or device.get_default_device()" % what)


def _core_fn(name, what):
    """The singa_wrap function ``name``, or DeviceUnavailableError if this build lacks it."""
    fn = getattr(singa, name, None)
    if fn is None:
        raise DeviceUnavailableError("%s: this build of singa_wrap has no %s" % (what, name))
    return fn


def _require_opencl(what):
    if not getattr(singa, "USE_OPENCL", False):
        raise DeviceUnavailableError(
            "%s: singa was built without OpenCL (singa_wrap.USE_OPENCL is False)" % what)


# ---- host devices ---------------------------------------------------------------------------
default_device = singa.get_default_device()
_default = default_device


def get_default_device():
    """The default device: the host CPU device unless set_default_device() chose another."""
    return _default


def set_default_device(dev):
    """Makes ``dev`` the device that singa.tensor uses when no device is given."""
    global _default
    if not isinstance(dev, singa.Device):
        raise TypeError("set_default_device: expected a singa_wrap.Device, got %s"
                        % type(dev).__name__)
    _default = dev


def cpu_features():
    """The instruction sets this CPU has, as a frozenset of /proc/cpuinfo's names ('avx2',
    'avx512f', 'avx512_bf16', 'amx_bf16', 'amx_tile'...), from cpuid in libsinga. bfloat16
    matmul and convolution need 'avx512_bf16' and refuse without it (NotImplementedError naming
    it). The environment variable SINGA_CPU_FEATURES_MASK="avx512_bf16,amx_bf16" pretends
    features are absent (read once, at the first query)."""
    return singa.cpu_features()


def create_cpu_device(id=None):
    """A host device.

    Without an argument this is the default host device (as in Apache SINGA, so tensors made
    with it and with no device can be mixed). With an integer ``id`` it is a new, separate host
    device with its own memory pool and random generator.
    """
    if id is None:
        return default_device
    return singa.create_cpu_device(int(id))


# ---- CUDA / OpenCL --------------------------------------------------------------------------
def get_num_gpus():
    """The number of CUDA GPUs usable by this build (0 without CUDA)."""
    if not singa.USE_CUDA:
        return 0
    return len(get_gpu_ids())


def get_gpu_ids():
    """The ids of the usable CUDA GPUs ([] without CUDA)."""
    if not singa.USE_CUDA:
        return []
    return list(_core_fn("get_gpu_ids", "get_gpu_ids")())


def _require_gpu(what):
    """DeviceUnavailableError unless this build has CUDA and the machine a usable GPU."""
    _require_cuda(what)
    if get_num_gpus() == 0:
        raise DeviceUnavailableError(
            "%s: singa is built with CUDA but no GPU is usable here (no CUDA driver or no "
            "device); use device.create_cpu_device()" % what)


def get_gpu_mem_size(id):
    """(free, total) bytes of GPU ``id``."""
    _require_gpu("get_gpu_mem_size")
    return _core_fn("get_gpu_mem_size", "get_gpu_mem_size")(id)


def device_query(id, verbose=False):
    """A description of GPU ``id``."""
    _require_gpu("device_query")
    return _core_fn("device_query", "device_query")(id, verbose)


def create_cuda_gpus(num):
    """``num`` CUDA GPU devices, on GPUs 0..num-1."""
    _require_gpu("create_cuda_gpus")
    return create_cuda_gpus_on(list(range(num)))


def create_cuda_gpu(set_default=False):
    """A CUDA GPU device on GPU 0."""
    _require_gpu("create_cuda_gpu")
    return create_cuda_gpu_on(0, set_default)


def create_cuda_gpus_on(device_ids):
    """One CUDA GPU device per id in ``device_ids``."""
    _require_gpu("create_cuda_gpus_on")
    create = _core_fn("create_cuda_gpu_on", "create_cuda_gpus_on")
    return [create(int(i)) for i in device_ids]


def create_cuda_gpu_on(device_id, set_default=False):
    """A CUDA GPU device on GPU ``device_id``; optionally also made the default device."""
    _require_gpu("create_cuda_gpu_on")
    dev = create_cuda_gpus_on([device_id])[0]
    if set_default:
        set_default_device(dev)
    return dev


def get_num_opencl_platforms():
    """The number of OpenCL platforms; raises DeviceUnavailableError when singa was built
    without OpenCL (``singa_wrap.USE_OPENCL`` False, as in every build of this project)."""
    _require_opencl("get_num_opencl_platforms")
    return _core_fn("get_num_opencl_platforms", "get_num_opencl_platforms")()


def get_num_opencl_devices():
    """The number of OpenCL devices; raises DeviceUnavailableError when singa was built without
    OpenCL (``singa_wrap.USE_OPENCL`` False)."""
    _require_opencl("get_num_opencl_devices")
    return _core_fn("get_num_opencl_devices", "get_num_opencl_devices")()


def create_opencl_device():
    """The default OpenCL device."""
    _require_opencl("create_opencl_device")
    return _core_fn("create_opencl_device", "create_opencl_device")()


# ---- allocation and memory statistics -----------------------------------------------------
_lazy_alloc = True


def enable_lazy_alloc(enable):
    """Apache SINGA's switch for allocating memory on first write.

    This core always allocates lazily; the flag is recorded (see is_lazy_alloc_enabled()) so
    code that sets it keeps working.
    """
    global _lazy_alloc
    _lazy_alloc = bool(enable)


enbale_lazy_alloc = enable_lazy_alloc  # the spelling of Apache SINGA 2.x/3.0


def is_lazy_alloc_enabled():
    """The flag last set by enable_lazy_alloc (True by default); the core allocates lazily
    whatever it says."""
    return _lazy_alloc


def _dev(dev, what):
    if dev is None:
        return get_default_device()
    if not isinstance(dev, singa.Device):
        raise TypeError("%s: expected a singa_wrap.Device or None, got %s"
                        % (what, type(dev).__name__))
    return dev


def get_memory_stats(dev=None):
    """The memory pool statistics of ``dev`` (default device if None), as a dict:
    in_use, peak_in_use, reserved, peak_reserved (bytes), num_mallocs, num_chunks."""
    return _dev(dev, "get_memory_stats").mem_stats()


def get_memory_in_use(dev=None):
    """Bytes held by live tensors on ``dev``."""
    return get_memory_stats(dev)["in_use"]


def get_peak_memory(dev=None):
    """The largest get_memory_in_use(dev) since the start or the last reset_peak_memory(dev)."""
    return get_memory_stats(dev)["peak_in_use"]


def reset_peak_memory(dev=None):
    """Restarts peak tracking of ``dev`` from the current use."""
    _dev(dev, "reset_peak_memory").ResetPeak()
