"""Fused scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention).

    y = autograd.scaled_dot_product_attention(q, k, v)                 # (..., L, E) x (..., S, E)
    y = autograd.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = autograd.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # keep: bool / int32
    y = autograd.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # bias: float, added

softmax(q k^T * scale + mask) v over the last two axes, the leading axes broadcast (q
(B, H, L, E) with k, v (B, 1, S, E) and so on). ``scale`` defaults to 1/sqrt(E). ``attn_mask``
broadcasts to (..., L, S): an int32 tensor or a bool numpy array keeps the entries where it is
nonzero (PyTorch's bool mask), a float32 tensor or array is added to the scores. ``is_causal``
keeps key j for query i when j <= i (top-left aligned) and excludes a mask, as in PyTorch. A query
whose every key is masked gives zeros, as PyTorch 2.13 does.

One fused core operation (singa_wrap.ScaledDotProductAttention, cpp/include/singa/ops/
attention.h) runs forward and backward in the flash-attention manner: the forward keeps only the
output and a log-sum-exp per query row, the backward recomputes the probabilities tile by tile,
so memory grows linearly with the sequence length. Dropout applies in training only
(``autograd.training``, like autograd.dropout; PyTorch's functional applies it whenever
dropout_p > 0): kept probabilities are scaled by 1 / (1 - dropout_p), and the backward
regenerates the forward's mask from a seed instead of storing it.
"""
import math

import numpy as np

from .. import _state
from .. import singa_wrap as singa
from .._args import as_float
from .._core import Tensor
from .errors import InputError
from .base import Operator, expect_tensor


class ScaledDotProductAttention(Operator):
    """Inputs (q, k, v) or (q, k, v, mask); the mask gets no gradient."""

    def __init__(self, dropout_p=0.0, is_causal=False, scale=None):
        super(ScaledDotProductAttention, self).__init__()
        dropout_p = as_float(dropout_p, "dropout_p", "scaled_dot_product_attention")
        if not 0.0 <= dropout_p < 1.0:
            raise InputError("scaled_dot_product_attention: dropout_p must be in [0, 1), got %r"
                             % (dropout_p,))
        if scale is not None:
            scale = as_float(scale, "scale", "scaled_dot_product_attention")
            if scale == 0.0 or not math.isfinite(scale):
                raise InputError("scaled_dot_product_attention: scale must be a finite nonzero "
                                 "number (None: 1/sqrt(E)), got %r" % (scale,))
        self.dropout_p, self.is_causal = dropout_p, bool(is_causal)
        self.scale = 0.0 if scale is None else scale  # 0: the core's 1/sqrt(E)

    def forward(self, q, k, v, mask=None):
        p = self.dropout_p if _state.training else 0.0
        out, lse, seed = singa.ScaledDotProductAttention(q, k, v, mask, self.scale, p,
                                                         self.is_causal)
        self.saved = (q, k, v, mask, out, lse, seed, p)
        return out

    def backward(self, dy):
        q, k, v, mask, out, lse, seed, p = self.saved
        dq, dk, dv = singa.ScaledDotProductAttentionBackward(dy, q, k, v, mask, out, lse, seed,
                                                             self.scale, p, self.is_causal)
        return (dq, dk, dv) if mask is None else (dq, dk, dv, None)


def _mask_tensor(attn_mask, like):
    """attn_mask as a Tensor on like's device: bool arrays become int32 (keep), other numbers
    float32 (added); a Tensor is used as it is (int32: keep, float32: added)."""
    expect_tensor(like, "scaled_dot_product_attention", "q")
    if attn_mask is None or isinstance(attn_mask, Tensor):
        return attn_mask
    a = np.asarray(attn_mask)
    if a.dtype.kind == "b":
        a = a.astype(np.int32)
    elif a.dtype.kind in "iuf":
        a = a.astype(np.float32)
    else:
        raise InputError("scaled_dot_product_attention: attn_mask must be a Tensor or a bool / "
                         "numeric array, got dtype %s" % (a.dtype,))
    return Tensor(data=singa.from_numpy(a, like.data.device()), requires_grad=False,
                  stores_grad=False)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None):
    """softmax(q k^T * scale + attn_mask) v: see the module docstring."""
    mask = _mask_tensor(attn_mask, q)
    op = ScaledDotProductAttention(dropout_p, is_causal, scale)
    return (op(q, k, v) if mask is None else op(q, k, v, mask))[0]
