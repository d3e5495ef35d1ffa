"""TEMPORARY (deleted before the branch lands): composites of the issue-19 ops written by the
ops helpers, installed into singa.autograd only where it lacks them, so that the transformer
layers can be written and tested against the agreed names meanwhile."""
import math

import numpy as np

from .. import autograd
from .. import tensor


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Interim composite of torch.nn.functional.layer_norm."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    axes = list(range(len(x.shape) - len(normalized_shape), len(x.shape)))
    mean = autograd.reduce_mean(x, axes, 1)
    xc = autograd.sub(x, mean)
    var = autograd.reduce_mean(autograd.mul(xc, xc), axes, 1)
    y = autograd.div(xc, autograd.sqrt(autograd.add(var, eps)))
    if weight is not None:
        y = autograd.mul(y, weight)
    if bias is not None:
        y = autograd.add(y, bias)
    return y


def _gelu(x, approximate="none"):
    """Interim composite of torch.nn.functional.gelu."""
    if approximate == "tanh":
        inner = autograd.mul(autograd.add(x, autograd.mul(autograd.mul(autograd.mul(x, x), x),
                                                          0.044715)), math.sqrt(2 / math.pi))
        return autograd.mul(autograd.mul(x, 0.5), autograd.add(autograd.tanh(inner), 1.0))
    return autograd.mul(autograd.mul(x, 0.5),
                        autograd.add(autograd.erf(autograd.mul(x, 1 / math.sqrt(2))), 1.0))


def _masked_fill(x, mask, value):
    """Interim composite: value where mask is nonzero (infinities clipped to 1e30)."""
    value = float(np.clip(value, -1e30, 1e30))
    return autograd.where(value, x, mask)


def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """Interim composite of scaled_dot_product_attention."""
    e = q.shape[-1]
    nd = len(k.shape)
    perm = list(range(nd - 2)) + [nd - 1, nd - 2]
    s = autograd.mul(autograd.matmul(q, autograd.transpose(k, perm)),
                     1 / math.sqrt(e) if scale is None else scale)
    if attn_mask is not None:
        s = autograd.add(s, attn_mask)
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        c = np.where(np.tril(np.ones((L, S), bool)), 0, -1e30).astype(np.float32)
        s = autograd.add(s, tensor.from_numpy(c, q.device))
    p = autograd.softmax(s, axis=-1)
    if dropout_p > 0:
        p = autograd.dropout(p, ratio=dropout_p)
    return autograd.matmul(p, v)


for _name, _fn in (("layer_norm", _layer_norm), ("gelu", _gelu), ("masked_fill", _masked_fill),
                   ("scaled_dot_product_attention", _sdpa)):
    if not hasattr(autograd, _name):
        setattr(autograd, _name, _fn)
