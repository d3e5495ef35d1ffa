"""Transformer blocks and stacks (torch.nn's TransformerEncoderLayer, ..., Transformer).

    enc = layer.TransformerEncoder(
        layer.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True,
                                      norm_first=True, activation="gelu"), num_layers=2)
    h = enc(x)                                     # x (batch, seq, 64)
    h = enc(x, is_causal=True)                     # a decoder-only (GPT) stack
    model = layer.Transformer(64, 4, 2, 2, 128, batch_first=True)
    y = model(src, tgt, tgt_is_causal=True)

Sub-layers carry torch's names (``self_attn``, ``linear1``, ``norm1``, ``layers.0``...), so a
parameter is named like ``encoder.layers.0.self_attn.q_proj.W``. Masks are as in
MultiHeadAttention (singa/layers/attention.py); ``is_causal`` applies the causal mask itself.
``d_model`` may be None: the size of the input's last axis.
"""
import copy

import numpy as np

from .. import autograd
from .._args import as_int, type_error
from .attention import LayerNorm, MultiHeadAttention, dense
from .base import Layer, settings
from ._util import CheckValueError, check_ndim
from .dense import Linear
from .simple import Dropout

__all__ = ["TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerDecoder", "Transformer"]


def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return autograd.relu
    if activation == "gelu":
        return autograd.gelu
    raise CheckValueError("activation must be 'relu', 'gelu' or a callable, got %r"
                          % (activation,))


class _Block(Layer):
    """What the encoder and decoder layers share (torch's constructor arguments): the
    self-attention, the feed-forward part, ``norms`` LayerNorms with their dropouts."""

    norms = 2

    def __init__(self, d_model=None, nhead=1, dim_feedforward=2048, dropout=0.1,
                 activation="relu", layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True):
        super(_Block, self).__init__()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, bool(batch_first)
        self.norm_first = bool(norm_first)
        self.activation_name = activation if isinstance(activation, str) else \
            getattr(activation, "__name__", "custom")
        self.activation = _activation(activation)
        self.self_attn = self._attention(dropout, bias)
        self.linear1 = Linear(dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias) if d_model else None
        for i in range(1, self.norms + 1):
            setattr(self, "norm%d" % i, LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
            setattr(self, "dropout%d" % i, Dropout(dropout))
        self._bias, self._dropout_ratio = bias, dropout

    def _attention(self, dropout, bias):
        return MultiHeadAttention(self.d_model, self.nhead, dropout=dropout, bias=bias,
                                  batch_first=self.batch_first)

    def extra_repr(self):
        return settings(self.d_model, self.nhead, activation=self.activation_name,
                        batch_first=self.batch_first, norm_first=self.norm_first)

    def initialize(self, x, *args, **kwargs):
        check_ndim(self, x, 3, "(batch, seq, d_model)" if self.batch_first else
                   "(seq, batch, d_model)")
        if self.linear2 is None:
            self.d_model = x.shape[-1]
            self.linear2 = Linear(self.d_model, bias=self._bias)

    def _sa_block(self, x, mask, key_padding_mask, is_causal):
        y = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(y)

    def _ff_block(self, x, out_dropout):
        h = self.dropout(self.activation(dense(self.linear1, x)))
        return out_dropout(dense(self.linear2, h))

    def _residual(self, x, norm, block, *args):
        """x + block(norm(x)) before normalising (norm_first), else norm(x + block(x))."""
        if self.norm_first:
            return autograd.add(x, block(norm(x), *args))
        return norm(autograd.add(x, block(x, *args)))


class TransformerEncoderLayer(_Block):
    """Self-attention and a feed-forward network, each in a residual branch with a LayerNorm
    after it (post-norm) or, with ``norm_first``, before it (torch.nn.TransformerEncoderLayer).
    ``TransformerEncoderLayer(d_model=None, nhead=1, dim_feedforward=2048, dropout=0.1,
    activation="relu", layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True)``;
    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``."""

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = self._residual(src, self.norm1, self._sa_block, src_mask, src_key_padding_mask,
                           is_causal)
        return self._residual(x, self.norm2, self._ff_block, self.dropout2)


class TransformerDecoderLayer(_Block):
    """Self-attention, attention over the encoder's output (``multihead_attn``) and a
    feed-forward network, each residual with a LayerNorm after (or, ``norm_first``, before)
    it (torch.nn.TransformerDecoderLayer); the constructor's arguments are the encoder
    layer's. ``forward(tgt, memory, tgt_mask=None,
    memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=False, memory_is_causal=False)``."""

    norms = 3

    def __init__(self, *args, **kwargs):
        super(TransformerDecoderLayer, self).__init__(*args, **kwargs)
        self.multihead_attn = self._attention(self._dropout_ratio, self._bias)

    def _mha_block(self, x, memory, mask, key_padding_mask, is_causal):
        y = self.multihead_attn(x, memory, memory, attn_mask=mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)[0]
        return self.dropout2(y)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = self._residual(tgt, self.norm1, self._sa_block, tgt_mask, tgt_key_padding_mask,
                           tgt_is_causal)
        x = self._residual(x, self.norm2, self._mha_block, memory, memory_mask,
                           memory_key_padding_mask, memory_is_causal)
        return self._residual(x, self.norm3, self._ff_block, self.dropout3)


def _clones(prototype, num_layers, what):
    """``num_layers`` independent copies of a layer that has not run yet (torch deep-copies
    its prototype too; copying created parameters is not supported)."""
    if not isinstance(prototype, Layer):
        raise TypeError("%s: expected a layer to copy, got %s" % (what, type(prototype).__name__))
    if prototype.__dict__.get("_initialized") or prototype.get_params():
        raise CheckValueError("%s: pass a layer that has not been called yet (its copies get "
                              "parameters of their own at their first call)" % what)
    memo = {id(prototype.__dict__.get("_parent")): None}
    n = as_int(num_layers, "num_layers", what)
    return [copy.deepcopy(prototype, dict(memo)) for _ in range(n)]


class _Container(Layer):
    """A layer whose sub-layers create their parameters themselves at their first call."""

    def initialize(self, *args, **kwargs):
        pass


class _Stack(_Container):
    def __init__(self, prototype, num_layers, norm):
        super(_Stack, self).__init__()
        self.layers = _clones(prototype, num_layers, type(self).__name__)
        self.num_layers = int(num_layers)
        self.norm = norm

    def extra_repr(self):
        return settings(num_layers=self.num_layers)


class TransformerEncoder(_Stack):
    """``num_layers`` copies of ``encoder_layer`` (named ``layers.0``...), then ``norm`` if
    given (torch.nn.TransformerEncoder). ``forward(src, mask=None, src_key_padding_mask=None,
    is_causal=False)``."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super(TransformerEncoder, self).__init__(encoder_layer, num_layers, norm)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        for lay in self.layers:
            x = lay(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                    is_causal=is_causal)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(_Stack):
    """``num_layers`` copies of ``decoder_layer`` (``layers.0``...), then ``norm`` if given
    (torch.nn.TransformerDecoder). ``forward(tgt, memory, tgt_mask=None, memory_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, tgt_is_causal=False,
    memory_is_causal=False)``."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super(TransformerDecoder, self).__init__(decoder_layer, num_layers, norm)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        for lay in self.layers:
            x = lay(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                    tgt_key_padding_mask=tgt_key_padding_mask,
                    memory_key_padding_mask=memory_key_padding_mask,
                    tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(_Container):
    """An encoder-decoder transformer (torch.nn.Transformer): ``encoder`` (num_encoder_layers
    blocks and a final LayerNorm) and ``decoder`` (likewise). ``forward(src, tgt,
    src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=False,
    tgt_is_causal=False, memory_is_causal=False)``."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True):
        super(Transformer, self).__init__()
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                  norm_first=norm_first, bias=bias)
        for what, v in (("custom_encoder", custom_encoder), ("custom_decoder", custom_decoder)):
            if v is not None and not isinstance(v, Layer):
                raise type_error("Transformer", what, "Layer or None", v)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **kw), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **kw), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, bool(batch_first)

    def extra_repr(self):
        return settings(self.d_model, self.nhead, batch_first=self.batch_first)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=False, tgt_is_causal=False,
                memory_is_causal=False):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz):
        """The (sz, sz) float causal mask as a numpy array: 0 on and below the diagonal, -inf
        above (torch.nn.Transformer's helper)."""
        return np.triu(np.full((sz, sz), -np.inf, dtype=np.float32), 1)
