"""The transformer layers against torch.nn's modules of the same names: the weights are copied
into the torch module, and the outputs and every gradient (each parameter's and the inputs')
must agree, for pre/post-norm, masks, causal attention, cross attention and both layouts.
Also: positional embeddings, parameter names, set_params and checkpoints, bad input."""
import os
import sys

import numpy as np
import pytest

from singa import autograd, layer, opt, tensor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

torch = pytest.importorskip("torch", reason="PyTorch is the reference of these tests")

E, H = 16, 4  # small sizes keep the file at a few seconds


def _t(a, grad=True):
    t = tensor.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
    t.requires_grad = t.stores_grad = grad
    return t


# ---- copying singa's parameters to torch's layout and back ---------------------------------
def _torch_layout(tname, values):
    """The value of torch parameter ``tname`` from singa's {name: array} ``values`` (parameters
    or gradients): torch packs q, k, v into in_proj_weight and stores Linear weights (out, in)."""
    prefix, leaf = tname.rsplit(".", 1) if "." in tname else ("", tname)
    join = (lambda s: prefix + "." + s) if prefix else (lambda s: s)
    qkv = ("q_proj", "k_proj", "v_proj")
    if leaf == "in_proj_weight":
        return np.concatenate([values[join(p + ".W")].T for p in qkv])
    if leaf == "in_proj_bias":
        return np.concatenate([values[join(p + ".b")] for p in qkv])
    if leaf in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
        return values[join(leaf[:6] + ".W")].T
    if join("W") in values:  # a Linear
        return values[join("W")].T if leaf == "weight" else values[join("b")]
    return values[join("scale")] if leaf == "weight" else values[join("bias")]


def copy_to_torch(slayer, tmod):
    values = {k: tensor.to_numpy(v) for k, v in slayer.get_params().items()}
    with torch.no_grad():
        for name, p in tmod.named_parameters():
            p.copy_(torch.from_numpy(_torch_layout(name, values)))


def run_both(slayer, tmod, inputs, call_s, call_t, rng, out_index=None):
    """Runs singa (call_s(*Tensors)) once to create its parameters, copies them into torch, runs
    both with the same inputs and output weights, and compares outputs and all gradients."""
    autograd.training = True
    xs = [_t(a) for a in inputs]
    ys = call_s(*xs)
    ys = ys[out_index] if out_index is not None else ys
    copy_to_torch(slayer, tmod)
    txs = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in inputs]
    tys = call_t(*txs)
    tys = tys[out_index] if out_index is not None else tys
    np.testing.assert_allclose(tensor.to_numpy(ys), tys.detach().numpy(), rtol=1e-4, atol=1e-5)
    dy = rng.standard_normal(tuple(ys.shape)).astype(np.float32)
    loss = autograd.reduce_sum(autograd.mul(ys, _t(dy, grad=False)))
    grads = autograd.gradients(loss)
    (tys * torch.from_numpy(dy)).sum().backward()
    params = slayer.get_params()
    sg = {k: tensor.to_numpy(grads[id(v)]) for k, v in params.items()}
    for name, p in tmod.named_parameters():
        np.testing.assert_allclose(_torch_layout(name, sg), p.grad.numpy(), rtol=1e-3,
                                   atol=1e-4, err_msg=name)
    for x, tx in zip(xs, txs):
        np.testing.assert_allclose(tensor.to_numpy(grads[id(x)]), tx.grad.numpy(), rtol=1e-3,
                                   atol=1e-4)
    return ys, tys


def _causal_bool(L, S=None):
    S = L if S is None else S
    return np.triu(np.ones((L, S), dtype=bool), 1)  # torch's convention: True = masked


# ---- LayerNorm, GELU -------------------------------------------------------------------------
@pytest.mark.parametrize("shape,affine", [((8,), True), ((3, 8), True), ((8,), False)])
def test_layer_norm_matches_torch(shape, affine, rng):
    s = layer.LayerNorm(shape, eps=1e-5, elementwise_affine=affine)
    t = torch.nn.LayerNorm(shape, eps=1e-5, elementwise_affine=affine)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    if affine:  # non-trivial scale and bias
        s(_t(x))
        s.set_params({"scale": rng.standard_normal(shape).astype(np.float32),
                      "bias": rng.standard_normal(shape).astype(np.float32)})
    run_both(s, t, [x], s, t, rng)


def test_layer_norm_takes_its_size_from_the_first_input(rng):
    ln = layer.LayerNorm()
    ln(_t(rng.standard_normal((4, 6))))
    assert {k: tuple(v.shape) for k, v in ln.get_params().items()} == {"scale": (6,),
                                                                         "bias": (6,)}
    with pytest.raises(ValueError, match="trailing axes"):
        ln(_t(rng.standard_normal((4, 5))))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch(approximate, rng):
    s, t = layer.GELU(approximate), torch.nn.GELU(approximate=approximate)
    run_both(s, t, [rng.standard_normal((3, 7)) * 2], s, t, rng)
    with pytest.raises(ValueError):
        layer.GELU("fast")


# ---- MultiHeadAttention ----------------------------------------------------------------------
def _mha_pair(batch_first, kdim=None, vdim=None, bias=True):
    s = layer.MultiHeadAttention(E, H, batch_first=batch_first, kdim=kdim, vdim=vdim, bias=bias)
    t = torch.nn.MultiheadAttention(E, H, batch_first=batch_first, kdim=kdim, vdim=vdim,
                                    bias=bias)
    return s, t


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "fused"])
def test_self_attention_matches_torch(batch_first, need_weights, rng):
    s, t = _mha_pair(batch_first)
    x = rng.standard_normal((2, 5, E) if batch_first else (5, 2, E))
    ys, tys = run_both(s, t, [x], lambda a: s(a, a, a, need_weights=need_weights),
                       lambda a: t(a, a, a, need_weights=need_weights), rng, out_index=0)
    assert tuple(ys.shape) == tuple(x.shape)
    if need_weights:  # the averaged probabilities, (N, L, S)
        w = s(_t(x), need_weights=True)[1]
        tw = t(*(torch.tensor(x, dtype=torch.float32),) * 3)[1]
        np.testing.assert_allclose(tensor.to_numpy(w), tw.detach().numpy(), rtol=1e-4,
                                   atol=1e-6)
    else:
        assert s(_t(x), need_weights=False)[1] is None


def test_per_head_weights_match_torch(rng):
    s, t = _mha_pair(True)
    x = rng.standard_normal((2, 4, E)).astype(np.float32)
    w = s(_t(x), average_attn_weights=False)[1]
    copy_to_torch(s, t)
    tx = torch.from_numpy(x)
    tw = t(tx, tx, tx, average_attn_weights=False)[1]
    assert tuple(w.shape) == (2, H, 4, 4)
    np.testing.assert_allclose(tensor.to_numpy(w), tw.detach().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kdim,vdim,bias", [(None, None, True), (12, 10, True),
                                             (None, None, False)],
                         ids=["same-dims", "kdim-vdim", "no-bias"])
def test_cross_attention_matches_torch(kdim, vdim, bias, rng):
    s, t = _mha_pair(True, kdim, vdim, bias)
    q = rng.standard_normal((2, 3, E))
    k = rng.standard_normal((2, 6, kdim or E))
    v = rng.standard_normal((2, 6, vdim or E))
    run_both(s, t, [q, k, v], lambda a, b, c: s(a, b, c, need_weights=False),
             lambda a, b, c: t(a, b, c, need_weights=False), rng, out_index=0)


def _masks(kind, n, L, S, rng):
    """(singa's masks, torch's masks) as dicts of keyword arguments."""
    pad = np.zeros((n, S), dtype=bool)
    pad[0, -2:] = True  # the first sample's last two keys are padding
    if kind == "padding-bool":
        return {"key_padding_mask": pad}, {"key_padding_mask": torch.from_numpy(pad)}
    if kind == "padding-int-tensor":
        return ({"key_padding_mask": tensor.from_numpy(pad.astype(np.int32))},
                {"key_padding_mask": torch.from_numpy(pad)})
    if kind == "attn-bool":
        m = rng.random((L, S)) < 0.3
        m[:, 0] = False  # no row fully masked
        return {"attn_mask": m}, {"attn_mask": torch.from_numpy(m)}
    if kind == "attn-float-3d":
        m = rng.standard_normal((n * H, L, S)).astype(np.float32)
        return {"attn_mask": tensor.from_numpy(m)}, {"attn_mask": torch.from_numpy(m)}
    if kind == "causal":
        c = _causal_bool(L, S)
        return {"is_causal": True}, {"attn_mask": torch.from_numpy(c), "is_causal": True}
    if kind == "causal-and-padding":
        c = _causal_bool(L, S)
        return ({"is_causal": True, "key_padding_mask": pad},
                {"attn_mask": torch.from_numpy(c), "key_padding_mask": torch.from_numpy(pad)})
    raise AssertionError(kind)


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "fused"])
@pytest.mark.parametrize("kind", ["padding-bool", "padding-int-tensor", "attn-bool",
                                  "attn-float-3d", "causal", "causal-and-padding"])
def test_masked_attention_matches_torch(kind, need_weights, rng):
    s, t = _mha_pair(True)
    n, L = 2, 5
    sm, tm = _masks(kind, n, L, L, rng)
    run_both(s, t, [rng.standard_normal((n, L, E))],
             lambda a: s(a, need_weights=need_weights, **sm),
             lambda a: t(a, a, a, need_weights=need_weights, **tm), rng, out_index=0)


def test_attention_rejects_bad_input(rng):
    s = layer.MultiHeadAttention(E, H, batch_first=True)
    x = _t(rng.standard_normal((2, 5, E)))
    with pytest.raises(ValueError, match="key_padding_mask"):
        s(x, key_padding_mask=np.zeros((5, 2), dtype=bool))
    with pytest.raises(ValueError, match="attn_mask"):
        s(x, attn_mask=np.zeros((4, 4), dtype=bool))
    with pytest.raises(ValueError, match="query"):
        s(_t(rng.standard_normal((5, E))))
    with pytest.raises(ValueError, match="divisible"):
        layer.MultiHeadAttention(10, 4)


def test_attention_infers_embed_dim(rng):
    s = layer.MultiHeadAttention(num_heads=2, batch_first=True)
    y, _ = s(_t(rng.standard_normal((2, 3, 6))))
    assert tuple(y.shape) == (2, 3, 6)
    assert tuple(s.get_params()["q_proj.W"].shape) == (6, 6)


def test_attention_dropout_acts_only_in_training(rng):
    s = layer.MultiHeadAttention(E, H, dropout=0.5, batch_first=True)
    x = _t(rng.standard_normal((2, 6, E)))
    autograd.training = False
    a, b = (tensor.to_numpy(s(x, need_weights=False)[0]) for _ in range(2))
    np.testing.assert_array_equal(a, b)
    autograd.training = True
    c, d = (tensor.to_numpy(s(x, need_weights=False)[0]) for _ in range(2))
    assert not np.allclose(c, a) and not np.allclose(c, d)


# ---- encoder and decoder layers, stacks ------------------------------------------------------
ACTS = ["relu", "gelu"]


@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
def test_encoder_layer_matches_torch(batch_first, norm_first, activation, rng):
    kw = dict(dim_feedforward=24, dropout=0.0, activation=activation, batch_first=batch_first,
              norm_first=norm_first)
    s = layer.TransformerEncoderLayer(E, H, **kw)
    t = torch.nn.TransformerEncoderLayer(E, H, **kw)
    n, L = 2, 5
    pad = np.zeros((n, L), dtype=bool)
    pad[1, -1] = True
    x = rng.standard_normal((n, L, E) if batch_first else (L, n, E))
    run_both(s, t, [x], lambda a: s(a, src_key_padding_mask=pad, is_causal=True),
             lambda a: t(a, src_mask=torch.from_numpy(_causal_bool(L)),
                         src_key_padding_mask=torch.from_numpy(pad)), rng)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
def test_decoder_layer_matches_torch(batch_first, norm_first, rng):
    kw = dict(dim_feedforward=24, dropout=0.0, activation="gelu", batch_first=batch_first,
              norm_first=norm_first)
    s = layer.TransformerDecoderLayer(E, H, **kw)
    t = torch.nn.TransformerDecoderLayer(E, H, **kw)
    n, L, S = 2, 4, 6
    mpad = np.zeros((n, S), dtype=bool)
    mpad[0, -3:] = True
    tgt = rng.standard_normal((n, L, E) if batch_first else (L, n, E))
    mem = rng.standard_normal((n, S, E) if batch_first else (S, n, E))
    run_both(s, t, [tgt, mem],
             lambda a, m: s(a, m, memory_key_padding_mask=mpad, tgt_is_causal=True),
             lambda a, m: t(a, m, tgt_mask=torch.from_numpy(_causal_bool(L)),
                            memory_key_padding_mask=torch.from_numpy(mpad)), rng)


def test_encoder_stack_matches_torch(rng):
    kw = dict(dim_feedforward=24, dropout=0.0, batch_first=True, norm_first=True)
    s = layer.TransformerEncoder(layer.TransformerEncoderLayer(E, H, **kw), 2, layer.LayerNorm(E))
    t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, **kw), 2,
                                    torch.nn.LayerNorm(E), enable_nested_tensor=False)
    run_both(s, t, [rng.standard_normal((2, 5, E))], lambda a: s(a, is_causal=True),
             lambda a: t(a, mask=torch.from_numpy(_causal_bool(5)), is_causal=True), rng)
    assert "layers.1.self_attn.out_proj.W" in s.get_params()
    assert s.get_params()["layers.0.linear1.W"] is not s.get_params()["layers.1.linear1.W"]


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
def test_transformer_matches_torch(batch_first, rng):
    kw = dict(d_model=E, nhead=H, num_encoder_layers=2, num_decoder_layers=1,
              dim_feedforward=24, dropout=0.0, batch_first=batch_first)
    s, t = layer.Transformer(**kw), torch.nn.Transformer(**kw)
    src = rng.standard_normal((2, 6, E) if batch_first else (6, 2, E))
    tgt = rng.standard_normal((2, 4, E) if batch_first else (4, 2, E))
    run_both(s, t, [src, tgt], lambda a, b: s(a, b, tgt_is_causal=True),
             lambda a, b: t(a, b, tgt_mask=t.generate_square_subsequent_mask(4)), rng)
    np.testing.assert_array_equal(layer.Transformer.generate_square_subsequent_mask(4),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())


def test_d_model_is_taken_from_the_first_input(rng):
    enc = layer.TransformerEncoderLayer(nhead=2, dim_feedforward=8, dropout=0.0,
                                        batch_first=True)
    y = enc(_t(rng.standard_normal((2, 3, 6))))
    assert tuple(y.shape) == (2, 3, 6)
    shapes = {k: tuple(v.shape) for k, v in enc.get_params().items()}
    assert shapes["linear1.W"] == (6, 8) and shapes["linear2.W"] == (8, 6)
    assert shapes["norm2.scale"] == (6,)


def test_stack_needs_a_fresh_prototype(rng):
    proto = layer.TransformerEncoderLayer(E, H, 8, batch_first=True)
    proto(_t(rng.standard_normal((1, 2, E))))
    with pytest.raises(ValueError, match="not been called"):
        layer.TransformerEncoder(proto, 2)


# ---- positional embeddings -------------------------------------------------------------------
def test_sinusoidal_positional_embedding(rng):
    pe = layer.SinusoidalPositionalEmbedding(max_len=50, batch_first=True)
    x = rng.standard_normal((2, 7, 6)).astype(np.float32)
    y = tensor.to_numpy(pe(_t(x)))
    pos, i = np.arange(7)[:, None], np.arange(3)[None, :]
    ang = pos / np.power(10000.0, 2 * i / 6)
    table = np.stack([np.sin(ang), np.cos(ang)], axis=-1).reshape(7, 6)
    np.testing.assert_allclose(y, x + table, rtol=1e-5, atol=1e-6)
    assert pe.get_params() == {}
    pe(_t(x))
    assert len(pe._rows.entries) == 1  # the constant rows are made once per length and device
    seq_first = layer.SinusoidalPositionalEmbedding(max_len=50)
    np.testing.assert_allclose(tensor.to_numpy(seq_first(_t(x.transpose(1, 0, 2)))),
                               (x + table).transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="at most 50"):
        pe(_t(np.zeros((1, 51, 6))))


@pytest.mark.parametrize("batch_first", [True, False])
def test_learned_positional_embedding(batch_first, rng):
    pe = layer.LearnedPositionalEmbedding(10, batch_first=batch_first)
    x = rng.standard_normal((3, 4, 8) if batch_first else (4, 3, 8)).astype(np.float32)
    autograd.training = True
    tx = _t(x)
    y = pe(tx)
    W = tensor.to_numpy(pe.W)
    rows = W[:4][None] if batch_first else W[:4][:, None]
    np.testing.assert_allclose(tensor.to_numpy(y), x + rows, rtol=1e-6)
    grads = autograd.gradients(autograd.reduce_sum(y))
    expected = np.zeros_like(W)
    expected[:4] = 3.0  # every row used once per sample
    np.testing.assert_allclose(tensor.to_numpy(grads[id(pe.W)]), expected)


# ---- parameters, checkpoints -----------------------------------------------------------------
def TinyGPT():
    import gpt  # examples/gpt.py
    return gpt.GPT(11, 8, d_model=E, nhead=H, num_layers=2)


def test_set_params_and_checkpoint_round_trip(tmp_path, rng):
    idx = tensor.from_numpy(rng.integers(0, 11, (2, 8)).astype(np.int32))
    a, b = TinyGPT(), TinyGPT()
    for m in (a, b):
        m.set_optimizer(opt.Adam(lr=0.01))
        m.compile([idx], is_train=False, use_graph=False)
    assert "blocks.layers.1.self_attn.k_proj.W" in a.get_params()
    b.set_params({k: tensor.to_numpy(v) for k, v in a.get_params().items()})
    np.testing.assert_allclose(tensor.to_numpy(b(idx)), tensor.to_numpy(a(idx)), rtol=1e-6)
    path = str(tmp_path / "gpt.zip")
    a.save_states(path)
    c = TinyGPT()
    c.set_optimizer(opt.Adam(lr=0.01))
    c.compile([idx], is_train=False, use_graph=False)
    c.load_states(path)
    np.testing.assert_allclose(tensor.to_numpy(c(idx)), tensor.to_numpy(a(idx)), rtol=1e-6)
    with pytest.raises(ValueError):
        b.set_params({"blocks.layers.0.norm1.scale": np.ones(3, np.float32)})
