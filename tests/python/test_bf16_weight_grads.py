"""bfloat16 AMP's weight gradients: a convolution writes the float32 gradient of the float32
master weight that autocast cast to bf16 (Conv2dBackwardW/B(..., float32_grad=True); oneDNN's
bf16 backward-weights with f32 diff_weights, or its matmul for a 1x1 stride-1 convolution), and
the Cast passes it on with no rounding and no cast op (autograd.Cast.float32_grads).

    Conv2dBackwardW(dy16, x16, h, True)   # float32 dW, within bf16 tolerance of float32's
"""
import os
import sys

import numpy as np
import pytest

from singa import autograd, device, layer, model, opt, singa_wrap, tensor

sys.path.insert(0, os.path.dirname(__file__))
from test_bfloat16 import bf16_tensor, close_to_f32, f32, rounded  # noqa: E402
from test_bfloat16_kernels import backend  # noqa: E402,F401  (oneDNN and reference kernels)

native = pytest.mark.skipif(not (singa_wrap.USE_DNNL
                                 and "avx512_bf16" in device.cpu_features()),
                            reason="native bfloat16 needs oneDNN and avx512_bf16")
F32, BF16 = singa_wrap.kFloat32, singa_wrap.kBFloat16
N = tensor.to_numpy


@native
@pytest.mark.parametrize("xs,oc,k,s,p,g", [
    ((2, 3, 9, 9), 8, 3, 1, 1, 1),       # 3x3: the convolution, f32 diff_weights
    ((3, 16, 5, 7), 24, 1, 1, 0, 1),     # 1x1 stride 1: matmuls over the N*H*W positions
    ((2, 32, 4, 4), 16, 1, 1, 0, 1),     # fewer output channels
    ((4, 16, 48, 48), 32, 1, 1, 0, 1),   # many positions, more output channels: conv forward
    ((2, 32, 1, 1), 16, 1, 1, 0, 1),     # 1x1 images
    ((2, 16, 6, 6), 32, 1, 2, 0, 1),     # 1x1 stride 2: dW from the gathered rows of x
    ((2, 16, 7, 5), 32, 1, 2, 0, 1),     # odd height: no strided view, the convolution
    ((2, 16, 8, 5), 32, 1, 2, 0, 1),     # odd width: the gathered rows
    ((2, 8, 8, 8), 8, 3, 1, 1, 4)])      # groups
def test_bf16_conv_and_its_float32_grad_match_float32(backend, xs, oc, k, s, p, g):
    rng = np.random.default_rng(1)
    x = rounded(rng.normal(size=xs).astype(np.float32))
    w = rounded(rng.normal(size=(oc, xs[1] // g, k, k)).astype(np.float32) * 0.3)
    h = singa_wrap.ConvHandle(xs, k, s, p, xs[1], oc, True, g, 1)
    ys = (xs[0], oc, h.conv_height, h.conv_width)
    dy = rounded(rng.normal(size=ys).astype(np.float32))
    for got, ref in (  # forward (no bias: a 1x1 one may be a matmul) and backward data
            (singa_wrap.Conv2dForward(bf16_tensor(x).data, bf16_tensor(w).data, None, h),
             singa_wrap.Conv2dForward(f32(x).data, f32(w).data, None, h)),
            (singa_wrap.Conv2dBackwardX(bf16_tensor(dy).data, bf16_tensor(w).data, h),
             singa_wrap.Conv2dBackwardX(f32(dy).data, f32(w).data, h))):
        want = singa_wrap.to_numpy(ref)
        close_to_f32(tensor.Tensor(data=got), want, np.abs(want).max())
    for wide, narrow, ref in (
            (singa_wrap.Conv2dBackwardW(bf16_tensor(dy).data, bf16_tensor(x).data, h, True),
             singa_wrap.Conv2dBackwardW(bf16_tensor(dy).data, bf16_tensor(x).data, h),
             singa_wrap.Conv2dBackwardW(f32(dy).data, f32(x).data, h)),
            (singa_wrap.Conv2dBackwardB(bf16_tensor(dy).data, h, True),
             singa_wrap.Conv2dBackwardB(bf16_tensor(dy).data, h),
             singa_wrap.Conv2dBackwardB(f32(dy).data, h))):
        assert wide.data_type() == F32 and narrow.data_type() == BF16
        assert wide.shape() == narrow.shape() == ref.shape()
        want = singa_wrap.to_numpy(ref)
        scale = np.abs(want).max()
        close_to_f32(tensor.Tensor(data=wide), want, scale)
        # the wide one is float32 accumulation unrounded: rounding it gives the narrow one
        # (up to one bf16 step where the two kernels sum in another order)
        np.testing.assert_allclose(N(tensor.Tensor(data=wide)),
                                   N(tensor.Tensor(data=narrow).as_type(tensor.float32)),
                                   rtol=2 ** -7, atol=2 ** -7 * scale)


def test_float32_grad_of_float32_inputs_changes_nothing():
    rng = np.random.default_rng(2)
    x, dy = (rng.normal(size=s).astype(np.float32) for s in ((2, 4, 5, 5), (2, 6, 5, 5)))
    h = singa_wrap.ConvHandle((2, 4, 5, 5), 1, 1, 0, 4, 6, True, 1, 1)
    a = singa_wrap.Conv2dBackwardW(f32(dy).data, f32(x).data, h, True)
    b = singa_wrap.Conv2dBackwardW(f32(dy).data, f32(x).data, h)
    np.testing.assert_array_equal(singa_wrap.to_numpy(a), singa_wrap.to_numpy(b))


class PointwiseNet(model.Model):
    """A bottleneck's convolutions: 3x3 stem, 1x1 stride-1 expand (no bias) and reduce (with
    bias), batch norms and ReLUs between them, 16 and 32 channels (kept channels-last on AMX)."""

    def __init__(self):
        super().__init__()
        self.stem = layer.Conv2d(16, 3, padding=1, bias=False)
        self.bn0 = layer.BatchNorm2d()
        self.expand = layer.Conv2d(32, 1, bias=False)
        self.bn1 = layer.BatchNorm2d()
        self.reduce = layer.Conv2d(16, 1, bias=True)
        self.relu = layer.ReLU()
        self.pool = layer.AvgPool2d((5, 7), stride=1)
        self.flat = layer.Flatten()
        self.fc = layer.Linear(3)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.relu(self.bn0(self.stem(x)))
        y = self.reduce(self.relu(self.bn1(self.expand(y))))
        return self.fc(self.flat(self.pool(self.relu(y))))

    def train_one_batch(self, x, t):
        out = self.forward(x)
        loss = self.loss(out, t)
        self.optimizer(loss)
        return out, loss


def train(precision, graph=True, layouts=True, float32_grads=True, steps=3):
    dev = device.create_cpu_device(22)  # its own device: the default one's settings stay
    dev.set_backend("dnnl")
    dev.SetRandSeed(5)
    dev.SetGraphLayouts(layouts)
    rng = np.random.default_rng(0)
    x = tensor.from_numpy(rng.standard_normal((4, 3, 5, 7)).astype(np.float32), dev)
    t = tensor.from_numpy(rng.integers(0, 3, 4).astype(np.int32), dev)
    net = PointwiseNet()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    old, autograd.Cast.float32_grads = autograd.Cast.float32_grads, float32_grads
    try:
        net.compile([x], is_train=True, use_graph=graph, precision=precision)
        losses = [float(N(net(x, t)[1]).reshape(-1)[0]) for _ in range(steps)]
    finally:
        autograd.Cast.float32_grads = old
    params = {k: N(v) for k, v in net.get_states().items()}
    nodes = dev.graph_op_names() if graph else []
    counts = dev.graph_layout_counts() if graph else None
    dev.ResetGraph()
    return losses, params, nodes, counts


def check_close(a, b, rtol, atol_frac):
    np.testing.assert_allclose(a[0], b[0], rtol=rtol)
    for k, v in a[1].items():
        np.testing.assert_allclose(v, b[1][k], rtol=rtol,
                                   atol=atol_frac * max(np.abs(b[1][k]).max(), 1e-3), err_msg=k)


@native
def test_amp_graph_equals_eager_with_kept_layouts_and_float32_weight_grads():
    graph = train("bfloat16")
    eager = train("bfloat16", graph=False)
    assert graph[0] == eager[0]
    for k, v in graph[1].items():
        np.testing.assert_array_equal(v, eager[1][k], err_msg=k)
    if "amx_bf16" in device.cpu_features():  # the 1x1 convolutions' operands stay NHWC
        assert graph[3]["channels_last"] == graph[3]["blocks"] > 0
    plain = train("bfloat16", layouts=False)
    check_close(graph, plain, 2e-2, 2e-3)


@native
def test_amp_with_float32_weight_grads_drops_one_cast_per_conv_weight_and_bias():
    new, old = train("bfloat16"), train("bfloat16", float32_grads=False)
    # stem.W, expand.W, reduce.W: no AsType back to float32; reduce.b: neither that nor the
    # rounding of its float32 sum to bf16
    assert len(old[2]) - len(new[2]) == 5
    assert old[2].count("AsType") - new[2].count("AsType") == 5
    # within bf16 rounding of the old path (small parameters, a batch norm's bias ~1e-3, drift
    # by ~1% of their size in 3 steps), and no farther from float32 training than it
    check_close(new, old, 2e-2, 2e-2)
    ref = train("float32")
    np.testing.assert_allclose(new[0], ref[0], rtol=1e-2)
    assert error(new, ref) <= 1.5 * error(old, ref), (error(new, ref), error(old, ref))


def error(a, ref):
    """The largest parameter difference, relative to the parameter's size."""
    return max(np.abs(v - ref[1][k]).max() / max(np.abs(ref[1][k]).max(), 1e-3)
               for k, v in a[1].items())


@native
def test_a_cast_read_by_a_conv_and_another_op_sums_its_gradients_in_float32():
    rng = np.random.default_rng(3)
    x = tensor.from_numpy(rounded(rng.normal(size=(2, 4, 5, 5)).astype(np.float32)))
    w = tensor.from_numpy(rounded(rng.normal(size=(6, 4, 1, 1)).astype(np.float32)))
    w.requires_grad = w.stores_grad = True
    h = singa_wrap.ConvHandle((2, 4, 5, 5), 1, 1, 0, 4, 6, False, 1, 1)
    autograd.training = True
    try:
        x16 = autograd.cast(x, tensor.bfloat16)
        w16 = autograd.cast(w, tensor.bfloat16)
        # d/dw [sum(conv(x, w)) + sum(3 w)] = conv's dW of ones + 3
        y = autograd.conv2d(h, x16, w16)
        loss = autograd.add(autograd.reduce_sum(autograd.cast(y, tensor.float32)),
                            autograd.reduce_sum(autograd.mul(w16, tensor.from_numpy(
                                np.full((6, 4, 1, 1), 3, np.float32)).as_type(
                                    tensor.bfloat16))))
        grads = dict((id(p), g) for p, g in autograd.backward(loss))
    finally:
        autograd.training = False
    g = grads[id(w)]
    assert g.dtype == tensor.float32
    want = np.broadcast_to(N(x).sum(axis=(0, 2, 3)).reshape(1, 4, 1, 1), (6, 4, 1, 1)) + 3
    np.testing.assert_allclose(N(g), want, rtol=1e-2, atol=1e-2)


@native
def test_amp_skips_the_gradient_of_the_cast_input_batch():
    """The Cast of the input batch wants no gradient, so the stem's convolution computes no
    dx in bf16 AMP either, as in float32 (on ResNet-50 at 224x224 it cost ~3% of a step)."""
    for precision in ("bfloat16", "float32"):
        names = train(precision, steps=1)[2]
        assert names.count("Conv2dBackwardX") == 2, precision  # of 3 convolutions
