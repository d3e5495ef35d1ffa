"""Import of ONNX Resize beyond nearest upsampling by integer factors (ops_tensor._resize):
linear, cubic, downsampling, any coordinate transformation, antialias, keep_aspect_ratio_policy
and tf_crop_and_resize.

    y = resize_by_axis_maps(x, attrs, scales, sizes, roi, opset, cache)

Note: ONNX's Resize is separable (one axis after the other) and, along one axis, affine in the
input: each output element is a fixed weighted sum of input elements, or the extrapolation
value where tf_crop_and_resize samples outside the input. So each resized axis k is a matrix
M_k (out_k x n_k) plus a constant c_k on the extrapolated outputs, and y = A_last(...A_first(x))
with A_k(v) = M_k v + c_k along axis k: autograd matmuls and adds, which train. M_k and c_k are
what onnx's reference Resize gives along that axis alone for the identity I_{n_k} and for zeros
(the weights are its definition of the modes), computed once per shape and cached.
"""
import numpy as np

from .. import autograd, tensor
from .errors import SonnxError, UnsupportedOpError, reference_errors

_AXIS_ATTRS = ("mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
               "extrapolation_value", "nearest_mode", "antialias")


def resize_axes(attrs, x_shape):
    """The axes a Resize node scales (opset 18's ``axes``, every axis by default), made
    non-negative; SonnxError when one is out of range or repeated."""
    nd = len(x_shape)
    given = list(attrs.get("axes", range(nd)))
    if any(not -nd <= a < nd for a in given) or \
            len(set(a % max(nd, 1) for a in given)) < len(given):
        raise SonnxError("Resize: axes %s are out of range or repeated for an input of shape %s"
                         % (given, tuple(x_shape)))
    return [a + nd if a < 0 else a for a in given]


def _per_axis(x_shape, attrs, scales, sizes, roi):
    """(scale, out size, (roi start, roi end)) for every axis of the input, as ONNX defines
    them from the given scales or sizes, ``axes`` and ``keep_aspect_ratio_policy``; and the
    aspect (policy, (length, size) of the axis that set the common scale) or None."""
    nd = len(x_shape)
    axes = resize_axes(attrs, x_shape)
    scale, out, aspect = [1.0] * nd, list(x_shape), None
    if sizes is not None:
        for a, s in zip(axes, sizes):  # an empty axis stays empty (_resize checks the size)
            out[a], scale[a] = int(s), int(s) / x_shape[a] if x_shape[a] else 1.0
        policy = attrs.get("keep_aspect_ratio_policy", b"stretch")
        policy = policy.decode() if isinstance(policy, bytes) else policy
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise SonnxError("Resize: keep_aspect_ratio_policy must be stretch, not_larger or "
                             "not_smaller, got %r" % (policy,))
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            j = pick(axes, key=lambda a: scale[a])
            aspect = (policy, x_shape[j], out[j])
            common = scale[j]
            for a in axes:
                scale[a], out[a] = common, int(common * x_shape[a] + 0.5)
    else:
        for a, s in zip(axes, scales):
            scale[a] = float(s)
            out[a] = int(float(s) * x_shape[a])
    bounds = [(0.0, 1.0)] * nd
    coord = attrs.get("coordinate_transformation_mode", b"half_pixel")
    coord = coord.decode() if isinstance(coord, bytes) else coord
    # ONNX: roi "only takes effect when coordinate_transformation_mode is tf_crop_and_resize";
    # in the other modes one of any length is ignored, as onnx's reference does
    if roi is not None and roi.size and coord == "tf_crop_and_resize":
        if len(roi) not in (2 * len(axes), 2 * nd):
            raise SonnxError("Resize: roi must hold a start and an end for each of the %d axes "
                             "(or of the %d given in axes), got %d values"
                             % (nd, len(axes), len(roi)))
        k = len(roi) // 2
        for i, a in enumerate(axes if k == len(axes) else range(nd)):
            bounds[a] = (float(roi[i]), float(roi[k + i]))
    return scale, out, bounds, aspect


def _axis_map(n, scale, out, bounds, attrs, opset, aspect, by_size):
    """(M, c): the weights (out x n) and the constant (out,) of Resize along one axis: onnx's
    reference on a (n, n) input whose axis 0 is a batch, given the scale or (``by_size``) the
    output size as the node gave it. With a keep_aspect_ratio_policy, a
    third axis of the length and size that set the common scale makes the reference derive
    the same scale and output size as for the whole input."""
    if n == 0 or out == 0:  # nothing to sample or nothing sampled: the reference's (n, 0) or
        # (0, n) result cannot be reshaped below
        return np.zeros((out, n), np.float32), np.zeros(out, np.float32)
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    given = {k: attrs[k] for k in _AXIS_ATTRS if k in attrs}
    feeds = {"roi": np.array([0.0, bounds[0], 1.0, bounds[1]], np.float32)}
    shape = (n, n)
    if aspect is None and by_size:  # the size itself (out / n as a float may floor lower)
        inputs = ["x", "roi", "", "sizes"]
        feeds["sizes"] = np.array([n, out], np.int64)
    elif aspect is None:
        inputs = ["x", "roi", "scales"]
        feeds["scales"] = np.array([1.0, scale], np.float32)
    else:
        policy, length, size = aspect
        given.update(keep_aspect_ratio_policy=policy, axes=[1, 2])
        inputs = ["x", "roi", "", "sizes"]
        feeds["roi"] = np.array([bounds[0], 0.0, bounds[1], 1.0], np.float32)
        feeds["sizes"] = np.array([out, size], np.int64)
        shape = (n, n, length)
    node = helper.make_node("Resize", inputs, ["y"], **given)
    with reference_errors("Resize"):
        ref = ReferenceEvaluator(node, opsets={"": opset})

    def run(v):
        v = np.broadcast_to(v.reshape(v.shape + (1,) * (len(shape) - 2)), (v.shape[0],) +
                            shape[1:]).astype(np.float32)
        with reference_errors("Resize"):
            y = np.asarray(ref.run(None, dict(feeds, x=np.ascontiguousarray(v)))[0])
        return y.reshape(y.shape[:2] + (-1,))[:, :, 0]
    c = run(np.zeros((1, n), np.float32))[0]
    M = (run(np.eye(n, dtype=np.float32)) - c).T  # row i of the identity: input i's weights
    if M.shape != (out, n):
        raise UnsupportedOpError("Resize: the reference gives %d outputs along an axis of %d "
                                 "where %d were expected (scale %g, opset %d)"
                                 % (M.shape[0], n, out, scale, opset))
    return M, c


def resize_by_axis_maps(x, attrs, scales, sizes, roi, opset, cache):
    """ONNX Resize of Tensor x (see the module note); scales / sizes / roi are numpy or None."""
    scale, out, bounds, aspect = _per_axis(tuple(x.shape), attrs, scales, sizes, roi)
    nd = len(x.shape)
    y = x
    for a in range(nd):
        n = x.shape[a]
        if out[a] == n and scale[a] == 1.0 and bounds[a] == (0.0, 1.0):
            continue
        key = ("resize_axis", n, scale[a], out[a], bounds[a], aspect, sizes is None, repr(sorted(
            (k, attrs[k]) for k in _AXIS_ATTRS if k in attrs)), opset)
        if key not in cache:
            M, c = _axis_map(n, scale[a], out[a], bounds[a], attrs, opset, aspect,
                             sizes is not None)
            Mt = tensor.from_numpy(np.ascontiguousarray(M.T), x.device)
            cshape = [1] * nd
            cshape[a] = out[a]
            ct = tensor.from_numpy(np.ascontiguousarray(c.reshape(cshape)), x.device) \
                if np.any(c) else None
            for t in (Mt, ct):
                if t is not None:
                    t.requires_grad = t.stores_grad = False
            cache[key] = (Mt, ct)
        Mt, ct = cache[key]
        perm = [i for i in range(nd) if i != a] + [a]  # axis a last, multiplied, put back
        y = autograd.transpose(autograd.matmul(autograd.transpose(y, perm), Mt),
                               list(np.argsort(perm)))
        if ct is not None:
            y = autograd.add(y, ct)
    return y
