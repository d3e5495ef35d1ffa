"""Dynamic loss scaling (opt.LossScaler, singa/loss_scale.py) and float16 AMP's refusal on the
host. float16 math needs a GPU (test_gpu.py has those rows); the scaler is dtype-agnostic, so
its state machine is tested here through float32 (and bfloat16) models with injected infs:
a skipped step leaves parameters, optimizer state and step counter untouched and halves the
scale, growth_interval clean steps double it, clean steps equal unscaled training (power-of-two
scales are exact), graph == eager, and the scale sequence equals PyTorch's GradScaler's."""
import numpy as np
import pytest

import tiny_nets
from singa import device, layer, opt, singa_wrap, tensor
from singa.autograd import amp

N = tensor.to_numpy
native_bf16 = pytest.mark.skipif(
    not (singa_wrap.USE_DNNL and "avx512_bf16" in device.cpu_features()),
    reason="needs oneDNN and a CPU with avx512_bf16 (device.cpu_features())")


def _batches(steps, poisoned, seed=0):
    """tiny_nets' batches; those at the indices in ``poisoned`` hold an inf (their loss and
    every gradient become inf/NaN)."""
    out = tiny_nets.batches(steps, seed)
    for i in poisoned:
        out[i][0][1, 2] = np.inf
    return out


def _train(batches, make_opt, scaler, use_graph, init=None, precision="float32"):
    """Trains a tiny_nets.Net over ``batches``; returns the net, its optimizer, per step (the
    scale after it, the tracker, whether it was skipped, the params, the optimizer state) and
    the initial states."""
    net = tiny_nets.Net()
    o = make_opt()
    net.set_optimizer(o)
    tx, ty = tensor.from_numpy(batches[0][0]), tensor.from_numpy(batches[0][1])
    net.compile([tx], is_train=True, use_graph=use_graph, precision=precision,
                loss_scale=scaler if scaler is not None else False)
    if init is None:
        init = {k: N(v).copy() for k, v in net.get_states().items()}
    net.set_states({k: tensor.from_numpy(v) for k, v in init.items()})
    trace = []
    for x, y in batches:
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        net(tx, ty)
        row = {"params": {k: N(v).copy() for k, v in net.get_params().items()},
               "opt": _opt_state(o)}
        if scaler is not None:
            row.update(scale=scaler.get_scale(), tracker=scaler.get_growth_tracker(),
                       skipped=scaler.found_inf())
        trace.append(row)
    return net, o, trace, init


def _opt_state(o):
    out = {"step": float(N(o.step_counter)[0])}
    for name in o._state_dicts:
        for k, v in getattr(o, name).items():
            out[name + ":" + str(k)] = N(v).copy()
    return out


def _expected_scales(poisoned, steps, init, growth, backoff, interval):
    """The rules as PyTorch's GradScaler.update states them."""
    scale, tracker, out = init, 0, []
    for i in range(steps):
        if i in poisoned:
            scale, tracker = scale * backoff, 0
        else:
            tracker += 1
            if tracker == interval:
                scale, tracker = scale * growth, 0
        out.append((scale, tracker))
    return out


def _sgd():
    return opt.SGD(lr=0.1, momentum=0.9, weight_decay=1e-3)


POISONED = {1, 5, 6}
STEPS = 11


@pytest.mark.parametrize("use_graph", [False, True], ids=["eager", "graph"])
def test_skip_backoff_and_growth_follow_the_rules(use_graph):
    scaler = opt.LossScaler(init_scale=2.0 ** 10, growth_interval=3)
    _, _, trace, _ = _train(_batches(STEPS, POISONED), _sgd, scaler, use_graph)
    want = _expected_scales(POISONED, STEPS, 2.0 ** 10, 2.0, 0.5, 3)
    assert [(r["scale"], r["tracker"]) for r in trace] == want
    assert [r["skipped"] for r in trace] == [i in POISONED for i in range(STEPS)]


@pytest.mark.parametrize("use_graph", [False, True], ids=["eager", "graph"])
def test_a_skipped_step_touches_no_parameter_and_no_optimizer_state(use_graph):
    scaler = opt.LossScaler(init_scale=2.0 ** 10, growth_interval=3)
    _, _, trace, _ = _train(_batches(STEPS, POISONED), _sgd, scaler, use_graph)
    for i in sorted(POISONED):
        before, after = trace[i - 1], trace[i]
        for k, v in before["params"].items():
            np.testing.assert_array_equal(after["params"][k], v, err_msg="step %d %s" % (i, k))
        assert after["opt"].keys() == before["opt"].keys()
        for k, v in before["opt"].items():
            np.testing.assert_array_equal(after["opt"][k], v, err_msg="step %d %s" % (i, k))
    assert trace[-1]["opt"]["step"] == STEPS - len(POISONED)  # only the clean steps count


@pytest.mark.parametrize("make_opt", [_sgd, lambda: opt.Adam(lr=0.01, weight_decay=1e-3),
                                      lambda: opt.RMSProp(lr=0.01),
                                      lambda: opt.SGD(lr=0.1)],
                         ids=["sgd_momentum", "adam", "rmsprop", "sgd_plain"])
def test_clean_steps_equal_unscaled_training_on_the_clean_batches(make_opt):
    """Power-of-two scales multiply and divide exactly, and skipped steps change nothing, so
    training with the scaler equals training without it on the batches that were not
    poisoned."""
    batches = _batches(STEPS, POISONED)
    scaler = opt.LossScaler(init_scale=2.0 ** 12, growth_interval=2)
    net, o, trace, init = _train(batches, make_opt, scaler, False)
    clean = [b for i, b in enumerate(batches) if i not in POISONED]
    ref, ref_o, _, _ = _train(clean, make_opt, None, False, init)
    for k, v in ref.get_params().items():
        np.testing.assert_array_equal(N(net.get_params()[k]), N(v), err_msg=k)
    ref_state = _opt_state(ref_o)
    assert ref_state.keys() == trace[-1]["opt"].keys()
    for k, v in ref_state.items():
        np.testing.assert_array_equal(trace[-1]["opt"][k], v, err_msg=k)


def test_graph_equals_eager():
    batches = _batches(STEPS, POISONED, seed=3)
    make = lambda: opt.Adam(lr=0.01)  # noqa: E731
    eager = _train(batches, make, opt.LossScaler(init_scale=8.0, growth_interval=2), False)
    graph = _train(batches, make, opt.LossScaler(init_scale=8.0, growth_interval=2), True,
                   eager[3])
    for e, g in zip(eager[2], graph[2]):
        assert (e["scale"], e["tracker"], e["skipped"]) == (g["scale"], g["tracker"],
                                                           g["skipped"])
        for k in e["params"]:
            np.testing.assert_array_equal(e["params"][k], g["params"][k], err_msg=k)
        for k in e["opt"]:
            np.testing.assert_array_equal(e["opt"][k], g["opt"][k], err_msg=k)


def test_the_scale_sequence_equals_pytorchs_gradscaler():
    torch = pytest.importorskip("torch")
    poisoned, steps = {0, 2, 3, 9}, 14
    kw = dict(init_scale=2.0 ** 8, growth_factor=4.0, backoff_factor=0.25, growth_interval=2)
    w = torch.nn.Parameter(torch.ones(3))
    sgd = torch.optim.SGD([w], lr=0.1)
    ts = torch.amp.GradScaler("cpu", **kw)
    want = []
    for i in range(steps):
        sgd.zero_grad()
        ts.scale((w * 2.0).sum()).backward()
        if i in poisoned:
            w.grad[1] = float("inf")
        ts.step(sgd)
        ts.update()
        want.append(ts.get_scale())
    scaler = opt.LossScaler(**kw)
    _, _, trace, _ = _train(_batches(steps, poisoned), _sgd, scaler, True)
    assert [r["scale"] for r in trace] == want
    assert scaler.state_dict().keys() == ts.state_dict().keys()


def test_defaults_are_gradscalers():
    s = opt.LossScaler()
    assert s.get_scale() == 2.0 ** 16 and s.get_growth_tracker() == 0 and not s.found_inf()
    assert (s.growth_factor, s.backoff_factor, s.growth_interval) == (2.0, 0.5, 2000)


def _forced(scaler, found, tracker):
    scaler._ensure(device.get_default_device())
    scaler._found.set_value(float(found))
    scaler._tracker.set_value(float(tracker))
    scaler.update()
    return scaler.get_scale(), scaler.get_growth_tracker()


def test_update_alone_backs_off_grows_and_never_grows_to_inf():
    assert _forced(opt.LossScaler(init_scale=64.0, growth_interval=5), 1, 3) == (32.0, 0)
    assert _forced(opt.LossScaler(init_scale=64.0, growth_interval=5), 0, 3) == (64.0, 4)
    assert _forced(opt.LossScaler(init_scale=64.0, growth_interval=5), 0, 4) == (128.0, 0)
    # 2**127 * 2 overflows float32: the scale stays, the tracker restarts (PyTorch's rule)
    assert _forced(opt.LossScaler(init_scale=2.0 ** 127, growth_interval=1), 0, 0) == (
        2.0 ** 127, 0)


def test_state_dict_round_trip_reaches_a_recorded_graph():
    batches = _batches(4, set())
    scaler = opt.LossScaler(init_scale=16.0, growth_interval=100)
    net, _, trace, _ = _train(batches, _sgd, scaler, True)
    assert trace[-1]["scale"] == 16.0 and trace[-1]["tracker"] == 4
    scaler.load_state_dict(dict(scaler.state_dict(), scale=2.0 ** 20, _growth_tracker=99))
    tx, ty = tensor.from_numpy(batches[0][0]), tensor.from_numpy(batches[0][1])
    net(tx, ty)  # the replay reads the loaded values and grows at its 100th clean step
    assert (scaler.get_scale(), scaler.get_growth_tracker()) == (2.0 ** 21, 0)


def test_pytorch_like_api_inside_train_one_batch():
    class Net(tiny_nets.Net):
        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.loss_fn(out, y)
            self.scaler.step(self.optimizer, self.scaler.scale(loss))
            self.scaler.update()
            return out, loss

    batches = _batches(5, {2})
    net = Net()
    net.scaler = opt.LossScaler(init_scale=4.0, growth_interval=2)
    net.set_optimizer(_sgd())
    tx, ty = tensor.from_numpy(batches[0][0]), tensor.from_numpy(batches[0][1])
    net.compile([tx], is_train=True, use_graph=True)
    scales = []
    for x, y in batches:
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        net(tx, ty)
        scales.append(net.scaler.get_scale())
    assert scales == [s for s, _ in _expected_scales({2}, 5, 4.0, 2.0, 0.5, 2)]


def test_bad_arguments_are_refused():
    for kw in (dict(init_scale=0), dict(init_scale=float("inf")), dict(growth_factor=1.0),
               dict(backoff_factor=1.0), dict(backoff_factor=0), dict(growth_interval=0),
               dict(growth_interval=2.5)):
        with pytest.raises(ValueError, match="LossScaler"):
            opt.LossScaler(**kw)
    net = tiny_nets.Net()
    with pytest.raises(TypeError, match="loss_scale"):
        net.compile([tensor.from_numpy(np.ones((2, 5), np.float32))], loss_scale=1024)

    class FakeDist:
        communicator = None

    with pytest.raises(NotImplementedError, match="DistOpt"):
        opt.LossScaler().attach(FakeDist())


def test_float16_on_the_host_is_refused_naming_the_device():
    dev = device.get_default_device()
    with pytest.raises(NotImplementedError, match="float16.*CUDA.*host"):
        amp.check_precision("float16", dev)
    with pytest.raises(NotImplementedError, match="CUDA devices only"):
        with amp.autocast("float16"):
            pass
    net = tiny_nets.Net()
    net.set_optimizer(_sgd())
    with pytest.raises(NotImplementedError, match="cpu"):
        net.compile([tensor.from_numpy(np.ones((2, 5), np.float32))], is_train=True,
                    precision="float16")
    assert amp.PRECISIONS["float16"] == tensor.float16


@native_bf16
@pytest.mark.parametrize("use_graph", [False, True], ids=["eager", "graph"])
def test_bfloat16_amp_with_a_loss_scaler_skips_and_grows(use_graph):
    scaler = opt.LossScaler(init_scale=2.0 ** 10, growth_interval=3)
    _, _, trace, _ = _train(_batches(STEPS, POISONED), _sgd, scaler, use_graph,
                            precision="bfloat16")
    assert [(r["scale"], r["tracker"]) for r in trace] == _expected_scales(
        POISONED, STEPS, 2.0 ** 10, 2.0, 0.5, 3)
    for i in sorted(POISONED):
        for k, v in trace[i - 1]["params"].items():
            np.testing.assert_array_equal(trace[i]["params"][k], v, err_msg=k)


def test_compiling_again_without_a_scaler_detaches_it():
    batches = _batches(2, set())
    scaler = opt.LossScaler(init_scale=4.0, growth_interval=1)
    net, o, trace, _ = _train(batches[:1], _sgd, scaler, False)
    assert o.loss_scaler is scaler and trace[-1]["scale"] == 8.0
    tx, ty = tensor.from_numpy(batches[1][0]), tensor.from_numpy(batches[1][1])
    net.compile([tx], is_train=True, loss_scale=False)
    net(tx, ty)
    assert o.loss_scaler is None and scaler.get_scale() == 8.0


def test_float16_autocast_keeps_master_weights_float32_after_a_float16_activation():
    """Under float16 AMP a layer after a convolution is fed float16 (its parameters would
    follow that dtype in SINGA's float16 training): they are float32 master weights. The math
    itself needs a GPU (float16 on the host raises DTypeError, after the parameters exist)."""
    x = tensor.from_numpy(np.ones((2, 3, 4, 4), np.float16))
    conv, bn, fc = layer.Conv2d(2, 3), layer.BatchNorm2d(), layer.Linear(2)
    with amp.autocast("float16", check=False):
        for lay, inp in ((conv, x), (bn, x), (fc, x.reshape((2, 48)))):
            with pytest.raises(singa_wrap.DTypeError):
                lay(inp)
    for t in (conv.W, conv.b, bn.scale, bn.bias, bn.running_mean, bn.running_var, fc.W, fc.b):
        assert t.dtype == tensor.float32


@pytest.mark.parametrize("use_graph", [False, True], ids=["eager", "graph"])
def test_a_checkpoint_holds_the_scaler_and_a_resumed_run_continues_exactly(use_graph, tmp_path):
    batches = _batches(9, {1, 6})
    make = lambda: opt.LossScaler(init_scale=2.0 ** 8, growth_interval=3)  # noqa: E731
    full, _, full_trace, init = _train(batches, _sgd, make(), use_graph)
    first, _, _, _ = _train(batches[:4], _sgd, make(), use_graph, init)
    path = str(tmp_path / "ckpt.zip")
    first.save_states(path)
    resumed = tiny_nets.Net()
    resumed.set_optimizer(_sgd())
    scaler = make()
    tx, ty = tensor.from_numpy(batches[0][0]), tensor.from_numpy(batches[0][1])
    resumed.compile([tx], is_train=True, use_graph=use_graph, loss_scale=scaler)
    resumed.load_states(path)
    assert (scaler.get_scale(), scaler.get_growth_tracker()) == (
        full_trace[3]["scale"], full_trace[3]["tracker"])
    for x, y in batches[4:]:
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        resumed(tx, ty)
    assert scaler.get_scale() == full_trace[-1]["scale"]
    for k, v in full.get_params().items():
        np.testing.assert_array_equal(N(resumed.get_params()[k]), N(v), err_msg=k)
