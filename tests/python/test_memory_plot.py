"""singa.graph's picture of memory: the layout it draws is the planner's (every recyclable block
in the arena, no two blocks alive at once overlapping), the live-bytes curve peaks at the
planner's lower bound, and matplotlib stays an optional dependency."""
import sys

import numpy as np
import pytest

from singa import device, graph, layer, model, opt, tensor


class _Net(model.Model):
    def __init__(self):
        super().__init__()
        self.c1 = layer.Conv2d(8, 3, padding=1)
        self.r1 = layer.ReLU()
        self.flat = layer.Flatten()
        self.l1 = layer.Linear(10)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.l1(self.flat(self.r1(self.c1(x))))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


@pytest.fixture(scope="module")
def ran():
    dev = device.create_cpu_device(210)
    net = _Net()
    net.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    rng = np.random.default_rng(0)
    tx = tensor.from_numpy(rng.standard_normal((4, 3, 8, 8)).astype(np.float32), dev)
    ty = tensor.from_numpy(np.array([1, 2, 3, 4], np.int32), dev)
    net.compile([tx], is_train=True, use_graph=True, sequential=False)
    net.train()
    net(tx, ty)
    yield dev
    dev.ResetGraph()


def test_layout_is_the_plan(ran):
    blocks = graph.memory_layout(ran)
    plan = graph.memory_plan(ran)
    n = len(ran.graph_op_names())
    assert n == ran.graph_num_nodes() > 5
    rec = [b for b in blocks if b["recyclable"]]
    assert len(rec) == plan["num_recyclable"] > 0
    assert sum(b["size"] for b in blocks if not b["recyclable"]) == plan["persistent_bytes"]
    align = lambda s: (s + 63) // 64 * 64  # noqa: E731
    for b in rec:
        assert 0 <= b["first"] <= b["last"] < n
        assert b["offset"] + align(b["size"]) <= plan["arena_bytes"]
        assert b["kind"] in ("intermediate", "end")
    # The planner's invariant, seen from Python: blocks alive at once never share bytes.
    for i, p in enumerate(rec):
        for q in rec[i + 1:]:
            if p["first"] <= q["last"] and q["first"] <= p["last"]:
                assert (p["offset"] + align(p["size"]) <= q["offset"] or
                        q["offset"] + align(q["size"]) <= p["offset"]), (p, q)
    # Parameters are named by the Model and are not recyclable.
    named = {b["name"]: b for b in blocks if b["name"]}
    assert {"c1.W", "l1.W", "input[0]", "input[1]"} <= set(named)
    assert not named["c1.W"]["recyclable"] and named["c1.W"]["kind"] == "input"


def test_live_bytes_peak_is_the_lower_bound(ran):
    live, lower = graph.live_bytes(ran)
    assert len(live) == ran.graph_num_nodes()
    assert lower == max(live) == graph.memory_plan(ran)["lower_bound_bytes"]
    assert live[-1] >= 0 and min(live) >= 0


def test_plot_memory_draws_every_block(ran, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "mem.png"
    fig = graph.plot_memory(ran, str(path), title="t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10000
    top, bottom = fig.axes[:2]
    plan = graph.memory_plan(ran)
    assert len(top.patches) == plan["num_recyclable"]
    # Rectangles sit where the plan put the blocks (MiB on y, positions on x).
    rec = sorted((b for b in graph.memory_layout(ran) if b["recyclable"]),
                 key=lambda b: (b["first"], b["offset"]))
    got = sorted(((p.get_x(), p.get_y() * 2 ** 20) for p in top.patches))
    want = sorted(((b["first"], b["offset"]) for b in rec))
    np.testing.assert_allclose(np.array(got), np.array(want, dtype=float), rtol=1e-9)
    ys = bottom.lines[0].get_ydata()
    assert max(ys) * 2 ** 20 == pytest.approx(plan["lower_bound_bytes"])


def test_plot_memory_without_matplotlib_says_how_to_get_it(ran, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        graph.plot_memory(ran)


def test_plot_memory_needs_a_run_graph():
    pytest.importorskip("matplotlib")
    dev = device.create_cpu_device(211)
    with pytest.raises(ValueError, match="no built graph"):
        graph.plot_memory(dev)


@pytest.mark.parametrize("label_top", [3, 100])
def test_plot_memory_labels_never_overlap(ran, tmp_path, label_top):
    # Each label sits inside its own block's rectangle and clear of the other labels and of the
    # legend, measured on the drawn figure (issue 16: overlapping labels were unreadable).
    pytest.importorskip("matplotlib")
    fig = graph.plot_memory(ran, str(tmp_path / "mem.png"), label_top=label_top)
    top = fig.axes[0]
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig).draw()
    r = fig.canvas.get_renderer()
    texts = [t for t in top.texts if t.get_text()]
    assert 1 <= len(texts) <= label_top
    boxes = [t.get_window_extent(r) for t in texts]
    for i, a in enumerate(boxes):
        assert not a.overlaps(top.get_legend().get_window_extent(r)), texts[i].get_text()
        for j in range(i):
            assert not a.overlaps(boxes[j]), (texts[i].get_text(), texts[j].get_text())
        x, y = texts[i].get_position()
        owner = [p for p in top.patches if p.get_x() <= x <= p.get_x() + p.get_width() and
                 p.get_y() <= y <= p.get_y() + p.get_height()]
        assert any(p.get_window_extent(r).contains(a.x0, a.y0) and
                   p.get_window_extent(r).contains(a.x1, a.y1) for p in owner), texts[i].get_text()
