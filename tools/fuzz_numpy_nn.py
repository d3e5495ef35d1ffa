"""Targets of tools/fuzz_numpy.py: losses and network ops (layer_norm, masked_fill, add_bias,
embedding, pooling, upsample, attention), with numpy references (torch's for attention)."""
import numpy as np

from singa import autograd, layer, tensor
from fuzz_numpy_gen import In, f64, target

FLT_MIN = np.finfo(np.float32).tiny
BCE_EPSILON = 1e-4  # singa.autograd.loss.BCE_EPSILON, SINGA's definition


def _log_softmax(x):
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(x, axis=1, keepdims=True) if x.shape[1] else 0
        return (x - m) - np.log(np.sum(np.exp(x - m), axis=1, keepdims=True))


def _targets(g, n, c, ints_ok=True):
    """Labels (n,) or (n, 1) int32 / float, or an (n, c) one-hot or probability matrix."""
    u = g.r.random()
    labels = g.rng.integers(0, c, n) if c else np.zeros(n, np.int64)
    if ints_ok and u < 0.5:
        shape = (n,) if g.r.random() < 0.7 else (n, 1)
        dtype = g.choice([np.int32, np.float32])
        return In(labels.reshape(shape).astype(dtype), "labels", grad=False)
    if u < 0.75:
        return In(np.eye(c, dtype=np.float32)[labels].reshape(n, c), "one-hot", grad=False)
    p = g.rng.random((n, c)) + 0.01
    return In((p / p.sum(axis=1, keepdims=True)).astype(np.float32), "probabilities", grad=False)


def _per_row(t, x, row_loss):
    """The mean over rows of row_loss(x, target matrix), labels made one-hot."""
    n, c = x.shape
    if t.ndim == 1 or (t.ndim == 2 and t.shape[1] == 1 and c != 1):
        t = np.eye(c)[t.reshape(-1).astype(np.int64)] if n else np.zeros((0, c))
    with np.errstate(invalid="ignore"):
        return np.array([row_loss(x, t).sum() / n if n else np.nan])


def _sce_gen(g):
    n, c = g.choice([1, 2, 3, 4]), g.choice([1, 2, 3, 5])
    return [g.x((n, c)), _targets(g, n, c)], {}


def _sce(x, t):
    return _per_row(t, x, lambda x, t: np.where(t != 0, -t * _log_softmax(x), 0))


def _probs(g, n, c):
    p = g.rng.random((n, c)) * 0.98 + 0.01
    if g.r.random() < 0.3:  # exact 0s and 1s: the clamps decide there (no gradient check)
        p[g.rng.random((n, c)) < 0.3] = g.choice([0.0, 1.0])
        return In(p.astype(np.float32), "probabilities with 0s and 1s")
    return In(p.astype(np.float32), "probabilities")


def _ce_gen(g):
    n, c = g.choice([1, 2, 3, 4]), g.choice([1, 2, 3, 5])
    return [_probs(g, n, c), _targets(g, n, c)], {}


def _ce(x, t):
    """singa's CrossEntropy: -t log(max(x, FLT_MIN)) where t != 0 (the kernel's clamp)."""
    return _per_row(t, x, lambda x, t: np.where(t != 0, -t * np.log(np.maximum(x, FLT_MIN)), 0))


def _bce_gen(g):
    shape = g.shape(rmin=1, rmax=3, zero=False)
    t = In((g.rng.random(shape) < 0.5).astype(np.float32), "targets", grad=False)
    p = g.rng.random(shape) * 0.98 + 0.01
    return [In(p.astype(np.float32), "probabilities"), t], {}


def _bce(x, t):
    total = t * np.log(x + BCE_EPSILON) + (1 - t) * np.log(1 + BCE_EPSILON - x)
    return np.array([-total.sum() / x.shape[0]])


def _mse_gen(g):
    shape = g.shape(rmin=1, zero=False)
    return [g.x(shape), g.x(shape, grad=False)], {}  # a loss's target gets no gradient


def _layer_norm_gen(g):
    x = g.x(rmin=1, rmax=4, zero=False)
    k = g.r.randint(1, x.a.ndim)
    norm = list(x.a.shape[x.a.ndim - k:])
    args = [x, norm]
    if g.r.random() < 0.6:
        args += [g.x(norm), g.x(norm)]
    return args, {"eps": g.choice([1e-5, 1e-3])} if g.r.random() < 0.3 else {}


def _layer_norm(x, shape, w=None, b=None, eps=1e-5):
    """In x's dtype (float32, as torch's and singa's kernels): the variance of values past
    1.8e19 overflows there, which float64 would hide."""
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    y = (x - m) / np.sqrt(v + eps)
    return y if w is None else y * w + (0 if b is None else b)


def _masked_fill_gen(g):
    s, t = g.pair_shapes()
    if len(t) > len(s) or any(a != b and a != 1 for a, b in zip(t[::-1], s[::-1])):
        s, t = t, s  # the mask broadcasts to x, not x to the mask
    if len(t) > len(s) or any(a != b and a != 1 for a, b in zip(t[::-1], s[::-1])):
        t = s
    mask = In((g.rng.random(t) < 0.5).astype(np.float32), "mask", grad=False)
    return [g.x(s), mask, g.choice([0.0, -1e9, float("-inf"), 2.5])], {}


def _add_bias_gen(g):
    r, c = g.choice([0, 1, 2, 3]), g.choice([0, 1, 2, 4])
    axis = g.choice([0, 1])
    return [g.x((r, c)), g.x((c,) if axis == 0 else (r,))], {"axis": axis}


def _embedding_gen(g):
    v, d = g.choice([1, 3, 5]), g.choice([1, 2, 4])
    ids = g.rng.integers(0, v, g.shape(rmax=2, dims=(1, 2, 3)))
    return [In(ids.astype(g.choice([np.int32, np.float32])), "ids", grad=False), g.x((v, d))], {}


def _gap_gen(g):
    shape = (g.choice([1, 2]), g.choice([1, 3]), g.choice([1, 2, 4]), g.choice([1, 3]))
    fmt = g.choice(["channels_first", "channels_last"])
    return [g.x(shape)], {"data_format": fmt}


def _gap(x, data_format="channels_first"):
    axes = (2, 3) if data_format == "channels_first" else (1, 2)
    return x.mean(axis=axes, keepdims=True)


def _upsample_gen(g):
    x = g.x(rmin=1, rmax=4)
    return [x, "nearest", [g.choice([1, 1, 2, 3]) for _ in x.a.shape]], {}


def _upsample(x, mode, scales):
    for a, s in enumerate(scales):
        x = np.repeat(x, s, axis=a)
    return x


def _attention_gen(g):
    b, h, lq, lk, d = (g.choice(v) for v in ([1, 2], [1, 2], [1, 3], [1, 2, 4], [1, 4]))
    # v finite: a masked key's inf value is skipped by the CUDA kernel but weighted by p = 0
    # (NaN) in the CPU's tile product; both are defensible, only a row with no key left has a
    # contract (zeros, test_numpy_edge_values.py)
    q, k = g.x((b, h, lq, d)), g.x((b, h, lk, d))
    v = g.x((b, h, lk, d), fill=g.choice(["randn", "ints", "big", "small"]))
    kw = {}
    u = g.r.random()
    if u < 0.3:
        kw["is_causal"] = True
    elif u < 0.6:
        kw["attn_mask"] = In((g.rng.random((lq, lk)) < 0.7).astype(np.int32), "mask", grad=False)
    if g.r.random() < 0.3:
        kw["scale"] = g.choice([0.5, 2.0])
    return [q, k, v], kw


def _attention(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """torch.nn.functional.scaled_dot_product_attention's formula in x's dtype (float32 scores
    overflow as torch's do): mask nonzero = takes part, is_causal the upper-left triangle, a
    query whose every score is -inf gives zeros (torch 2.13). A masked key is left out, not weighted by 0: its
    NaN or inf value does not reach the output (torch's math path multiplies, 0 * NaN; its
    flash path and singa skip the key)."""
    s = (q @ np.swapaxes(k, -1, -2)) * np.asarray(
        1 / np.sqrt(q.shape[-1]) if scale is None else scale, q.dtype)
    lq, lk = s.shape[-2:]
    keep = np.ones((lq, lk), bool)
    if is_causal:
        keep = np.tril(keep)
    if attn_mask is not None:
        keep = keep & (np.asarray(attn_mask) != 0)
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.where(keep, s, -np.inf)
        m = s.max(axis=-1, keepdims=True)
        e = np.where(keep, np.exp(s - m), 0)
        p = e / e.sum(axis=-1, keepdims=True)
        terms = np.where(keep[..., None], p[..., None] * v[..., None, :, :], 0)
        # every score -inf (masked, or -inf from the data: torch 2.13 cannot tell them apart)
        return np.where(m == -np.inf, 0, terms.sum(axis=-2)).astype(q.dtype)


def _attention_bound(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """attention's tolerance scale: the largest |value| per output column, and inf for a query
    whose scores pass float32's range (where the order of the dot product's additions, FMA or
    not, decides between +-inf and NaN)."""
    q, k, v = (np.abs(a.astype(np.float64)) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    over = (s > np.finfo(np.float32).max).any(axis=-1, keepdims=True)
    return np.where(over, np.inf, v.max(axis=-2, keepdims=True, initial=0))


def _conv_gen(g):
    n, c, h, w = g.choice([0, 1, 2]), g.choice([1, 2, 3]), g.choice([1, 3, 5]), g.choice([1, 2, 4])
    k = (g.choice([1, 2, 3]), g.choice([1, 2, 3]))
    kw = {"stride": (g.choice([1, 2, 3]), g.choice([1, 2])),
          "padding": (g.choice([0, 1]), g.choice([0, 1, 2])), "dilation": g.choice([1, 2])}
    if any(size + 2 * p - kw["dilation"] * (kk - 1) - 1 < 0
           for size, p, kk in zip((h, w), kw["padding"], k)):
        kw["padding"], kw["dilation"] = (k[0], k[1]), 1  # the window fits
    oc = g.choice([1, 2, 4])
    kw["group"] = g.choice([gr for gr in (1, 2, 3) if c % gr == 0 and oc % gr == 0])
    weight = g.x((oc, c // kw["group"]) + k, fill="randn", grad=False)
    return [g.x((n, c, h, w)), weight, g.x((oc,), fill="randn", grad=False)], kw


def _conv(x, weight, bias, stride, padding, dilation, group):
    """layer.Conv2d with the given weights (copied in after the layer makes its own)."""
    conv = layer.Conv2d(weight.shape[0], weight.shape[2:], stride=stride, padding=padding,
                        dilation=dilation, group=group)
    conv(x)
    conv.W.copy_from_numpy(tensor.to_numpy(weight))
    conv.b.copy_from_numpy(tensor.to_numpy(bias))
    return conv(x)


def _torch_conv(x, weight, bias, stride, padding, dilation, group):
    import torch
    return torch.nn.functional.conv2d(*(torch.from_numpy(np.ascontiguousarray(a))
                                        for a in (x, weight, bias)),
                                      stride, padding, dilation, group).numpy()


def _pool_gen(g):
    shape = (g.choice([0, 1, 2]), g.choice([1, 2]), g.choice([2, 3, 5]), g.choice([2, 4]))
    k = (g.choice([1, 2]), g.choice([1, 2]))
    pad = (g.choice([0, k[0] // 2]), g.choice([0, k[1] // 2]))
    return [g.x(shape), k], {"stride": (g.choice([1, 2]), g.choice([1, 2, 3])), "padding": pad}


def _pool(kind):
    def call(x, k, stride, padding):
        return getattr(layer, kind)(k, stride=stride, padding=padding)(x)
    return call


def _torch_pool(kind):
    """torch's pooling; average pooling leaves the padding out of the count (ONNX's default
    count_include_pad=0, as singa)."""
    def ref(x, k, stride, padding):
        import torch
        t = torch.from_numpy(np.ascontiguousarray(x))
        if kind == "MaxPool2d":
            return torch.nn.functional.max_pool2d(t, k, stride, padding).numpy()
        return torch.nn.functional.avg_pool2d(t, k, stride, padding,
                                              count_include_pad=False).numpy()
    ref.raw = _numpy_pool(kind)
    return ref


def _numpy_pool(kind):
    """The pooling in numpy, for the gradient's differences (torch's per-call cost, 128 calls a
    check, made them slow): padding is NaN, left out by nanmax / nanmean (finite inputs only)."""
    def ref(x, k, stride, padding):
        (ph, pw), (sh, sw) = padding, stride
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=np.nan)
        oh, ow = (xp.shape[2] - k[0]) // sh + 1, (xp.shape[3] - k[1]) // sw + 1
        reduce = np.nanmax if kind == "MaxPool2d" else np.nanmean
        out = np.zeros(x.shape[:2] + (oh, ow), x.dtype)
        for i in range(oh):
            for j in range(ow):
                win = xp[:, :, i * sh:i * sh + k[0], j * sw:j * sw + k[1]]
                out[:, :, i, j] = reduce(win, axis=(2, 3)) if win.size else 0
        return out
    return ref


def nn_targets():
    target("autograd.softmax_cross_entropy", _sce_gen, autograd.softmax_cross_entropy, f64(_sce),
           accum=True, grad=True)
    target("autograd.cross_entropy", _ce_gen, autograd.cross_entropy, f64(_ce), accum=True,
           grad=True)
    target("autograd.binary_cross_entropy", _bce_gen, autograd.binary_cross_entropy, f64(_bce),
           accum=True, grad=True)
    # in float32, as singa's: a square past float32's range is inf there (float64 would not be)
    target("autograd.mse_loss", _mse_gen, autograd.mse_loss,
           lambda x, t: np.array([np.mean((x - t) ** 2)], x.dtype), accum=True, grad=True)
    target("autograd.layer_norm", _layer_norm_gen, autograd.layer_norm, _layer_norm,
           rtol=1e-4, atol=1e-5, grad=True)
    target("autograd.masked_fill", _masked_fill_gen, autograd.masked_fill,
           lambda x, m, value: np.where(m != 0, np.float32(value), x), exact=True, grad=True)
    target("autograd.add_bias", _add_bias_gen, autograd.add_bias,
           f64(lambda x, b, axis: x + (b[None, :] if axis == 0 else b[:, None])), grad=True)
    target("autograd.embedding", _embedding_gen, autograd.embedding,
           lambda ids, w: w[ids.astype(np.int64)], exact=True, grad=True)
    target("autograd.globalaveragepool", _gap_gen, autograd.globalaveragepool, f64(_gap),
           accum=True, grad=True)
    target("autograd.upsample", _upsample_gen, autograd.upsample, _upsample, exact=True,
           grad=True)
    try:
        import torch  # noqa: F401  (conv and pooling have torch as their only reference)
    except ImportError:
        pass
    else:
        target("layer.Conv2d", _conv_gen, _conv, _torch_conv, accum=True, grad=True)
        for kind in ("MaxPool2d", "AvgPool2d"):
            target("layer." + kind, _pool_gen, _pool(kind), _torch_pool(kind), accum=True,
                   grad=True)
    target("autograd.scaled_dot_product_attention", _attention_gen,
           autograd.scaled_dot_product_attention, _attention, rtol=1e-4, atol=1e-5,
           accum=_attention_bound,
           grad=True)


nn_targets()
