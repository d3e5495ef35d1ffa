"""A memory budget for the graph, met by recomputation (cpp/include/singa/graph/remat.h): a
budgeted step trains to bit-identical losses and parameters, the plan fits the budget and falls
with it, and a budget below the least plan raises OutOfMemoryError stating that least."""
import re

import numpy as np
import pytest

from singa import autograd, device, graph, layer, model, opt, singa_wrap, tensor


class MLP(model.Model):
    def __init__(self, width=48, depth=5):
        super().__init__()
        self.fcs = [layer.Linear(width) for _ in range(depth)]
        for i, fc in enumerate(self.fcs):
            setattr(self, "fc%d" % i, fc)
        self.relu = layer.ReLU()
        self.out = layer.Linear(5)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        for fc in self.fcs:
            x = self.relu(fc(x))
        return self.out(x)

    def train_one_batch(self, x, t):
        out = self.forward(x)
        loss = self.loss(out, t)
        self.optimizer(loss)
        return out, loss


class CNN(MLP):
    """Convolutions with batch norm, fused ReLUs, max pooling and dropout."""

    def __init__(self):
        model.Model.__init__(self)
        self.conv1 = layer.Conv2d(6, 3, padding=1)
        self.bn1 = layer.BatchNorm2d()
        self.relu1 = layer.ReLU()
        self.conv2 = layer.Conv2d(8, 3, padding=1)
        self.relu2 = layer.ReLU()
        self.pool = layer.MaxPool2d(2, 2)
        self.drop = layer.Dropout(ratio=0.3)
        self.conv3 = layer.Conv2d(8, 3, padding=1)
        self.relu3 = layer.ReLU()
        self.flat = layer.Flatten()
        self.out = layer.Linear(5)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.relu1(self.bn1(self.conv1(x)))
        y = self.drop(self.pool(self.relu2(self.conv2(y))))
        return self.out(self.flat(self.relu3(self.conv3(y))))


class ResBlock(MLP):
    """A ResNet-ish stack: conv-bn-relu (fused) twice and an identity shortcut, three times."""

    def __init__(self, blocks=3):
        model.Model.__init__(self)
        self.stem = layer.Conv2d(8, 3, padding=1)
        self.stem_relu = layer.ReLU()
        self.parts = []
        for i in range(blocks):
            part = [layer.Conv2d(8, 3, padding=1, bias=False), layer.BatchNorm2d(), layer.ReLU(),
                    layer.Conv2d(8, 3, padding=1, bias=False), layer.BatchNorm2d(), layer.ReLU()]
            for j, lyr in enumerate(part):
                setattr(self, "b%d_%d" % (i, j), lyr)
            self.parts.append(part)
        self.flat = layer.Flatten()
        self.out = layer.Linear(5)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.stem_relu(self.stem(x))
        for c1, bn1, r1, c2, bn2, r2 in self.parts:
            h = r1(bn1(c1(y)))
            y = r2(autograd.add(bn2(c2(h)), y))
        return self.out(self.flat(y))


class DropMLP(MLP):
    """Dropout after every hidden ReLU: masks drawn once per step, outputs recomputable."""

    def __init__(self):
        super().__init__(width=64, depth=4)
        self.drop = layer.Dropout(ratio=0.4)

    def forward(self, x):
        for fc in self.fcs:
            x = self.drop(self.relu(fc(x)))
        return self.out(x)


class NormMLP(MLP):
    """Linear -> ReLU -> LayerNorm: the norm's output is the next product's input, which that
    product's backward reads (as in a transformer's pre-norm blocks)."""

    def __init__(self):
        super().__init__(width=64, depth=4)
        self.norms = [layer.LayerNorm() for _ in self.fcs]
        for i, n in enumerate(self.norms):
            setattr(self, "ln%d" % i, n)

    def forward(self, x):
        for fc, norm in zip(self.fcs, self.norms):
            x = norm(self.relu(fc(x)))
        return self.out(x)


def _data(kind):
    rng = np.random.default_rng(0)
    shape = (32, 20) if kind.__name__.endswith("MLP") else (4, 3, 8, 8)
    return (rng.standard_normal(shape).astype(np.float32),
            rng.integers(0, 5, shape[0]).astype(np.int32))


def train(kind, budget=None, steps=3, strategy="greedy", cost="measured"):
    dev = device.create_cpu_device(400)
    dev.SetRandSeed(11)
    x, t = _data(kind)
    tx, tt = tensor.from_numpy(x, dev), tensor.from_numpy(t, dev)
    net = kind()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    if budget is not None:
        dev.SetMemoryBudget(budget, strategy, cost=cost)
    net.compile([tx], is_train=True, use_graph=True)
    losses = [tensor.to_numpy(net(tx, tt)[1]).copy() for _ in range(steps)]
    params = {k: tensor.to_numpy(v) for k, v in net.get_states().items()}
    return losses, params, graph.memory_plan(dev), dev


def _total(plan):
    return plan["persistent_bytes"] + plan["arena_bytes"]


def _least(err):
    return int(re.search(r"needs at least (\d+) bytes", str(err)).group(1))


@pytest.mark.parametrize("kind", [MLP, CNN, ResBlock], ids=["mlp", "cnn-bn-dropout", "resblock"])
def test_budgeted_training_is_bit_identical_and_fits(kind):
    ref_losses, ref_params, free, _ = train(kind)
    total = _total(free)
    # The least budget any plan reaches, read from the error a tiny budget raises.
    with pytest.raises(singa_wrap.OutOfMemoryError, match="needs at least") as err:
        train(kind, budget=free["persistent_bytes"] + 64, steps=1)
    least = _least(err.value)
    assert free["persistent_bytes"] < least < total
    last_arena, recomputed = free["arena_bytes"], 0
    budgets = {total, int(0.9 * total), (total + least) // 2, least}
    for budget in sorted((b for b in budgets if b >= least), reverse=True):
        losses, params, plan, _ = train(kind, budget=budget)
        np.testing.assert_array_equal(np.array(losses), np.array(ref_losses), err_msg=str(budget))
        for k in ref_params:
            np.testing.assert_array_equal(params[k], ref_params[k], err_msg="%s %d" % (k, budget))
        assert _total(plan) <= budget
        assert plan["arena_bytes"] <= last_arena  # falls with the budget
        last_arena = plan["arena_bytes"]
        recomputed = max(recomputed, plan["num_recomputed"])
    assert recomputed > 0
    with pytest.raises(singa_wrap.OutOfMemoryError, match="at least %d bytes" % least):
        train(kind, budget=least - 1, steps=1)


def _at_least_budget(kind):
    """Training at the least budget the planner reaches, and the names of what it recomputed."""
    ref_losses, ref_params, free, _ = train(kind)
    with pytest.raises(singa_wrap.OutOfMemoryError) as err:
        train(kind, budget=free["persistent_bytes"] + 64, steps=1)
    losses, params, plan, dev = train(kind, budget=_least(err.value))
    np.testing.assert_array_equal(np.array(losses), np.array(ref_losses))
    for k in ref_params:  # the running statistics included: a rerun never updates them
        np.testing.assert_array_equal(params[k], ref_params[k], err_msg=k)
    return [n[:-len(" (recomputed)")] for n in dev.graph_op_names() if n.endswith("(recomputed)")]


def test_batch_norm_in_training_is_recomputed_from_its_saved_statistics():
    names = _at_least_budget(ResBlock)
    assert "BatchNormForwardTraining" in names


def test_dropout_is_recomputed_with_the_mask_it_drew():
    # The mask is a block the forward drew (Bernoulli, never rerun: the generator would move
    # on); the multiply applying it is what reruns.
    names = _at_least_budget(DropMLP)
    assert "EltwiseMult" in names and "Bernoulli" not in names


def test_layer_norm_is_recomputed_with_its_statistics_into_scratch():
    # The backward reads the saved mean and rstd; the rerun writes its own into scratch.
    names = _at_least_budget(NormMLP)
    assert "LayerNormForward" in names


def test_fraction_budget_and_compile_argument():
    _, _, free, _ = train(MLP)
    dev = device.create_cpu_device(400)
    x, t = _data(MLP)
    tx, tt = tensor.from_numpy(x, dev), tensor.from_numpy(t, dev)
    net = MLP()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    net.compile([tx], is_train=True, use_graph=True, memory_budget=0.9)
    assert dev.GetMemoryBudget() == 0.9
    net(tx, tt)
    plan = graph.memory_plan(dev)
    assert plan["budget_bytes"] == int(0.9 * _total(free))
    assert _total(plan) <= plan["budget_bytes"] and plan["num_recomputed"] > 0
    dev.SetMemoryBudget(None)  # read at the next build: back to the unconstrained plan
    assert dev.GetMemoryBudget() is None
    net(tx, tt)
    assert graph.memory_plan(dev)["arena_bytes"] == free["arena_bytes"]
    dev.SetMemoryBudget(12345)
    assert dev.GetMemoryBudget() == 12345


def test_a_rebuilt_graph_gives_its_old_arena_back():
    # A new plan (a new budget, or the replan by measured times) frees the old arena before
    # allocating its own; the pool must not keep the old one cached beside it, or a budgeted
    # step's RSS exceeds its budget (seen on ResNet-50: 1392 MiB RSS for an 847 MiB plan).
    # Activations of 16 MiB: arenas well above the pool's 32 MiB chunks.
    dev = device.create_cpu_device(400)
    rng = np.random.default_rng(0)
    tx = tensor.from_numpy(rng.standard_normal((16384, 64)).astype(np.float32), dev)
    tt = tensor.from_numpy(rng.integers(0, 5, 16384).astype(np.int32), dev)
    net = MLP(width=256, depth=4)
    net.set_optimizer(opt.SGD(lr=0.05))
    net.compile([tx], is_train=True, use_graph=True, memory_budget=0.8)
    net(tx, tt)
    old = graph.memory_plan(dev)["arena_bytes"]
    before = device.get_memory_stats(dev)["reserved"]
    dev.SetMemoryBudget(None)
    net(tx, tt)
    new = graph.memory_plan(dev)["arena_bytes"]
    assert new > old > 48 << 20, (old, new)
    grown = device.get_memory_stats(dev)["reserved"] - before
    assert grown < new - old // 2, (grown, old, new)


def test_measured_costs_replan_bit_identically_within_the_budget():
    # Steps 1-5 run the estimate's plan and time every operation; the sixth replans by those
    # times (graph.h: "Cost model"). Whatever it picks, the bits and the budget hold.
    ref_losses, ref_params, free, _ = train(ResBlock, steps=7)
    with pytest.raises(singa_wrap.OutOfMemoryError) as err:
        train(ResBlock, budget=free["persistent_bytes"] + 64, steps=1)
    budget = (_total(free) + _least(err.value)) // 2
    for cost, measured in [("measured", True), ("estimate", False)]:
        losses, params, plan, _ = train(ResBlock, budget=budget, steps=7, cost=cost)
        np.testing.assert_array_equal(np.array(losses), np.array(ref_losses), err_msg=cost)
        for k in ref_params:
            np.testing.assert_array_equal(params[k], ref_params[k], err_msg=k)
        assert plan["cost_measured"] == measured and plan["num_recomputed"] > 0
        assert _total(plan) <= budget
    with pytest.raises(singa_wrap.ArgumentError, match="cost"):
        device.create_cpu_device(400).SetMemoryBudget(0.5, cost="guess")


@pytest.mark.parametrize("kind", [CNN, ResBlock], ids=["cnn-bn-dropout", "resblock"])
def test_the_least_budget_holds_through_the_measured_replan(kind):
    # The error names the least budget; a graph given exactly that budget must keep running
    # after the sixth step replans by measured times (the plan it keeps is placed as it was
    # first placed, not more loosely).
    ref_losses, ref_params, free, _ = train(kind, steps=7)
    with pytest.raises(singa_wrap.OutOfMemoryError) as err:
        train(kind, budget=free["persistent_bytes"] + 64, steps=1)
    least = _least(err.value)
    losses, params, plan, _ = train(kind, budget=least, steps=7)
    assert plan["cost_measured"] and _total(plan) <= least
    np.testing.assert_array_equal(np.array(losses), np.array(ref_losses))
    for k in ref_params:
        np.testing.assert_array_equal(params[k], ref_params[k], err_msg=k)


def test_early_reruns_recompute_less_than_the_unrefined_greedy():
    # remat.h, "Early reruns": a block's main rerun moved to the recomputation that needs it
    # replaces a transient rerun; "greedy-unrefined" is the planner without them. The same bits
    # and budget either way, fewer recomputations with them (the estimate: deterministic).
    ref_losses, ref_params, free, _ = train(ResBlock)
    budget = int(free["persistent_bytes"] + 0.7 * free["arena_bytes"])
    plans = {}
    for strategy in ("greedy", "greedy-unrefined"):
        losses, params, plan, _ = train(ResBlock, budget=budget, strategy=strategy,
                                        cost="estimate")
        np.testing.assert_array_equal(np.array(losses), np.array(ref_losses), err_msg=strategy)
        for k in ref_params:
            np.testing.assert_array_equal(params[k], ref_params[k], err_msg=k)
        assert _total(plan) <= budget
        plans[strategy] = plan
    early, unrefined = plans["greedy"], plans["greedy-unrefined"]
    assert 0 < early["num_recomputed"] < unrefined["num_recomputed"]
    assert early["recompute_cost"] < unrefined["recompute_cost"]


@pytest.mark.parametrize("bad", [1.5, -3, 0.0 - 0.5, "half", True])
def test_bad_budgets_are_refused(bad):
    dev = device.create_cpu_device(400)
    with pytest.raises(singa_wrap.ArgumentError):
        dev.SetMemoryBudget(bad)
    with pytest.raises(singa_wrap.ArgumentError, match="strategy"):
        dev.SetMemoryBudget(0.5, strategy="magic")


def test_chen_sqrt_n_baseline_is_bit_identical():
    ref_losses, ref_params, free, _ = train(ResBlock)
    losses, params, plan, _ = train(ResBlock, budget=1.0, strategy="sqrt")
    np.testing.assert_array_equal(np.array(losses), np.array(ref_losses))
    assert plan["num_recomputed"] > 0 and _total(plan) <= _total(free)


def test_plot_marks_recomputed_ranges_and_profile_counts_them(tmp_path, capfd):
    pytest.importorskip("matplotlib")
    _, _, free, _ = train(ResBlock)
    dev = device.create_cpu_device(400)
    dev.SetRandSeed(11)
    x, t = _data(ResBlock)
    tx, tt = tensor.from_numpy(x, dev), tensor.from_numpy(t, dev)
    net = ResBlock()
    net.set_optimizer(opt.SGD(lr=0.05))
    net.compile([tx], is_train=True, use_graph=True, memory_budget=0.8)
    dev.SetVerbosity(1)
    dev.SetSkipIteration(0)
    for _ in range(2):
        net(tx, tt)
    plan = graph.memory_plan(dev)
    names = dev.graph_op_names()
    assert sum(n.endswith("(recomputed)") for n in names) == plan["num_recomputed"] > 0
    blocks = graph.memory_layout(dev)
    assert any(b["recomputed"] for b in blocks)
    fig = graph.plot_memory(dev, str(tmp_path / "m.png"))
    ax = fig.axes[0]
    assert any(p.get_hatch() for p in ax.patches)  # the ranges after a recomputation
    budget_line = _total(plan) and (plan["budget_bytes"] - plan["persistent_bytes"]) / 2.0 ** 20
    assert any(abs(line.get_ydata()[0] - budget_line) < 1e-9 for line in ax.get_lines())
    dev.PrintTimeProfiling()
    out = capfd.readouterr().out
    assert "(recomputed)" in out
    assert re.search(r"recomputed: %d operations per step" % plan["num_recomputed"], out)
    dev.SetVerbosity(0)


def _train_with_layouts(make_net, shape, budget=None, steps=3):
    """(losses, params, layout counts, plan) of a net trained on the dnnl backend with the
    graph's blocked layouts on (test_graph_layouts.py's setting), under `budget` (a fraction of
    the arena on top of the persistent blocks, as bench_remat_cost.py sets it)."""
    import test_graph_layouts as lay
    dev = lay.make_device(True)
    x, t = lay.data(dev, shape)
    net = make_net()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    net.compile([x], is_train=True, use_graph=True)
    if budget is not None:  # bytes from the unconstrained plan, before the first step
        free = budget["free"]
        dev.SetMemoryBudget(int(free["persistent_bytes"] + budget["arena"] * free["arena_bytes"]))
    losses = [tensor.to_numpy(net(x, t)[1]).copy() for _ in range(steps)]
    params = {k: tensor.to_numpy(v) for k, v in net.get_states().items()}
    return losses, params, dev.graph_layout_counts(), graph.memory_plan(dev)


def _same_bits(got, ref, what):
    np.testing.assert_array_equal(np.array(got[0]), np.array(ref[0]), err_msg=what)
    for k in ref[1]:
        np.testing.assert_array_equal(got[1][k], ref[1][k], err_msg="%s %s" % (what, k))


@pytest.mark.skipif(not singa_wrap.USE_DNNL, reason="blocked layouts need oneDNN kernels")
def test_a_budget_keeps_the_blocked_layouts_bit_identically():
    # A recomputation reruns its operation on the blocks the layout pass tagged, so a budget
    # keeps every layout and the bits of the unbudgeted graph with layouts: a small ResNet with
    # odd sizes, stride 2 and groups at 60% of its arena over 7 steps (the sixth replans by
    # measured times), and ResNet-18 at 80% of its arena.
    import test_graph_layouts as lay
    import models  # examples/ (test_graph_layouts puts it on the path)
    avx512 = lay.AVX512
    ref = _train_with_layouts(lambda: lay.Net((5, 6)), (4, 3, 9, 11), steps=7)
    assert ref[2]["blocks"] > 0 or not avx512
    got = _train_with_layouts(lambda: lay.Net((5, 6)), (4, 3, 9, 11),
                              {"free": ref[3], "arena": 0.6}, steps=7)
    _same_bits(got, ref, "small ResNet")
    assert got[2] == ref[2]  # the same blocks kept blocked
    assert got[3]["num_recomputed"] > 0 and got[3]["cost_measured"]
    assert _total(got[3]) <= got[3]["budget_bytes"]
    ref = _train_with_layouts(models.resnet18, (2, 3, 32, 32), steps=1)
    got = _train_with_layouts(models.resnet18, (2, 3, 32, 32),
                              {"free": ref[3], "arena": 0.8}, steps=1)
    assert got[3]["num_recomputed"] > 0
    assert got[2] == ref[2] and (ref[2]["blocks"] > 20 or not avx512)
    _same_bits(got, ref, "resnet18")
