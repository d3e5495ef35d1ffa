"""Epilogue fusion in the graph (graph.h): a convolution or batch norm absorbs the inference batch
norm, the residual add and the ReLU that follow it when nothing else reads the intermediates.
Fused runs must give the unfused numbers (forward, every gradient, several training steps), in
training and inference, with NaN propagating as in numpy."""
import gc
import os
import sys

import numpy as np
import pytest

from singa import autograd, device, layer, model, opt, tensor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import models  # noqa: E402  (examples/: ResNet-18)

BACKENDS = ["cpu", "dnnl"]


class Block(layer.Layer):
    """A ResNet basic block with odd sizes: conv-bn-relu, conv-bn, + shortcut, relu. A stride
    or a change of width gives the shortcut its own strided 1x1 conv + bn; `group` splits the
    second convolution; without batch norm the adds and ReLUs follow the convolutions."""

    def __init__(self, planes, stride=1, down=False, group=1, bn=True):
        super().__init__()
        self.bn = bn
        self.conv1 = layer.Conv2d(planes, 3, stride=stride, padding=1, bias=not bn)
        self.conv2 = layer.Conv2d(planes, 3, padding=1, group=group, bias=not bn)
        self.relu1, self.relu2, self.add = layer.ReLU(), layer.ReLU(), layer.Add()
        if bn:
            self.bn1, self.bn2 = layer.BatchNorm2d(), layer.BatchNorm2d()
        self.down = down
        if down:
            self.dconv = layer.Conv2d(planes, 1, stride=stride, bias=False)
            self.dbn = layer.BatchNorm2d()

    def forward(self, x):
        out = self.conv1(x)
        out = self.relu1(self.bn1(out) if self.bn else out)
        out = self.conv2(out)
        out = self.bn2(out) if self.bn else out
        res = self.dbn(self.dconv(x)) if self.down else x
        return self.relu2(self.add(out, res))


class Net(model.Model):
    def __init__(self):
        super().__init__()
        self.stem = layer.Conv2d(6, 3, padding=1, bias=False)
        self.bn = layer.BatchNorm2d()
        self.relu = layer.ReLU()
        self.b1 = Block(6)                              # identity shortcut
        self.b2 = Block(10, stride=2, down=True)        # strided, 1x1 conv + bn shortcut
        self.b3 = Block(10, group=2)                    # grouped conv
        self.b4 = Block(10, bn=False)                   # conv -> add -> relu
        self.flat = layer.Flatten()
        self.fc = layer.Linear(3)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.relu(self.bn(self.stem(x)))
        return self.fc(self.flat(self.b4(self.b3(self.b2(self.b1(y))))))

    def train_one_batch(self, x, t):
        out = self.forward(x)
        loss = self.loss(out, t)
        self.optimizer(loss)
        return out, loss


# Net's links: 4 blocks x (relu1, relu2, add) + the stem's relu; inference folds 8 batch norms.
# In backward, the batch norms followed by a ReLU alone (the stem's and bn1 of b1-b3) read
# their gradient through its mask (b4 has no batch norm; bn2's gradient is also the shortcut's).
TRAIN_COUNTS = {"batch_norm": 0, "add": 4, "relu": 9, "relu_backward": 4}
INFER_COUNTS = {"batch_norm": 8, "add": 4, "relu": 9, "relu_backward": 0}


def make_device(backend, fusion):
    dev = device.create_cpu_device()
    if not dev.supports_backend(backend):
        pytest.skip("this build has no %s backend" % backend)
    dev.set_backend(backend)
    dev.SetRandSeed(3)
    dev.SetGraphFusion(fusion)
    return dev


def data(dev, nan=False):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 3, 9, 7)).astype(np.float32)  # odd sizes
    if nan:
        x[1, 2, 4, 3] = np.nan
    t = rng.integers(0, 3, 3).astype(np.int32)
    return tensor.from_numpy(x, dev), tensor.from_numpy(t, dev)


def train(backend, graph, fusion=True, steps=3, sequential=False):
    dev = make_device(backend, fusion)
    x, t = data(dev)
    net = Net()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    net.compile([x], is_train=True, use_graph=graph, sequential=sequential)
    losses = [tensor.to_numpy(net(x, t)[1]).copy() for _ in range(steps)]
    params = {k: tensor.to_numpy(v) for k, v in net.get_states().items()}
    counts = dev.graph_fusion_counts() if graph else None
    return losses, params, counts


def close(a, b, what):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=what)


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_fused_equals_unfused_and_eager(backend):
    fused_losses, fused_params, counts = train(backend, True, True)
    plain_losses, plain_params, none = train(backend, True, False)
    eager_losses, eager_params, _ = train(backend, False)
    assert counts == TRAIN_COUNTS
    assert set(none.values()) == {0}  # SetGraphFusion(False): all off
    for other_losses, other_params in ((plain_losses, plain_params), (eager_losses, eager_params)):
        close(np.array(fused_losses), np.array(other_losses), "loss")
        for k in fused_params:  # every parameter after 3 steps: every gradient took part
            close(fused_params[k], other_params[k], k)


def test_a_residual_written_after_the_producer_is_not_read_early():
    # In submission order b2's shortcut (dconv, dbn) runs after bn2: bn2 must not absorb the add
    # (it would read the shortcut before it is written); the shortcut's batch norm, which runs
    # after both, absorbs it instead (an add's operands are interchangeable).
    losses, params, counts = train("cpu", True, sequential=True)
    eager_losses, eager_params, _ = train("cpu", False)
    assert counts == TRAIN_COUNTS
    close(np.array(losses), np.array(eager_losses), "loss")
    for k in params:
        close(params[k], eager_params[k], k)


def record_inference(net, dev, x):
    """Records net.forward(x) in evaluation mode as the device's graph; returns its output."""
    net.eval()
    dev.ResetGraph()
    dev.EnableGraph(True)
    out = net.forward(x)
    dev.EnableGraph(False)
    out.creator = None
    gc.collect()  # the recording's temporaries: only the graph holds them
    return out


def trained_net(backend):
    dev = make_device(backend, True)
    x, t = data(dev)
    net = Net()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    net.compile([x], is_train=True, use_graph=False)
    for _ in range(2):  # running statistics away from (0, 1)
        net(x, t)
    return net, dev, x


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_folds_batch_norm_and_follows_parameter_changes(backend):
    net, dev, x = trained_net(backend)
    net.eval()
    eager = tensor.to_numpy(net.forward(x))
    out = record_inference(net, dev, x)
    dev.RunGraph(False)
    assert dev.graph_fusion_counts() == INFER_COUNTS
    close(tensor.to_numpy(out), eager, "fused inference")
    # parameters changed between replays (a load, a step): the folding must see them
    rng = np.random.default_rng(1)
    for k, v in net.get_states().items():
        if "running_var" in k:
            v.copy_from_numpy(rng.uniform(0.5, 2.0, v.shape).astype(np.float32))
        elif "running_mean" in k or k.endswith(".scale") or k.endswith(".bias"):
            v.copy_from_numpy(rng.standard_normal(v.shape).astype(np.float32))
    dev.RunGraph(False)
    dev.EnableGraph(False)
    replayed = tensor.to_numpy(out)
    dev.ResetGraph()
    close(replayed, tensor.to_numpy(net.forward(x)), "after the parameters changed")
    dev.SetGraphFusion(False)
    out = record_inference(net, dev, x)
    dev.RunGraph(False)
    assert dev.graph_num_fused() == 0
    close(tensor.to_numpy(out), replayed, "unfused inference")
    dev.ResetGraph()


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_propagates_through_every_fused_path(backend):
    results = {}
    for fusion in (True, False):
        net, dev, _ = trained_net(backend)
        x, _ = data(dev, nan=True)
        dev.SetGraphFusion(fusion)
        out = record_inference(net, dev, x)
        dev.RunGraph(False)
        results[fusion] = tensor.to_numpy(out)
        assert dev.graph_num_fused() == (sum(INFER_COUNTS.values()) if fusion else 0)
        dev.ResetGraph()
    # the NaN pixel reaches sample 1's logits (through conv, folded bn, add, relu) and only them
    np.testing.assert_array_equal(np.isnan(results[True]), np.isnan(results[False]))
    assert np.isnan(results[True][1]).all() and not np.isnan(results[True][[0, 2]]).any()
    close(results[True][[0, 2]], results[False][[0, 2]], "the samples without NaN")


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_in_training_reaches_the_loss(backend):
    dev = make_device(backend, True)
    x, t = data(dev, nan=True)
    net = Net()
    net.set_optimizer(opt.SGD(lr=0.05))
    net.compile([x], is_train=True, use_graph=True)
    out, loss = net(x, t)
    assert dev.graph_fusion_counts() == TRAIN_COUNTS
    # batch statistics mix the samples: the NaN spreads to every output, as unfused
    assert np.isnan(tensor.to_numpy(loss)).all()


def test_resnet18_fuses_every_relu_and_add():
    dev = make_device("dnnl" if device.create_cpu_device().supports_backend("dnnl") else "cpu",
                      True)
    rng = np.random.default_rng(0)
    x = tensor.from_numpy(rng.standard_normal((2, 3, 32, 32)).astype(np.float32), dev)
    t = tensor.from_numpy(np.array([1, 7], np.int32), dev)
    net = models.resnet18()
    net.set_optimizer(opt.SGD(lr=0.01, momentum=0.9))
    net.compile([x], is_train=True, use_graph=True)
    net(x, t)
    # 17 ReLUs (stem + 2 per block) and the 8 residual adds; before: 9 ReLUs, no add. In
    # backward, the stem's and each block's first batch norm read through their ReLU's mask.
    assert dev.graph_fusion_counts() == {"batch_norm": 0, "add": 8, "relu": 17,
                                         "relu_backward": 9}
    out = record_inference(net, dev, x)
    dev.RunGraph(False)
    assert dev.graph_fusion_counts() == {"batch_norm": 20, "add": 8, "relu": 17,
                                         "relu_backward": 0}
    fused = tensor.to_numpy(out)
    dev.ResetGraph()
    close(fused, tensor.to_numpy(net.forward(x)), "ResNet-18 inference")
