"""Introspection of the computational graph: DOT output, rendering, profiling, memory plan."""
import shutil

import numpy as np
import pytest

from singa import device, graph, layer, model, opt, singa_wrap, tensor


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


def test_dot_labels_blocks_with_user_names(trained):
    dot = graph.to_dot(trained)
    # Parameters under their state names, the inputs and the results; the rest keep ids.
    for name in ("l1.W", "l1.b", "l2.W", "l2.b", "input[0]", "input[1]"):
        assert 'label="%s (' % name in dot, name
    w = [ln for ln in dot.splitlines() if 'label="l1.W (' in ln][0]
    assert "(%d B)" % (16 * 12 * 4) in w         # Linear(16) on 12 features: a 12x16 float32 W
    assert 'label="b' in dot                      # unnamed temporaries


def test_name_blocks_and_block_ids():
    dev = device.create_cpu_device(201)
    a = tensor.from_numpy(np.ones((3, 3), np.float32), dev)
    v = singa_wrap.Reshape(a.data, (9,))          # a view: same block
    assert v.block_id() == a.data.block_id() != 0
    graph.name_blocks(inputs=[a], extra={"k": a})
    assert a.data.block_name() == "extra[k]"      # the last name given wins
    graph.name_blocks(inputs=[a])
    assert v.block_name() == "input[0]"
    dev.EnableGraph(True)
    b = a * 2.0
    dev.EnableGraph(False)
    dev.RunGraph()
    assert 'label="input[0] (36 B)"' in graph.to_dot(dev)
    np.testing.assert_array_equal(tensor.to_numpy(b), np.full((3, 3), 2.0))
    dev.ResetGraph()
