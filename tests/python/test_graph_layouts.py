"""Kept layouts in the graph (graph.h, cpp/src/graph/layouts.cc): activations kept in oneDNN's
nChw16c (float32 convolutions on AVX-512) or channels-last NHWC (bfloat16 ones on AMX) between
the operations that accept it. A replay with layouts must give the plain-layout numbers (every
loss and parameter over several training steps, inference outputs), in float32 and in bfloat16
AMP, on ResNet-style nets with odd spatial sizes, groups, stride 2 and max pooling (NaN included);
the memory plan is unchanged (a kept block has its plain size: channels are multiples of 16)."""
import os
import sys

import numpy as np
import pytest

from singa import device, layer, model, opt, tensor
from singa import singa_wrap

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import models  # noqa: E402  (examples/: ResNet-18)
import test_graph_epilogue as epilogue  # noqa: E402  (its ResNet block and net)
from test_graph_epilogue import Block, record_inference  # noqa: E402

pytestmark = pytest.mark.skipif(not singa_wrap.USE_DNNL, reason="layouts need oneDNN kernels")
# oneDNN computes fp32 convolutions in nChw16c with AVX-512 (nChw8c below it: nothing blocked),
# bf16 ones in NHWC with AMX
AVX512 = "avx512f" in singa_wrap.cpu_features()
BF16 = "avx512_bf16" in singa_wrap.cpu_features()
AMX = "amx_bf16" in singa_wrap.cpu_features()
needs_bf16 = pytest.mark.skipif(not BF16, reason="bfloat16 AMP needs avx512_bf16")


class Net(epilogue.Net):
    """Odd spatial sizes (9x11 -> 5x6), a stride-2 block, a grouped conv, global average
    pooling; 16 and 32 channels so that the blocked layout applies (train_one_batch: the
    epilogue tests' net's)."""

    def __init__(self, hw):
        model.Model.__init__(self)
        self.stem = layer.Conv2d(16, 3, padding=1, bias=False)
        self.bn = layer.BatchNorm2d()
        self.relu = layer.ReLU()
        self.b1 = Block(16)
        self.b2 = Block(32, stride=2, down=True)
        self.b3 = Block(32, group=2)
        self.pool = layer.AvgPool2d(hw, stride=1)
        self.flat = layer.Flatten()
        self.fc = layer.Linear(3)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.relu(self.bn(self.stem(x)))
        return self.fc(self.flat(self.pool(self.b3(self.b2(self.b1(y))))))


def make_device(layouts):
    dev = device.create_cpu_device(21)  # its own device: the default one's settings stay as
    dev.set_backend("dnnl")             # they are for other tests
    dev.SetRandSeed(3)
    dev.SetGraphLayouts(layouts)
    return dev


def data(dev, shape=(4, 3, 9, 11), classes=3):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    t = rng.integers(0, classes, shape[0]).astype(np.int32)
    return tensor.from_numpy(x, dev), tensor.from_numpy(t, dev)


def train(make_net, layouts, graph=True, steps=3, precision="float32", shape=(4, 3, 9, 11)):
    dev = make_device(layouts)
    x, t = data(dev, shape)
    net = make_net()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    net.compile([x], is_train=True, use_graph=graph, precision=precision)
    losses = [tensor.to_numpy(net(x, t)[1]).copy() for _ in range(steps)]
    params = {k: tensor.to_numpy(v) for k, v in net.get_states().items()}
    counts = dev.graph_layout_counts() if graph else None
    plan = dev.graph_memory_plan() if graph else None
    dev.ResetGraph()
    return losses, params, counts, plan


def close(a, b, what, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


def check_same(on, off, rtol=1e-5, atol=1e-6):
    close(np.array(on[0]), np.array(off[0]), "loss", rtol, atol)
    for k in on[1]:  # every parameter after the steps: every gradient took part
        close(on[1][k], off[1][k], k, rtol, atol)


def test_training_with_layouts_equals_plain_and_eager():
    on = train(lambda: Net((5, 6)), True)
    off = train(lambda: Net((5, 6)), False)
    eager = train(lambda: Net((5, 6)), False, graph=False)
    assert on[2]["blocks"] > 0 or not AVX512
    assert off[2]["blocks"] == off[2]["bytes"] == 0  # SetGraphLayouts(False): all plain
    check_same(on, off)
    check_same(on, eager)
    # the plan's inputs are the plain ones: a blocked block keeps its size
    for k in ("lower_bound_bytes", "recyclable_bytes", "persistent_bytes", "num_recyclable"):
        assert on[3][k] == off[3][k], k


def test_fusion_off_turns_layouts_off():
    dev = make_device(True)
    dev.SetGraphFusion(False)
    x, t = data(dev)
    net = Net((5, 6))
    net.set_optimizer(opt.SGD(lr=0.05))
    net.compile([x], is_train=True, use_graph=True)
    net(x, t)
    assert dev.graph_layout_counts()["blocks"] == 0
    dev.ResetGraph()


def test_inference_with_layouts_equals_plain():
    # the folded batch norms, residual adds and ReLUs run on the blocked convolution output
    outs, counts = {}, {}
    for layouts in (True, False):
        dev = make_device(layouts)
        x, t = data(dev)
        net = Net((5, 6))
        net.set_optimizer(opt.SGD(lr=0.05))
        net.compile([x], is_train=True, use_graph=False)
        for _ in range(2):  # running statistics away from (0, 1)
            net(x, t)
        out = record_inference(net, dev, x)
        dev.RunGraph(False)
        dev.RunGraph(False)
        outs[layouts], counts[layouts] = tensor.to_numpy(out), dev.graph_layout_counts()
        dev.ResetGraph()
    assert counts[True]["blocks"] > 0 or not AVX512
    assert counts[False]["blocks"] == 0
    close(outs[True], outs[False], "inference")


def test_resnet18_training_with_layouts_equals_plain():
    on = train(models.resnet18, True, steps=2, shape=(2, 3, 32, 32))
    off = train(models.resnet18, False, steps=2, shape=(2, 3, 32, 32))
    assert on[2]["blocks"] > 20 or not AVX512  # the activations of the residual stages
    check_same(on, off)  # the same bits: reorders are exact, batch norm sums alike


@needs_bf16
def test_bf16_amp_training_with_layouts_equals_plain():
    on = train(lambda: Net((5, 6)), True, precision="bfloat16")
    off = train(lambda: Net((5, 6)), False, precision="bfloat16")
    assert off[2]["blocks"] == 0
    # with AMX, oneDNN's bf16 convolutions compute in channels-last (acdb): the activations
    # between them, their batch norms, ReLUs, adds and casts stay NHWC (elsewhere the
    # convolutions' own layout, whichever it is)
    assert on[2]["blocks"] > 0
    if AMX:
        assert on[2]["channels_last"] == on[2]["blocks"]
    if AMX and AVX512:  # the activations float32 keeps in nChw16c (global pooling's included)
        assert on[2]["blocks"] == train(lambda: Net((5, 6)), True, steps=1)[2]["blocks"]
    # the same bf16 roundings in both layouts, up to the order of float32 accumulations
    check_same(on, off, rtol=2e-2, atol=2e-3)
    for k in ("lower_bound_bytes", "recyclable_bytes", "persistent_bytes", "num_recyclable"):
        assert on[3][k] == off[3][k], k


@needs_bf16
def test_bf16_amp_resnet18_keeps_channels_last():
    on = train(models.resnet18, True, steps=2, shape=(2, 3, 32, 32), precision="bfloat16")
    off = train(models.resnet18, False, steps=2, shape=(2, 3, 32, 32), precision="bfloat16")
    assert on[2]["blocks"] > 20  # the activations of the residual stages
    if AMX:
        assert on[2]["channels_last"] == on[2]["blocks"]
    check_same(on, off, rtol=2e-2, atol=2e-3)


class PoolNet(Net):
    """An ImageNet-style stem: conv, batch norm, ReLU, 3x3 max pooling with stride 2 and
    padding 1 (9x11 -> 5x6), then a stride-2 block (3x3) and global average pooling."""

    def __init__(self):
        model.Model.__init__(self)
        self.stem = layer.Conv2d(16, 3, padding=1, bias=False)
        self.bn = layer.BatchNorm2d()
        self.relu = layer.ReLU()
        self.mp = layer.MaxPool2d(3, stride=2, padding=1)
        self.b1 = Block(16)
        self.b2 = Block(32, stride=2, down=True)
        self.pool = layer.AvgPool2d(3, stride=1)
        self.flat = layer.Flatten()
        self.fc = layer.Linear(3)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.mp(self.relu(self.bn(self.stem(x))))
        return self.fc(self.flat(self.pool(self.b2(self.b1(y)))))


@pytest.mark.parametrize("precision", ["float32", pytest.param("bfloat16", marks=needs_bf16)])
def test_max_pooling_keeps_layouts_and_equals_plain(precision):
    on = train(PoolNet, True, precision=precision)
    off = train(PoolNet, False, precision=precision)
    # the stem's activations around the max pooling are kept too: every activation block of
    # the net is (stem conv / bn / relu / pool, both blocks, and their gradients)
    assert on[2]["blocks"] > 0 or not AVX512
    tol = (1e-5, 1e-6) if precision == "float32" else (2e-2, 2e-3)
    check_same(on, off, *tol)


def max_pool_outputs(precision, layouts, x):
    dev = make_device(layouts)
    tx, t = data(dev)
    net = PoolNet()
    net.set_optimizer(opt.SGD(lr=0.05))
    net.compile([tx], is_train=True, use_graph=False, precision=precision)
    net(tx, t)  # running statistics
    tx.copy_from_numpy(x)
    out = record_inference(net, dev, tx)
    dev.RunGraph(False)
    counts = dev.graph_layout_counts()
    res = tensor.to_numpy(out).astype(np.float32)
    dev.ResetGraph()
    return res, counts


@pytest.mark.parametrize("precision", ["float32", pytest.param("bfloat16", marks=needs_bf16)])
def test_max_pooling_propagates_nan_in_every_layout(precision):
    # oneDNN's max pooling skips NaN; the fix-up finds the NaN's planes in the kept layout too
    x = np.random.default_rng(1).standard_normal((4, 3, 9, 11)).astype(np.float32)
    x[1, 0, 4, 5] = np.nan  # one pixel of one image
    on, counts = max_pool_outputs(precision, True, x)
    off, _ = max_pool_outputs(precision, False, x)
    assert counts["blocks"] > 0 or not AVX512
    assert np.isnan(on[1]).all() and np.isnan(off[1]).all()  # the NaN reached the output
    keep = [0, 2, 3]
    assert np.isfinite(on[keep]).all()
    tol = (1e-5, 1e-6) if precision == "float32" else (2e-2, 2e-3)
    close(on[keep], off[keep], "images without NaN", *tol)
