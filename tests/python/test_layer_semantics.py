"""Layer behaviours that mutation testing (tools/mutate.py, TESTING.md) found unpinned: each test
fails on a one-line change of the layer code that the rest of the suite let through.

References are numpy computations of the documented semantics (SINGA 3.3's layer.py), or
another public path of the same computation (one GRU step == a one-step sequence)."""
import numpy as np
import pytest

from singa import autograd, layer, tensor

F32 = np.float32


def N(t):
    return tensor.to_numpy(t)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_cross_entropy_layer_value_and_gradient(rng):
    # mean over the batch of -sum(t * log(p)), with one-hot targets
    p = rng.uniform(0.05, 1.0, (4, 3)).astype(F32)
    p /= p.sum(1, keepdims=True)
    t = np.eye(3, dtype=F32)[[2, 0, 1, 2]]
    x = tensor.from_numpy(p)
    x.requires_grad, x.stores_grad = True, True
    autograd.training = True
    try:
        loss = layer.CrossEntropy()(x, tensor.from_numpy(t))
        want = -(t * np.log(p)).sum(1).mean()
        np.testing.assert_allclose(N(loss).reshape(-1), [want], rtol=1e-5)
        grads = {id(q): N(g) for q, g in autograd.backward(loss)}
    finally:
        autograd.training = False
    np.testing.assert_allclose(grads[id(x)], -t / p / 4, rtol=1e-4)


def test_scatter_elements_layer_uses_its_axis(rng):
    x = rng.standard_normal((3, 4)).astype(F32)
    idx = np.array([[3, 0], [1, 2], [0, 3]], np.int32)
    upd = rng.standard_normal((3, 2)).astype(F32)
    want = x.copy()
    np.put_along_axis(want, idx, upd, axis=1)
    got = layer.ScatterElements(axis=1)(tensor.from_numpy(x), tensor.from_numpy(idx),
                                        tensor.from_numpy(upd))
    np.testing.assert_array_equal(N(got), want)
    # the default axis is 0 (ONNX and SINGA)
    idx0 = np.array([[2, 0, 1, 1]], np.int32)
    upd0 = rng.standard_normal((1, 4)).astype(F32)
    want0 = x.copy()
    np.put_along_axis(want0, idx0, upd0, axis=0)
    got0 = layer.ScatterElements()(tensor.from_numpy(x), tensor.from_numpy(idx0),
                                   tensor.from_numpy(upd0))
    np.testing.assert_array_equal(N(got0), want0)


def test_autograd_scatter_elements_passes_the_axis(rng):
    x = rng.standard_normal((2, 5)).astype(F32)
    idx = np.array([[4, 1], [0, 2]], np.int32)
    upd = np.array([[10, 20], [30, 40]], F32)
    want = x.copy()
    np.put_along_axis(want, idx, upd, axis=1)
    got = autograd.scatter_elements(tensor.from_numpy(x), tensor.from_numpy(idx),
                                    tensor.from_numpy(upd), 1)
    np.testing.assert_array_equal(N(got), want)


@pytest.mark.parametrize("bias", [False, True])
def test_separable_conv2d_bias_option(rng, bias):
    sep = layer.SeparableConv2d(4, 3, padding=1, bias=bias)
    x = tensor.from_numpy(rng.standard_normal((2, 3, 5, 5)).astype(F32))
    y0 = N(sep(x))
    biases = sorted(k for k in sep.get_params() if k.endswith("b"))
    if not bias:
        assert biases == []
        return
    # one bias per sub-convolution: the depthwise (3 channels) and the pointwise (4 kernels)
    assert [sep.get_params()[k].shape for k in biases] == [(3,), (4,)]
    # a pointwise bias shifts each output channel by its value
    shift = np.arange(1, 5, dtype=F32)
    sep.set_params({biases[1]: shift})
    np.testing.assert_allclose(N(sep(x)), y0 + shift.reshape(1, 4, 1, 1), rtol=1e-5,
                               atol=1e-5)


def test_embedding_from_pretrained_freezes_by_default(rng):
    emb = layer.Embedding(6, 2)
    ids = tensor.from_numpy(np.array([[0, 5]], np.int32))
    emb(ids)
    table = rng.standard_normal((6, 2)).astype(F32)
    emb.from_pretrained(table)  # SINGA: freeze=True
    assert not emb.W.requires_grad and not emb.W.stores_grad
    np.testing.assert_array_equal(N(emb(ids)), table[[[0, 5]]])
    emb.from_pretrained(table, freeze=False)
    assert emb.W.requires_grad and emb.W.stores_grad


def test_gru_step_forward_is_one_step_of_the_sequence(rng):
    gru = layer.GRU(3, 4)
    x = tensor.from_numpy(rng.standard_normal((2, 3)).astype(F32))
    h = tensor.from_numpy(rng.standard_normal((2, 4)).astype(F32))
    ys, hn = gru([x], h)
    step = gru.step_forward(x, h)
    assert step.shape == (2, 4)
    np.testing.assert_allclose(N(step), N(ys[0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(N(step), N(hn).reshape(2, 4), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", [lambda: layer.BatchNorm2d(3, 0.5),
                                  lambda: layer.BatchNorm2d(3, momentum=0.5)])
def test_batchnorm2d_momentum_positional_or_keyword(rng, make):
    # SINGA: running = momentum * running + (1 - momentum) * batch statistic (running_mean
    # starts at 0), whichever way the momentum is given
    bn = make()
    xv = rng.standard_normal((4, 3, 2, 2)).astype(F32) + np.array([1, -2, 3], F32)[:, None, None]
    autograd.training = True
    try:
        bn(tensor.from_numpy(xv))
    finally:
        autograd.training = False
    np.testing.assert_allclose(N(bn.running_mean).reshape(-1), 0.5 * xv.mean((0, 2, 3)),
                               rtol=1e-5, atol=1e-6)


def test_conv2d_input_gradient_with_a_frozen_weight(rng):
    # only x needs a gradient: backward must still give it (torch as the reference)
    torch = pytest.importorskip("torch")
    conv = layer.Conv2d(4, 3, padding=1)
    xv = rng.standard_normal((2, 3, 5, 5)).astype(F32)
    wv = rng.standard_normal((2, 4, 5, 5)).astype(F32)
    x = tensor.from_numpy(xv)
    conv(x)
    conv.W.requires_grad, conv.W.stores_grad = False, False
    conv.b.requires_grad, conv.b.stores_grad = False, False
    x.requires_grad, x.stores_grad = True, True
    autograd.training = True
    try:
        y = conv(x)
        loss = autograd.reduce_sum(autograd.mul(y, tensor.from_numpy(wv)), None, 0)
        grads = {id(p): N(g) for p, g in autograd.backward(loss)}
    finally:
        autograd.training = False
    tx = torch.tensor(xv, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, torch.tensor(N(conv.W)), torch.tensor(N(conv.b)),
                                    padding=1)
    (ty * torch.tensor(wv)).sum().backward()
    assert set(grads) == {id(x)}
    np.testing.assert_allclose(grads[id(x)], tx.grad.numpy(), rtol=1e-4, atol=1e-4)
