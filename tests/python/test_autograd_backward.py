"""The semantics of autograd.backward: what is recorded and returned, accumulation, roots of any
shape, the training flag, the SINGA docs' MLP example, graph buffering, and bad input."""
import gc
import weakref

import numpy as np
import pytest

from singa import autograd, tensor
from singa import singa_wrap as sw


@pytest.fixture(autouse=True)
def training_on():
    was = autograd.training
    autograd.training = True
    yield
    autograd.training = was


def param(a):
    t = tensor.from_numpy(np.asarray(a, np.float32))
    t.requires_grad = True
    t.stores_grad = True
    return t


def const(a):
    return tensor.Tensor(data=np.asarray(a), requires_grad=False, stores_grad=False,
                         dtype=tensor.int32 if np.asarray(a).dtype.kind in "iu" else tensor.float32)


def np_(t):
    return tensor.to_numpy(t)


# ---- what backward returns ------------------------------------------------------------------
def test_only_stores_grad_tensors_are_returned():
    x = tensor.from_numpy(np.ones((2, 3), np.float32))  # requires_grad, not stores_grad
    w = param(np.full((3, 2), 0.5))
    y = autograd.reduce_sum(autograd.matmul(x, w))
    grads = autograd.gradients(y)
    assert list(grads) == [id(w)]  # keyed by id(param), as SINGA code looks them up
    np.testing.assert_allclose(np_(grads[id(w)]), np.full((3, 2), 2.0))
    np.testing.assert_allclose(np_(grads[w]), np.full((3, 2), 2.0))  # the tensor works too


def test_backward_yields_pairs_and_gradients_is_a_dict():
    w, b = param(np.ones((2, 2))), param(np.zeros(2))
    x = const(np.eye(2))
    loss = autograd.reduce_mean(autograd.add_bias(autograd.matmul(x, w), b))
    pairs = list(autograd.backward(loss, retain_graph=True))
    assert {id(p) for p, _ in pairs} == {id(w), id(b)}
    assert all(isinstance(g, tensor.Tensor) for _, g in pairs)
    grads = autograd.gradients(loss, retain_graph=False)
    assert set(grads) == {id(w), id(b)} and w in grads and b in grads
    np.testing.assert_allclose(np_(grads[b]), [0.5, 0.5])
    # retain_graph=False freed what the operators saved: a third pass explains what happened
    with pytest.raises(RuntimeError, match="retain_graph"):
        autograd.gradients(loss)


def test_requires_grad_false_input_is_not_recorded():
    x = const(np.ones((2, 2)))
    y = autograd.relu(x)
    assert not y.requires_grad
    assert isinstance(y.creator, autograd.Dummy)
    assert list(autograd.backward(autograd.reduce_sum(y))) == []


def test_stores_grad_intermediate_and_root():
    w = param([1.0, 2.0, 3.0])
    h = autograd.mul(w, w)
    h.stores_grad = True
    y = autograd.reduce_sum(h, None, 0)
    y.stores_grad = True
    grads = autograd.gradients(y)
    np.testing.assert_allclose(np_(grads[y]), 1.0)
    np.testing.assert_allclose(np_(grads[h]), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(np_(grads[w]), [2.0, 4.0, 6.0])


# ---- accumulation -------------------------------------------------------------------------
def test_tensor_used_twice_accumulates():
    x = param([1.0, -2.0, 3.0])
    y = autograd.reduce_sum(autograd.add(autograd.mul(x, x), x), None, 0)  # x^2 + x
    np.testing.assert_allclose(np_(autograd.gradients(y)[x]), [3.0, -3.0, 7.0])


def test_diamond_graph():
    w = param([[0.5, -1.0], [2.0, 1.0]])
    x = const([[1.0, 2.0]])
    h = autograd.matmul(x, w)              # [[4.5, 1.0]]
    a, b = autograd.tanh(h), autograd.sigmoid(h)
    y = autograd.reduce_sum(autograd.mul(a, b), None, 0)
    hv = np.array([[4.5, 1.0]])
    t, s = np.tanh(hv), 1 / (1 + np.exp(-hv))
    dh = (1 - t ** 2) * s + t * s * (1 - s)
    np.testing.assert_allclose(np_(autograd.gradients(y)[w]), np.array([[1.0], [2.0]]) @ dh,
                               rtol=1e-5)


def test_parameter_used_by_two_layers():
    w = param(np.eye(2) * 2)
    x = const([[1.0, 1.0]])
    y = autograd.reduce_sum(autograd.matmul(autograd.matmul(x, w), w), None, 0)  # x W W
    np.testing.assert_allclose(np_(autograd.gradients(y)[w]), [[4.0, 4.0], [4.0, 4.0]])


def test_unused_output_of_split_gets_zero_gradient():
    x = param(np.arange(6.0).reshape(2, 3))
    a, b = autograd.split(x, 1, [1, 2])
    g = autograd.gradients(autograd.reduce_sum(b, None, 0))[x]
    np.testing.assert_allclose(np_(g), [[0, 1, 1], [0, 1, 1]])


# ---- roots ---------------------------------------------------------------------------------
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_sum_as_root(keepdims):
    x = param(np.arange(6.0).reshape(2, 3))
    y = autograd.reduce_sum(x, None, keepdims)
    np.testing.assert_allclose(np_(autograd.gradients(y)[x]), np.ones((2, 3)))


@pytest.mark.parametrize("make", [
    lambda ag, x: ag.relu(x), lambda ag, x: ag.reshape(x, (3, 2)), lambda ag, x: ag.transpose(x),
    lambda ag, x: ag.softmax(x), lambda ag, x: ag.reduce_mean(x, [0]),
    lambda ag, x: ag.cat([x, x], 0), lambda ag, x: ag.flatten(x)])
def test_non_scalar_root_seeds_ones(make):
    x = param(np.arange(6.0).reshape(2, 3) - 2.5)
    y = make(autograd, x)
    g = autograd.gradients(y)[x]
    # d sum(y) / dx through the same op: compare with an explicit reduce_sum root
    x2 = param(np.arange(6.0).reshape(2, 3) - 2.5)
    g2 = autograd.gradients(autograd.reduce_sum(make(autograd, x2)))[x2]
    np.testing.assert_allclose(np_(g), np_(g2), atol=1e-6)


def test_dy_scales_the_gradient():
    x = param([1.0, 2.0])
    y = autograd.reduce_sum(autograd.mul(x, x), None, 0)
    np.testing.assert_allclose(np_(autograd.gradients(y, 0.5)[x]), [1.0, 2.0])
    y = autograd.mul(x, x)
    dy = tensor.from_numpy(np.array([1.0, -1.0], np.float32))
    np.testing.assert_allclose(np_(autograd.gradients(y, dy)[x]), [2.0, -4.0])


def test_dy_of_wrong_shape_raises():
    x = param([1.0, 2.0])
    y = autograd.mul(x, x)
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        autograd.gradients(y, tensor.from_numpy(np.ones(3, np.float32)))


def test_backward_twice_gives_the_same_gradients():
    w = param([[1.0, 2.0], [3.0, 4.0]])
    y = autograd.reduce_sum(autograd.tanh(autograd.matmul(const([[0.1, 0.2]]), w)))
    g1 = np_(autograd.gradients(y, retain_graph=True)[w])
    g2 = np_(autograd.gradients(y)[w])
    np.testing.assert_allclose(g1, g2)


def test_backward_frees_what_operators_saved():
    w = param([[1.0, 2.0], [3.0, 4.0]])
    h = autograd.tanh(autograd.matmul(const([[0.1, 0.2]]), w))
    y = autograd.reduce_sum(h)
    op = h.creator
    assert any(isinstance(v, sw.Tensor) for v in vars(op).values())
    autograd.gradients(y, retain_graph=False)
    assert not any(isinstance(v, sw.Tensor) for v in vars(op).values())
    assert op.src == []


# ---- the training flag ----------------------------------------------------------------------
def test_training_flag_is_shared_with_submodules():
    from singa import _state
    autograd.training = False
    assert _state.training is False and autograd.training is False
    autograd.training = True
    assert _state.training is True


def test_inference_records_nothing():
    autograd.training = False
    w = param([[1.0, 2.0]])
    y = autograd.relu(autograd.matmul(const([[1.0], [2.0]]), w))
    assert isinstance(y.creator, autograd.Dummy) and not y.requires_grad
    assert list(autograd.backward(autograd.reduce_sum(y))) == []
    np.testing.assert_allclose(np_(y), [[1, 2], [2, 4]])


def test_dropout_is_identity_in_inference_and_masks_in_training():
    x = param(np.ones((50, 40)))
    autograd.training = False
    np.testing.assert_allclose(np_(autograd.dropout(x, ratio=0.5)), np.ones((50, 40)))
    autograd.training = True
    y = autograd.dropout(x, ratio=0.5)
    yv = np_(y)
    assert set(np.unique(yv)) <= {0.0, 2.0} and 0.3 < np.mean(yv == 0) < 0.7
    g = np_(autograd.gradients(autograd.reduce_sum(y))[x])
    np.testing.assert_allclose(g, yv)


def test_intermediate_tensors_are_freed_without_gc():
    gc.disable()
    try:
        x = tensor.from_numpy(np.ones((4, 4), np.float32))
        ref = weakref.ref(x)
        del x
        assert ref() is None, "a tensor and its Dummy creator must not form a cycle"
        w = param(np.ones((4, 4)))
        h = autograd.relu(w)
        ref = weakref.ref(h)
        y = autograd.reduce_sum(h)
        del h
        assert ref() is None
        assert w in autograd.gradients(y)
    finally:
        gc.enable()


def test_custom_operator_like_the_docs():
    class Double(autograd.Operator):
        def forward(self, x):
            return sw.EltwiseMult(x, 2.0)

        def backward(self, dy):
            return sw.EltwiseMult(dy, 2.0)

    x = param([1.0, 2.0])
    y = Double()(x)[0]
    assert y.creator.name.startswith("Double#")
    np.testing.assert_allclose(np_(autograd.gradients(autograd.reduce_sum(y))[x]), [2.0, 2.0])
    assert autograd.Operation is autograd.Operator


def test_batchnorm_updates_running_stats_in_training_and_uses_them_in_inference():
    rng = np.random.RandomState(3)
    xv = rng.randn(8, 2, 3, 3).astype(np.float32) * 2 + 1
    x = const(xv)
    scale, bias = param(np.ones(2)), param(np.zeros(2))
    rm, rv = tensor.zeros((2,)), tensor.ones((2,))
    handle = autograd.BatchNormHandle(x, momentum=0.9)
    y = autograd.batchnorm_2d(handle, x, scale, bias, rm, rv)
    mean, var = xv.mean((0, 2, 3)), xv.var((0, 2, 3), ddof=1)
    np.testing.assert_allclose(np_(rm), 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(np_(rv), 0.9 + 0.1 * var, rtol=1e-5)
    grads = autograd.gradients(autograd.reduce_sum(y))
    assert scale in grads and bias in grads
    autograd.training = False
    y = autograd.batchnorm_2d(handle, x, scale, bias, rm, rv)
    expect = (xv - np_(rm).reshape(1, 2, 1, 1)) / np.sqrt(np_(rv).reshape(1, 2, 1, 1) + 1e-5)
    np.testing.assert_allclose(np_(y), expect, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np_(rm), 0.1 * mean, rtol=1e-5)  # unchanged


def test_batchnorm_handle_takes_singa_argument_order():
    h = autograd.BatchNormHandle(0.8, const(np.ones((2, 3))))
    assert h.factor == 0.8 and h.channels == 3


def test_layer_classes_are_reexported():
    from singa import layer
    assert autograd.Linear is layer.Linear and autograd.Conv2d is layer.Conv2d
    with pytest.raises(AttributeError):
        autograd.NoSuchThing


# ---- the "Operation only" example of autograd.md ---------------------------------------------
def _mlp_data():
    rng = np.random.RandomState(0)
    data = rng.randn(100, 2).astype(np.float32)
    label = (data[:, 0] + 2 * data[:, 1] > 0).astype(np.int32)  # linearly separable
    return data, np.eye(2, dtype=np.float32)[label]


def test_operation_only_mlp_learns():
    from singa.tensor import Tensor
    try:
        from singa import opt
        sgd = opt.SGD(0.05)
        update = sgd.update
    except ImportError:  # singa.opt not written yet: the update SGD would do
        def update(p, g):
            p -= 0.05 * g
    data, label = _mlp_data()
    tensor.get_default_device().SetRandSeed(0)
    w0 = Tensor(shape=(2, 3), requires_grad=True, stores_grad=True)
    w0.gaussian(0.0, 0.1)
    b0 = Tensor(shape=(1, 3), requires_grad=True, stores_grad=True)
    b0.set_value(0.0)
    w1 = Tensor(shape=(3, 2), requires_grad=True, stores_grad=True)
    w1.gaussian(0.0, 0.1)
    b1 = Tensor(shape=(1, 2), requires_grad=True, stores_grad=True)
    b1.set_value(0.0)

    inputs = Tensor(data=data)
    target = Tensor(data=label)
    autograd.training = True
    losses = []
    for i in range(300):
        x = autograd.matmul(inputs, w0)
        x = autograd.add_bias(x, b0)
        x = autograd.relu(x)
        x = autograd.matmul(x, w1)
        x = autograd.add_bias(x, b1)
        loss = autograd.softmax_cross_entropy(x, target)
        for p, g in autograd.backward(loss):
            update(p, g)
        losses.append(float(tensor.to_numpy(loss)[0]))
    assert losses[-1] < 0.5 * losses[0], losses[::30]


# ---- graph buffering: forward and backward only queue core ops --------------------------------
def test_forward_and_backward_can_be_buffered():
    dev = sw.create_cpu_device()
    rng = np.random.RandomState(1)
    xv, wv = rng.randn(4, 3).astype(np.float32), rng.randn(3, 2).astype(np.float32)
    x = tensor.from_numpy(xv, dev)
    x.requires_grad = False
    w = tensor.from_numpy(wv, dev)
    w.stores_grad = True
    t = tensor.from_numpy(np.array([0, 1, 1, 0], np.int32), dev)
    t.requires_grad = False
    dev.EnableGraph(True)
    try:
        h = autograd.tanh(autograd.matmul(x, w))
        h = autograd.pad(autograd.gather(h, 1, [1, 0]), "edge", [0, 1, 0, 0])
        loss = autograd.softmax_cross_entropy(autograd.slice(h, [0], [2], [1]), t)
        grads = autograd.gradients(loss)
    finally:
        dev.EnableGraph(False)
    dev.RunGraph()
    eager = autograd.gradients(autograd.softmax_cross_entropy(
        autograd.slice(autograd.pad(autograd.gather(autograd.tanh(autograd.matmul(
            tensor.from_numpy(xv), tensor.from_numpy(wv))), 1, [1, 0]), "edge", [0, 1, 0, 0]),
            [0], [2], [1]), tensor.from_numpy(np.array([0, 1, 1, 0], np.int32))))
    (ge,) = eager.values() if len(eager) == 1 else [None]
    assert ge is None  # the eager w had stores_grad False: nothing is returned
    w2 = param(wv)
    h2 = autograd.tanh(autograd.matmul(tensor.from_numpy(xv), w2))
    h2 = autograd.pad(autograd.gather(h2, 1, [1, 0]), "edge", [0, 1, 0, 0])
    loss2 = autograd.softmax_cross_entropy(autograd.slice(h2, [0], [2], [1]),
                                           tensor.from_numpy(np.array([0, 1, 1, 0], np.int32)))
    np.testing.assert_allclose(np_(grads[w]), np_(autograd.gradients(loss2)[w2]), rtol=1e-5)
    np.testing.assert_allclose(np_(loss), np_(loss2), rtol=1e-6)


# ---- bad input raises, naming the op and the shapes ------------------------------------------
def f32(*shape):
    return tensor.from_numpy(np.ones(shape, np.float32))


BAD = [
    ("matmul inner sizes", lambda: autograd.matmul(f32(2, 3), f32(4, 5)), ValueError),
    ("add shapes", lambda: autograd.add(f32(2, 3), f32(4, 3)), ValueError),
    ("reshape size", lambda: autograd.reshape(f32(2, 3), (4, 2)), ValueError),
    ("cat shapes", lambda: autograd.cat([f32(2, 3), f32(3, 2)], 0), ValueError),
    ("cat empty", lambda: autograd.cat([], 0), ValueError),
    ("transpose repeated axis", lambda: autograd.transpose(f32(2, 3), (0, 0)), ValueError),
    ("squeeze non-1 axis", lambda: autograd.squeeze(f32(2, 3), [1]), ValueError),
    ("split parts", lambda: autograd.split(f32(4, 3), 0, [1, 2]), ValueError),
    ("split unequal", lambda: autograd.split(f32(5, 3), 0, None, 2), ValueError),
    ("softmax axis", lambda: autograd.softmax(f32(2, 3), 2), IndexError),
    ("reduce axis", lambda: autograd.reduce_sum(f32(2, 3), [3]), IndexError),
    ("gather index", lambda: autograd.gather(f32(2, 3), 1, [0, 3]), IndexError),
    ("add_bias size", lambda: autograd.add_bias(f32(2, 3), f32(2)), ValueError),
    ("gemm C shape", lambda: autograd.gemm(f32(2, 3), f32(3, 4), f32(3, 4)), ValueError),
    ("pad count", lambda: autograd.pad(f32(2, 3), "constant", [1, 1]), ValueError),
    ("dropout ratio", lambda: autograd.dropout(f32(2, 3), ratio=1.0), ValueError),
    ("sce label count", lambda: autograd.softmax_cross_entropy(f32(4, 3), const([0, 1, 2])),
     ValueError),
    ("sce target shape", lambda: autograd.softmax_cross_entropy(f32(4, 3), f32(4, 2)), ValueError),
    ("mse shapes", lambda: autograd.mse_loss(f32(4, 3), f32(3, 4)), ValueError),
    ("sqrt of float16", lambda: autograd.sqrt(tensor.from_numpy(np.ones(2, np.float16))),
     TypeError),
    ("matmul of float16", lambda: autograd.matmul(f32(2, 2), tensor.from_numpy(
        np.ones((2, 2), np.float16))), TypeError),
    ("not a tensor", lambda: autograd.relu(np.ones(3)), TypeError),
    ("conv2d 2-d input", lambda: autograd.conv2d(None, f32(2, 3), f32(1, 1, 1, 1)), ValueError),
    ("backward of non-tensor", lambda: list(autograd.backward(3.0)), TypeError),
]


@pytest.mark.parametrize("name,call,exc", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises(name, call, exc):
    with pytest.raises(exc):
        call()


def test_label_out_of_range_raises():
    with pytest.raises(ValueError):
        autograd.softmax_cross_entropy(f32(2, 3), const([0, 3]))


def test_label_count_message_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(3,\).*\(4, 3\)"):
        autograd.softmax_cross_entropy(f32(4, 3), const([0, 1, 2]))


def test_backward_of_a_non_tensor_names_what_it_got():
    with pytest.raises(TypeError, match="backward: y must be a singa Tensor, got ndarray"):
        list(autograd.backward(np.ones(3, np.float32)))


def test_a_stored_output_gradient_is_named_like_every_other_gradient():
    # y's own gradient (the seed, yielded when y stores its gradient) follows the "<name>_g"
    # convention of the gradients the operators produce
    autograd.training = True
    x = tensor.from_numpy(np.ones((2, 3), np.float32))
    x.requires_grad = x.stores_grad = True
    y = autograd.reduce_mean(autograd.relu(x))
    y.stores_grad = True
    grads = {p.name: g for p, g in autograd.backward(y)}
    assert grads[y.name].name == y.name + "_g"
    assert grads[x.name].name.endswith("_g")


def test_an_axis_that_is_not_an_int_names_the_op_and_the_axis():
    x = tensor.from_numpy(np.ones((2, 3), np.float32))
    # PyTorch's wording (singa/_args.py): the op, the parameter, the type found
    with pytest.raises(TypeError, match=r"reduce_mean\(\): argument 'axes' .*element of type "
                                        r"str at pos 0"):
        autograd.reduce_mean(x, axes=["a"])
    with pytest.raises(TypeError, match=r"flatten\(\): argument 'axis' must be int, not float"):
        autograd.flatten(x, 1.5)
