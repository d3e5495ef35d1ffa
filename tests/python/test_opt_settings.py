"""Optimizer hyper-parameters set between steps (a number or a schedule) take effect at the next
step, eagerly and in a replayed graph; the schedules' values; ScheduleError; ReduceLROnPlateau."""
import math

import sys

import numpy as np
import pytest

import tiny_nets
from singa import device, opt, singa_wrap, tensor

F32 = np.float32


def N(t):
    return tensor.to_numpy(t)


# ---- numpy references of the update formulas (float64) ----------
def sgd_ref(p, g, st, h):
    g = g + h["weight_decay"] * p
    if h["momentum"] != 0:
        st["buf"] = h["momentum"] * st.get("buf", 0.0) + (1 - h["dampening"]) * g
        g = g + h["momentum"] * st["buf"] if h.get("nesterov") else st["buf"]
    return p - h["lr"] * g


def adam_ref(p, g, st, h):
    g = g + h["weight_decay"] * p
    t = st["t"] = st.get("t", 0) + 1
    st["m"] = h["beta_1"] * st.get("m", 0.0) + (1 - h["beta_1"]) * g
    st["v"] = h["beta_2"] * st.get("v", 0.0) + (1 - h["beta_2"]) * g * g
    m_hat = st["m"] / (1 - h["beta_1"] ** t)
    v_hat = st["v"] / (1 - h["beta_2"] ** t)
    return p - h["lr"] * m_hat / (np.sqrt(v_hat) + h["epsilon"])


def rmsprop_ref(p, g, st, h):
    g = g + h["weight_decay"] * p
    st["avg"] = h["rho"] * st.get("avg", 0.0) + (1 - h["rho"]) * g * g
    return p - h["lr"] * g / np.sqrt(st["avg"] + h["epsilon"])


def adagrad_ref(p, g, st, h):
    g = g + h["weight_decay"] * p
    st["hist"] = st.get("hist", 0.0) + g * g
    return p - h["lr"] * g / np.sqrt(st["hist"] + h["epsilon"])


# (make, initial hyper-parameters, reference, {step: changes})
CASES = {
    "sgd": (opt.SGD, dict(lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0), sgd_ref,
            {1: dict(lr=0.02), 2: dict(momentum=0.9), 3: dict(weight_decay=0.01, lr=0.05),
             4: dict(dampening=0.3), 5: dict(momentum=0.0)}),
    "adam": (opt.Adam, dict(lr=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.0),
             adam_ref, {1: dict(lr=0.002), 2: dict(beta_1=0.5), 3: dict(beta_2=0.9),
                        4: dict(epsilon=1e-3, weight_decay=0.1)}),
    "rmsprop": (opt.RMSProp, dict(lr=0.01, rho=0.9, epsilon=1e-8, weight_decay=0.0),
                rmsprop_ref, {2: dict(rho=0.5, lr=0.03), 4: dict(epsilon=0.1)}),
    "adagrad": (opt.AdaGrad, dict(lr=0.1, epsilon=1e-8, weight_decay=0.0), adagrad_ref,
                {1: dict(lr=0.5), 3: dict(epsilon=0.5, weight_decay=0.2)}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numbers_set_between_steps_are_used_by_the_next_eager_step(name, rng):
    make, hypers, ref, changes = CASES[name]
    o = make(**hypers)
    p0 = rng.standard_normal(4)
    p = tensor.from_numpy(p0.astype(F32))
    p.name = "p"
    expected, st, h = p0.copy(), {}, dict(hypers)
    for i in range(6):
        for k, v in changes.get(i, {}).items():
            setattr(o, k, v)
            h[k] = v
            assert isinstance(getattr(o, k), opt.Constant) and getattr(o, k).init_value == v
        g = rng.standard_normal(4)
        o.update(p, tensor.from_numpy(g.astype(F32)))
        o.step()
        expected = ref(expected, g, st, h)
        np.testing.assert_allclose(N(p), expected, rtol=2e-5, atol=1e-6, err_msg="step %d" % i)


def test_lr_set_to_a_number_or_a_constant_schedule():
    """The issue's two cases: `sgd.lr = 0.001` raised in step(); `sgd.lr = opt.Constant(0.0)`
    was ignored."""
    sgd = opt.SGD(lr=0.1)
    p = tensor.from_numpy(np.ones(3, F32))
    p.name = "p"
    g = tensor.from_numpy(np.ones(3, F32))
    sgd.lr = 0.001
    sgd.update(p, g)
    sgd.step()
    np.testing.assert_allclose(N(p), 1 - 0.001, rtol=1e-6)
    sgd.lr = opt.Constant(0.0)
    for _ in range(2):
        sgd.update(p, g)
        sgd.step()
    np.testing.assert_allclose(N(p), 1 - 0.001, rtol=1e-6)
    assert float(sgd.lr_value) == 0.0


def test_a_schedule_set_between_steps_counts_from_the_current_step():
    sgd = opt.SGD(lr=0.1)
    for _ in range(4):
        sgd.step()
    sgd.lr = opt.StepDecay(1.0, step_size=3, gamma=0.5)  # step 4: 0.5
    assert float(sgd.lr_value) == pytest.approx(0.5)
    sgd.step()
    sgd.step()  # step 6
    assert float(sgd.lr_value) == pytest.approx(0.25)
    sgd.lr = 0.3
    sgd.step()
    assert float(sgd.lr_value) == pytest.approx(0.3)


def test_bad_values_raise_and_change_nothing():
    sgd = opt.SGD(lr=0.1, momentum=0.9, nesterov=True)
    with pytest.raises(ValueError, match="learning rate"):
        sgd.lr = -1.0
    with pytest.raises(ValueError, match="learning rate"):
        sgd.lr = float("nan")
    with pytest.raises(TypeError, match="number or a schedule"):
        sgd.lr = "0.1"
    with pytest.raises(ValueError, match="Nesterov"):
        sgd.momentum = 0.0
    with pytest.raises(ValueError, match="Nesterov"):
        sgd.dampening = 0.5
    assert sgd.lr.init_value == 0.1 and sgd.momentum.init_value == 0.9
    assert float(sgd.lr_value) == pytest.approx(0.1) and float(sgd.mom_value) == \
        pytest.approx(0.9)
    sgd.nesterov = False  # any other attribute is a plain attribute
    sgd.dampening = 0.5
    assert sgd.dampening.init_value == 0.5


@pytest.mark.skipif(not singa_wrap.USE_DIST, reason="singa built without MPI")
def test_distopt_forwards_the_wrapped_optimizers_hyper_parameters():
    dist = opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9))
    dist.lr = 0.01
    assert dist.opt.lr.init_value == 0.01 and float(dist.opt.lr_value) == pytest.approx(0.01)
    assert dist.lr is dist.opt.lr and dist.momentum.init_value == 0.9
    with pytest.raises(AttributeError):
        dist.not_an_attribute
    dist.threshold = 3  # other attributes stay the wrapper's
    assert dist.threshold == 3 and "threshold" not in dist.opt.__dict__


# ---- graph mode ----------
def _twins(make, dev):
    return (tiny_nets.compiled(make(), dev, use_graph=False),
            tiny_nets.compiled(make(), dev, use_graph=True))


@pytest.mark.parametrize("name", sorted(CASES))
def test_numbers_set_between_steps_reach_the_replayed_graph(name):
    """A number replacing a number is written into the device tensor the replay reads: the
    graph is not recorded again, and it computes what eager mode computes."""
    make, hypers, _, changes = CASES[name]
    dev = device.create_cpu_device(61)
    eager, graph = _twins(lambda: make(**hypers), dev)
    data = tiny_nets.batches(6)
    structural = {"momentum", "weight_decay"}  # zero <-> non-zero changes a step's operations
    version = None
    for i, (x, y) in enumerate(data):
        recorded = False
        for k, v in changes.get(i, {}).items():
            recorded |= k in structural and (getattr(graph.optimizer, k).init_value == 0) != \
                (v == 0)
            setattr(eager.optimizer, k, v)
            setattr(graph.optimizer, k, v)
        e_loss = tiny_nets.step(eager, x, y)
        g_loss = tiny_nets.step(graph, x, y)
        assert g_loss == pytest.approx(e_loss, rel=1e-5), i
        if version is not None and not recorded:
            assert dev.graph_version() == version, "step %d recorded the graph again" % i
        version = dev.graph_version()
    for k, v in tiny_nets.params(eager).items():
        np.testing.assert_allclose(tiny_nets.params(graph)[k], v, rtol=1e-5, atol=1e-6)
    dev.ResetGraph()


@pytest.mark.parametrize("use_graph", [False, True])
def test_lr_zero_freezes_the_parameters_in_both_modes(use_graph):
    dev = device.create_cpu_device(62)
    m = tiny_nets.compiled(opt.SGD(lr=0.1, momentum=0.9), dev, use_graph)
    data = tiny_nets.batches(5)
    for x, y in data[:2]:
        tiny_nets.step(m, x, y)
    for zero in (0.0, opt.Constant(0.0)):
        m.optimizer.lr = zero
        before = tiny_nets.params(m)
        for x, y in data[2:]:
            tiny_nets.step(m, x, y)
        for k, v in tiny_nets.params(m).items():
            np.testing.assert_array_equal(v, before[k], err_msg=k)
        m.optimizer.lr = 0.1
        tiny_nets.step(m, *data[0])
        assert any(not np.array_equal(v, before[k]) for k, v in tiny_nets.params(m).items())
    dev.ResetGraph()


def test_number_to_schedule_and_back_records_the_graph_again():
    dev = device.create_cpu_device(63)
    make = lambda: opt.Adam(lr=0.01)  # noqa: E731
    eager, graph = _twins(make, dev)
    data = tiny_nets.batches(8)
    plan = {2: opt.CosineDecay(0.05, decay_steps=4, min_value=0.001),
            5: 0.02, 6: opt.LinearWarmup(opt.StepDecay(0.03, 1, 0.5), warmup_steps=1)}
    for i, (x, y) in enumerate(data):
        version = dev.graph_version()
        if i in plan:
            eager.optimizer.lr = plan[i]
            graph.optimizer.lr = plan[i]
        e_loss, g_loss = tiny_nets.step(eager, x, y), tiny_nets.step(graph, x, y)
        assert g_loss == pytest.approx(e_loss, rel=1e-5), i
        assert float(graph.optimizer.lr_value) == pytest.approx(
            float(eager.optimizer.lr_value), rel=1e-6)
        if i in plan and i > 0:
            assert dev.graph_version() != version, "step %d replayed a stale graph" % i
    for k, v in tiny_nets.params(eager).items():
        np.testing.assert_allclose(tiny_nets.params(graph)[k], v, rtol=1e-5, atol=1e-6)
    dev.ResetGraph()


def test_a_structural_change_while_recording_raises():
    """Inside train_one_batch, while the device records, a change that needs other operations
    cannot be honoured (resetting the graph would drop the recording): it raises."""
    dev = device.create_cpu_device(64)

    class Changer(tiny_nets.Net):
        change = False

        def train_one_batch(self, x, y):
            if self.change:
                self.optimizer.lr = opt.StepDecay(0.1, 2)
            return super().train_one_batch(x, y)

    m = Changer()
    m.set_optimizer(opt.SGD(lr=0.1))
    m.compile([tensor.Tensor((tiny_nets.B, tiny_nets.D), dev)], is_train=True, use_graph=True)
    x, y = tiny_nets.batches(1)[0]
    tiny_nets.step(m, x, y)  # the optimizer's tensors now live on dev
    dev.ResetGraph()  # the next call records again
    m.change = True
    with pytest.raises(RuntimeError, match="between two steps"):
        tiny_nets.step(m, x, y)
    assert type(m.optimizer.lr) is opt.Constant
    assert not dev.graph_enabled()
    m.change = False
    m.optimizer.lr = opt.StepDecay(0.1, 2)  # between steps it is fine (at step 1: 0.1)
    tiny_nets.step(m, x, y)
    assert float(m.optimizer.lr_value) == pytest.approx(0.01)  # step 2
    dev.ResetGraph()


# ---- the schedules' values ----------
def _values(sched, n):
    sgd = opt.SGD(lr=sched)
    out = []
    for _ in range(n):
        out.append(float(sgd.lr_value))
        sgd.step()
    return np.array(out)


SCHEDULES = {
    "step": (lambda: opt.StepDecay(0.8, step_size=3, gamma=0.5),
             lambda s: 0.8 * 0.5 ** (s // 3)),
    "multistep": (lambda: opt.MultiStepDecay(1.0, milestones=[2, 5, 6], gamma=0.1),
                  lambda s: 0.1 ** sum(s >= m for m in (2, 5, 6))),
    "cosine": (lambda: opt.CosineDecay(0.5, decay_steps=6, min_value=0.1),
               lambda s: 0.1 + 0.4 * (1 + math.cos(math.pi * min(s, 6) / 6)) / 2),
    "exponential": (lambda: opt.ExponentialDecay(0.5, decay_steps=4, decay_rate=0.3),
                    lambda s: 0.5 * 0.3 ** (s / 4)),
    "warmup-constant": (lambda: opt.LinearWarmup(0.2, warmup_steps=4),
                        lambda s: 0.2 * min(s / 4, 1)),
    "warmup-cosine": (lambda: opt.LinearWarmup(opt.CosineDecay(0.4, 5), warmup_steps=3,
                                               start_value=0.1),
                      lambda s: 0.1 + 0.3 * s / 3 if s < 3 else
                      0.4 * (1 + math.cos(math.pi * min(s - 3, 5) / 5)) / 2),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_values(name):
    make, formula = SCHEDULES[name]
    n = 12
    np.testing.assert_allclose(_values(make(), n), [formula(s) for s in range(n)], rtol=1e-5,
                               atol=1e-7)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedules_are_replayed_by_the_graph(name):
    """The schedule's operations are recorded with the step: each replay recomputes the value
    from the device's step counter."""
    make, formula = SCHEDULES[name]
    dev = device.create_cpu_device(65)
    m = tiny_nets.compiled(opt.SGD(lr=make()), dev, use_graph=True)
    got = []
    for x, y in tiny_nets.batches(9):
        tiny_nets.step(m, x, y)
        got.append(float(m.optimizer.lr_value))
    np.testing.assert_allclose(got, [formula(s) for s in range(1, 10)], rtol=1e-5, atol=1e-7)
    dev.ResetGraph()


def test_schedule_arguments_are_checked():
    with pytest.raises(ValueError, match="step_size"):
        opt.StepDecay(0.1, step_size=0)
    with pytest.raises(ValueError, match="milestones"):
        opt.MultiStepDecay(0.1, milestones=[5, 3])
    with pytest.raises(ValueError, match="milestones"):
        opt.MultiStepDecay(0.1, milestones=[])
    with pytest.raises(ValueError, match="decay_steps"):
        opt.CosineDecay(0.1, decay_steps=-1)
    with pytest.raises(ValueError, match="warmup_steps"):
        opt.LinearWarmup(0.1, warmup_steps=0)
    with pytest.raises(TypeError, match="after"):
        opt.LinearWarmup("x", warmup_steps=2)
    assert repr(opt.StepDecay(0.1, 3)) == "StepDecay(0.1, step_size=3, gamma=0.1)"
    assert repr(opt.Constant(0.5)) == "Constant(0.5)"


# ---- a schedule must not read the step in Python ----------
READS = {
    "float": lambda step: float(step),
    "int": lambda step: int(step),
    "item": lambda step: step.item(),
    "numpy": lambda step: step.numpy(),
    "to_numpy": lambda step: tensor.to_numpy(step),
    "np.asarray": lambda step: np.asarray(step),
    "np.from_dlpack": lambda step: np.from_dlpack(step),
    "if": lambda step: 1 if step > 3 else 0,
    "derived": lambda step: float(step / 10 + 1),
    "range": lambda step: range(step),
}
if sys.version_info >= (3, 12):  # a Python class's __buffer__ counts from 3.12 (PEP 688)
    READS["memoryview"] = lambda step: memoryview(step)


@pytest.mark.parametrize("how", sorted(READS))
def test_a_schedule_reading_the_step_in_python_raises(how):
    class Frozen(opt.DecayScheduler):
        def call(self, step):
            READS[how](step)
            return opt.Constant(self.init_value)(step)

    with pytest.raises(opt.ScheduleError, match="tensor operations") as e:
        opt.SGD(lr=Frozen(0.1))
    assert isinstance(e.value, TypeError) and "Frozen" in str(e.value)
    sgd = opt.SGD(lr=0.1)
    with pytest.raises(opt.ScheduleError):
        sgd.lr = Frozen(0.1)
    assert type(sgd.lr) is opt.Constant


def test_a_schedule_written_with_tensor_ops_as_in_singa_works():
    class Halving(opt.DecayScheduler):  # Apache SINGA's ExponentialDecay style
        def call(self, step):
            rate = tensor.Tensor((1,), step.device)
            rate.set_value(0.5)
            return self.init_value * tensor.pow(rate, step // 2)

    np.testing.assert_allclose(_values(Halving(1.0), 6), [1, 1, .5, .5, .25, .25])

    class NotATensor(opt.DecayScheduler):
        def call(self, step):
            return 0.1

    with pytest.raises(opt.ScheduleError, match="one-element Tensor"):
        opt.SGD(lr=NotATensor(0.1))


# ---- ReduceLROnPlateau ----------
def plateau_ref(metrics, lr, mode, factor, patience, threshold, threshold_mode, cooldown,
                min_lr):
    """PyTorch's ReduceLROnPlateau rule, written out: the lr after each metric."""
    best = math.inf if mode == "min" else -math.inf
    bad = cool = 0
    out = []
    for m in metrics:
        if mode == "min":
            better = m < (best * (1 - threshold) if threshold_mode == "rel" else best - threshold)
        else:
            better = m > (best * (1 + threshold) if threshold_mode == "rel" else best + threshold)
        if better:
            best, bad = m, 0
        else:
            bad += 1
        if cool > 0:
            cool -= 1
            bad = 0
        if bad > patience:
            new = max(lr * factor, min_lr)
            if lr - new > 1e-8:
                lr = new
            cool, bad = cooldown, 0
        out.append(lr)
    return out


@pytest.mark.parametrize("kw", [
    dict(mode="min", factor=0.5, patience=2, threshold=1e-4, threshold_mode="rel", cooldown=0,
         min_lr=0.0),
    dict(mode="max", factor=0.1, patience=1, threshold=0.01, threshold_mode="abs", cooldown=2,
         min_lr=0.002),
])
def test_reduce_lr_on_plateau_follows_pytorchs_rule(kw, rng):
    metrics = list(np.round(np.cumsum(rng.standard_normal(40)) * 0.1, 3))
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    plateau = opt.ReduceLROnPlateau(sgd, **kw)
    got = []
    for m in metrics:
        plateau.step(tensor.from_numpy(np.array([m], F32)) if len(got) % 2 else m)
        got.append(sgd.lr.init_value)
        assert float(sgd.lr_value) == pytest.approx(got[-1], rel=1e-6)
    expected = plateau_ref([float(F32(m)) for m in metrics], 0.1, **kw)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert plateau.num_reductions == len(set(expected)) - 1 > 0


def test_reduce_lr_on_plateau_matches_pytorch(rng):
    torch = pytest.importorskip("torch")
    metrics = [float(m) for m in np.round(np.cumsum(rng.standard_normal(60)) * 0.1, 2)]
    for kw in (dict(mode="min", factor=0.3, patience=3, threshold=0.05, threshold_mode="rel",
                    cooldown=1, min_lr=1e-3),
               dict(mode="max", factor=0.5, patience=0, threshold=0.0, threshold_mode="abs",
                    cooldown=0, min_lr=0.0)):
        w = torch.nn.Parameter(torch.zeros(1))
        topt = torch.optim.SGD([w], lr=0.1)
        tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
        sgd = opt.SGD(lr=0.1)
        ours = opt.ReduceLROnPlateau(sgd, **kw)
        for m in metrics:
            tsched.step(m)
            ours.step(m)
            assert sgd.lr.init_value == pytest.approx(topt.param_groups[0]["lr"], rel=1e-12)
        assert ours.num_reductions > 0


@pytest.mark.parametrize("eps,reduced", [(0.5, False), (0.4999, True)])
def test_reduce_lr_on_plateau_skips_a_change_of_eps_or_less(eps, reduced):
    # lr 1.0 -> 0.5 is a change of exactly 0.5: PyTorch applies a change only when it exceeds
    # eps (old - new > eps), so eps 0.5 keeps 1.0
    sgd = opt.SGD(lr=1.0)
    plateau = opt.ReduceLROnPlateau(sgd, factor=0.5, patience=0, eps=eps)
    plateau.step(1.0)
    plateau.step(1.0)  # no improvement, patience 0: a reduction is due
    assert sgd.lr.init_value == (0.5 if reduced else 1.0)
    assert plateau.num_reductions == int(reduced)
    torch = pytest.importorskip("torch")
    topt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, factor=0.5, patience=0, eps=eps)
    tsched.step(1.0)
    tsched.step(1.0)
    assert topt.param_groups[0]["lr"] == sgd.lr.init_value


def test_reduce_lr_on_plateau_reaches_the_replayed_graph():
    dev = device.create_cpu_device(66)
    m = tiny_nets.compiled(opt.SGD(lr=0.1), dev, use_graph=True)
    plateau = opt.ReduceLROnPlateau(m.optimizer, factor=0.1, patience=0)
    data = tiny_nets.batches(4)
    tiny_nets.step(m, *data[0])
    plateau.step(1.0)
    assert plateau.step(1.0)  # no improvement: lr 0.01
    version = dev.graph_version()
    before = tiny_nets.params(m)
    tiny_nets.step(m, *data[1])
    assert dev.graph_version() == version  # replayed, not recorded again
    ref = tiny_nets.compiled(opt.SGD(lr=0.01), dev, use_graph=False, params=False)
    ref.set_params(before)
    tiny_nets.step(ref, *data[1])
    for k, v in tiny_nets.params(ref).items():
        np.testing.assert_allclose(tiny_nets.params(m)[k], v, rtol=1e-6, atol=1e-7)
    dev.ResetGraph()


def test_reduce_lr_on_plateau_checks_its_arguments():
    with pytest.raises(TypeError, match="schedule"):
        opt.ReduceLROnPlateau(opt.SGD(lr=opt.StepDecay(0.1, 2)))
    with pytest.raises(TypeError, match="optimizer"):
        opt.ReduceLROnPlateau(object())
    with pytest.raises(ValueError, match="factor"):
        opt.ReduceLROnPlateau(opt.SGD(), factor=1.5)
    with pytest.raises(ValueError, match="mode"):
        opt.ReduceLROnPlateau(opt.SGD(), mode="up")
    with pytest.raises(ValueError, match="NaN"):
        opt.ReduceLROnPlateau(opt.SGD()).step(float("nan"))
    p = opt.ReduceLROnPlateau(opt.SGD(lr=0.1), patience=0)
    p.step(1.0)
    p.step(2.0)
    states = p.get_states()
    q = opt.ReduceLROnPlateau(opt.SGD(lr=0.1), patience=0)
    q.set_states(states)
    assert q.get_states() == states and states["num_reductions"] == 1
