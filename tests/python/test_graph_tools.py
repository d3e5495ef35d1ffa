"""Introspection of the computational graph: DOT output, rendering, profiling, memory plan."""
import shutil

import numpy as np
import pytest

from singa import device, graph, layer, model, opt, tensor


class Tiny(model.Model):
    def __init__(self):
        super().__init__()
        self.l1 = layer.Linear(16)
        self.relu = layer.ReLU()
        self.l2 = layer.Linear(4)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.l2(self.relu(self.l1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


@pytest.fixture
def trained():
    dev = device.create_cpu_device(200)
    net = Tiny()
    net.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    tx = tensor.from_numpy(np.ones((8, 12), np.float32), dev)
    ty = tensor.from_numpy(np.arange(8, dtype=np.int32) % 4, dev)
    net.compile([tx], is_train=True, use_graph=True, sequential=False)
    dev.SetVerbosity(1)
    dev.SetSkipIteration(1)
    for _ in range(4):
        net(tx, ty)
    yield dev
    dev.SetVerbosity(0)
    dev.ResetGraph()


def test_dot_has_every_operation(trained):
    dot = graph.to_dot(trained)
    assert dot.startswith("digraph")
    n = trained.graph_num_nodes()
    assert n > 5
    for i in range(n):
        assert "op%d [label=" % i in dot
    assert "Mult" in dot and "SGDUpdate" in dot and "->" in dot


def test_save_and_render(trained, tmp_path):
    p = graph.save_dot(trained, str(tmp_path / "g.dot"))
    assert open(p).read() == graph.to_dot(trained)
    if shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="graphviz"):
            graph.render(trained, str(tmp_path / "g.svg"))
    else:
        graph.render(trained, str(tmp_path / "g.svg"))
        assert b"<svg" in (tmp_path / "g.svg").read_bytes()


def test_profile_lists_operations(trained):
    text = graph.profile(trained)
    assert "3 iterations measured" in text
    assert "Mult" in text and "ms/iter" in text


def test_memory_plan_and_device_counters(trained):
    plan = graph.memory_plan(trained)
    assert plan["num_recyclable"] > 0
    assert plan["lower_bound_bytes"] <= plan["arena_bytes"] <= plan["recyclable_bytes"]
    stats = device.get_memory_stats(trained)
    assert stats["peak_in_use"] >= stats["in_use"] > 0
