"""singa.utils: the progress bar, the SAME padding arithmetic (against hand-worked cases, ONNX's
definition and a numpy convolution), odd padding, handles and the post-order graph walk."""
import itertools
import math
import sys

import numpy as np
import pytest

from singa import autograd, layer, tensor, utils
from singa import singa_wrap as sw


# ---- update_progress ---------------------------------------------------------------------------
def _bar(dots, pct, status):
    # the format SINGA documents: 20-wide bar, percentage, status; then backspaces over
    # "% " + status plus the bar and 7 more characters
    return "[%s%s] %s %s%s" % ("." * dots, " " * (20 - dots), pct, status,
                               "\b" * (9 + 20 + len(status)))


@pytest.mark.parametrize("progress,info,expected", [
    (0.5, "loss", _bar(10, "50.0%", "loss")),
    (0.125, "", _bar(2, "12.5%", "")),            # round(2.5) == 2
    (0.99, "x", _bar(20, "99.0%", "x")),          # round(19.8) == 20, yet not done
    (1, "end", _bar(20, "100.0%", "Done. end")),
    (3.0, "", _bar(20, "100.0%", "Done. ")),
    (-0.2, "i", _bar(0, "0.0%", "Halt. i")),
    ("half", "i", _bar(0, "0.0%", "error: progress var must be float. i")),
    (float("nan"), "", _bar(0, "0.0%", "error: progress var must be float. ")),
    (np.float32(0.25), "", _bar(5, "25.0%", "")),
])
def test_update_progress_writes_the_bar(capsys, progress, info, expected):
    utils.update_progress(progress, info)
    assert capsys.readouterr().out == expected


# ---- get_output_shape / get_padding_shape ------------------------------------------------------
@pytest.mark.parametrize("mode,ins,ks,ss,pads,odd", [
    # total = (ceil(in/s) - 1) * s + k - in, worked by hand
    ("SAME_UPPER", (7, 7), (3, 3), (2, 2), [1, 1, 1, 1], [0, 0, 0, 0]),      # total 2
    ("SAME_UPPER", (8, 8), (3, 3), (2, 2), [0, 0, 0, 0], [0, 1, 0, 1]),      # total 1
    ("SAME_LOWER", (8, 8), (3, 3), (2, 2), [0, 0, 0, 0], [1, 0, 1, 0]),
    ("SAME_UPPER", (5, 6), (2, 3), (1, 2), [0, 0, 0, 0], [0, 1, 0, 1]),      # 1 and 1
    ("SAME_LOWER", (6, 9), (4, 3), (1, 3), [1, 1, 0, 0], [1, 0, 0, 0]),      # 3 and 0
    ("SAME_UPPER", (4,), (5,), (1,), [2, 2], [0, 0]),                         # 4, 1-d
    ("SAME_UPPER", (5, 5, 5), (3, 3, 3), (1, 1, 1), [1] * 6, [0] * 6),        # 3-d
    ("SAME_UPPER", (6,), (1,), (4,), [0, 0], [0, 0]),    # SINGA: [-1, -1], [1, 0]
    ("VALID", (7, 7), (3, 3), (2, 2), [0, 0, 0, 0], [0, 0, 0, 0]),
    ("VALID", (5,), (2,), (2,), [0, 0], [0, 0]),         # SINGA: [-1, -1], [1, 0]
])
def test_get_padding_shape_hand_worked(mode, ins, ks, ss, pads, odd):
    assert utils.get_padding_shape(mode, ins, ks, ss) == (pads, odd)


def test_get_output_shape_hand_worked():
    assert utils.get_output_shape("SAME_UPPER", (7, 8), (3, 3), (2, 2)) == [4, 4]
    assert utils.get_output_shape("SAME_LOWER", [1], [5], [3]) == [1]
    assert utils.get_output_shape("VALID", (7, 8), (3, 3), (2, 2)) == [3, 3]
    assert utils.get_output_shape("VALID", (3,), (3,), (5,)) == [1]


def test_padding_gives_the_output_shape_for_every_small_case():
    """ONNX: with the padding applied, a plain convolution yields ceil(in/s) outputs; the extra
    pixel of an odd total goes after the data for SAME_UPPER, before it for SAME_LOWER."""
    for mode in ("SAME_UPPER", "SAME_LOWER"):
        for n, k, s in itertools.product(range(1, 13), range(1, 6), range(1, 5)):
            pads, odd = utils.get_padding_shape(mode, [n], [k], [s])
            out = utils.get_output_shape(mode, [n], [k], [s])
            assert out == [math.ceil(n / s)]
            assert pads[0] == pads[1] >= 0 and sum(odd) in (0, 1)
            total = sum(pads) + sum(odd)
            assert total == max((out[0] - 1) * s + k - n, 0), (mode, n, k, s)
            assert (n + total - k) // s + 1 == out[0], (mode, n, k, s)
            if sum(odd):
                assert odd == ([0, 1] if mode == "SAME_UPPER" else [1, 0])


@pytest.mark.parametrize("args,match", [
    (("NOTSET", (4, 4), (3, 3), (1, 1)), "pad mode"),
    (("SAME", (4, 4), (3, 3), (1, 1)), "pad mode"),
    (("SAME_UPPER", (4, 4), (3,), (1, 1)), "one value per spatial axis"),
    (("SAME_UPPER", (4, 4), (3, 3), (0, 1)), "strides_spatial must hold positive ints"),
    (("VALID", (2, 4), (3, 3), (1, 1)), "leaves no output"),
])
def test_padding_helpers_reject_garbage(args, match):
    with pytest.raises(ValueError, match=match):
        utils.get_padding_shape(*args)


# ---- odd padding and a whole SAME convolution --------------------------------------------------
def test_handle_odd_pad_fwd_and_bwd(rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    odd = (1, 0, 2, 1)                             # top, bottom, left, right
    y = utils.handle_odd_pad_fwd(tensor.from_numpy(x).data, odd)
    assert isinstance(y, sw.Tensor)
    want = np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1)))
    np.testing.assert_array_equal(sw.to_numpy(y), want)
    back = utils.handle_odd_pad_bwd(y, odd)
    np.testing.assert_array_equal(sw.to_numpy(back), x)
    # a Tensor in gives a Tensor out; zero padding is the identity
    t = utils.handle_odd_pad_fwd(tensor.from_numpy(x), [0, 1, 0, 0])
    assert isinstance(t, tensor.Tensor)
    np.testing.assert_array_equal(tensor.to_numpy(t), np.pad(x, ((0, 0),) * 2 + ((0, 1), (0, 0))))
    np.testing.assert_array_equal(sw.to_numpy(utils.handle_odd_pad_fwd(tensor.from_numpy(x).data,
                                                                       [0] * 4)), x)


def test_handle_odd_pad_rejects_bad_input(rng):
    x = tensor.from_numpy(np.zeros((1, 1, 2, 2), np.float32))
    with pytest.raises(ValueError, match="four non-negative"):
        utils.handle_odd_pad_fwd(x.data, (1, 0, -1, 0))
    with pytest.raises(ValueError, match="4-d"):
        utils.handle_odd_pad_fwd(tensor.from_numpy(np.zeros((2, 2), np.float32)).data, [1] * 4)
    with pytest.raises(ValueError, match="removes more"):
        utils.handle_odd_pad_bwd(x.data, (2, 1, 0, 0))
    with pytest.raises(TypeError):
        utils.handle_odd_pad_fwd(np.zeros((1, 1, 2, 2)), [0] * 4)


def _np_conv(xp, w, stride):
    """Cross-correlation of an already padded xp (N, C, H, W) with w (F, C, kh, kw)."""
    n, c, h, wd = xp.shape
    f, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, f, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return y


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("hw,k,s", [((8, 7), 3, 2), ((6, 6), 2, 1), ((5, 9), 4, 3)])
def test_same_convolution_through_the_helpers(rng, mode, hw, k, s):
    """What SINGA's Conv2d does in SAME mode: symmetric padding in the handle, the odd part added
    to the input first; compared with numpy on the explicitly padded input."""
    x = rng.standard_normal((2, 2) + hw).astype(np.float32)
    w = rng.standard_normal((3, 2, k, k)).astype(np.float32)
    pads, odd = utils.get_padding_shape(mode, hw, (k, k), (s, s))
    xp = utils.handle_odd_pad_fwd(tensor.from_numpy(x).data, odd)
    h = sw.ConvHandle(xp, (k, k), (s, s), (pads[0], pads[2]), 2, 3, False)
    y = sw.to_numpy(sw.Conv2dForward(xp, tensor.from_numpy(w).data, sw.Tensor(), h))
    assert list(y.shape[2:]) == utils.get_output_shape(mode, hw, (k, k), (s, s))
    full = [p + o for p, o in zip(pads, odd)]
    ref = _np_conv(np.pad(x, ((0, 0), (0, 0), full[0:2], full[2:4])), w, s)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    # our Conv2d layer reaches the same padding by its own route
    conv = layer.Conv2d(3, k, stride=s, pad_mode=mode, bias=False)
    out = conv(tensor.from_numpy(x))
    assert list(conv.padding) == pads[0::2] and list(conv.odd_padding) == odd
    assert tuple(out.shape) == y.shape


def test_same_pad_shape_check():
    x = tensor.from_numpy(np.zeros((1, 2, 8, 8), np.float32))
    good = sw.ConvHandle(x.data, (3, 3), (2, 2), (0, 0), 2, 4, True)
    assert utils.same_pad_shape_check(good, "SAME_UPPER", x.data) == ([0] * 4, [0, 1, 0, 1])
    assert utils.same_pad_shape_check(good, "SAME_LOWER", x) == ([0] * 4, [1, 0, 1, 0])
    bad = sw.ConvHandle(x.data, (3, 3), (2, 2), (1, 1), 2, 4, True)
    with pytest.raises(AssertionError, match=r"should be \[0, 0\], the handle has \[1, 1\]"):
        utils.same_pad_shape_check(bad, "SAME_UPPER", x.data)
    pool = sw.PoolingHandle(x.data, (3, 3), (1, 1), (1, 1), True)
    assert utils.same_pad_shape_check(pool, "SAME_UPPER", x.data) == ([1] * 4, [0] * 4)


def test_re_new_handle_keeps_the_geometry():
    x = tensor.from_numpy(np.zeros((2, 4, 8, 8), np.float32))
    h = sw.ConvHandle(x.data, (3, 2), (2, 1), (1, 0), 4, 6, False, 2)
    x2 = tensor.from_numpy(np.zeros((5, 4, 11, 9), np.float32))
    n = utils.re_new_handle(h, x2.data)
    assert type(n) is type(h)
    for attr in ("kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w", "channels",
                 "num_filters", "bias_term", "group"):
        assert getattr(n, attr) == getattr(h, attr), attr
    assert (n.batchsize, n.height, n.width) == (5, 11, 9)
    # the new handle computes with the new shape: (11 + 2 - 3) // 2 + 1 = 6, 9 - 2 + 1 = 8
    w = tensor.from_numpy(np.ones((6, 2, 3, 2), np.float32))
    assert sw.Conv2dForward(x2.data, w.data, sw.Tensor(), n).shape() == (5, 6, 6, 8)
    for is_max in (True, False):
        p = sw.PoolingHandle(x.data, (2, 2), (2, 2), (0, 0), is_max)
        q = utils.re_new_handle(p, x2, is_pool=True)
        assert type(q) is type(p) and q.is_max_pooling == is_max
        assert (q.kernel_h, q.stride_w, q.pad_h, q.height, q.width) == (2, 2, 0, 11, 9)


def test_force_unicode():
    assert utils.force_unicode(b"conv1") == "conv1"
    assert utils.force_unicode("\u00e9t\u00e9".encode("utf-8")) == "\u00e9t\u00e9"
    assert utils.force_unicode("already") == "already"
    assert utils.force_unicode(5) == 5


# ---- post_order_recursive ----------------------------------------------------------------------
def _singa_post_order(root, root_t):
    """SINGA 3.3's recursive definition (revisits shared sub-graphs), as the reference."""
    nodes, weights, inputs = {}, {}, {}

    def walk(op, t):
        if op is None:
            return
        for src, _yid, y, _ in op.src:
            walk(src, y)
        if isinstance(op, autograd.Dummy):
            (weights if t is not None else inputs).setdefault(op.name, t)
        else:
            nodes.setdefault(op.name, op)
    walk(root, root_t)
    return list(nodes), list(weights), list(inputs)


def _param(a, name):
    t = tensor.Tensor(data=np.asarray(a, np.float32), name=name)
    t.stores_grad = True
    return t


def test_post_order_recursive_small_graph(rng):
    autograd.training = True
    x = tensor.Tensor(data=rng.standard_normal((2, 3)).astype(np.float32), name="x")
    x.requires_grad = False
    W = _param(rng.standard_normal((3, 4)), "W")
    b = _param(rng.standard_normal((4,)), "b")
    h = autograd.relu(autograd.add(autograd.matmul(x, W), b))
    y = autograd.add(autograd.mul(h, h), autograd.matmul(h, _param(np.eye(4), "V")))
    nodes, weights, inputs = utils.post_order_recursive(y.creator, None)
    assert (list(nodes), list(weights), list(inputs)) == _singa_post_order(y.creator, None)
    assert list(weights) == ["W", "b", "V"] and list(inputs) == ["x"]
    assert weights["W"] is W and weights["b"] is b and inputs["x"] is x
    pos = {name: i for i, name in enumerate(nodes)}
    for name, op in nodes.items():   # every operator after the operators feeding it
        for src, _, _, _ in op.src:
            if src.name in pos:
                assert pos[src.name] < pos[name]
    assert list(nodes)[-1] == y.creator.name and len(nodes) == 6


def test_post_order_recursive_deep_chain():
    autograd.training = True
    x = _param(np.ones((2,)), "p")
    y = x
    for _ in range(3 * sys.getrecursionlimit()):
        y = autograd.relu(y)
    nodes, weights, inputs = utils.post_order_recursive(y.creator, None)
    assert len(nodes) == 3 * sys.getrecursionlimit() and list(weights) == ["p"] and not inputs
