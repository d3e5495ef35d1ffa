"""The fused Adam step (singa/ops/optim.h: AdamUpdate, which opt.Adam runs for float32
parameters) against the unfused ops it replaces (opt.Adam.fused = False): the same bits for the
parameter and both moments, with and without weight decay, with an lr schedule, through
non-finite values, eager and in a replayed graph; bad operands raise."""
import numpy as np
import pytest

from singa import device, opt, tensor
from singa import singa_wrap as sw
import tiny_nets

F32 = np.float32


def adam(fused, **kw):
    a = opt.Adam(**kw)
    a.fused = fused
    return a


def run(optimizer, p0, grads):
    p = tensor.Tensor(data=p0.copy(), requires_grad=True, stores_grad=True, name="p")
    for g in grads:
        optimizer.apply("p", p, tensor.Tensor(data=g))
        optimizer.step()
    return [tensor.to_numpy(t) for t in (p, optimizer.m["p"], optimizer.v["p"])]


def same_bits(got, want, what):
    for name, g, w in zip(("param", "m", "v"), got, want):
        np.testing.assert_array_equal(g, w, err_msg="%s: %s" % (what, name))


@pytest.mark.parametrize("kw", [dict(lr=0.01), dict(lr=0.05, weight_decay=0.3),
                                dict(lr=0.05, beta_1=0.5, beta_2=0.9, epsilon=1e-3),
                                dict(lr=opt.ExponentialDecay(0.1, 1, 0.5), weight_decay=0.01)])
@pytest.mark.parametrize("n", [7, 70001])  # one thread, and the kernel's parallel loop
def test_fused_equals_unfused_bit_for_bit(kw, n):
    rng = np.random.default_rng(n)
    p0 = rng.standard_normal(n).astype(F32)
    grads = [(rng.standard_normal(n) * 10 ** rng.uniform(-3, 1, n)).astype(F32)
             for _ in range(5)]
    same_bits(run(adam(True, **kw), p0, grads), run(adam(False, **kw), p0, grads), str(kw))


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_non_finite_values_flow_as_in_the_unfused_ops(wd):
    p0 = np.array([np.inf, 1.0, -np.inf, 2.0, 0.5, np.nan], F32)
    grads = [np.array([1.0, np.nan, 0.0, np.inf, -np.inf, 1.0], F32),
             np.array([0.5, 1.0, 1.0, 1.0, 1.0, 1.0], F32)]
    fused = run(adam(True, lr=0.1, weight_decay=wd), p0, grads)
    same_bits(fused, run(adam(False, lr=0.1, weight_decay=wd), p0, grads), "wd=%g" % wd)
    assert np.isnan(fused[0][1]) and np.isnan(fused[0][5])


def train(fused, use_graph, steps=4):
    dev = device.get_default_device()
    dev.SetRandSeed(0)
    net = tiny_nets.compiled(adam(fused, lr=0.05, weight_decay=0.01), dev, use_graph=use_graph)
    for x, y in tiny_nets.batches(steps):
        tiny_nets.step(net, x, y)
    return {k: tensor.to_numpy(v) for k, v in net.get_params().items()}


def test_graph_equals_eager_and_the_unfused_graph():
    eager = train(True, use_graph=False)
    graph = train(True, use_graph=True)
    unfused = train(False, use_graph=True)
    assert sorted(eager) == sorted(graph) == sorted(unfused)
    for k in eager:
        np.testing.assert_array_equal(graph[k], eager[k], err_msg=k)
        np.testing.assert_array_equal(graph[k], unfused[k], err_msg=k)


def test_the_fused_step_runs_as_one_operation():
    dev = device.create_cpu_device(2)
    p = tensor.Tensor((5,), dev, requires_grad=True, stores_grad=True, name="p")
    p.set_value(1.0)
    g = tensor.Tensor((5,), dev)
    g.set_value(0.5)
    a = opt.Adam(lr=0.1)
    a.apply("p", p, g)  # creates the moments outside the recording
    dev.EnableGraph(True)
    try:
        a.apply("p", p, g)
    finally:
        dev.EnableGraph(False)
    assert dev.graph_num_nodes() == 1
    dev.ResetGraph()


def test_bad_operands_raise():
    p = tensor.Tensor(data=np.zeros((2, 3), F32))
    g = tensor.Tensor(data=np.zeros((2, 3), F32))
    m, v = tensor.Tensor(data=np.zeros((2, 3), F32)), tensor.Tensor(data=np.zeros((3, 2), F32))
    one = tensor.Tensor(data=np.ones(1, F32))
    two = tensor.Tensor(data=np.ones(2, F32))
    with pytest.raises(sw.ShapeError, match="AdamUpdate: the state v"):
        sw.AdamUpdate(p.data, g.data, m.data, v.data, *[one.data] * 6)
    with pytest.raises(sw.ShapeError, match="AdamUpdate: lr must hold one value"):
        sw.AdamUpdate(p.data, g.data, m.data, m.data, two.data, *[one.data] * 5)
    with pytest.raises(sw.ShapeError, match="AdamUpdate: parameter"):
        sw.AdamUpdate(p.data, v.data, m.data, m.data, *[one.data] * 6)
    ints = tensor.from_numpy(np.zeros((2, 3), np.int32))
    with pytest.raises(sw.DTypeError, match="AdamUpdate: expects float32"):
        sw.AdamUpdate(ints.data, ints.data, m.data, m.data, *[one.data] * 6)
