"""The op schema's activations (schema/activations.py), every row the same way: forward against
numpy (NaN included), backward against finite differences, graph mode against eager, the torch.nn
module of the row's name, and an ONNX round trip with attributes other than the defaults. A new
row needs its numpy reference in REF below, and nothing else here.

    pytest -q tests/python/test_activations.py
"""
import numpy as np
import pytest

from singa import autograd, sonnx, tensor
from singa import singa_wrap as sw

from gradcheck import check_graph, check_op

ROWS = {row[0]: row for row in sw.ACTIVATION_OPS}


def _hardswish(x):  # x * relu6(x + 3) / 6: NaN at -inf (-inf * 0) as torch 2.x gives
    return x * np.clip(x + 3, 0, 6) / 6


# C++ name -> (numpy reference f(x, **attrs), non-default attributes to test, kinks: points the
# finite differences must keep away from)
REF = {
    "LeakyReLU": (lambda x, a: np.where(x > 0, x, a * x), {"a": 0.2}, [0.0]),
    "Elu": (lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
            {"alpha": 0.7}, [0.0]),
    "SeLU": (lambda x, alpha, gamma: gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
             {"alpha": 1.5, "gamma": 1.2}, [0.0]),
    "HardSigmoid": (lambda x, alpha, gamma: np.clip(alpha * x + gamma, 0, 1),
                    {"alpha": 0.3, "gamma": 0.4}, [-0.4 / 0.3, 0.6 / 0.3]),
    "HardSwish": (lambda x: _hardswish(x), {}, [-3.0, 3.0]),
}


def _x(kinks, shape=(4, 5), seed=0):
    x = np.random.default_rng(seed).uniform(-4.5, 4.5, shape)
    for k in kinks:  # keep the differences off the kinks
        near = np.abs(x - k) < 0.05
        x[near] = k + 0.1
    return x.astype(np.float32)


def _call(name, **attrs):
    fn = getattr(autograd, ROWS[name][2])
    return lambda ag, x: fn(x, **attrs)


def test_every_row_has_a_reference():
    assert set(REF) == set(ROWS)


@pytest.mark.parametrize("name", sorted(ROWS))
@pytest.mark.parametrize("defaults", [True, False], ids=["defaults", "attrs"])
def test_forward_backward_against_numpy(name, defaults):
    ref, attrs, kinks = REF[name]
    if defaults:
        attrs = {key: default for _, key, default, _, _ in ROWS[name][4]}
    check_op(_call(name, **attrs), lambda x: ref(x.astype(np.float64), **attrs), [_x(kinks)])


@pytest.mark.parametrize("name", sorted(ROWS))
def test_nan_and_inf_propagate_as_numpy(name):
    ref, attrs, _ = REF[name]
    x = np.array([np.nan, np.inf, -np.inf, -1.0, 0.0, 2.0], np.float32)
    got = tensor.to_numpy(getattr(autograd, ROWS[name][2])(tensor.from_numpy(x), **attrs))
    with np.errstate(invalid="ignore", over="ignore"):
        want = ref(x.astype(np.float64), **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_graph_equals_eager(name):
    ref, attrs, kinks = REF[name]
    check_graph(_call(name, **attrs), [_x(kinks, (3, 7), seed=1)])


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_backward_op_directly(name):
    """<Op>Backward(dy, x, attrs) as the kernel it is: dy times the derivative, any dy."""
    ref, attrs, kinks = REF[name]
    x = _x(kinks).astype(np.float64)
    dy = np.random.default_rng(3).standard_normal(x.shape)
    eps = 1e-6
    want = dy * (ref(x + eps, **attrs) - ref(x - eps, **attrs)) / (2 * eps)
    values = [float(attrs.get(key, default)) for _, key, default, _, _ in ROWS[name][4]]
    got = sw.to_numpy(getattr(sw, name + "Backward")(
        sw.from_numpy(dy.astype(np.float32)), sw.from_numpy(x.astype(np.float32)), *values))
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", sorted(n for n in ROWS if ROWS[n][6]))
def test_against_the_torch_module(name):
    torch = pytest.importorskip("torch")
    _, attrs, kinks = REF[name]
    # torch's arguments: its modules take them positionally (SELU has none: ONNX's constants)
    cls_name, row_attrs = ROWS[name][6], ROWS[name][4]
    if cls_name == "SELU":
        attrs = {key: onnx_default for _, key, _, _, onnx_default in row_attrs}
        module = torch.nn.SELU()
    else:
        module = getattr(torch.nn, cls_name)(*[attrs[key] for _, key, _, _, _ in row_attrs])
    x_np = _x(kinks)
    xt = torch.tensor(x_np, requires_grad=True)
    yt = module(xt)
    dy = np.random.default_rng(5).standard_normal(x_np.shape).astype(np.float32)
    yt.backward(torch.tensor(dy))

    x = tensor.from_numpy(x_np)
    x.requires_grad = x.stores_grad = True
    autograd.training = True
    try:
        y = getattr(autograd, ROWS[name][2])(x, **attrs)
        (gx,) = [g for p, g in autograd.backward(y, tensor.from_numpy(dy)) if p is x]
    finally:
        autograd.training = False
    np.testing.assert_allclose(tensor.to_numpy(y), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(gx), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(n for n in ROWS if ROWS[n][5]))
def test_onnx_round_trip_with_attributes(name):
    ort = pytest.importorskip("onnxruntime")
    _, attrs, kinks = REF[name]
    onnx_name, first, _ = ROWS[name][5]
    x_np = _x(kinks)
    x = tensor.from_numpy(x_np)
    autograd.training = True
    try:
        y = getattr(autograd, ROWS[name][2])(x, **attrs)
        model = sonnx.to_onnx([x], [y], opset_version=max(13, first))
    finally:
        autograd.training = False
    assert [n.op_type for n in model.graph.node] == [onnx_name]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (ref,) = sess.run(None, {sess.get_inputs()[0].name: x_np})
    (back,) = sonnx.prepare(model).run([x_np])
    np.testing.assert_allclose(tensor.to_numpy(y), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(back, ref, rtol=1e-5, atol=1e-6)
