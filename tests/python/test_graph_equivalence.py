"""Graph mode gives eager mode's numbers: the example models (MLP, the seed's CNN, ResNet-18, a
small Xception: separable convolutions in layer lists registered with register_layers),
both execution orders, the static planner on and off, every optimizer, batch norm and dropout."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import models  # noqa: E402
from singa import device, layer, model, opt, tensor  # noqa: E402

N = tensor.to_numpy
SHAPES = {"mlp": (784,), "cnn": (1, 28, 28), "resnet18": (3, 32, 32), "xception": (3, 32, 32)}
BATCH = {"mlp": 8, "cnn": 4, "resnet18": 2, "xception": 2}
STEPS = {"mlp": 6, "cnn": 4, "resnet18": 3, "xception": 3}
OPTIMIZERS = {
    "sgd": lambda: opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-4),
    "nesterov": lambda: opt.SGD(lr=opt.ExponentialDecay(0.05, 2, 0.5), momentum=0.9,
                                nesterov=True),
    "adam": lambda: opt.Adam(lr=0.005),
    "rmsprop": lambda: opt.RMSProp(lr=0.005),
    "adagrad": lambda: opt.AdaGrad(lr=0.01),
}


def build(name):
    return {"mlp": models.MLP, "cnn": models.CNN, "resnet18": models.resnet18,
            "xception": models.Xception}[name]()


def data(name, steps, seed=0):
    rng = np.random.default_rng(seed)
    shape = (BATCH[name],) + SHAPES[name]
    return [(rng.standard_normal(shape).astype(np.float32),
             rng.integers(0, 10, BATCH[name]).astype(np.int32)) for _ in range(steps)]


def run(net, dev, batches):
    """Trains on the batches; returns the losses and the final states."""
    tx = tensor.Tensor(batches[0][0].shape, dev)
    ty = tensor.Tensor(batches[0][1].shape, dev, tensor.int32)
    losses = []
    for x, y in batches:
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _, loss = net(tx, ty)
        losses.append(N(loss).copy())
    return np.concatenate(losses), {k: N(v) for k, v in net.get_states().items()}


def twin(name, make_opt, dev, use_graph, sequential, init_states=None):
    net = build(name)
    net.set_optimizer(make_opt())
    tx = tensor.Tensor((BATCH[name],) + SHAPES[name], dev)
    net.compile([tx], is_train=True, use_graph=use_graph, sequential=sequential)
    if init_states is not None:
        net.set_states(init_states)
    return net


_reference = {}


def eager_reference(name, opt_name):
    """Eager losses and states of one model/optimizer pair (computed once, shared)."""
    key = (name, opt_name)
    if key not in _reference:
        dev = device.create_cpu_device(100)
        net = twin(name, OPTIMIZERS[opt_name], dev, False, False)
        init = {k: N(v).copy() for k, v in net.get_states().items()}
        losses, states = run(net, dev, data(name, STEPS[name]))
        _reference[key] = (init, losses, states)
    return _reference[key]


def check(name, opt_name, sequential, planned):
    init, e_losses, e_states = eager_reference(name, opt_name)
    dev = device.create_cpu_device(101)
    dev.SetGraphPlanning(planned)
    init_t = {k: tensor.from_numpy(v, dev) for k, v in init.items()}
    net = twin(name, OPTIMIZERS[opt_name], dev, True, sequential, init_t)
    g_losses, g_states = run(net, dev, data(name, STEPS[name]))
    np.testing.assert_allclose(g_losses, e_losses, rtol=1e-5, atol=1e-6)
    assert g_states.keys() == e_states.keys()
    for k in e_states:
        np.testing.assert_allclose(g_states[k], e_states[k], rtol=1e-4, atol=1e-5, err_msg=k)
    plan = dev.graph_memory_plan()
    assert plan["num_recyclable"] > 0
    if planned:
        assert plan["arena_bytes"] >= plan["lower_bound_bytes"]
    dev.ResetGraph()


@pytest.mark.parametrize("planned", [True, False], ids=["planner", "no-planner"])
@pytest.mark.parametrize("sequential", [False, True], ids=["bfs", "serial"])
@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet18", "xception"])
def test_models_graph_matches_eager(name, sequential, planned):
    check(name, "sgd", sequential, planned)


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_every_optimizer_graph_matches_eager(name, opt_name):
    check(name, opt_name, False, True)


class DropoutNet(model.Model):
    def __init__(self):
        super().__init__()
        self.l1 = layer.Linear(32)
        self.relu = layer.ReLU()
        self.drop = layer.Dropout(0.5)
        self.l2 = layer.Linear(10)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.l2(self.drop(self.relu(self.l1(x))))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


@pytest.mark.parametrize("sequential", [False, True], ids=["bfs", "serial"])
def test_dropout_with_a_fixed_seed_graph_matches_eager(sequential):
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((8, 20)).astype(np.float32),
                rng.integers(0, 10, 8).astype(np.int32)) for _ in range(5)]
    results = []
    for use_graph in (False, True):
        dev = device.create_cpu_device(102 + use_graph)
        dev.SetRandSeed(7)
        net = DropoutNet()
        net.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
        tx = tensor.Tensor((8, 20), dev)
        net.compile([tx], is_train=True, use_graph=use_graph, sequential=sequential)
        dev.SetRandSeed(11)  # the same generator state before the first training step
        results.append(run(net, dev, batches))
        dev.ResetGraph()
    (e_losses, e_states), (g_losses, g_states) = results
    np.testing.assert_allclose(g_losses, e_losses, rtol=1e-5)
    for k in e_states:
        np.testing.assert_allclose(g_states[k], e_states[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert len(set(np.round(e_losses, 5))) > 1  # dropout really drew different masks


# ---- transformers: an encoder with a padding mask, a decoder-only (causal) GPT -------------
def _gpt(dropout=0.0):
    import gpt
    return gpt.GPT(11, 8, d_model=16, nhead=2, num_layers=2, dropout=dropout)


def _encoder_classifier():
    import transformer_classifier
    return transformer_classifier.EncoderClassifier(4, 8, d_model=16, nhead=2, num_layers=2,
                                                    dropout=0.0)


def _token_batches(name, steps, rng):
    if name.startswith("gpt"):
        return [(rng.integers(0, 11, (4, 8)).astype(np.int32),
                 rng.integers(0, 11, (4, 8)).astype(np.int32)) for _ in range(steps)]
    out = []
    for _ in range(steps):
        pad = np.zeros((4, 8), np.int32)
        pad[1, 5:] = pad[3, 2:] = 1
        out.append((rng.integers(1, 13, (4, 8)).astype(np.int32) * (1 - pad), pad,
                    rng.integers(0, 4, 4).astype(np.int32)))
    return out


@pytest.mark.parametrize("sequential", [False, True], ids=["bfs", "serial"])
@pytest.mark.parametrize("name", ["gpt", "gpt-dropout", "encoder"])
def test_transformers_graph_matches_eager(name, sequential):
    # gpt-dropout: dropout in the blocks and inside the fused attention, the same draws
    batches = _token_batches(name, 4, np.random.default_rng(5))
    results = []
    for use_graph in (False, True):
        dev = device.create_cpu_device(110 + use_graph)
        dev.SetRandSeed(7)
        net = _encoder_classifier() if name == "encoder" else _gpt(0.2 * (name == "gpt-dropout"))
        net.set_optimizer(opt.Adam(lr=0.01))
        ts = [tensor.from_numpy(a, dev) for a in batches[0]]
        net.compile(ts[:-1], is_train=True, use_graph=use_graph, sequential=sequential)
        if use_graph:
            net.set_states(init)
        else:
            init = {k: N(v).copy() for k, v in net.get_states().items()}
        dev.SetRandSeed(11)  # the same generator state before the first training step
        losses = []
        for batch in batches:
            for t, a in zip(ts, batch):
                t.copy_from_numpy(a)
            losses.append(N(net(*ts)[1]).copy())
        results.append((np.concatenate(losses), {k: N(v) for k, v in net.get_states().items()}))
        if use_graph:
            assert dev.graph_memory_plan()["num_recyclable"] > 0
        dev.ResetGraph()
    (e_losses, e_states), (g_losses, g_states) = results
    np.testing.assert_allclose(g_losses, e_losses, rtol=1e-5, atol=1e-6)
    assert e_losses[-1] < e_losses[0]  # it trains
    for k in e_states:
        np.testing.assert_allclose(g_states[k], e_states[k], rtol=1e-4, atol=1e-5, err_msg=k)
