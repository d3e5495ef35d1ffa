"""The GPU against the CPU: every autograd operator of test_autograd_ops.py (forward and
backward), tensors across devices, graph == eager with CUDA Graph capture on and off, dropout,
the GPU memory pool, errors found inside kernels, NaN/Inf propagation (test_nan_propagation.py's
rows) and the finite check, training on the digits, and float16 mixed precision with loss scaling.

    tests/gpu/run_all.sh                              # on a machine with a GPU: nothing may skip
    SINGA_GPU_STANDIN=cpu python -m pytest test_gpu.py   # the test logic, here, on a second CPU

Without a usable GPU every test skips with the reason; with SINGA_REQUIRE_GPU=1 (run_all.sh) they
run anyway and fail, so that a GPU run cannot pass by skipping. SINGA_GPU_STANDIN=cpu runs them
with a separate host device in the GPU's place (what a host device cannot do, CUDA Graph capture,
is then not asserted): it checks the tests themselves on a machine without a GPU.

Tolerances (stated once): forward rtol 1e-4 / atol 1e-5 (or the op row's own when looser), since
cuBLAS/cuDNN sum in other orders than OpenBLAS/oneDNN; gradients rtol 1e-3 / atol 1e-4 scaled by
the gradient's magnitude (reductions over the batch, atomics in cuDNN's backward-filter
algorithms); trained model states rtol 1e-3 / atol 1e-4 after a few steps.
"""
import gc
import os

import numpy as np
import pytest

import test_graph_equivalence as ge  # noqa: E402  (puts examples/ on sys.path)
from gradcheck import _outputs, _tensors, analytic_grads
from test_autograd_ops import ALL, EAGER_ONLY
from test_transformer_ops import TRANSFORMER
from singa import autograd, device, opt, tensor
from singa import singa_wrap as sw

import test_nan_propagation as nan_cases
from test_amp import SmallCNN
import datasets  # noqa: E402  (examples/)
import digits_fit  # noqa: E402
import models  # noqa: E402  (examples/)
import train  # noqa: E402  (examples/)

N = tensor.to_numpy
STANDIN = os.environ.get("SINGA_GPU_STANDIN") == "cpu"
REQUIRED = os.environ.get("SINGA_REQUIRE_GPU") == "1"
HAVE_GPU = device.get_num_gpus() > 0

pytestmark = pytest.mark.skipif(
    not (HAVE_GPU or STANDIN or REQUIRED),
    reason="no CUDA GPU is usable here (singa_wrap.USE_CUDA=%s, get_num_gpus()=0); "
           "tests/gpu/run_all.sh runs these on a GPU" % sw.USE_CUDA)
needs_capture = pytest.mark.skipif(STANDIN, reason="a host stand-in cannot capture CUDA Graphs")

FWD = dict(rtol=1e-4, atol=1e-5)
GRAD = dict(rtol=1e-3, atol=1e-4)
_standin_ids = iter(range(300, 10 ** 6))


def new_gpu():
    """A fresh GPU device (own stream, handles, pool and graph), or the host stand-in."""
    if STANDIN:
        return sw.create_cpu_device(next(_standin_ids))
    return device.create_cuda_gpu_on(0)


@pytest.fixture(scope="module")
def gpu():
    return new_gpu()


# ---- every operator: GPU == CPU, forward and backward ----------------------------------------
def _grad_inputs(c, arrays):
    if c.grad is not None:
        return c.grad
    return [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]


def _seeds(c, arrays, seed=0):
    """Random output gradients, shaped by an eager CPU run of the op."""
    was = autograd.training
    autograd.training = True
    try:
        shapes = [y.shape for y in _outputs(c.op(autograd, *_tensors(arrays, [])))]
    finally:
        autograd.training = was
    rng = np.random.RandomState(seed)
    return [rng.uniform(-1, 1, size=s) for s in shapes]


def _assert_same(got, want, what, tol=None):
    g_grads, g_outs = got
    w_grads, w_outs = want
    fwd = {k: max(v, (tol or {}).get(k, 0.0)) for k, v in FWD.items()}  # the row's, if looser
    assert len(g_outs) == len(w_outs)
    for k, (a, b) in enumerate(zip(g_outs, w_outs)):
        assert a.shape == b.shape and a.dtype == b.dtype, (what, k, a.shape, b.shape)
        np.testing.assert_allclose(a, b, err_msg="%s: output %d" % (what, k), **fwd)
    assert set(g_grads) == set(w_grads), what
    for i in w_grads:
        scale = max(1.0, float(np.max(np.abs(w_grads[i]))) if w_grads[i].size else 1.0)
        np.testing.assert_allclose(g_grads[i], w_grads[i], rtol=GRAD["rtol"],
                                   atol=GRAD["atol"] * scale,
                                   err_msg="%s: gradient of input %d" % (what, i))


@pytest.mark.parametrize("c", ALL + TRANSFORMER)
def test_op_on_gpu_equals_cpu(c, gpu):
    arrays = [np.asarray(a) for a in c.inputs]
    grad = _grad_inputs(c, arrays)
    dys = _seeds(c, arrays)
    cpu = analytic_grads(c.op, arrays, grad, dys)
    on_gpu = analytic_grads(c.op, arrays, grad, dys, dev=gpu)
    _assert_same(on_gpu, cpu, c.id + " on the GPU", c.tol)


@pytest.mark.parametrize("c", [p for p in ALL + TRANSFORMER if p.values[0].id not in EAGER_ONLY])
def test_op_in_a_gpu_graph_equals_cpu(c):
    """Buffered into the GPU device's graph and replayed on its stream (captured where the ops
    allow it): the CPU's eager numbers."""
    arrays = [np.asarray(a) for a in c.inputs]
    grad = _grad_inputs(c, arrays)
    dys = _seeds(c, arrays)
    cpu = analytic_grads(c.op, arrays, grad, dys)
    dev = new_gpu()
    try:
        on_gpu = analytic_grads(c.op, arrays, grad, dys, graph=True, dev=dev)
    finally:
        dev.ResetGraph()
    _assert_same(on_gpu, cpu, c.id + " in a GPU graph", c.tol)


# ---- the elementwise table (cpp/include/singa/ops/elementwise.def), per dtype it allows -------
def _ew_operand(dtype, shape, rng, name, second=False):
    if dtype == np.int32:  # divisors and exponents stay small and positive
        lo, hi = (1, 4) if second else (-5, 6)
        return rng.randint(lo, hi, size=shape).astype(np.int32)
    x = rng.uniform(0.2, 0.8, size=shape).astype(np.float32)  # inside every op's domain
    return x + 1.5 if name == "Acosh" else x


@pytest.mark.parametrize("name,arity,kinds", sw.ELEMENTWISE_OPS,
                         ids=[r[0] for r in sw.ELEMENTWISE_OPS])
def test_elementwise_table_on_gpu_equals_cpu(name, arity, kinds, gpu):
    """Every .def row, in float32 and (kind I) int32, binary rows with broadcasting: the GPU's
    table kernel gives the CPU's values (ints exactly)."""
    rng = np.random.RandomState(1)
    host = device.get_default_device()
    for dtype in [np.float32] + ([np.int32] if "I" in kinds else []):
        arrays = [_ew_operand(dtype, (3, 4), rng, name)]
        if arity == 2:
            arrays.append(_ew_operand(dtype, (4,), rng, name, second=True))
        fn = getattr(sw, name)
        want = sw.to_numpy(fn(*[sw.from_numpy(a, host) for a in arrays]))
        got = sw.to_numpy(fn(*[sw.from_numpy(a, gpu) for a in arrays]))
        assert got.dtype == want.dtype and got.shape == want.shape, (name, dtype)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, err_msg="%s %s" % (name, dtype.__name__), **FWD)
        else:
            np.testing.assert_array_equal(got, want, err_msg="%s %s" % (name, dtype.__name__))


# ---- tensors across devices ------------------------------------------------------------------
ARRAYS = [np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
          np.arange(-5, 7, dtype=np.int32).reshape(2, 6),
          np.linspace(-2, 2, 10).astype(np.float16)]


@pytest.mark.parametrize("a", ARRAYS, ids=lambda a: str(a.dtype))
def test_round_trips_across_devices(a, gpu):
    host = tensor.from_numpy(a)
    t = tensor.from_numpy(a).to_device(gpu)
    assert t.device == gpu and (STANDIN or not t.device.is_host())
    assert t.dtype == host.dtype and t.shape == a.shape
    np.testing.assert_array_equal(N(t), a)             # tensor.to_numpy
    np.testing.assert_array_equal(np.asarray(t), a)    # numpy.asarray (the buffer protocol)
    np.testing.assert_array_equal(t.to_numpy(), a)
    back = tensor.to_host(t)                           # a host copy; t stays on the GPU
    assert back.device.is_host() and (STANDIN or back.device != gpu) and t.device == gpu
    np.testing.assert_array_equal(N(back), a)
    g = tensor.Tensor(a.shape, gpu, host.dtype)
    g.copy_from_numpy(a[::-1].copy())
    np.testing.assert_array_equal(N(g), a[::-1])
    g.copy_data(host)                                  # host -> GPU
    np.testing.assert_array_equal(N(g), a)
    h = tensor.Tensor(a.shape, dtype=host.dtype)
    h.copy_data(g)                                     # GPU -> host
    np.testing.assert_array_equal(N(h), a)
    f = tensor.from_numpy(a, gpu)
    assert f.device == gpu
    np.testing.assert_array_equal(N(f.clone()), a)
    f.to_host()
    assert f.device.is_host() and (STANDIN or f.device != gpu)  # a host stand-in stays put
    np.testing.assert_array_equal(N(f), a)


def test_views_and_math_stay_on_the_gpu(gpu):
    a = ARRAYS[0]
    t = tensor.from_numpy(a, gpu)
    for r, want in [(t.T(), a.T), (tensor.exp(t), np.exp(a)), (t + 1.5, a + 1.5),
                    (tensor.mult(t, t.T()), a @ a.T), (t[1], a[1:2])]:
        assert r.device == gpu
        np.testing.assert_allclose(N(r), want, **FWD)


# ---- graph == eager for the example models, capture on and off --------------------------------
def _gpu_twin(name, make_opt, use_graph, init, capture=True):
    dev = new_gpu()
    dev.SetCaptureEnabled(capture)
    init_t = {k: tensor.from_numpy(v, dev) for k, v in init.items()}
    return dev, ge.twin(name, make_opt, dev, use_graph, False, init_t)


def _assert_states(got, want, what):
    assert got.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-3, atol=1e-4,
                                   err_msg="%s: %s" % (what, k))


@pytest.mark.parametrize("capture", [True, False], ids=["capture", "no-capture"])
@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_model_graph_equals_eager_on_gpu(name, capture):
    init, cpu_losses, cpu_states = ge.eager_reference(name, "sgd")
    batches = ge.data(name, ge.STEPS[name])
    edev, eager = _gpu_twin(name, ge.OPTIMIZERS["sgd"], False, init)
    e_losses, e_states = ge.run(eager, edev, batches)
    np.testing.assert_allclose(e_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    _assert_states(e_states, cpu_states, "GPU eager vs CPU eager")

    gdev, graph = _gpu_twin(name, ge.OPTIMIZERS["sgd"], True, init, capture)
    g_losses, g_states = ge.run(graph, gdev, batches)
    np.testing.assert_allclose(g_losses, e_losses, rtol=1e-4, atol=1e-5)
    _assert_states(g_states, e_states, "GPU graph vs GPU eager")
    if not STANDIN:
        assert gdev.capture_enabled() is capture
        assert gdev.graph_captured() is capture, "every op of this step allows capture"
    gdev.ResetGraph()
    assert gdev.graph_captured() is False


@needs_capture
def test_switching_capture_off_drops_the_captured_graph():
    init, _, _ = ge.eager_reference("mlp", "sgd")
    batches = ge.data("mlp", ge.STEPS["mlp"])
    dev, net = _gpu_twin("mlp", ge.OPTIMIZERS["sgd"], True, init, capture=True)
    losses_on, _ = ge.run(net, dev, batches[:3])
    assert dev.graph_captured()
    dev.SetCaptureEnabled(False)
    losses_off, _ = ge.run(net, dev, batches[3:])
    assert not dev.graph_captured()
    dev2, net2 = _gpu_twin("mlp", ge.OPTIMIZERS["sgd"], True, init, capture=False)
    ref, _ = ge.run(net2, dev2, batches)
    np.testing.assert_allclose(np.concatenate([losses_on, losses_off]), ref, rtol=1e-5,
                               atol=1e-6)
    dev.ResetGraph()
    dev2.ResetGraph()


def test_dropout_graph_is_not_captured_and_equals_eager():
    """Random ops (cuRAND advances its offset on the host) forbid capture: the graph replays op
    by op, drawing the same masks as eager mode from the same seed."""
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((8, 20)).astype(np.float32),
                rng.integers(0, 10, 8).astype(np.int32)) for _ in range(5)]
    results = []
    for use_graph in (False, True):
        dev = new_gpu()
        dev.SetCaptureEnabled(True)
        dev.SetRandSeed(7)
        net = ge.DropoutNet()
        net.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
        tx = tensor.Tensor((8, 20), dev)
        net.compile([tx], is_train=True, use_graph=use_graph, sequential=False)
        dev.SetRandSeed(11)
        results.append(ge.run(net, dev, batches))
        assert dev.graph_captured() is False
        dev.ResetGraph()
    (e_losses, e_states), (g_losses, g_states) = results
    np.testing.assert_allclose(g_losses, e_losses, rtol=1e-5)
    for k in e_states:
        np.testing.assert_allclose(g_states[k], e_states[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert len(set(np.round(e_losses, 5))) > 1  # dropout really drew different masks


def test_dropout_masks_on_gpu_drop_the_requested_fraction(gpu):
    was = autograd.training
    autograd.training = True
    try:
        x = tensor.from_numpy(np.ones((200, 100), np.float32), gpu)
        y = N(autograd.dropout(x, ratio=0.3))
    finally:
        autograd.training = was
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)  # inverted dropout scaling


# ---- memory --------------------------------------------------------------------------------
def test_gpu_memory_pool_stats():
    dev = new_gpu()
    before = device.get_memory_stats(dev)
    assert set(before) >= {"in_use", "peak_in_use", "reserved", "peak_reserved", "num_mallocs"}
    host_before = device.get_memory_in_use()
    t = tensor.Tensor((1024, 256), dev)   # 1 MiB of float32
    t.set_value(1.0)
    during = device.get_memory_stats(dev)
    assert during["in_use"] - before["in_use"] >= 1 << 20
    assert during["reserved"] >= during["in_use"]
    assert during["peak_in_use"] >= during["in_use"]
    assert device.get_memory_in_use() == host_before  # the host pool did not pay for it
    del t
    gc.collect()
    after = device.get_memory_stats(dev)
    assert after["in_use"] == before["in_use"]
    assert after["peak_in_use"] >= during["in_use"]
    device.reset_peak_memory(dev)
    assert device.get_peak_memory(dev) == device.get_memory_in_use(dev)


def test_impossible_allocation_raises_memory_error_and_the_device_survives():
    dev = new_gpu()
    with pytest.raises(MemoryError) as info:
        huge = tensor.Tensor((1 << 40,), dev)   # 4 TiB of float32
        huge.set_value(0.0)
    assert str(info.value)
    ok = tensor.from_numpy(np.arange(4, dtype=np.float32), dev)
    np.testing.assert_array_equal(N(ok * 2.0), np.arange(4) * 2.0)


# ---- errors found inside kernels -------------------------------------------------------------
def _survives(dev):
    t = tensor.from_numpy(np.array([1.0, 2.0], np.float32), dev)
    np.testing.assert_array_equal(N(t + t), [2.0, 4.0])


def test_out_of_range_index_raises_at_the_next_read(gpu):
    """A device kernel cannot throw: it records the error and the next read (a synchronising
    copy to the host) raises AxisError; the process and the device live on."""
    x = tensor.from_numpy(np.ones((2, 4), np.float32), gpu)
    idx = tensor.from_numpy(np.array([[1, 9], [0, 0]], np.int32), gpu)
    with pytest.raises(sw.AxisError):
        N(autograd.gather(x, 1, idx))
    _survives(gpu)


def test_out_of_range_label_raises_at_the_next_read(gpu):
    x = tensor.from_numpy(np.zeros((2, 3), np.float32), gpu)
    labels = tensor.from_numpy(np.array([0, 7], np.int32), gpu)
    with pytest.raises(ValueError):
        N(autograd.softmax_cross_entropy(x, labels))
    _survives(gpu)


# ---- NaN and Inf propagate (test_nan_propagation.py's rows, on the CUDA kernels) --------------
@pytest.mark.parametrize("case", nan_cases.CASES, ids=nan_cases.CASE_IDS)
def test_nan_propagates_on_gpu(case, gpu):
    nan_cases.run_case(case, dev=gpu)


@pytest.mark.parametrize("case", nan_cases.CASES, ids=nan_cases.CASE_IDS)
def test_nan_propagates_in_a_gpu_graph(case):
    nan_cases.run_case(case, dev=new_gpu(), graph=True)


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_batchnorm_fused_relu_keeps_nan_on_gpu(training, gpu):
    got, ref = nan_cases.bn_relu_case(gpu, training)
    nan_cases.same(got, ref, "batch norm + relu on the GPU")


def test_reductions_follow_numpy_nan_rules_on_gpu(gpu):
    for got, ref in nan_cases.reductions(gpu):
        nan_cases.same(got, ref, "reduction on the GPU")


def test_conv_relu_fused_by_the_gpu_graph_keeps_nan():
    dev = new_gpu()
    got = nan_cases._conv_then_relu(dev)
    assert dev.graph_num_fused() == 1
    nan_cases.same(got, nan_cases._conv_ref(nan_cases.CONV_X, nan_cases.CONV_W), "cuDNN ReLU")


def test_check_finite_on_gpu_names_the_op_and_turns_capture_off():
    dev = new_gpu()
    x = tensor.from_numpy(np.array([[-1.0, 2.0]], np.float32), dev)
    dev.SetCheckFinite(True)
    assert not dev.capture_enabled()
    with pytest.raises(sw.NonFiniteError, match="'Log'.*1 NaN"):
        autograd.log(x)
    dev.EnableGraph(True)
    try:
        y = autograd.log(autograd.sub(x, x))
    finally:
        dev.EnableGraph(False)
    with pytest.raises(sw.NonFiniteError, match="'Log'.*0 NaN and 2 Inf"):
        dev.RunGraph()
    dev.SetCheckFinite(False)
    dev.RunGraph()
    assert np.isneginf(N(y)).all()


# ---- training ------------------------------------------------------------------------------
def _train_mlp_on_digits(dev, init=None, epochs=3, bs=64):
    (xtr, ytr), (xte, yte) = datasets.load_digits_28()
    xtr, xte = xtr.reshape(len(xtr), -1), xte.reshape(len(xte), -1)
    dev.SetRandSeed(0)
    net = models.MLP(num_classes=10)
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-5))
    tx = tensor.Tensor((bs, xtr.shape[1]), dev)
    ty = tensor.Tensor((bs,), dev, tensor.int32)
    net.compile([tx], is_train=True, use_graph=True, sequential=False)
    if init is None:
        init = {k: N(v).copy() for k, v in net.get_states().items()}
    else:
        net.set_states({k: tensor.from_numpy(v, dev) for k, v in init.items()})
    digits_fit.fit(net, tx, ty, xtr, ytr, epochs, bs)
    acc = train.accuracy(net, xte, yte, tx, bs)
    dev.ResetGraph()
    return acc, init


def test_mlp_on_digits_reaches_the_cpus_accuracy():
    cpu_acc, init = _train_mlp_on_digits(device.create_cpu_device(299))
    gpu_acc, _ = _train_mlp_on_digits(new_gpu(), init)
    assert cpu_acc > 0.85
    assert gpu_acc >= cpu_acc - 0.02, (gpu_acc, cpu_acc)


# ---- fused attention (cpp/src/ops/cuda/attention.cu) -----------------------------------------
_ATTN = {
    "plain": ((2, 3, 9, 8), (2, 3, 11, 8), (2, 3, 11, 5), {}),
    "causal tiles": ((2, 70, 16), (2, 300, 16), (2, 300, 16), dict(is_causal=True)),
    "bool mask, kv heads": ((2, 4, 33, 8), (2, 1, 47, 8), (2, 1, 47, 8), dict(mask="bool")),
    "float bias": ((2, 4, 9, 8), (2, 4, 47, 8), (2, 4, 47, 8), dict(mask="float")),
}


@pytest.mark.parametrize("name", sorted(_ATTN))
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_attention_on_gpu_equals_cpu(name, graph):
    qs, ks, vs, kw = _ATTN[name]
    rng = np.random.RandomState(5)
    arrays = [rng.uniform(-1, 1, size=s).astype(np.float32) for s in (qs, ks, vs)]
    L, S = qs[-2], ks[-2]
    mask = {"bool": rng.uniform(size=(L, S)) > 0.3,
            "float": rng.uniform(-1, 1, size=(qs[0], 1, 1, S)).astype(np.float32)}.get(
                kw.get("mask"))

    def op(ag, q, k, v):
        return ag.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                               is_causal=kw.get("is_causal", False))

    dys = [rng.uniform(-1, 1, size=np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2]) + (L, vs[-1]))]
    cpu = analytic_grads(op, arrays, [0, 1, 2], dys)
    dev = new_gpu()
    try:
        on_gpu = analytic_grads(op, arrays, [0, 1, 2], dys, graph=graph, dev=dev)
    finally:
        dev.ResetGraph()
    _assert_same(on_gpu, cpu, "attention " + name)


def test_attention_dropout_on_gpu_backward_uses_the_forward_mask(gpu):
    from test_attention import _check_against_recovered_mask, _dropout_setup
    q, k, v = _dropout_setup(np.random.default_rng(2))
    dy = np.random.default_rng(3).standard_normal((2, 4, 6)).astype(np.float32)
    was = autograd.training
    autograd.training = True
    try:
        ts = [tensor.from_numpy(a, gpu) for a in (q, k, v)]
        for t in ts:
            t.requires_grad = t.stores_grad = True
        y = autograd.scaled_dot_product_attention(*ts, dropout_p=0.4)
        g = autograd.gradients(y, tensor.from_numpy(dy, gpu))
        _check_against_recovered_mask(q, k, v, N(y), [N(g[t]) for t in ts], dy, 0.4)
    finally:
        autograd.training = was


def test_fused_adam_on_gpu_equals_cpu(gpu):
    """opt.Adam's fused AdamUpdate (cuda/optim.cu) against the CPU kernel: nvcc may contract
    a * b + c into one FMA, so within a few ulps rather than bit for bit."""
    rng = np.random.default_rng(5)
    p0 = rng.standard_normal(50001).astype(np.float32)
    grads = [rng.standard_normal(50001).astype(np.float32) for _ in range(3)]
    out = []
    for dev in (device.get_default_device(), gpu):
        p = tensor.from_numpy(p0, dev)
        adam = opt.Adam(lr=0.05, weight_decay=0.01)
        for g in grads:
            adam.apply("p", p, tensor.from_numpy(g, dev))
            adam.step()
        out.append([N(t) for t in (p, adam.m["p"], adam.v["p"])])
    for name, a, b in zip(("param", "m", "v"), out[1], out[0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)


# ---- bfloat16 (test_bfloat16.py holds the CPU's own checks) ------------------------------------
BF16_STEP = dict(rtol=2 ** -7, atol=1e-6)  # one bf16 rounding step apart at most


def _bf16(a, dev):
    return sw.from_numpy(np.asarray(a, np.float32), dev).AsType(sw.kBFloat16)


def _f32(t):
    return sw.to_numpy(t.AsType(sw.kFloat32))


@pytest.mark.parametrize("name,arity,kinds", sw.ELEMENTWISE_OPS,
                         ids=[r[0] for r in sw.ELEMENTWISE_OPS])
def test_bf16_elementwise_on_gpu_equals_cpu(name, arity, kinds, gpu):
    """Every .def row in bfloat16: the GPU computes in float and rounds once, as the CPU does."""
    rng = np.random.RandomState(2)
    host = device.get_default_device()
    arrays = [_ew_operand(np.float32, (3, 4), rng, name)]
    if arity == 2:
        arrays.append(_ew_operand(np.float32, (4,), rng, name, second=True))
    fn = getattr(sw, name)
    want = fn(*[_bf16(a, host) for a in arrays])
    got = fn(*[_bf16(a, gpu) for a in arrays])
    assert got.data_type() == want.data_type() == sw.kBFloat16
    np.testing.assert_allclose(_f32(got), _f32(want), err_msg=name, **BF16_STEP)


def test_bf16_matmul_conv_pool_batchnorm_on_gpu_equal_cpu(gpu):
    """cuBLAS bf16 GEMM (float accumulation); convolution, pooling and batch norm through
    float32 on the GPU: each within a bf16 step or two of the CPU's bf16 result."""
    rng = np.random.RandomState(3)
    host = device.get_default_device()
    a, b = rng.randn(3, 33, 20), rng.randn(20, 9)
    x, w = rng.randn(2, 4, 7, 7), rng.randn(6, 4, 3, 3) * 0.3
    scale, bias = rng.uniform(0.5, 1.5, 4), rng.randn(4)
    out = {}
    for key, dev in (("cpu", host), ("gpu", gpu)):
        h = sw.ConvHandle((2, 4, 7, 7), [3, 3], [1, 1], [1, 1], 4, 6, False, 1, [1, 1])
        ph = sw.PoolingHandle((2, 4, 7, 7), [2, 2], [2, 2], [0, 0], True, False)
        f = lambda v: sw.from_numpy(np.asarray(v, np.float32), dev)  # noqa: E731
        rm, rv = f(np.zeros(4)), f(np.ones(4))
        y, _, _ = sw.BatchNormForwardTraining(_bf16(x, dev), f(scale), f(bias), rm, rv, 0.1,
                                              1e-5)
        out[key] = [_f32(sw.Mult(_bf16(a, dev), _bf16(b, dev))),
                    _f32(sw.Conv2dForward(_bf16(x, dev), _bf16(w, dev), sw.Tensor(), h, False)),
                    _f32(sw.Pool2dForward(_bf16(x, dev), ph)), _f32(y)]
    for name, g, c in zip(("matmul", "conv", "pool", "batchnorm"), out["gpu"], out["cpu"]):
        np.testing.assert_allclose(g, c, rtol=2 ** -6, atol=2 ** -6 * np.abs(c).max(),
                                   err_msg=name)


# ---- float16 automatic mixed precision, dynamic loss scaling (test_loss_scale.py: the scaler on
# the CPU; singa/loss_scale.py) -------------------------------------------------------------------
needs_float16 = pytest.mark.skipif(STANDIN, reason="a host stand-in has no float16 math")


def _amp_data():
    rng = np.random.default_rng(5)
    return (rng.normal(size=(16, 3, 8, 8)).astype(np.float32),
            rng.integers(0, 10, 16).astype(np.int32))


def _amp_run(precision, use_graph, init, steps=4, loss_scale=None, watch=None):
    """Trains test_amp's SmallCNN on a fresh GPU; returns the net, its losses, the initial
    states and, per step, the loss scale and the parameters named in ``watch``."""
    dev = new_gpu()
    x, y = _amp_data()
    net = SmallCNN()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    tx, ty = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
    net.compile([tx], is_train=True, use_graph=use_graph, precision=precision,
                loss_scale=loss_scale)
    if init is None:
        init = {k: N(v).copy() for k, v in net.get_states().items()}
    net.set_states({k: tensor.from_numpy(v, dev) for k, v in init.items()})
    losses, trace = [], []
    for _ in range(steps):
        losses.append(float(N(net(tx, ty)[1].as_type(tensor.float32)).ravel()[0]))
        scaler = net.__dict__["_loss_scaler"]
        trace.append((scaler.get_scale() if scaler is not None else None,
                      {k: N(net.get_params()[k]).copy() for k in watch or ()}))
    return net, losses, init, trace


@needs_float16
@pytest.mark.parametrize("use_graph", [False, True], ids=["eager", "graph"])
def test_float16_amp_trains_like_float32_with_float32_master_weights(use_graph):
    """Convolution and matmul in float16 (cuDNN / cuBLAS), the rest by POLICY; parameters and
    optimizer state float32; a scale of 2**12 meets no overflow on this net (no skipped step,
    so the two runs take the same steps)."""
    ref, ref_losses, init, _ = _amp_run("float32", use_graph, None)
    net, losses, _, trace = _amp_run("float16", use_graph, init,
                                     loss_scale=opt.LossScaler(init_scale=2.0 ** 12))
    for name, p in net.get_params().items():
        assert p.dtype == tensor.float32, name
    assert [s for s, _ in trace] == [2.0 ** 12] * len(trace)
    np.testing.assert_allclose(losses, ref_losses, rtol=2e-2)
    for k, v in net.get_params().items():
        want = N(ref.get_params()[k])
        np.testing.assert_allclose(N(v), want, rtol=0.05, atol=max(0.02 * np.abs(want).max(),
                                                                    1e-3), err_msg=k)


@needs_float16
def test_float16_amp_graph_equals_eager():
    eager, eager_losses, init, eager_trace = _amp_run("float16", False, None)
    graph, graph_losses, _, graph_trace = _amp_run("float16", True, init)
    assert [s for s, _ in eager_trace] == [s for s, _ in graph_trace]
    np.testing.assert_allclose(graph_losses, eager_losses, **FWD)
    _assert_states({k: N(v) for k, v in graph.get_states().items()},
                   {k: N(v) for k, v in eager.get_states().items()}, "float16 graph vs eager")


@needs_float16
@pytest.mark.parametrize("use_graph", [False, True], ids=["eager", "graph"])
def test_float16_gradients_overflowing_skip_the_step_and_halve_the_scale(use_graph):
    """A scale of 2**40 overflows float16 in backward (dy > 65504): those steps are skipped
    (the weights keep their values) and the scale halves each time, until the gradients fit;
    then training moves the weights."""
    scaler = opt.LossScaler(init_scale=2.0 ** 40)
    _, _, init, trace = _amp_run("float16", use_graph, None, steps=30, loss_scale=scaler,
                                 watch=["conv1.W"])
    scales = [s for s, _ in trace]
    first_clean = next(i for i, s in enumerate(scales) if i > 0 and s == scales[i - 1])
    assert scales[:first_clean] == [2.0 ** (39 - i) for i in range(first_clean)]
    assert 0 < first_clean < 29
    for i in range(first_clean):
        np.testing.assert_array_equal(trace[i][1]["conv1.W"], init["conv1.W"])
    assert not np.array_equal(trace[first_clean][1]["conv1.W"], init["conv1.W"])

