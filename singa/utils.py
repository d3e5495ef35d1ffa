"""Small helpers of Apache SINGA 3.3's ``singa.utils``: a progress bar, the ONNX-style "SAME"
padding arithmetic used by conv and pooling, and a post-order walk of an autograd graph.

Example::

    from singa import utils
    pads, odd = utils.get_padding_shape("SAME_UPPER", (7, 7), (3, 3), (2, 2))
    # pads == [1, 1, 1, 1] (top, bottom, left, right, symmetric part), odd == [0, 0, 0, 0]
    x_padded = utils.handle_odd_pad_fwd(x.data, odd)     # adds the asymmetric zeros
    utils.update_progress(0.5, "loss = 0.31")             # [..........          ] 50.0% loss = 0.31

Where SINGA's version computes garbage we raise or keep the correct result instead (each such
place says so): negative paddings are clamped to 0 as ONNX specifies, an unknown pad mode raises,
and ``same_pad_shape_check`` compares the handle's padding with the symmetric part of the SAME
padding (SINGA's version fails with a TypeError on every call).
"""
import math
import numbers
import sys
from collections import OrderedDict

from . import singa_wrap as singa
from ._args import type_error as _type_error
from . import errors
from . import tensor
from .autograd import nn as _nn
from .autograd.base import Dummy, Operator
from ._padding import same_pad_split

_BAR_LENGTH = 20
_SAME_MODES = ("SAME_UPPER", "SAME_LOWER")


def update_progress(progress, info):
    """Writes a progress bar and ``info`` to stdout, then moves the cursor back over it (with
    backspaces) so that the next call overwrites it.

    Args:
        progress (float): progress in [0, 1]; negative means halted, >= 1 means done.
        info (str): text shown after the bar.
    """
    status = ""
    # SINGA accepts only int and float; a numpy float32 (not a float subclass) showed an error.
    if isinstance(progress, numbers.Real) and not math.isnan(progress):
        progress = float(progress)
    else:
        progress = 0.0
        status = "error: progress var must be float. "
    if progress < 0:
        progress = 0.0
        status = "Halt. "
    if progress >= 1:
        progress = 1.0
        status = "Done. "
    if not isinstance(info, str):
        raise _type_error("update_progress", "info", "str", info)
    status = status + info
    block = int(round(_BAR_LENGTH * progress))
    text = "[{0}] {1:3.1f}% {2}".format("." * block + " " * (_BAR_LENGTH - block),
                                        progress * 100, status)
    sys.stdout.write(text)
    sys.stdout.write("\b" * (9 + _BAR_LENGTH + len(status)))
    sys.stdout.flush()


# ---- odd padding: the asymmetric part a (pad_h, pad_w) handle cannot express -------------------
def _core(x, op):
    """(core tensor of x, whether x was a Tensor)."""
    if isinstance(x, tensor.Tensor):
        return x.data, True
    if isinstance(x, singa.Tensor):
        return x, False
    raise TypeError("%s: expected a singa Tensor or core tensor, got %s" % (op, type(x).__name__))


def _check_nchw(ct, op):
    if ct.nDim() != 4:
        raise singa.ShapeError("%s: expected a 4-d tensor (N, C, H, W), got shape %s"
                               % (op, ct.shape()))


def handle_odd_pad_fwd(x, odd_padding):
    """x (N, C, H, W) with zeros added: odd_padding = (top, bottom, left, right) rows/columns.

    Takes and returns a core tensor, as SINGA's does (a Tensor in gives a Tensor out)."""
    ct, wrapped = _core(x, "handle_odd_pad_fwd")
    _check_nchw(ct, "handle_odd_pad_fwd")
    y = _nn._odd_pad(ct, _nn._norm_odd(odd_padding, "handle_odd_pad_fwd"))
    return tensor.from_raw_tensor(y) if wrapped else y


def handle_odd_pad_bwd(dx, odd_padding):
    """The gradient of handle_odd_pad_fwd: dx with the padded rows/columns sliced away."""
    ct, wrapped = _core(dx, "handle_odd_pad_bwd")
    _check_nchw(ct, "handle_odd_pad_bwd")
    odd = _nn._norm_odd(odd_padding)
    h, w = ct.shape()[2:]
    if odd[0] + odd[1] > h or odd[2] + odd[3] > w:
        raise singa.ShapeError("handle_odd_pad_bwd: odd padding %s removes more than the "
                               "gradient's %dx%d rows x columns" % (odd, h, w))
    y = _nn._odd_unpad(ct, odd)
    return tensor.from_raw_tensor(y) if wrapped else y


def _spatial(x):
    if not isinstance(x, (singa.Tensor, tensor.Tensor)):
        raise errors.CheckTypeError("same_pad_shape_check: x must be a singa Tensor, got %s"
                                    % type(x).__name__)
    shape = x.shape() if isinstance(x, singa.Tensor) else tuple(x.shape)
    return list(shape[2:])


# A handle's padding is not the one its SAME pad mode implies (an AssertionError, as in SINGA,
# and a ValueError).
PaddingMismatchError = errors.PaddingMismatchError


def same_pad_shape_check(handle, pad_mode, x):
    """Checks that ``handle``'s (pad_h, pad_w) is the symmetric part of the ``pad_mode`` padding
    for input x, and returns ``get_padding_shape``'s (pads, odd_pads) for it.

    SINGA's version fails on every call (it floor-divides a list); we check what it meant to.
    """
    _check_handle(handle, "same_pad_shape_check", (singa.ConvHandle, singa.PoolingHandle))
    kernel = [handle.kernel_h, handle.kernel_w]
    stride = [handle.stride_h, handle.stride_w]
    given = [handle.pad_h, handle.pad_w]
    pads, odd = get_padding_shape(pad_mode, _spatial(x), kernel, stride)
    expected = pads[0::2]
    if given != expected:
        raise PaddingMismatchError(
            "same_pad_shape_check: for %s mode with input %s, kernel %s and stride %s the "
            "padding should be %s, the handle has %s" % (pad_mode, _spatial(x), kernel, stride,
                                                        expected, given))
    return pads, odd


def _check_handle(handle, fn, classes):
    if not isinstance(handle, classes):
        raise errors.CheckTypeError("%s: expected a %s, got %s" % (
            fn, " or ".join(c.__name__ for c in classes), type(handle).__name__))


def re_new_handle(handle, x, is_pool=False):
    """A new handle of ``handle``'s class and geometry for input x (a new input shape)."""
    _check_handle(handle, "re_new_handle (is_pool=%r)" % (is_pool,),
                  (singa.PoolingHandle,) if is_pool else (singa.ConvHandle,))
    if not isinstance(x, (singa.Tensor, tensor.Tensor)):
        raise TypeError("re_new_handle: x must be a singa Tensor, got %s" % type(x).__name__)
    ct = x.data if isinstance(x, tensor.Tensor) else x
    kernel = (handle.kernel_h, handle.kernel_w)
    stride = (handle.stride_h, handle.stride_w)
    padding = (handle.pad_h, handle.pad_w)
    cls = type(handle)
    if is_pool:
        extra = {}
        if hasattr(handle, "count_include_pad"):
            extra["count_include_pad"] = handle.count_include_pad
        return cls(ct, kernel, stride, padding, handle.is_max_pooling, **extra)
    extra = {}
    if hasattr(handle, "dilation_h"):  # ours keeps the dilation too (SINGA's has none)
        extra["dilation"] = (handle.dilation_h, handle.dilation_w)
    return cls(ct, kernel, stride, padding, handle.channels, handle.num_filters,
               handle.bias_term, handle.group, **extra)


# ---- ONNX auto_pad arithmetic ------------------------------------------------------------------
def _check_geometry(op, mode, shapes):
    """Validates the pad mode and that the three lists have one positive int per axis."""
    if mode not in _SAME_MODES + ("VALID",):
        # SINGA returns zeros (and from them negative paddings) for any other mode.
        raise ValueError("%s: pad mode must be SAME_UPPER, SAME_LOWER or VALID, got %r"
                         % (op, mode))
    names = ("input_spatial_shape", "kernel_spatial_shape", "strides_spatial")
    lists = [list(s) for s in shapes]
    if len({len(s) for s in lists}) != 1:
        raise ValueError("%s: %s must have one value per spatial axis, got %s"
                         % (op, ", ".join(names), ", ".join(str(s) for s in lists)))
    for name, vals in zip(names, lists):
        if any(not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0
               for v in vals):
            raise ValueError("%s: %s must hold positive ints, got %s" % (op, name, vals))
    return [[int(v) for v in s] for s in lists]


def get_output_shape(auto_pad, input_spatial_shape, kernel_spatial_shape, strides_spatial):
    """The spatial output shape of a conv or pooling under ONNX ``auto_pad``: ceil(in / s) for
    SAME_UPPER / SAME_LOWER, ceil((in - k + 1) / s) for VALID."""
    ins, ks, ss = _check_geometry("get_output_shape", auto_pad,
                                  (input_spatial_shape, kernel_spatial_shape, strides_spatial))
    if auto_pad in _SAME_MODES:
        return [-(-i // s) for i, s in zip(ins, ss)]
    out = [-(-(i - k + 1) // s) for i, k, s in zip(ins, ks, ss)]
    for i, k, o in zip(ins, ks, out):
        if o <= 0:
            raise ValueError("get_output_shape: VALID padding with a kernel of %d on an input "
                             "of %d leaves no output" % (k, i))
    return out


def get_padding_shape(pad_mode, input_spatial_shape, kernel_spatial_shape, strides_spatial):
    """The padding that gives ``get_output_shape``'s outputs, as (pads, odd_pads).

    Both are lists of two entries per spatial axis, (before, after) in axis order: for 2-d,
    [top, bottom, left, right]. ``pads`` is the symmetric part (a handle's pad_h = pads[0],
    pad_w = pads[2]); ``odd_pads`` holds the one extra row/column of an odd total, after the
    data for SAME_UPPER and before it for SAME_LOWER (see handle_odd_pad_fwd).

    SINGA returns negative paddings when the total is negative (a stride larger than the kernel,
    or VALID); ONNX clamps the total at 0 and so do we.
    """
    ins, ks, ss = _check_geometry("get_padding_shape", pad_mode,
                                  (input_spatial_shape, kernel_spatial_shape, strides_spatial))
    pads = [0] * (2 * len(ins))
    odd = [0] * (2 * len(ins))
    if pad_mode == "VALID":  # no output reaches past the data (raises if none fits)
        get_output_shape(pad_mode, ins, ks, ss)
        return pads, odd
    for i, (size, k, s) in enumerate(zip(ins, ks, ss)):
        before, after = same_pad_split(pad_mode, size, k, s)
        pads[2 * i] = pads[2 * i + 1] = min(before, after)
        odd[2 * i], odd[2 * i + 1] = before - pads[2 * i], after - pads[2 * i]
    return pads, odd


def force_unicode(s):
    """``s`` decoded as UTF-8 when it is bytes; anything else unchanged."""
    try:
        return s.decode("utf-8")
    except AttributeError:
        return s


# ---- autograd graph ------------------------------------------------------------------------------
def post_order_recursive(root, root_t):
    """The operators of the autograd graph ending at operator ``root``, in post order (every
    operator after the operators producing its inputs), as three OrderedDicts keyed by name:

    * nodes: the recorded operators;
    * weights: the Dummy creators of tensors that store a gradient (parameters) -> the tensor;
    * inputs: the Dummy creators of the other leaf tensors -> the tensor (SINGA stores None; we
      store the tensor while it lives, None after).

    ``root_t`` is root's output tensor when root stores a gradient, else None (sonnx passes
    ``(y.creator, None)``). The walk is iterative, so deep graphs (long RNNs) do not hit Python's
    recursion limit; a shared sub-graph is listed once, at its first completion, as SINGA's
    recursion (which revisits it) also leaves it.
    """
    if root is not None and not isinstance(root, Operator):
        raise errors.CheckTypeError("post_order_recursive: root must be an autograd Operator "
                                    "(a tensor's creator), got %s" % type(root).__name__)
    nodes, weights, inputs = OrderedDict(), OrderedDict(), OrderedDict()
    done = set()
    stack = [(root, root_t, False)]
    while stack:
        op, t, expanded = stack.pop()
        if op is None:
            continue
        if not expanded:
            if id(op) in done:
                continue
            stack.append((op, t, True))
            # pushed reversed so that the first input is walked first
            for src_op, _yid, y, _stores in reversed(op.src):
                stack.append((src_op, y, False))
            continue
        if id(op) in done:
            continue
        done.add(id(op))
        if isinstance(op, Dummy):
            if t is not None:
                weights[op.name] = t
            else:
                inputs[op.name] = op.tensor
        else:
            nodes[op.name] = op
    return nodes, weights, inputs
