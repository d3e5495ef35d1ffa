"""Automatic mixed precision in bfloat16 or float16: the policy table and the autocast that
applies it.

    net.compile([tx], is_train=True, use_graph=True, precision="bfloat16")   # one switch
    net.compile([tgpu], is_train=True, use_graph=True, precision="float16")  # CUDA; loss scaling
    with autograd.amp.autocast("bfloat16"):                                  # or around code
        loss = autograd.softmax_cross_entropy(net.forward(x), y)

While autocast is on, each autograd operator's float inputs are cast by POLICY (through the
Cast operator, so gradients flow back in the input's own dtype): convolutions and matrix
products get bfloat16 inputs (oneDNN / cuBLAS accumulate in float32); softmax, losses and
reductions get float32 ones; every other operator follows its inputs (bf16 elementwise math
computes in float32 and rounds once; batch norm keeps its statistics, scale and bias in
float32 whatever x is). The parameters stay float32 (master weights): a layer's W is cast to
bf16 inside each step, its gradient cast back (a convolution writes the float32 gradient of
the master weight directly: Operator.float32_grad), and the optimizer updates float32 weights
and state. The casts are ordinary operations, so a recorded graph replays them: eager and graph
mode compute the same numbers.

A CPU without AVX512_BF16 refuses (NotImplementedError naming the instruction set) instead of
running oneDNN's slow emulation; ``device.cpu_features()`` says what the CPU has.

float16 is the same table with float16 as the low dtype (cuBLAS / cuDNN compute it with float
accumulation), on CUDA devices only: the host backend has no float16 math (float16 host
tensors are storage, see singa/tensor.py), so a host device refuses (NotImplementedError naming
the device). float16's narrow range (max 65504, subnormals below 6e-5) makes small gradients
underflow, so Model.compile(..., precision="float16") also scales the loss dynamically
(singa/loss_scale.py: opt.LossScaler, PyTorch GradScaler's rules, decided on the device).
"""
import contextlib

from .. import _state
from .. import singa_wrap as singa
from .math import Cast

LOW, FP32 = "low", "float32"

# Operator class -> what its float inputs become. Absent: follow the inputs.
POLICY = {
    "_Conv2d": LOW, "Matmul": LOW, "Gemm": LOW,
    "SoftMax": FP32, "LogSoftMax": FP32,
    "SoftMaxCrossEntropy": FP32, "CrossEntropy": FP32, "BinaryCrossEntropy": FP32,
    "MeanSquareError": FP32,
    "ReduceSum": FP32, "ReduceMean": FP32,
}
PRECISIONS = {"float32": None, "bfloat16": singa.kBFloat16, "float16": singa.kFloat16}
_FLOATS = (singa.kFloat32, singa.kBFloat16, singa.kFloat16)


def check_precision(precision, dev=None):
    """The low dtype of ``precision`` ('float32' -> None, 'bfloat16', 'float16'), after checking
    that ``dev`` (default: the host) can compute in it."""
    if precision not in PRECISIONS:
        raise ValueError("precision must be one of %s, got %r"
                         % (", ".join(map(repr, PRECISIONS)), precision))
    low = PRECISIONS[precision]
    host = dev is None or dev.is_host()
    if low == singa.kFloat16 and host:
        raise singa.SingaNotImplementedError(
            "precision='float16' computes on CUDA devices only, but the device is %s (the "
            "host): its backend has no float16 math, float16 host tensors are storage only; "
            "train on a CUDA device (device.create_cuda_gpu()), or with precision='bfloat16' "
            "on this CPU" % ("the default host device" if dev is None else repr(dev)))
    if low == singa.kFloat16:
        return low
    if low is not None and host and "avx512_bf16" not in singa.cpu_features():
        raise singa.SingaNotImplementedError(
            "precision=%r needs the avx512_bf16 instruction set, which this CPU lacks "
            "(device.cpu_features(): %s); train with precision='float32'"
            % (precision, ", ".join(sorted(f for f in singa.cpu_features() if "avx" in f
                                           or "amx" in f)) or "no AVX"))
    return low


def _cast_inputs(op, xs):
    rule = POLICY.get(type(op).__name__)
    if rule is None:
        return xs
    to = _state.autocast_dtype if rule == LOW else singa.kFloat32
    return tuple(Cast(to)(x)[0] if x.data.data_type() in _FLOATS and x.data.data_type() != to
                 else x for x in xs)


@contextlib.contextmanager
def autocast(precision="bfloat16", dev=None, check=True):
    """Applies POLICY to the autograd operators called inside (precision 'float32': no-op).
    ``dev``: the device the operators run on (None: the host; 'float16' needs the CUDA device
    here, ``autocast("float16", gpu)``); check=False skips the device check (Model checked it
    at compile). Loss scaling is not part of autocast: use opt.LossScaler around the step."""
    low = check_precision(precision, dev) if check else PRECISIONS[precision]
    prev = getattr(_state, "autocast_dtype", None), getattr(_state, "autocast", None)
    if low is not None:
        _state.autocast_dtype, _state.autocast = low, _cast_inputs
    try:
        yield
    finally:
        _state.autocast_dtype, _state.autocast = prev
