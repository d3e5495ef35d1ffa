"""singa.opt: each optimizer against a numpy computation of the same steps, schedules, states,
errors, and hyper-parameters that advance inside a replayed graph."""
import numpy as np
import pytest

from singa import autograd, device, layer, opt, singa_wrap, tensor

F32 = np.float32
STEPS = 4


def T(a, **kw):
    return tensor.Tensor(data=np.asarray(a, F32), **kw)


def N(t):
    return tensor.to_numpy(t)


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def run(optimizer, p0, grads, use_call=False):
    """Applies ``grads`` (one per step) to a parameter starting at p0; returns its values."""
    p = T(p0, requires_grad=True, stores_grad=True, name="p")
    for g in grads:
        if use_call:
            optimizer.update(p, T(g))
            optimizer.step()
        else:
            optimizer.apply("p", p, T(g))
            optimizer.step()
    return N(p)


def sgd_ref(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    p = p.copy()
    buf = np.zeros_like(p)
    f = F32
    for g in grads:
        g = g + f(weight_decay) * p if weight_decay else g
        if momentum:
            buf = buf * f(momentum) + g * (f(1) - f(dampening))
            g = g + f(momentum) * buf if nesterov else buf
        p = p - g * f(lr)
    return p


@pytest.mark.parametrize("kw", [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.02, momentum=0.9, weight_decay=0.01),
    dict(lr=0.02, weight_decay=0.1),
])
def test_sgd_matches_numpy(rng, kw):
    p0 = rng.standard_normal((3, 4)).astype(F32)
    grads = [rng.standard_normal((3, 4)).astype(F32) for _ in range(STEPS)]
    got = run(opt.SGD(**kw), p0, grads)
    np.testing.assert_allclose(got, sgd_ref(p0, grads, **kw), rtol=1e-6, atol=1e-6)


def test_sgd_first_step_by_hand():
    # p = 1, g = 2, momentum 0.9, wd 0.5: g' = 2.5, buf = 2.5, p = 1 - 0.1 * 2.5 = 0.75
    sgd = opt.SGD(lr=0.1, momentum=0.9, weight_decay=0.5)
    assert run(sgd, np.ones(2, F32), [np.full(2, 2, F32)])[0] == pytest.approx(0.75)
    # second step (new optimizer state per test): buf = 0.9 * 2.5 + 2.5
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    got = run(sgd, np.zeros(1, F32), [np.ones(1, F32), np.ones(1, F32)])
    assert got[0] == pytest.approx(-0.1 - 0.1 * 1.9)


def adam_ref(p, grads, lr, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.0):
    p = p.copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    f = F32
    for t, g in enumerate(grads, 1):
        g = g + f(weight_decay) * p if weight_decay else g
        m = m * f(beta_1) + g * (f(1) - f(beta_1))
        v = v * f(beta_2) + g * g * (f(1) - f(beta_2))
        m_hat = m / (f(1) - f(beta_1) ** f(t))
        v_hat = v / (f(1) - f(beta_2) ** f(t))
        p = p - (m_hat / (np.sqrt(v_hat) + f(epsilon))) * f(lr)
    return p


@pytest.mark.parametrize("kw", [dict(lr=0.01), dict(lr=0.1, beta_1=0.8, beta_2=0.99,
                                                       weight_decay=0.01, epsilon=1e-6)])
def test_adam_matches_numpy(rng, kw):
    p0 = rng.standard_normal((5,)).astype(F32)
    grads = [rng.standard_normal((5,)).astype(F32) for _ in range(STEPS)]
    got = run(opt.Adam(**kw), p0, grads)
    np.testing.assert_allclose(got, adam_ref(p0, grads, **kw), rtol=1e-5, atol=1e-6)


def test_adam_bias_correction_first_step():
    # with bias correction the first step moves every weight by about lr * sign(g)
    got = run(opt.Adam(lr=0.01), np.zeros(3, F32), [np.array([0.5, -2.0, 1e-3], F32)])
    np.testing.assert_allclose(got, [-0.01, 0.01, -0.01], rtol=1e-4)


def test_rmsprop_matches_numpy(rng):
    lr, rho, eps = 0.01, 0.9, 1e-8
    p0 = rng.standard_normal((4,)).astype(F32)
    grads = [rng.standard_normal((4,)).astype(F32) for _ in range(STEPS)]
    p, avg = p0.copy(), np.zeros(4, F32)
    for g in grads:
        avg = avg * F32(rho) + g * g * (F32(1) - F32(rho))
        p = p - (g / np.sqrt(avg + F32(eps))) * F32(lr)
    got = run(opt.RMSProp(lr=lr, rho=rho, epsilon=eps), p0, grads)
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)


def rmsprop_ref(p, grads, lr, rho=0.9, epsilon=1e-8, weight_decay=0.0):
    p, avg, f = p.copy(), np.zeros_like(p), F32
    for g in grads:
        g = g + f(weight_decay) * p if weight_decay else g
        avg = avg * f(rho) + g * g * (f(1) - f(rho))
        p = p - (g / np.sqrt(avg + f(epsilon))) * f(lr)
    return p


def adagrad_ref(p, grads, lr, epsilon=1e-8, weight_decay=0.0):
    p, hist, f = p.copy(), np.zeros_like(p), F32
    for g in grads:
        g = g + f(weight_decay) * p if weight_decay else g
        hist = hist + g * g
        p = p - (g / np.sqrt(hist + f(epsilon))) * f(lr)
    return p


# Every option of every optimizer, several steps, through apply() and through update(): a
# dropped or swapped term (e.g. RMSProp ignoring weight decay) changes the numbers.
OPTIONS = [
    (opt.RMSProp, rmsprop_ref, dict(lr=0.01)),
    (opt.RMSProp, rmsprop_ref, dict(lr=0.02, weight_decay=0.3)),
    (opt.RMSProp, rmsprop_ref, dict(lr=0.01, rho=0.5, epsilon=1e-3, weight_decay=0.05)),
    (opt.AdaGrad, adagrad_ref, dict(lr=0.1)),
    (opt.AdaGrad, adagrad_ref, dict(lr=0.1, epsilon=1e-2, weight_decay=0.2)),
    (opt.Adam, adam_ref, dict(lr=0.05, weight_decay=0.3)),
    (opt.Adam, adam_ref, dict(lr=0.05, beta_1=0.5, beta_2=0.9, epsilon=1e-3)),
    (opt.SGD, sgd_ref, dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.2)),
    (opt.SGD, sgd_ref, dict(lr=0.05, momentum=0.9, dampening=0.5, weight_decay=0.1)),
]


@pytest.mark.parametrize("use_update", [False, True])
@pytest.mark.parametrize("make,ref,kw", OPTIONS,
                         ids=["%s-%s" % (m.__name__, "-".join(sorted(k))) for m, _, k in OPTIONS])
def test_every_option_matches_numpy(rng, make, ref, kw, use_update):
    p0 = rng.standard_normal((3, 2)).astype(F32)
    grads = [rng.standard_normal((3, 2)).astype(F32) for _ in range(STEPS + 1)]
    got = run(make(**kw), p0, grads, use_call=use_update)
    np.testing.assert_allclose(got, ref(p0, grads, **kw), rtol=1e-5, atol=1e-6)


def test_weight_decay_changes_every_optimizer():
    # the same steps with and without weight decay must differ (by a known amount for SGD)
    # (several steps: the first step of RMSProp/Adam depends on the gradient's sign only)
    p0 = np.array([1.0, -2.0], F32)
    g = [np.array([0.5, 0.1], F32), np.array([-0.2, 0.3], F32), np.array([0.4, 0.4], F32)]
    for make in (opt.SGD, opt.RMSProp, opt.AdaGrad, opt.Adam):
        plain = run(make(lr=0.1), p0, g)
        decayed = run(make(lr=0.1, weight_decay=0.5), p0, g)
        assert np.abs(plain - decayed).max() > 1e-3, make.__name__
    assert run(opt.SGD(lr=0.1, weight_decay=0.5), p0, g[:1])[0] == pytest.approx(1 - 0.1 * 1.0)


def _decay(init, steps, rate, staircase, t):
    e = np.floor(t / steps) if staircase else t / steps
    return F32(init * rate ** e)


@pytest.mark.parametrize("staircase", [False, True])
def test_all_sgd_hyper_parameters_scheduled_match_numpy(rng, staircase):
    def sched(init, rate):
        return opt.ExponentialDecay(init, 2, rate, staircase=staircase)

    sgd = opt.SGD(lr=sched(0.1, 0.5), momentum=sched(0.9, 0.8), dampening=sched(0.2, 0.5),
                  weight_decay=sched(0.1, 0.5))
    p0 = rng.standard_normal((4,)).astype(F32)
    grads = [rng.standard_normal((4,)).astype(F32) for _ in range(5)]
    p, buf = p0.copy(), np.zeros_like(p0)
    for t, g in enumerate(grads):
        lr, mom = _decay(0.1, 2, 0.5, staircase, t), _decay(0.9, 2, 0.8, staircase, t)
        dam, wd = _decay(0.2, 2, 0.5, staircase, t), _decay(0.1, 2, 0.5, staircase, t)
        g = g + wd * p
        buf = buf * mom + g * (F32(1) - dam)
        p = p - buf * lr
    np.testing.assert_allclose(run(sgd, p0, grads), p, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make,ref", [(opt.Adam, adam_ref), (opt.RMSProp, rmsprop_ref),
                                      (opt.AdaGrad, adagrad_ref)])
def test_lr_schedule_matches_numpy_for_adaptive_optimizers(rng, make, ref):
    # an lr schedule scales each step: replay the reference one step at a time with that lr
    p0 = rng.standard_normal((3,)).astype(F32)
    grads = [rng.standard_normal((3,)).astype(F32) for _ in range(4)]
    got = run(make(lr=opt.ExponentialDecay(0.1, 1, 0.5)), p0, grads)
    # the reference: the same state recursion, the step size lr_t = 0.1 * 0.5^t
    p = p0.copy()
    if make is opt.Adam:
        m, v = np.zeros_like(p), np.zeros_like(p)
        for t, g in enumerate(grads):
            m = m * F32(0.9) + g * F32(0.1)
            v = v * F32(0.999) + g * g * (F32(1) - F32(0.999))
            m_hat = m / (F32(1) - F32(0.9) ** F32(t + 1))
            v_hat = v / (F32(1) - F32(0.999) ** F32(t + 1))
            p = p - m_hat / (np.sqrt(v_hat) + F32(1e-8)) * _decay(0.1, 1, 0.5, False, t)
    else:
        acc = np.zeros_like(p)
        for t, g in enumerate(grads):
            acc = acc * F32(0.9) + g * g * F32(0.1) if make is opt.RMSProp else acc + g * g
            p = p - g / np.sqrt(acc + F32(1e-8)) * _decay(0.1, 1, 0.5, False, t)
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)


def test_adagrad_matches_numpy(rng):
    lr, eps, wd = 0.1, 1e-8, 0.05
    p0 = rng.standard_normal((4,)).astype(F32)
    grads = [rng.standard_normal((4,)).astype(F32) for _ in range(STEPS)]
    p, hist = p0.copy(), np.zeros(4, F32)
    for g in grads:
        g = g + F32(wd) * p
        hist = hist + g * g
        p = p - (g / np.sqrt(hist + F32(eps))) * F32(lr)
    got = run(opt.AdaGrad(lr=lr, epsilon=eps, weight_decay=wd), p0, grads)
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)


# ---- schedules --------------------------------------------------------------------------------
def test_constant_and_exponential_decay():
    step = tensor.Tensor((1,))
    step.set_value(7.0)
    assert N(opt.Constant(0.3)(step))[0] == pytest.approx(0.3)
    assert N(opt.ExponentialDecay(0.5, 2, 0.1)(step))[0] == pytest.approx(0.5 * 0.1 ** 3.5,
                                                                          rel=1e-5)
    assert N(opt.ExponentialDecay(0.5, 2, 0.1, staircase=True)(step))[0] == pytest.approx(
        0.5 * 0.1 ** 3, rel=1e-5)
    with pytest.raises(TypeError):
        opt.Constant(1.0)(3)
    with pytest.raises(ValueError):
        opt.ExponentialDecay(0.5, 0, 0.1)


def test_lr_schedule_drives_the_update():
    sched = opt.ExponentialDecay(1.0, decay_steps=1, decay_rate=0.5)
    sgd = opt.SGD(lr=sched)
    grads = [np.ones(1, F32)] * 3
    assert run(sgd, np.zeros(1, F32), grads)[0] == pytest.approx(-(1 + 0.5 + 0.25))
    assert N(sgd.lr_value)[0] == pytest.approx(0.125)
    assert N(sgd.step_counter)[0] == 3


def test_momentum_schedule():
    sgd = opt.SGD(lr=1.0, momentum=opt.ExponentialDecay(0.5, 1, 0.5))
    # buf1 = 1 (p = -1); step 1: momentum 0.25, buf2 = 0.25 + 1 (p = -2.25)
    assert run(sgd, np.zeros(1, F32), [np.ones(1, F32)] * 2)[0] == pytest.approx(-2.25)


# ---- the training-step API ----------------------------------------------------------------------
def test_call_does_backward_update_and_step(rng):
    autograd.training = True
    try:
        w0 = rng.standard_normal((3, 2)).astype(F32)
        x = rng.standard_normal((4, 3)).astype(F32)
        w = T(w0, requires_grad=True, stores_grad=True)
        sgd = opt.SGD(lr=0.1)
        loss = autograd.reduce_sum(autograd.matmul(T(x), w), None, 0)
        sgd(loss)
    finally:
        autograd.training = False
    # d(sum(x w))/dw = x^T 1
    np.testing.assert_allclose(N(w), w0 - 0.1 * x.T @ np.ones((4, 2), F32), rtol=1e-5)
    assert N(sgd.step_counter)[0] == 1


def test_old_update_api_runs_the_autograd_md_mlp(rng):
    """The 'operation only' MLP of the autograd documentation, unchanged."""
    data = rng.standard_normal((16, 2)).astype(F32)
    label = np.eye(2, dtype=F32)[(data[:, 0] * data[:, 1] > 0).astype(int)]
    w0 = tensor.Tensor(shape=(2, 3), requires_grad=True, stores_grad=True)
    w0.gaussian(0.0, 0.1)
    b0 = tensor.Tensor(shape=(1, 3), requires_grad=True, stores_grad=True)
    b0.set_value(0.0)
    w1 = tensor.Tensor(shape=(3, 2), requires_grad=True, stores_grad=True)
    w1.gaussian(0.0, 0.1)
    b1 = tensor.Tensor(shape=(1, 2), requires_grad=True, stores_grad=True)
    b1.set_value(0.0)
    inputs = tensor.Tensor(data=data)
    target = tensor.Tensor(data=label)
    autograd.training = True
    sgd = opt.SGD(0.05)
    losses = []
    try:
        for i in range(10):
            x = autograd.matmul(inputs, w0)
            x = autograd.add_bias(x, b0)
            x = autograd.relu(x)
            x = autograd.matmul(x, w1)
            x = autograd.add_bias(x, b1)
            loss = autograd.mse_loss(x, target)
            for p, gp in autograd.backward(loss):
                sgd.update(p, gp)
            losses.append(float(N(loss)[0]))
    finally:
        autograd.training = False
    assert losses[-1] < losses[0]


def test_update_keeps_the_gradient_intact(rng):
    g0 = rng.standard_normal((3,)).astype(F32)
    g = T(g0)
    p = T(np.ones(3), requires_grad=True, stores_grad=True)
    opt.SGD(lr=0.1, momentum=0.9, weight_decay=0.1).update(p, g)
    np.testing.assert_array_equal(N(g), g0)


# ---- errors -------------------------------------------------------------------------------------
def test_bad_arguments():
    with pytest.raises(ValueError):
        opt.SGD(lr=0.1, momentum=-1)
    with pytest.raises(ValueError):
        opt.SGD(lr=0.1, weight_decay=-0.1)
    with pytest.raises(ValueError, match="Nesterov"):
        opt.SGD(lr=0.1, nesterov=True)
    with pytest.raises(TypeError):
        opt.SGD(lr="fast")
    if not opt.singa.USE_DIST:  # a build without MPI has no DistOpt (test_dist.py covers it)
        with pytest.raises(NotImplementedError):
            opt.DistOpt(opt.SGD())
    sgd = opt.SGD(lr=0.1)
    p = T(np.ones((2, 2)), requires_grad=True, stores_grad=True)
    with pytest.raises(ValueError, match=r"\(2, 2\).*\(4,\)"):
        sgd.apply("p", p, T(np.ones(4)))
    with pytest.raises(TypeError):
        sgd.apply("p", p, np.ones((2, 2)))


def test_state_of_another_shape_raises():
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    sgd.apply("W", T(np.ones(3), stores_grad=True), T(np.ones(3)))
    with pytest.raises(ValueError, match=r"'W'.*\(2,\).*\(3,\).*unique"):
        sgd.apply("W", T(np.ones(2), stores_grad=True), T(np.ones(2)))


@pytest.mark.parametrize("through_update", [False, True])
def test_two_parameters_with_one_name_keep_their_own_state(through_update):
    # Standalone layers all name their weight "W" (as in SINGA): one optimizer must not share a
    # momentum buffer between them. Reference: each tensor with its own numpy momentum.
    a0 = np.array([[1.0, 2.0], [3.0, 4.0]], F32)
    b0 = np.array([[0.5, -1.0], [2.0, 0.25]], F32)
    a = T(a0, requires_grad=True, stores_grad=True, name="W")
    b = T(b0, requires_grad=True, stores_grad=True, name="W")
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    ra, rb, va, vb = a0.copy(), b0.copy(), np.zeros_like(a0), np.zeros_like(b0)
    autograd.training = True
    try:
        for _ in range(3):
            loss = autograd.reduce_sum(autograd.matmul(a, b), None, 0)
            if through_update:
                for p, g in autograd.backward(loss):
                    sgd.update(p, g)
                sgd.step()
            else:
                sgd(loss)
            ga, gb = np.ones((2, 2), F32) @ rb.T, ra.T @ np.ones((2, 2), F32)
            va, vb = 0.9 * va + ga, 0.9 * vb + gb
            ra, rb = ra - 0.1 * va, rb - 0.1 * vb
    finally:
        autograd.training = False
    np.testing.assert_allclose(N(a), ra, rtol=1e-5)
    np.testing.assert_allclose(N(b), rb, rtol=1e-5)
    assert sorted(sgd.moments) == ["W", "W#1"]


# ---- states -------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: opt.SGD(lr=0.1, momentum=0.9),
                                  lambda: opt.Adam(lr=0.01), lambda: opt.RMSProp(lr=0.01),
                                  lambda: opt.AdaGrad(lr=0.1)])
def test_get_set_states_resume_exactly(rng, make):
    p0 = rng.standard_normal((3,)).astype(F32)
    grads = [rng.standard_normal((3,)).astype(F32) for _ in range(4)]
    full = run(make(), p0, grads)

    first = make()
    mid = run(first, p0, grads[:2])
    states = first.get_states()
    assert states["step_counter"] == 2.0
    second = make()
    second.set_states(states)
    np.testing.assert_array_equal(run(second, mid, grads[2:]), full)
    if isinstance(second, opt.SGD):
        assert set(states) == {"step_counter", "moments", "hyper_parameters"}
    with pytest.raises(KeyError):
        make().set_states({})


def test_set_states_copies_into_existing_tensors():
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    p = T(np.ones(2), stores_grad=True, name="p")
    sgd.apply("p", p, T(np.ones(2)))
    buf, counter = sgd.moments["p"], sgd.step_counter
    sgd.set_states({"step_counter": 5, "moments": {"p": np.full(2, 3.0, F32)}})
    assert sgd.moments["p"] is buf and sgd.step_counter is counter
    np.testing.assert_array_equal(N(buf), [3, 3])
    with pytest.raises(ValueError, match=r"moments\['p'\]"):
        sgd.set_states({"step_counter": 0, "moments": {"p": np.ones(3, F32)}})


# ---- graph replay -------------------------------------------------------------------------------
@pytest.mark.parametrize("sequential", [False, True])
def test_step_counter_and_schedule_advance_in_a_replayed_graph(sequential):
    dev = device.create_cpu_device(3)
    p = tensor.Tensor((2,), dev, requires_grad=True, stores_grad=True, name="p")
    p.set_value(0.0)
    g = tensor.Tensor((2,), dev)
    g.set_value(1.0)
    adam = opt.Adam(lr=opt.ExponentialDecay(0.1, 1, 0.5))
    sgd_ref = opt.Adam(lr=opt.ExponentialDecay(0.1, 1, 0.5))
    q = tensor.Tensor((2,), dev, requires_grad=True, stores_grad=True, name="p")
    q.set_value(0.0)
    dev.EnableGraph(True)
    try:
        adam.apply("p", p, g)  # state is created outside buffering
        adam.step()
    finally:
        dev.EnableGraph(False)
    try:
        for _ in range(4):
            dev.RunGraph(sequential)
            sgd_ref.apply("p", q, g)
            sgd_ref.step()
            np.testing.assert_allclose(N(p), N(q), rtol=1e-6)
        assert N(adam.step_counter)[0] == 4
        assert N(adam.lr_value)[0] == pytest.approx(0.1 * 0.5 ** 4)
    finally:
        dev.ResetGraph()


def test_optimizer_state_lives_on_the_parameter_device():
    dev = device.create_cpu_device(4)
    p = tensor.Tensor((2,), dev, requires_grad=True, stores_grad=True, name="p")
    p.set_value(1.0)
    g = tensor.Tensor((2,), dev)
    g.set_value(1.0)
    sgd = opt.SGD(lr=0.5, momentum=0.5)
    sgd.apply("p", p, g)
    assert sgd.moments["p"].device == dev and sgd.lr_value.device == dev
    np.testing.assert_allclose(N(p), [0.5, 0.5])


def test_singa_wrap_has_what_opt_uses():
    for name in ("EltwiseMult", "Add", "Sub", "Div", "Pow", "Sqrt", "Square", "Floor"):
        assert hasattr(singa_wrap, name)
    assert isinstance(layer.Linear(2), layer.Layer)


# ---- param_state: the tensors an update writes -----------------------------------------------
@pytest.mark.parametrize("make,names", [
    (lambda: opt.SGD(lr=0.1, momentum=0.9), ["moments"]),
    (lambda: opt.SGD(lr=0.1), []),
    (lambda: opt.Adam(lr=0.1), ["m", "v"]),
    (lambda: opt.RMSProp(lr=0.1), ["running_average"]),
    (lambda: opt.AdaGrad(lr=0.1), ["history"]),
])
def test_param_state_is_exactly_what_an_update_writes(make, names, rng):
    o = make()
    p = T(rng.standard_normal((2, 3)), requires_grad=True, stores_grad=True, name="p")
    q = T(rng.standard_normal((4,)), requires_grad=True, stores_grad=True, name="q")
    o.update(q, T(rng.standard_normal(4)))  # q's state exists; p's does not yet
    state = o.param_state(p)
    assert sorted(state) == names
    for t in state.values():  # made before the first update, as zeros of p's shape
        np.testing.assert_array_equal(N(t), np.zeros((2, 3), F32))
    everything = [p, q] + [t for d in o.get_states().values() if isinstance(d, dict)
                           for t in d.values() if isinstance(t, tensor.Tensor)]
    before = [N(t).copy() for t in everything]
    o.update(p, T(rng.standard_normal((2, 3))))
    changed = {id(t) for t, b in zip(everything, before) if not np.array_equal(N(t), b)}
    assert changed == {id(p)} | {id(t) for t in state.values()}
    # the same tensors as the optimizer's own state (get_states), not copies
    for name, t in state.items():
        assert o.get_states()[name]["p"] is t
    assert all(o.param_state(p)[n] is t for n, t in state.items())


def test_param_state_of_two_parameters_sharing_a_name_is_each_ones_own():
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    a = T(np.ones(2), requires_grad=True, stores_grad=True, name="W")
    b = T(np.ones(3), requires_grad=True, stores_grad=True, name="W")
    sgd.update(a, T([1.0, 2.0]))
    sgd.update(b, T([3.0, 4.0, 5.0]))
    np.testing.assert_array_equal(N(sgd.param_state(a)["moments"]), [1.0, 2.0])
    np.testing.assert_array_equal(N(sgd.param_state(b)["moments"]), [3.0, 4.0, 5.0])
