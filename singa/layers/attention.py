"""The pieces of a transformer block: LayerNorm, GELU, MultiHeadAttention, positional embeddings.

    ln = layer.LayerNorm(64)                     # or LayerNorm(): the size of the last axis
    mha = layer.MultiHeadAttention(64, 4, batch_first=True)
    y, w = mha(x, x, x)                          # x (batch, seq, 64); w (batch, seq, seq)
    y, _ = mha(x, need_weights=False, is_causal=True)      # one fused attention op
    pos = layer.SinusoidalPositionalEmbedding(batch_first=True)
    h = pos(x)                                   # x + the table's first seq rows

Arguments and results follow torch.nn's modules of the same names; sizes that torch requires
(``embed_dim``, ``normalized_shape``, ``d_model``) may be None here and are then taken from
the first input, as SINGA's layers do.

Note: masks
  ``attn_mask`` and ``key_padding_mask`` follow torch.nn.MultiheadAttention: a boolean mask (a
  numpy bool array or an int32 Tensor) is true where a position may NOT be attended; a float
  mask (float32 Tensor or array) is added to the attention scores. A numpy mask is a constant
  of the layer's step (baked into a recorded graph); a mask that changes between steps must be
  a Tensor that the step copies new values into, like the data. Every mask becomes one float
  mask (0 or -inf) of shape (batch or 1, heads or 1, L, S) that the fused
  ``autograd.scaled_dot_product_attention`` adds to the scores; a causal mask alone is passed
  as its ``is_causal`` flag instead, so that the op skips the masked tiles.
"""
import math

import numpy as np

from .. import _state, autograd, tensor
from .._args import as_float, as_shape
from ..tensor import Tensor
from .base import Layer, graph_paused, settings
from ._util import CheckValueError, check_ndim, check_tensor, param, positive_int, shape_error
from .dense import Linear

__all__ = ["LayerNorm", "GELU", "MultiHeadAttention", "MultiheadAttention",
           "SinusoidalPositionalEmbedding", "LearnedPositionalEmbedding"]


def dense(lin, x):
    """A Linear layer applied to the last axis of x, whatever x's rank."""
    shape = tuple(x.shape)
    y = lin(autograd.reshape(x, (-1, shape[-1])))
    return autograd.reshape(y, shape[:-1] + (y.shape[-1],))


def constant(array, like):
    """A float32 Tensor holding ``array`` on ``like``'s device, made outside graph recording
    (a recorded step reads it as a constant)."""
    with graph_paused(like.device):
        return tensor.from_numpy(np.ascontiguousarray(array, dtype=np.float32), like.device)


class LayerNorm(Layer):
    """Normalises over the trailing ``normalized_shape`` axes to zero mean and unit variance,
    then scales and shifts per element (torch.nn.LayerNorm). ``normalized_shape=None`` takes the
    last axis's size from the first input. Parameters: ``scale`` (ones) and ``bias`` (zeros)."""

    def __init__(self, normalized_shape=None, eps=1e-5, elementwise_affine=True, bias=True):
        super(LayerNorm, self).__init__()
        self.normalized_shape = None if normalized_shape is None else \
            tuple(as_shape(normalized_shape, "normalized_shape", "LayerNorm"))
        self.eps = as_float(eps, "eps", "LayerNorm")
        self.elementwise_affine = bool(elementwise_affine)
        self.use_bias = bool(bias)

    def extra_repr(self):
        return settings(self.normalized_shape, eps=self.eps,
                        elementwise_affine=self.elementwise_affine)

    def _check(self, x):
        check_tensor(self, x)
        n = len(self.normalized_shape)
        if len(x.shape) < n or tuple(x.shape[-n:]) != self.normalized_shape:
            raise shape_error(self, "expected an input whose trailing axes are %s, got shape %s",
                              self.normalized_shape, tuple(x.shape))

    def initialize(self, x):
        if self.normalized_shape is None:
            check_tensor(self, x)
            if not x.shape:
                raise shape_error(self, "cannot normalise a scalar")
            self.normalized_shape = (x.shape[-1],)
        self._check(x)
        self.scale = self.bias = None
        if self.elementwise_affine:
            self.scale = param(self.normalized_shape, x, lambda t: t.set_value(1.0))
            if self.use_bias:
                self.bias = param(self.normalized_shape, x, lambda t: t.set_value(0.0))

    def forward(self, x):
        self._check(x)
        return autograd.layer_norm(x, self.normalized_shape, self.scale, self.bias, self.eps)


class GELU(Layer):
    """x * Phi(x), Phi the standard normal CDF (``approximate="none"``) or its tanh
    approximation (``"tanh"``), as torch.nn.GELU."""

    def __init__(self, approximate="none"):
        super(GELU, self).__init__()
        if approximate not in ("none", "tanh"):
            raise CheckValueError("GELU: approximate must be 'none' or 'tanh', got %r"
                                  % (approximate,))
        self.approximate = approximate

    def extra_repr(self):
        return settings(approximate=self.approximate)

    def forward(self, x):
        return autograd.gelu(x, approximate=self.approximate)


class ConstantCache(object):
    """A few constant tensors by (key, device), newest first. Devices are matched with ==: a
    tensor's ``device`` is a new Python wrapper at every access, so its id() is no key."""

    def __init__(self, size=8):
        self.entries, self.size = [], size

    def get(self, key, like, make):
        """The constant for ``key`` on ``like``'s device; ``make()`` gives its numpy values."""
        dev = like.device
        for k, d, t in self.entries:
            if k == key and d == dev:
                return t
        t = constant(make(), like)
        self.entries = [(key, dev, t)] + self.entries[:self.size - 1]
        return t


_CAUSAL = ConstantCache()


def causal_mask(L, S, like):
    """The float causal mask (0 where j <= i, -inf above the diagonal), cached per size."""
    return _CAUSAL.get((L, S), like, lambda: np.where(np.tril(np.ones((L, S), dtype=bool)),
                                                      0.0, -np.inf))


class MultiHeadAttention(Layer):
    """Multi-head attention (torch.nn.MultiheadAttention): the query, key and value are
    projected (``q_proj``, ``k_proj``, ``v_proj``), split into ``num_heads`` heads by a reshape,
    attended by one fused scaled-dot-product op over all heads, merged and projected
    (``out_proj``).

    ``forward(query, key=None, value=None, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns ``(output,
    weights)``; key and value default to the query (self-attention). Inputs are (L, N, E), or
    (N, L, E) with ``batch_first``. ``weights`` (N, L, S), or (N, heads, L, S) when not
    averaged, is None when ``need_weights=False``; only then does the fused op run (with
    weights the probabilities are formed explicitly, as torch does). ``is_causal=True`` masks
    the keys after each query (top-left aligned); unlike torch's hint it needs no attn_mask,
    and one given is combined with it. ``dropout`` drops attention probabilities in
    training. See the module note for the masks."""

    def __init__(self, embed_dim=None, num_heads=1, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False):
        super(MultiHeadAttention, self).__init__()
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiHeadAttention: add_bias_kv and add_zero_attn are "
                                      "not supported")
        num_heads = positive_int("MultiHeadAttention", "num_heads", num_heads)
        if embed_dim is not None:
            embed_dim = positive_int("MultiHeadAttention", "embed_dim", embed_dim)
        dropout = as_float(dropout, "dropout", "MultiHeadAttention")
        if not 0.0 <= dropout < 1.0:
            raise CheckValueError("MultiHeadAttention: dropout must be in [0, 1), got %r"
                                  % (dropout,))
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, float(dropout)
        self.kdim, self.vdim = kdim, vdim
        self.batch_first = bool(batch_first)
        self.bias = bool(bias)
        if embed_dim is not None:
            self._build(embed_dim)

    def _build(self, e):
        if e % self.num_heads:
            raise CheckValueError("MultiHeadAttention: embed_dim %d is not divisible by "
                                  "num_heads %d" % (e, self.num_heads))
        self.embed_dim, self.head_dim = e, e // self.num_heads
        proj = [Linear(d, e, bias=self.bias) if d is not None else Linear(e, bias=self.bias)
                for d in (e, self.kdim, self.vdim, e)]
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = proj

    def extra_repr(self):
        return settings(self.embed_dim, self.num_heads, dropout=self.dropout,
                        batch_first=self.batch_first)

    def initialize(self, query, *args, **kwargs):
        check_ndim(self, query, 3, "(batch, seq, embed)" if self.batch_first else
                   "(seq, batch, embed)", "query")
        if self.embed_dim is None:
            self._build(query.shape[-1])

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        key = query if key is None else key
        value = key if value is None else value
        q, k, v = (self._heads(self.q_proj, query, "query"), self._heads(self.k_proj, key, "key"),
                   self._heads(self.v_proj, value, "value"))
        n, _, L, _ = q.shape
        S = k.shape[2]
        if v.shape[:3] != k.shape[:3]:
            raise shape_error(self, "key and value must have the same batch and length, got "
                              "shapes %s and %s", tuple(key.shape), tuple(value.shape))
        mask = self._merged_mask(key_padding_mask, attn_mask, n, L, S, q)
        causal_flag = bool(is_causal) and mask is None and not need_weights
        if is_causal and not causal_flag:
            c = causal_mask(L, S, q)
            mask = c if mask is None else autograd.add(mask, c)
        p = self.dropout if _state.training else 0.0
        weights = None
        if need_weights:
            o, weights = self._explicit(q, k, v, mask, p, average_attn_weights)
        else:
            o = autograd.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p,
                                                      is_causal=causal_flag)
        o = autograd.reshape(autograd.transpose(o, (0, 2, 1, 3)), (n, L, self.embed_dim))
        out = dense(self.out_proj, o)
        if not self.batch_first:
            out = autograd.transpose(out, (1, 0, 2))
        return out, weights

    def _heads(self, proj, x, what):
        """x (L, N, E') or (N, L, E') projected and split: (N, heads, L, head_dim)."""
        check_ndim(self, x, 3, "(batch, seq, features)" if self.batch_first else
                   "(seq, batch, features)", what)
        if not self.batch_first:
            x = autograd.transpose(x, (1, 0, 2))
        n, L = x.shape[0], x.shape[1]
        y = autograd.reshape(dense(proj, x), (n, L, self.num_heads, self.head_dim))
        return autograd.transpose(y, (0, 2, 1, 3))

    def _explicit(self, q, k, v, mask, p, average):
        s = autograd.matmul(autograd.mul(q, 1.0 / math.sqrt(self.head_dim)),
                            autograd.transpose(k, (0, 1, 3, 2)))
        if mask is not None:
            s = autograd.add(s, mask)
        w = autograd.softmax(s, axis=-1)
        if p > 0.0:
            w = autograd.dropout(w, ratio=p)
        o = autograd.matmul(w, v)
        return o, autograd.reduce_mean(w, [1], 0) if average else w

    def _merged_mask(self, key_padding_mask, attn_mask, n, L, S, like):
        """The additive float mask of shape (n or 1, heads or 1, L, S), or None."""
        kpm = self._additive(key_padding_mask, "key_padding_mask", like)
        am = self._additive(attn_mask, "attn_mask", like)
        if kpm is not None:
            if tuple(kpm.shape) != (n, S):
                raise shape_error(self, "key_padding_mask must have shape (batch, S) = %s, "
                                  "got %s", (n, S), tuple(kpm.shape))
            kpm = autograd.reshape(kpm, (n, 1, 1, S))
        if am is not None:
            if tuple(am.shape) == (L, S):
                am = autograd.reshape(am, (1, 1, L, S))
            elif tuple(am.shape) == (n * self.num_heads, L, S):
                am = autograd.reshape(am, (n, self.num_heads, L, S))
            else:
                raise shape_error(self, "attn_mask must have shape (L, S) = %s or (batch * "
                                  "heads, L, S) = %s, got %s", (L, S),
                                  (n * self.num_heads, L, S), tuple(am.shape))
        if kpm is None or am is None:
            return kpm if am is None else am
        return autograd.add(kpm, am)

    def _additive(self, m, what, like):
        """A mask as a float Tensor added to the scores: -inf where a boolean mask is true."""
        if m is None:
            return None
        if isinstance(m, np.ndarray):
            if m.dtype == bool:
                m = np.where(m, -np.inf, 0.0)
            return constant(m, like)
        if not isinstance(m, Tensor):
            raise TypeError("%s: %s must be a Tensor or a numpy array, got %s"
                            % (self._display_name(), what, type(m).__name__))
        self.device_check(like, m)
        if m.dtype == tensor.int32:  # 0 where m is 0, -inf elsewhere
            return autograd.masked_fill(autograd.cast(m, tensor.float32), m, -np.inf)
        return m


MultiheadAttention = MultiHeadAttention  # torch.nn's spelling


class _Positional(Layer):
    """Adds a (max_len, d_model) table's first L rows to x: (N, L, D) with ``batch_first``,
    else (L, N, D)."""

    def __init__(self, max_len, d_model, batch_first):
        super(_Positional, self).__init__()
        name = type(self).__name__
        if d_model is not None:
            d_model = positive_int(name, "d_model", d_model)
        self.max_len = positive_int(name, "max_len", max_len)
        self.d_model, self.batch_first = d_model, bool(batch_first)

    def extra_repr(self):
        return settings(self.max_len, self.d_model, batch_first=self.batch_first)

    def _length(self, x):
        check_ndim(self, x, 3, "(batch, seq, d_model)" if self.batch_first else
                   "(seq, batch, d_model)")
        if self.d_model is None:
            self.d_model = x.shape[-1]
        L = x.shape[1] if self.batch_first else x.shape[0]
        if L > self.max_len or x.shape[-1] != self.d_model:
            raise shape_error(self, "expected at most %d positions of %d features, got shape "
                              "%s", self.max_len, self.d_model, tuple(x.shape))
        return L

    def _add(self, x, rows):
        if not self.batch_first:
            rows = autograd.reshape(rows, (rows.shape[0], 1, self.d_model))
        return autograd.add(x, rows)


class SinusoidalPositionalEmbedding(_Positional):
    """x + PE[:L], PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))
    ("Attention Is All You Need"); a constant, no parameter. ``d_model`` None: x's last axis."""

    def __init__(self, d_model=None, max_len=5000, batch_first=False):
        super(SinusoidalPositionalEmbedding, self).__init__(max_len, d_model, batch_first)
        self._rows = ConstantCache(2)

    @staticmethod
    def table(length, d_model):
        """The (length, d_model) float32 table as a numpy array."""
        pos = np.arange(length, dtype=np.float64)[:, None]
        freq = np.exp(-math.log(10000.0) * np.arange(0, d_model, 2) / d_model)
        pe = np.zeros((length, d_model))
        pe[:, 0::2] = np.sin(pos * freq)
        pe[:, 1::2] = np.cos(pos * freq)[:, :d_model // 2]
        return pe.astype(np.float32)

    def forward(self, x):
        L = self._length(x)
        return self._add(x, self._rows.get(L, x, lambda: self.table(L, self.d_model)))


class LearnedPositionalEmbedding(_Positional):
    """x + W[:L] with a trainable table W (max_len, d_model) drawn from N(0, init_std^2)
    (0.02, GPT-2's). ``d_model`` None: x's last axis."""

    def __init__(self, max_len, d_model=None, batch_first=False, init_std=0.02):
        super(LearnedPositionalEmbedding, self).__init__(max_len, d_model, batch_first)
        self.init_std = as_float(init_std, "init_std", "LearnedPositionalEmbedding")

    def initialize(self, x):
        self._length(x)
        self.W = param((self.max_len, self.d_model), x,
                       lambda t: t.gaussian(0.0, self.init_std))

    def forward(self, x):
        L = self._length(x)
        rows = self.W if L == self.max_len else autograd.slice(self.W, [0], [L], [0])
        return self._add(x, rows)
