"""autograd.scaled_dot_product_attention, the fused flash-style op: forward and gradients against
a naive numpy reference (finite differences) and against PyTorch's sdpa (masks, causal, odd
lengths, broadcasting, scale), dropout regenerated identically in backward (eager and in graph
replays), graph == eager, errors, NaN, and memory linear in the sequence length."""
import numpy as np
import pytest

from gradcheck import check_graph, check_op, numeric_grads
from singa import autograd, device, tensor
from singa import singa_wrap as sw

N = tensor.to_numpy


def ref_sdpa(q, k, v, mask=None, causal=False, scale=None, keep=None, p=0.0):
    """The unfused definition in float64: softmax(q k^T scale + mask) (dropped) v."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    L, S = s.shape[-2:]
    if causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    den = np.sum(e, axis=-1, keepdims=True)
    prob = np.where(den > 0, e / np.where(den > 0, den, 1.0), 0.0)
    if keep is not None:
        prob = prob * keep / (1.0 - p)
    return prob @ v


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def sdpa(mask=None, **kw):
    return lambda ag, q, k, v: ag.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)


# ---- numpy reference, finite differences (tiny shapes: every element is differenced) ----

CASES = {
    "plain": dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 3)),
    "causal L<S": dict(q=(1, 3, 4), k=(1, 5, 4), v=(1, 5, 2), causal=True),
    "causal L>S": dict(q=(1, 6, 3), k=(1, 4, 3), v=(1, 4, 2), causal=True),
    "bool mask": dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 3), mask="bool"),
    "float mask": dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 3), mask="float"),
    "scale": dict(q=(3, 4), k=(5, 4), v=(5, 2), scale=0.7),
    "broadcast heads": dict(q=(2, 2, 3, 4), k=(2, 1, 4, 4), v=(1, 2, 4, 3)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_the_numpy_reference_and_finite_differences(case, rng):
    c = CASES[case]
    q, k, v = rand(rng, *c["q"]), rand(rng, *c["k"]), rand(rng, *c["v"])
    L, S = c["q"][-2], c["k"][-2]
    mask = None
    if c.get("mask") == "bool":
        mask = rng.random((L, S)) > 0.4
        mask[:, 0] = True  # no fully masked row here (its gradient is tested below)
    elif c.get("mask") == "float":
        mask = rand(rng, c["q"][0], 1, S)  # per batch, broadcast over the queries
    kw = dict(is_causal=c.get("causal", False), scale=c.get("scale"))
    check_op(sdpa(mask, **kw),
             lambda q, k, v: ref_sdpa(q, k, v, mask, kw["is_causal"], kw["scale"]), [q, k, v])


def test_a_fully_masked_row_gives_zeros_and_no_gradient(rng):
    q, k, v = rand(rng, 4, 3), rand(rng, 5, 3), rand(rng, 5, 2)
    mask = rng.random((4, 5)) > 0.3
    mask[2] = False
    mask[[0, 1, 3], 0] = True
    check_op(sdpa(mask), lambda q, k, v: ref_sdpa(q, k, v, mask), [q, k, v])
    autograd.training = True
    tq = tensor.from_numpy(q)
    tq.requires_grad = tq.stores_grad = True
    y = autograd.scaled_dot_product_attention(tq, tensor.from_numpy(k), tensor.from_numpy(v),
                                              attn_mask=mask)
    assert np.all(N(y)[2] == 0)
    (_, dq), = autograd.backward(y, tensor.from_numpy(np.ones((4, 2), np.float32)))
    assert np.all(N(dq)[2] == 0) and np.any(N(dq)[0] != 0)


def test_a_fully_masked_row_passes_the_finite_check(rng):
    # the saved log-sum-exp of such a row is finite: a device checking every output for NaN/Inf
    # must not stop at a padding row
    dev = sw.create_cpu_device()
    dev.SetCheckFinite(True)
    mask = np.ones((4, 5), bool)
    mask[1] = False
    autograd.training = True
    ts = [tensor.from_numpy(rand(rng, *s), dev) for s in ((4, 3), (5, 3), (5, 2))]
    for t in ts:
        t.requires_grad = t.stores_grad = True
    y = autograd.scaled_dot_product_attention(*ts, attn_mask=mask)
    g = autograd.gradients(y, tensor.from_numpy(np.ones((4, 2), np.float32), dev))
    assert np.all(N(g[ts[0]])[1] == 0)


@pytest.mark.parametrize("L,S", [(0, 5), (3, 0)])
def test_no_queries_or_no_keys_give_zeros(L, S):
    autograd.training = True
    ts = [tensor.from_numpy(np.ones(s, np.float32)) for s in ((2, L, 4), (2, S, 4), (2, S, 3))]
    for t in ts:
        t.requires_grad = t.stores_grad = True
    y = autograd.scaled_dot_product_attention(*ts)
    assert N(y).shape == (2, L, 3) and not N(y).any()
    g = autograd.gradients(y, tensor.from_numpy(np.ones((2, L, 3), np.float32)))
    for t in ts:
        assert N(g[t]).shape == t.shape and not N(g[t]).any()


def test_int32_tensor_masks_keep_and_float_tensor_masks_add(rng):
    q, k, v = rand(rng, 2, 3, 4), rand(rng, 2, 6, 4), rand(rng, 2, 6, 4)
    keep = rng.random((3, 6)) > 0.5
    keep[:, 0] = True
    add = rand(rng, 3, 6)
    tq, tk, tv = (tensor.from_numpy(a) for a in (q, k, v))
    y = autograd.scaled_dot_product_attention(tq, tk, tv, tensor.from_numpy(keep.astype(np.int32)))
    np.testing.assert_allclose(N(y), ref_sdpa(q, k, v, keep), rtol=1e-5, atol=1e-6)
    y = autograd.scaled_dot_product_attention(tq, tk, tv, tensor.from_numpy(add))
    np.testing.assert_allclose(N(y), ref_sdpa(q, k, v, add), rtol=1e-5, atol=1e-6)


def test_tiles_and_odd_lengths_match_the_reference(rng):
    # 67 queries (two query tiles of 64), 300 keys (two key tiles of 256), the causal cut
    # crossing both, and a key-padding style mask
    q, k, v = rand(rng, 2, 67, 8), rand(rng, 2, 300, 8), rand(rng, 2, 300, 5)
    pad = np.ones((2, 1, 300), bool)
    pad[0, :, 280:] = False
    for mask, causal in ((None, False), (None, True), (pad, False)):
        y = autograd.scaled_dot_product_attention(*(tensor.from_numpy(a) for a in (q, k, v)),
                                                  attn_mask=mask, is_causal=causal)
        np.testing.assert_allclose(N(y), ref_sdpa(q, k, v, mask, causal), rtol=1e-4, atol=1e-5)


def test_graph_matches_eager(rng):
    q, k, v = rand(rng, 2, 2, 5, 4), rand(rng, 2, 1, 7, 4), rand(rng, 2, 1, 7, 3)
    check_graph(sdpa(), [q, k, v])
    check_graph(sdpa(is_causal=True), [q, k, v])
    check_graph(sdpa(rng.random((5, 7)) > 0.3), [q, k, v])


# ---- PyTorch's scaled_dot_product_attention ----

@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch is the reference of this test")


TORCH_CASES = {
    "plain 4-d": dict(q=(2, 3, 9, 8), k=(2, 3, 11, 8), v=(2, 3, 11, 5)),
    "3-d": dict(q=(3, 70, 16), k=(3, 300, 16), v=(3, 300, 16)),
    "causal L<S": dict(q=(2, 2, 33, 8), k=(2, 2, 70, 8), v=(2, 2, 70, 8), causal=True),
    "causal L>S": dict(q=(1, 2, 130, 8), k=(1, 2, 65, 8), v=(1, 2, 65, 4), causal=True),
    # the backward skips the keys past a query block's last row (a 256-key tile, 128-query
    # blocks: the first block sees 128 of them), and a second, partial key tile
    "causal, several tiles": dict(q=(1, 2, 300, 8), k=(1, 2, 300, 8), v=(1, 2, 300, 6),
                                  causal=True),
    "bool mask": dict(q=(2, 3, 9, 8), k=(2, 3, 11, 8), v=(2, 3, 11, 8), mask="bool"),
    "key padding": dict(q=(2, 3, 9, 8), k=(2, 3, 11, 8), v=(2, 3, 11, 8), mask="padding"),
    "float mask": dict(q=(2, 3, 9, 8), k=(2, 3, 11, 8), v=(2, 3, 11, 8), mask="float"),
    "kv heads broadcast": dict(q=(2, 4, 9, 8), k=(2, 1, 11, 8), v=(2, 1, 11, 6)),
    "q batch broadcast": dict(q=(1, 4, 9, 8), k=(3, 4, 11, 8), v=(3, 4, 11, 8)),
    "scale": dict(q=(2, 9, 8), k=(2, 11, 8), v=(2, 11, 8), scale=0.2),
    "fully masked row": dict(q=(1, 5, 4), k=(1, 6, 4), v=(1, 6, 4), mask="row"),
}


@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_matches_torch_forward_and_gradients(case, torch, rng):
    c = TORCH_CASES[case]
    q, k, v = rand(rng, *c["q"]), rand(rng, *c["k"]), rand(rng, *c["v"])
    L, S = c["q"][-2], c["k"][-2]
    mask = None
    if c.get("mask") == "bool":
        mask = rng.random((L, S)) > 0.5
    elif c.get("mask") == "padding":
        mask = np.ones((c["q"][0], 1, 1, S), bool)
        mask[0, ..., 7:] = False
    elif c.get("mask") == "float":
        mask = rand(rng, c["q"][0], 1, L, S)
    elif c.get("mask") == "row":
        mask = rng.random((L, S)) > 0.5
        mask[3] = False
    kw = dict(is_causal=c.get("causal", False), scale=c.get("scale"))
    dy = rand(rng, *(np.broadcast_shapes(c["q"][:-2], c["k"][:-2]) + (L, c["v"][-1])))

    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tm = None if mask is None else torch.tensor(mask)
    ty = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, **kw)
    ty.backward(torch.tensor(dy))

    autograd.training = True
    sq, sk, sv = (tensor.from_numpy(a) for a in (q, k, v))
    for t in (sq, sk, sv):
        t.requires_grad = t.stores_grad = True
    y = autograd.scaled_dot_product_attention(sq, sk, sv, attn_mask=mask, **kw)
    grads = autograd.gradients(y, tensor.from_numpy(dy))
    np.testing.assert_allclose(N(y), ty.detach().numpy(), rtol=1e-4, atol=2e-5)
    for s, t, name in ((sq, tq, "dq"), (sk, tk, "dk"), (sv, tv, "dv")):
        np.testing.assert_allclose(N(grads[s]), t.grad.numpy(), rtol=1e-4, atol=5e-5,
                                   err_msg=name)


# ---- dropout: the mask is regenerated, never stored ----

def _dropout_setup(rng, L=4, S=6, E=3):
    # v = identity: the output is the dropped, rescaled probability matrix itself, so the
    # forward's mask can be read back from it (kept entries are > 0, dropped ones exactly 0)
    return rand(rng, 2, L, E), rand(rng, 2, S, E), np.tile(np.eye(S, dtype=np.float32), (2, 1, 1))


def _check_against_recovered_mask(q, k, v, y, grads, dy, p):
    keep = y != 0
    assert 0 < keep.mean() < 1, "dropout kept all or nothing: the test has no power"
    np.testing.assert_allclose(y, ref_sdpa(q, k, v, keep=keep, p=p), rtol=1e-5, atol=1e-6)
    want = numeric_grads(lambda q, k, v: ref_sdpa(q, k, v, keep=keep, p=p), [q, k, v],
                         [0, 1, 2], [dy])
    for i, name in enumerate(("dq", "dk", "dv")):
        np.testing.assert_allclose(grads[i], want[i], rtol=2e-3, atol=2e-4, err_msg=name)


def test_dropout_backward_uses_the_forward_mask(rng):
    q, k, v = _dropout_setup(rng)
    dy = rand(rng, 2, 4, 6)
    autograd.training = True
    masks = []
    for _ in range(2):
        ts = [tensor.from_numpy(a) for a in (q, k, v)]
        for t in ts:
            t.requires_grad = t.stores_grad = True
        y = autograd.scaled_dot_product_attention(*ts, dropout_p=0.4)
        g = autograd.gradients(y, tensor.from_numpy(dy))
        _check_against_recovered_mask(q, k, v, N(y), [N(g[t]) for t in ts], dy, 0.4)
        masks.append(N(y) != 0)
    assert np.any(masks[0] != masks[1]), "two calls drew the same dropout mask"


def test_dropout_is_off_outside_training_and_drops_at_its_rate(rng):
    q, k, v = (tensor.from_numpy(rand(rng, 1, 64, 8)) for _ in range(3))
    eval_y = N(autograd.scaled_dot_product_attention(q, k, v, dropout_p=0.5))
    np.testing.assert_allclose(eval_y, N(autograd.scaled_dot_product_attention(q, k, v)))
    autograd.training = True
    ident = tensor.from_numpy(np.eye(512, dtype=np.float32)[None])
    kk = tensor.from_numpy(rand(rng, 1, 512, 8))
    p = N(autograd.scaled_dot_product_attention(q, kk, ident, dropout_p=0.3))
    dropped = np.mean(p == 0)
    assert abs(dropped - 0.3) < 0.02, dropped  # 32768 draws: 3 sigma is 0.008
    assert abs(p.sum(-1).mean() - 1.0) < 0.05  # kept ones scaled by 1 / (1 - p)


def test_dropout_in_a_graph_draws_a_new_mask_each_replay_and_backward_follows_it(rng):
    q, k, v = _dropout_setup(rng)
    dy = rand(rng, 2, 4, 6)
    dev = sw.create_cpu_device()
    autograd.training = True
    ts = [tensor.from_numpy(a, dev) for a in (q, k, v)]
    for t in ts:
        t.requires_grad = t.stores_grad = True
    dev.EnableGraph(True)
    try:
        y = autograd.scaled_dot_product_attention(*ts, dropout_p=0.4)
        g = autograd.gradients(y, tensor.from_numpy(dy, dev))
    finally:
        dev.EnableGraph(False)
    masks = []
    for _ in range(2):
        dev.RunGraph()
        _check_against_recovered_mask(q, k, v, N(y), [N(g[t]) for t in ts], dy, 0.4)
        masks.append(N(y) != 0)
    assert np.any(masks[0] != masks[1]), "a replay reused the recorded dropout mask"


# ---- errors and NaN ----

BAD = {
    "E differs": ((2, 3, 4), (2, 5, 3), (2, 5, 3), None, "last axis"),
    "S differs": ((2, 3, 4), (2, 5, 4), (2, 6, 4), None, "number of keys"),
    "batch": ((2, 3, 4), (3, 5, 4), (3, 5, 4), None, "broadcast"),
    "1-d": ((4,), (5, 4), (5, 4), None, "at least 2 axes"),
    "mask shape": ((2, 3, 4), (2, 5, 4), (2, 5, 4), (3, 4), "mask"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_shapes_raise_errors_naming_the_op_and_shapes(case, rng):
    qs, ks, vs, ms, words = BAD[case]
    q, k, v = (tensor.from_numpy(rand(rng, *s)) for s in (qs, ks, vs))
    mask = None if ms is None else np.ones(ms, bool)
    with pytest.raises(ValueError) as e:
        autograd.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    msg = str(e.value)
    assert "ScaledDotProductAttention" in msg and words in msg, msg
    assert str(tuple(qs)).replace(" ", "") in msg.replace(" ", "") or ms is not None, msg


def test_bad_arguments_raise(rng):
    q = tensor.from_numpy(rand(rng, 3, 4))
    with pytest.raises(ValueError, match="causal"):
        autograd.scaled_dot_product_attention(q, q, q, attn_mask=np.ones((3, 3), bool),
                                              is_causal=True)
    with pytest.raises(ValueError, match="dropout_p"):
        autograd.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    with pytest.raises(TypeError, match="float32"):
        i = tensor.from_numpy(np.ones((3, 4), np.int32))
        autograd.scaled_dot_product_attention(i, i, i)


def test_nan_in_q_propagates_to_its_row_only(rng):
    q, k, v = rand(rng, 4, 3), rand(rng, 5, 3), rand(rng, 5, 2)
    q[1, 0] = np.nan
    autograd.training = True
    ts = [tensor.from_numpy(a) for a in (q, k, v)]
    for t in ts:
        t.requires_grad = t.stores_grad = True
    y = N(autograd.scaled_dot_product_attention(*ts))
    assert np.all(np.isnan(y[1])) and np.all(np.isfinite(np.delete(y, 1, axis=0)))
    g = autograd.gradients(autograd.scaled_dot_product_attention(*ts),
                           tensor.from_numpy(np.ones((4, 2), np.float32)))
    assert np.all(np.isnan(N(g[ts[0]])[1])) and np.all(np.isnan(N(g[ts[1]])))


# ---- memory: linear in the sequence length ----

def _vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    pytest.skip("no /proc/self/status")


def test_seq_4096_runs_where_a_naive_score_matrix_would_need_a_gibibyte(rng):
    B, H, L, E = 1, 16, 4096, 8
    naive = B * H * L * L * 4
    assert naive == 2**30
    dev = device.get_default_device()
    autograd.training = True
    ts = [tensor.from_numpy(rand(rng, B, H, L, E)) for _ in range(3)]
    for t in ts:
        t.requires_grad = t.stores_grad = True
    dy = tensor.from_numpy(np.ones((B, H, L, E), np.float32))
    in_use = device.get_memory_in_use(dev)
    device.reset_peak_memory(dev)
    with open("/proc/self/clear_refs", "w") as f:  # restart the peak RSS from here
        f.write("5")
    rss = _vm("VmRSS")
    y = autograd.scaled_dot_product_attention(*ts, is_causal=True)
    grads = autograd.gradients(y, dy)
    assert np.isfinite(N(grads[ts[0]])).all()
    pool_growth = device.get_peak_memory(dev) - in_use
    rss_growth = _vm("VmHWM") - rss
    io = 7 * B * H * L * E * 4 + B * H * L * 4  # out, lse, the gradients and their seeds
    assert pool_growth < io + (8 << 20), (pool_growth, io)
    assert rss_growth < naive // 8, rss_growth
