"""The oneDNN backend (singa_wrap.USE_DNNL) against the reference CPU kernels: the device switch,
every oneDNN op for odd shapes (and torch as a third opinion on convolution), the fused ReLU, and
a few training steps of a small CNN in both backends, eager and in graph mode."""
import os
import sys

import numpy as np
import pytest

from backend_switch import backend
from singa import autograd, device, layer, model, opt, singa_wrap, tensor

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not singa_wrap.USE_DNNL,
                                reason="built without oneDNN (USE_DNNL=OFF)")

N = tensor.to_numpy


def both(fn, dev=None):
    """fn() under the reference kernels and under oneDNN, as lists of numpy arrays."""
    dev = dev or device.get_default_device()
    out = {}
    for name in ("cpu", "dnnl"):
        with backend(dev, name):
            r = fn()
            out[name] = [N(t).copy() for t in (r if isinstance(r, (list, tuple)) else [r])]
    return out["cpu"], out["dnnl"]


def assert_same(ref, got, rtol=1e-4, atol=1e-4):
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


def T(a):
    return tensor.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).data


def test_device_backend_switch():
    dev = device.create_cpu_device()
    assert dev.backend() == "dnnl" and dev.supports_backend("dnnl")
    assert dev.supports_backend("cpu") and not dev.supports_backend("cuda")
    dev.set_backend("cpu")
    assert dev.backend() == "cpu"
    with pytest.raises(singa_wrap.DeviceError, match="cuda"):
        dev.set_backend("cuda")
    with pytest.raises(ValueError, match="unknown backend 'mkl'"):
        dev.set_backend("mkl")
    assert dev.backend() == "cpu"


CONV_CASES = [  # x shape, out channels, kernel, stride, padding, dilation, groups
    ((2, 3, 8, 8), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 5, 7, 9), 6, (3, 2), (2, 1), (1, 0), (1, 1), 1),
    ((3, 4, 11, 10), 8, (3, 3), (2, 3), (2, 1), (2, 1), 1),
    ((2, 6, 9, 9), 9, (3, 3), (1, 1), (1, 1), (1, 1), 3),
    ((2, 8, 10, 7), 8, (3, 3), (2, 2), (1, 1), (1, 1), 8),
    ((4, 16, 5, 5), 12, (1, 1), (1, 1), (0, 0), (1, 1), 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x%s_g%d" % ("x".join(map(str, c[0])), c[6]))
@pytest.mark.parametrize("relu", [False, True])
def test_conv_matches_reference_and_torch(case, relu, rng):
    xs, oc, k, s, p, d, g = case
    h = singa_wrap.ConvHandle(xs, k, s, p, xs[1], oc, True, g, d)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((oc, xs[1] // g) + k).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    yt = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                    s, p, d, g)
    if relu:
        yt = torch.relu(yt)
    dy = rng.standard_normal(tuple(yt.shape)).astype(np.float32)

    def run():
        y = singa_wrap.Conv2dForward(T(x), T(w), T(b), h, relu)
        return [y, singa_wrap.Conv2dBackwardX(T(dy), T(w), h),
                singa_wrap.Conv2dBackwardW(T(dy), T(x), h), singa_wrap.Conv2dBackwardB(T(dy), h)]

    ref, got = both(run)
    assert_same(ref, got)
    np.testing.assert_allclose(got[0], yt.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["max", "avg", "avg_include_pad"])
@pytest.mark.parametrize("case", [((2, 3, 8, 8), (2, 2), (2, 2), (0, 0)),
                                  ((1, 4, 7, 9), (3, 2), (2, 1), (1, 1)),
                                  ((3, 2, 10, 10), (3, 3), (2, 2), (1, 1))])
def test_pooling_matches_reference(case, mode, rng):
    xs, k, s, p = case
    h = singa_wrap.PoolingHandle(xs, k, s, p, mode == "max", mode == "avg_include_pad")
    x = rng.permutation(np.prod(xs)).reshape(xs).astype(np.float32)  # no ties
    y0 = singa_wrap.Pool2dForward(T(x), h)
    dy = rng.standard_normal(y0.shape()).astype(np.float32)

    def run():
        y = singa_wrap.Pool2dForward(T(x), h)
        return [y, singa_wrap.Pool2dBackward(T(dy), T(x), y, h)]

    ref, got = both(run)
    assert_same(ref, got)


@pytest.mark.parametrize("xs", [(4, 3, 5, 7), (7, 5), (1, 6, 3, 3)])
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_matches_reference(xs, relu, rng):
    c = xs[1]
    x = (rng.standard_normal(xs) * 2 + 0.5).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, c).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    dy = rng.standard_normal(xs).astype(np.float32)

    def run():
        rm, rv = T(np.zeros(c)), T(np.ones(c))
        y, mean, var = singa_wrap.BatchNormForwardTraining(T(x), T(scale), T(bias), rm, rv, 0.1,
                                                           1e-5, relu)
        yi = singa_wrap.BatchNormForwardInference(T(x), T(scale), T(bias), rm, rv, 1e-5, relu)
        grads = singa_wrap.BatchNormBackward(T(dy), T(x), T(scale), mean, var, 1e-5)
        return [y, mean, var, rm, rv, yi] + list(grads)

    ref, got = both(run)
    assert_same(ref, got, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["cpu", "dnnl"])
def test_fused_relu_gives_unfused_numbers_and_gradients(name, rng):
    dev = device.get_default_device()
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    h = singa_wrap.ConvHandle((2, 3, 6, 6), 3, 1, 1, 3, 4, False)
    bn = autograd.BatchNormHandle((2, 4, 6, 6), momentum=0.9)
    autograd.training = True
    results = []
    with backend(dev, name):
        for fused in (False, True):
            tx = tensor.from_numpy(x)
            tw = tensor.from_numpy(w)
            sc = tensor.from_numpy(np.linspace(0.5, 1.5, 4).astype(np.float32))
            bi = tensor.from_numpy(np.linspace(-0.2, 0.3, 4).astype(np.float32))
            for t in (tx, tw, sc, bi):
                t.requires_grad = t.stores_grad = True
            rm, rv = tensor.zeros((4,)), tensor.ones((4,))
            if fused:
                y = autograd.conv2d(h, tx, tw, relu=True)
                y = autograd.batchnorm_2d(bn, y, sc, bi, rm, rv, relu=True)
            else:
                y = autograd.relu(autograd.conv2d(h, tx, tw))
                y = autograd.relu(autograd.batchnorm_2d(bn, y, sc, bi, rm, rv))
            loss = autograd.sum(autograd.mul(y, y))
            grads = dict((id(p), g) for p, g in autograd.backward(loss))
            results.append([N(y), N(rm), N(rv)] + [N(grads[id(p)]) for p in (tx, tw, sc, bi)])
    assert (results[1][0] == 0).mean() > 0.2  # the ReLU clipped something
    assert_same(results[0], results[1], rtol=1e-5, atol=1e-5)


class SmallCNN(model.Model):
    def __init__(self):
        super(SmallCNN, self).__init__()
        self.conv1 = layer.Conv2d(6, 3, padding=1, activation="RELU")
        self.bn1 = layer.BatchNorm2d(6)
        self.relu = layer.ReLU()
        self.pool = layer.MaxPool2d(2, 2)
        self.conv2 = layer.Conv2d(8, 3, stride=2, padding=1, group=2)
        self.avg = layer.AvgPool2d(2, 2)
        self.flat = layer.Flatten()
        self.fc = layer.Linear(5)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.pool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(self.flat(self.avg(self.conv2(y))))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


def train(backend_name, use_graph, steps=4):
    dev = device.create_cpu_device()
    dev.set_backend(backend_name)
    dev.SetRandSeed(7)
    rng = np.random.default_rng(3)
    net = SmallCNN()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    tx = tensor.Tensor((4, 3, 12, 12), dev)
    ty = tensor.Tensor((4,), dev, tensor.int32)
    tx.gaussian(0.0, 1.0)
    net.compile([tx], is_train=True, use_graph=use_graph, sequential=False)
    losses = []
    for _ in range(steps):
        tx.copy_from_numpy(rng.standard_normal((4, 3, 12, 12)).astype(np.float32))
        ty.copy_from_numpy(rng.integers(0, 5, 4).astype(np.int32))
        _, loss = net(tx, ty)
        losses.append(float(N(loss).reshape(-1)[0]))
    return np.array(losses), {k: N(v) for k, v in net.get_states().items()}


def test_small_cnn_trains_alike_in_both_backends_and_graph_mode():
    ref_losses, ref_states = train("cpu", use_graph=False)
    assert ref_losses[-1] < ref_losses[0]  # it learns
    for name, graph in (("dnnl", False), ("dnnl", True), ("cpu", True)):
        losses, states = train(name, graph)
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-3, atol=1e-4)
        for k, v in ref_states.items():
            np.testing.assert_allclose(states[k], v, rtol=1e-3, atol=1e-3, err_msg=k)
