"""Apache SINGA 3.3 semantics of singa.autograd that its own tests and examples rely on:
operators called directly return a gradient for every input, backward can run twice through
one graph, gradients() is keyed by id(param), non-differentiable operators are their outputs'
creators, predicates on zeros and ties, space_to_depth/depth_to_space modes, channels-last
global average pooling, reflect padding as wide as the axis, dropout's seed, and errors that
are also AssertionError.
"""
import numpy as np
import pytest

from gradcheck import check_op, direct_backward, numeric_grads
from singa import autograd, opt, tensor
from singa import singa_wrap as sw
from test_autograd_ops import conv_np

R = np.random.RandomState(11)


def u(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, size=shape).astype(np.float32)


def away(*shape, gap=0.3):
    return (R.choice([-1.0, 1.0], size=shape) * R.uniform(gap, 1.0, size=shape)).astype(
        np.float32)


def np_(t):
    return tensor.to_numpy(t) if isinstance(t, tensor.Tensor) else sw.to_numpy(t)


def conv(x, w, b=None, group=1):
    """A 3x3, stride 1, pad 1 convolution handle on x's shape (group: depthwise when = C)."""
    cin, cout = x.shape[1], w.shape[0]
    h = sw.ConvHandle(x.data, (3, 3), (1, 1), (1, 1), cin, cout, b is not None, group)
    return autograd.conv2d(h, x, w, b)


def grouped_conv_np(x, w, b, group):
    cin = x.shape[1] // group
    cout = w.shape[0] // group
    ys = [conv_np(x[:, g * cin:(g + 1) * cin], w[g * cout:(g + 1) * cout], None, 1, 1)
          for g in range(group)]
    y = np.concatenate(ys, axis=1)
    return y if b is None else y + b.reshape(1, -1, 1, 1)


COND = np.array([[1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 1, 0]], np.float32)
X4 = u(2, 3, 5, 5)

# id, op(ag, *tensors), numpy reference, inputs: every input is a plain tensor, and
# creator.backward(dy) must return the gradient of each of them.
DIRECT = [
    ("div", lambda ag, a, b: ag.div(a, b), np.divide, [u(3, 4), away(3, 4)]),
    ("div_broadcast", lambda ag, a, b: ag.div(a, b), np.divide, [u(3, 4), away(4)]),
    ("mul_broadcast", lambda ag, a, b: ag.mul(a, b), np.multiply, [u(3, 4), u(3, 1)]),
    ("add", lambda ag, a, b: ag.add(a, b), np.add, [u(3, 4), u(4)]),
    ("sub", lambda ag, a, b: ag.sub(a, b), np.subtract, [u(3, 4), u(3, 4)]),
    ("pow", lambda ag, a, b: ag.pow(a, b), np.power, [u(3, 4, lo=0.5, hi=2), u(3, 4)]),
    ("matmul", lambda ag, a, b: ag.matmul(a, b), np.matmul, [u(3, 4), u(4, 2)]),
    ("prelu", lambda ag, x, s: ag.prelu(x, s), lambda x, s: np.where(x > 0, x, s * x),
     [away(3, 4), u(4)]),
    ("where", lambda ag, a, b: ag.where(a, b, COND), lambda a, b: np.where(COND != 0, a, b),
     [u(3, 4), u(3, 4)]),
    ("max2", lambda ag, a, b: ag.max(a, b), np.maximum, [u(3, 4), u(3, 4)]),
    ("min2", lambda ag, a, b: ag.min(a, b), np.minimum, [u(3, 4), u(3, 4)]),
    ("max3", lambda ag, a, b, c: ag.max(a, b, c), lambda a, b, c: np.maximum(np.maximum(a, b), c),
     [u(3, 4), u(3, 4), u(3, 4)]),
    ("sum3", lambda ag, a, b, c: ag.sum(a, b, c), lambda a, b, c: a + b + c,
     [u(2, 3), u(2, 3), u(2, 3)]),
    ("mean2", lambda ag, a, b: ag.mean(a, b), lambda a, b: (a + b) / 2, [u(2, 3), u(2, 3)]),
    ("gemm", lambda ag, a, b, c: ag.gemm(a, b, c, 0.5, 2.0, 1, 0),
     lambda a, b, c: 0.5 * a.T @ b + 2.0 * c, [u(4, 3), u(4, 2), u(3, 2)]),
    ("add_bias", lambda ag, x, b: ag.add_bias(x, b), lambda x, b: x + b, [u(3, 4), u(4)]),
    ("cossim", lambda ag, a, b: ag.cossim(a, b),
     lambda a, b: np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1),
     [u(3, 4), u(3, 4)]),
    ("cat", lambda ag, a, b: ag.cat([a, b], 1), lambda a, b: np.concatenate([a, b], 1),
     [u(2, 3), u(2, 2)]),
    ("conv2d_bias", lambda ag, x, w, b: conv(x, w, b),
     lambda x, w, b: grouped_conv_np(x, w, b, 1), [X4, u(4, 3, 3, 3), u(4)]),
    ("conv2d_no_bias", lambda ag, x, w: conv(x, w),
     lambda x, w: grouped_conv_np(x, w, None, 1), [X4, u(2, 3, 3, 3)]),
    # the depthwise half of a separable convolution (groups = channels)
    ("conv2d_depthwise", lambda ag, x, w: conv(x, w, group=3),
     lambda x, w: grouped_conv_np(x, w, None, 3), [X4, u(3, 1, 3, 3)]),
]


@pytest.mark.parametrize("name,op,ref,arrays", DIRECT, ids=[d[0] for d in DIRECT])
def test_direct_backward_returns_every_gradient(name, op, ref, arrays):
    expected = np.asarray(ref(*arrays))
    dy = R.uniform(-1, 1, size=expected.shape)
    dxs, y = direct_backward(op, arrays, dy)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
    assert isinstance(dxs, (tuple, list)) and len(dxs) == len(arrays)
    want = numeric_grads(ref, arrays, range(len(arrays)), [dy])
    for i, dx in enumerate(dxs):
        assert dx is not None, "%s: no gradient for input %d" % (name, i)
        np.testing.assert_allclose(np_(dx), want[i], rtol=2e-3, atol=2e-3,
                                   err_msg="%s: gradient of input %d" % (name, i))


@pytest.mark.parametrize("fn", ["min", "max"])
def test_one_input_min_max_return_a_single_gradient(fn):
    x = u(3, 4)
    dy = u(3, 4)
    dx, y = direct_backward(lambda ag, a: getattr(ag, fn)(a), [x], dy)
    np.testing.assert_allclose(y, x)
    assert isinstance(dx, sw.Tensor)  # not a tuple
    np.testing.assert_allclose(np_(dx), dy, rtol=1e-6)


def test_one_input_sum_returns_a_sequence_of_one():
    dy = u(2, 2)
    dxs, _ = direct_backward(lambda ag, a: ag.sum(a), [u(2, 2)], dy)
    assert len(dxs) == 1
    np.testing.assert_allclose(np_(dxs[0]), dy)


def test_embedding_returns_zeros_of_the_ids_shape_and_the_table_gradient():
    # SINGA's callers unpack `dx, dW = y.creator.backward(dy)` and read dx.shape() == ids'
    ids = np.array([[0, 3], [3, 1]], np.int32)
    w = u(5, 2)
    dy = u(2, 2, 2)
    (dids, dw), y = direct_backward(lambda ag, i, t: ag.embedding(i, t), [ids, w], dy)
    np.testing.assert_allclose(y, w[ids])
    np.testing.assert_array_equal(np_(dids), np.zeros(ids.shape, np.float32))
    want = np.zeros_like(w)
    np.add.at(want, ids, dy)
    np.testing.assert_allclose(np_(dw), want, rtol=1e-6)


def test_shape_output_is_created_by_the_shape_op():
    autograd.training = True
    x = tensor.from_numpy(u(2, 3, 4))
    y = autograd.shape(x)
    assert isinstance(y.creator, autograd.Shape)
    assert not y.requires_grad
    np.testing.assert_array_equal(np_(y), [2, 3, 4])
    np.testing.assert_array_equal(np_(y.creator.backward(y.data)), np.zeros((2, 3, 4)))


def test_predicate_output_is_created_by_its_op_and_blocks_the_gradient():
    autograd.training = True
    xv = away(3, 4)
    x = tensor.from_numpy(xv)
    x.stores_grad = True
    mask = autograd.greater(x, tensor.from_numpy(np.zeros((3, 4), np.float32)))
    assert isinstance(mask.creator, autograd.Greater) and not mask.requires_grad
    with pytest.raises(AssertionError):  # as in SINGA: comparisons have no gradient
        mask.creator.backward(mask.data)
    grads = autograd.gradients(autograd.reduce_sum(autograd.mul(x, mask)))
    np.testing.assert_allclose(np_(grads[id(x)]), (xv > 0).astype(np.float32))


# ---- backward twice through one graph, and memory ---------------------------------------------
def _mlp(w_np, b_np, x_np, t_np):
    w = tensor.from_numpy(w_np)
    b = tensor.from_numpy(b_np)
    for p in (w, b):
        p.requires_grad = p.stores_grad = True
    x, t = tensor.from_numpy(x_np), tensor.from_numpy(t_np)
    y = autograd.add_bias(autograd.matmul(x, w), b)
    return w, b, autograd.mse_loss(autograd.tanh(y), t)


def _mlp_grads_np(w, b, x, t):
    h = np.tanh(x @ w + b)
    dh = 2 * (h - t) / h.size * (1 - h ** 2)
    return x.T @ dh, dh.sum(0)


def test_backward_twice_through_one_graph_gives_the_same_gradients():
    autograd.training = True
    w_np, b_np, x_np, t_np = u(4, 3), u(3), u(5, 4), u(5, 3)
    w, b, loss = _mlp(w_np, b_np, x_np, t_np)
    dw, db = _mlp_grads_np(w_np, b_np, x_np, t_np)
    first = {id(p): np_(g) for p, g in autograd.backward(loss)}
    second = autograd.gradients(loss)  # SINGA keeps what the operators saved
    for grads in (first, {k: np_(v) for k, v in second.items()}):
        np.testing.assert_allclose(grads[id(w)], dw, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(grads[id(b)], db, rtol=1e-4, atol=1e-6)


def test_gan_pattern_backward_then_optimizer_on_the_same_loss():
    # SINGA's GAN example: autograd.backward(loss) (e.g. to inspect gradients), then
    # self.optimizer(loss) on the same loss.
    autograd.training = True
    w_np, b_np, x_np, t_np = u(4, 3), u(3), u(5, 4), u(5, 3)
    w, b, loss = _mlp(w_np, b_np, x_np, t_np)
    for _ in autograd.backward(loss):
        pass
    sgd = opt.SGD(lr=0.1)
    sgd(loss)
    dw, db = _mlp_grads_np(w_np, b_np, x_np, t_np)
    np.testing.assert_allclose(np_(w), w_np - 0.1 * dw, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np_(b), b_np - 0.1 * db, rtol=1e-4, atol=1e-6)


def test_retain_graph_false_frees_saved_tensors_and_refuses_a_second_pass():
    autograd.training = True
    _, _, loss = _mlp(u(4, 3), u(3), u(5, 4), u(5, 3))
    op = loss.creator
    autograd.gradients(loss, retain_graph=False)
    assert op.src == [] and not any(isinstance(v, sw.Tensor) for v in vars(op).values())
    with pytest.raises(RuntimeError, match="retain_graph"):
        autograd.gradients(loss)


def test_saved_tensors_are_freed_while_a_graph_is_recorded():
    # Model's graph mode records forward and backward with the device buffering: there the
    # activations are released as backward passes, so that the planner can recycle them.
    autograd.training = True
    dev = sw.create_cpu_device()
    w = tensor.from_numpy(u(4, 3), dev)
    w.requires_grad = w.stores_grad = True
    x = tensor.from_numpy(u(5, 4), dev)
    dev.EnableGraph(True)
    try:
        h = autograd.tanh(autograd.matmul(x, w))
        op = h.creator
        autograd.gradients(autograd.reduce_sum(h))
        assert op.src == [] and getattr(op, "_released", False)
    finally:
        dev.EnableGraph(False)
        dev.ResetGraph()


def test_gradients_are_keyed_by_id_of_the_parameter():
    autograd.training = True
    w_np, b_np, x_np, t_np = u(4, 3), u(3), u(5, 4), u(5, 3)
    w, b, loss = _mlp(w_np, b_np, x_np, t_np)
    grads = autograd.gradients(loss)
    assert sorted(grads) == sorted([id(w), id(b)])
    dw, _ = _mlp_grads_np(w_np, b_np, x_np, t_np)
    np.testing.assert_allclose(np_(grads[id(w)]), dw, rtol=1e-4, atol=1e-6)
    assert grads[w] is grads[id(w)] and grads.get(b) is grads[id(b)]


# ---- predicates on zeros and ties -------------------------------------------------------------
A = np.array([0.0, 0.0, 1.0, -1.0, 2.0, 3.5, -2.0, 0.0], np.float32)
B = np.array([0.0, 1.0, 1.0, 2.0, -1.0, 3.5, 0.0, -3.0], np.float32)
PREDICATES = [
    ("less", np.less), ("greater", np.greater), ("equal", np.equal),
    ("less_equal", np.less_equal), ("greater_equal", np.greater_equal),
    ("_and", np.logical_and), ("_or", np.logical_or), ("_xor", np.logical_xor),
]


@pytest.mark.parametrize("name,ref", PREDICATES, ids=[p[0] for p in PREDICATES])
def test_predicates_on_zeros_and_equal_pairs(name, ref):
    a, b = tensor.from_numpy(A), tensor.from_numpy(B)
    got = np_(getattr(autograd, name)(a, b)).astype(np.float32)
    np.testing.assert_array_equal(got, ref(A, B).astype(np.float32))
    got = np_(getattr(autograd, name)(b, a)).astype(np.float32)  # and the other way round
    np.testing.assert_array_equal(got, ref(B, A).astype(np.float32))


def test_not_on_zeros():
    got = np_(autograd._not(tensor.from_numpy(A))).astype(np.float32)
    np.testing.assert_array_equal(got, np.logical_not(A).astype(np.float32))


# ---- space_to_depth / depth_to_space ---------------------------------------------------------
def s2d_np(x, b, mode):
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    return y.transpose(perm).reshape(n, c * b * b, h // b, w // b)


def d2s_np(x, b, mode):  # ONNX DepthToSpace
    n, c, h, w = x.shape
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_modes(mode):
    x = u(2, 3, 4, 6)
    check_op(lambda ag, t: ag.space_to_depth(t, 2, mode), lambda t: s2d_np(t, 2, mode), [x])
    y = autograd.space_to_depth(tensor.from_numpy(x), 2, mode)
    # the inverse of depth_to_space in the same mode (ONNX's definition of the modes)
    np.testing.assert_array_equal(d2s_np(np_(y), 2, mode), x)
    back = autograd.depth_to_space(y, 2, mode)
    np.testing.assert_array_equal(np_(back), x)


def test_space_to_depth_modes_differ():
    x = tensor.from_numpy(u(1, 2, 2, 2))
    assert not np.array_equal(np_(autograd.space_to_depth(x, 2, "DCR")),
                              np_(autograd.space_to_depth(x, 2, "CRD")))
    with pytest.raises(ValueError, match="mode"):
        autograd.space_to_depth(x, 2, "XYZ")


# ---- global average pooling, reflect padding -------------------------------------------------
@pytest.mark.parametrize("fmt", ["channels_last", "NHWC", "whatever"])
def test_globalaveragepool_any_other_format_is_channels_last(fmt):
    x = u(2, 4, 5, 3)
    check_op(lambda ag, t: ag.globalaveragepool(t, fmt), lambda t: t.mean((1, 2), keepdims=True),
             [x])


def test_globalaveragepool_channels_first():
    x = u(2, 3, 4, 5)
    check_op(lambda ag, t: ag.globalaveragepool(t), lambda t: t.mean((2, 3), keepdims=True), [x])


@pytest.mark.parametrize("pads", [[3, 0, 3, 3], [0, 5, 7, 1], [2, 2, 0, 0]])
def test_reflect_pad_as_wide_as_the_axis_and_wider(pads):
    x = u(2, 3)  # axis sizes 2 and 3: pads of 2, 3 and more reflect again and again
    width = ((pads[0], pads[2]), (pads[1], pads[3]))
    check_op(lambda ag, t: ag.pad(t, "reflect", pads), lambda t: np.pad(t, width, "reflect"), [x])


def test_reflect_pad_of_a_single_element_axis_repeats_it():
    x = u(1, 3)
    check_op(lambda ag, t: ag.pad(t, "reflect", [2, 1, 0, 1]),
             lambda t: np.pad(t, ((2, 0), (1, 1)), "reflect"), [x])


# ---- dropout's seed --------------------------------------------------------------------------
def _mask(op_or_seed, x, ratio=0.5):
    autograd.training = True
    y = autograd.dropout(x, op_or_seed, ratio)
    return np_(y)


def test_dropout_takes_seed_then_ratio_as_singa():
    x = tensor.from_numpy(np.ones((100, 100), np.float32))
    y = _mask(3, x, 0.25)  # positional: seed 3, ratio 0.25
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.03
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)


def test_dropout_seed_makes_the_mask_reproducible_and_seed_0_does_not_reseed():
    x = tensor.from_numpy(np.ones((50, 50), np.float32))
    np.testing.assert_array_equal(_mask(5, x), _mask(5, x))
    assert not np.array_equal(_mask(0, x), _mask(0, x))
    with pytest.raises(ValueError):
        autograd.Dropout(seed=-1)


# ---- errors that SINGA raises with assert ------------------------------------------------------
BAD = [
    ("pad count", lambda x: autograd.pad(x, "constant", [1]), ValueError),
    ("squeeze a wide axis", lambda x: autograd.squeeze(x, [0]), ValueError),
    ("gather out of range", lambda x: autograd.gather(x, 0, [5]), IndexError),
    ("mse shapes", lambda x: autograd.mse_loss(x, tensor.from_numpy(u(3, 2))), ValueError),
    ("conv input rank", lambda x: autograd.conv2d(
        sw.ConvHandle(sw.Tensor((1, 1, 3, 3)), (1, 1), (1, 1), (0, 0), 1, 1, False, 1), x,
        tensor.from_numpy(u(1, 1, 1, 1))), ValueError),
    ("dropout ratio", lambda x: autograd.dropout(x, ratio=1.0), ValueError),
    ("split parts", lambda x: autograd.split(x, 0, None), ValueError),
]


@pytest.mark.parametrize("name,call,kind", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_also_an_assertion_error(name, call, kind):
    x = tensor.from_numpy(u(2, 3))
    with pytest.raises(AssertionError) as info:
        call(x)
    assert isinstance(info.value, kind)


# ---- every operator of the op table, called directly ----------------------------------------
from test_autograd_ops import ALL as OP_TABLE  # noqa: E402


@pytest.mark.parametrize("c", OP_TABLE)
def test_every_operator_called_directly_returns_a_gradient_per_float_input(c):
    """y.creator.backward(dy) for the last operator of every op-table row: one gradient per
    input of that operator (None only for integer inputs such as ids), each equal to finite
    differences where the input is one of the row's own arrays."""
    arrays = [np.asarray(a) for a in c.inputs]
    autograd.training = True
    ts = [tensor.from_numpy(a) for a in arrays]
    ys = c.op(autograd, *ts)
    ys = tuple(ys) if isinstance(ys, (tuple, list)) else (ys,)
    op = ys[0].creator
    if not op.requires_grad:  # comparisons, shape queries...: the op is the creator, no grad
        assert not isinstance(op, autograd.Dummy) and not ys[0].requires_grad
        return
    dys = [R.uniform(-1, 1, size=y.shape).astype(np.float32) for y in ys]
    dxs = op.backward(*[tensor.from_numpy(d).data for d in dys])
    dxs = tuple(dxs) if isinstance(dxs, (tuple, list)) else (dxs,)
    assert len(dxs) == len(op.src), "%s returned %d gradients for %d inputs" % (
        type(op).__name__, len(dxs), len(op.src))
    positions = {}  # input tensor id -> its positions among op's inputs (x * x: two)
    for k, (_, x_id, _, _) in enumerate(op.src):
        positions.setdefault(x_id, []).append(k)
    int_output = ys[0].data.data_type() == sw.kInt  # e.g. a cast to int: nothing flows back
    grad = c.grad if c.grad is not None else [i for i, a in enumerate(arrays)
                                              if a.dtype.kind == "f"]
    for k, (dx, shape) in enumerate(zip(dxs, op._x_shapes)):
        if dx is None:
            mine = [j for j, t in enumerate(ts) if k in positions.get(id(t), [])]
            assert int_output or (mine and arrays[mine[0]].dtype.kind != "f"), \
                "%s: no gradient for float input %d" % (type(op).__name__, k)
            continue
        assert dx.shape() == shape
    direct = [j for j in grad if id(ts[j]) in positions]
    if len(ys) != 1 or not direct:
        return
    want = numeric_grads(c.ref, arrays, direct, dys)
    for j in direct:
        dx = sum(np_(dxs[k]) for k in positions[id(ts[j])])
        scale = max(1.0, float(np.max(np.abs(want[j]))) if want[j].size else 1.0)
        np.testing.assert_allclose(dx, want[j], rtol=2e-3, atol=2e-3 * scale,
                                   err_msg="gradient of input %d" % j)


def test_release_graph_frees_a_finished_graph_and_later_backward_refuses():
    autograd.training = True
    w_np, b_np, x_np, t_np = u(4, 3), u(3), u(5, 4), u(5, 3)
    w, b, loss = _mlp(w_np, b_np, x_np, t_np)
    ops, stack = [], [loss.creator]
    while stack:  # every recorded operator behind the loss
        op = stack.pop()
        if op.requires_grad and op not in ops:
            ops.append(op)
            stack.extend(s for s, _, _, _ in op.src)
    assert len(ops) == 4  # matmul, add_bias, tanh, mse
    autograd.gradients(loss)
    autograd.release_graph(loss)
    for op in ops:
        assert op.src == [] and not any(isinstance(v, sw.Tensor) for v in vars(op).values())
    with pytest.raises(RuntimeError, match="freed"):
        autograd.gradients(loss)


def test_core_pb2_dtypes_are_singas():
    # SINGA code spells dtypes through its protobuf module
    from singa.proto import core_pb2
    assert (core_pb2.kFloat32, core_pb2.kFloat16, core_pb2.kInt) == (0, 1, 2)
    assert core_pb2.kFloat32 == tensor.float32 and core_pb2.kInt == tensor.int32
    assert tensor.sizeof(core_pb2.kFloat32) == 4 and tensor.sizeof(core_pb2.kInt) == 4
    t = tensor.Tensor((2, 3), dtype=core_pb2.kInt)
    assert t.dtype == tensor.int32
