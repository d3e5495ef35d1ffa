"""What SINGA 3.3's own ONNX tests (test/python/test_onnx.py, test_onnx_backend.py) call, each
behaviour asserted on its own: the low-level handles of singa_wrap under SINGA's names and
argument lists, to_onnx with constants in the input list, output names without Identity
nodes, SingaRep.run(x, last_layers=k) and SingaRep.layers, SingaBackend._rename_operators,
and the import of Constant, CastLike and Dropout (with its mask); and the ops its backend test
selects through ONNX's expanded node tests (ReduceMax / ReduceMin, Size, casts to types singa
has no dtype for).
"""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

from gradcheck import check_op
from singa import autograd, layer, sonnx, tensor
from singa import singa_wrap as sw
from singa.sonnx.ops import HANDLERS

R = np.random.RandomState(33)


def np_(t):
    return tensor.to_numpy(t) if isinstance(t, tensor.Tensor) else np.asarray(t)


def t_(a, grad=False):
    """A Tensor of a (requires_grad, as from_numpy makes it); grad=True: also stores_grad."""
    t = tensor.from_numpy(np.ascontiguousarray(a))
    t.stores_grad = grad
    return t


# ---- numpy references -----------------------------------------------------------------------
def conv_ref(x, W, b=None, stride=(1, 1), pad=(0, 0)):
    """Cross-correlation of x (N, C, H, W) with W (F, C, kh, kw), zero padding, no groups."""
    x = np.pad(x, [(0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])])
    n, _, h, w = x.shape
    f, _, kh, kw = W.shape
    oh, ow = (h - kh) // stride[0] + 1, (w - kw) // stride[1] + 1
    y = np.zeros((n, f, oh, ow), np.result_type(x, W))
    for i in range(oh):
        for j in range(ow):
            win = x[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
            y[:, :, i, j] = np.tensordot(win, W, axes=([1, 2, 3], [1, 2, 3]))
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def maxpool_ref(x, k, s):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    return np.stack([np.stack([x[:, :, i * s:i * s + k, j * s:j * s + k].max(axis=(2, 3))
                               for j in range(ow)], -1) for i in range(oh)], -2)


def bn_ref(x, scale, bias, mean, var, eps=1e-5):
    sh = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + eps) * scale.reshape(sh) + \
        bias.reshape(sh)


# ---- singa_wrap's handles under SINGA's names ---------------------------------------------------
def test_batchnorm_handle_is_one_class_under_singa_wrap_and_autograd():
    assert autograd.BatchNormHandle is sw.BatchNormHandle
    assert issubclass(sw.CudnnBatchNormHandle, sw.BatchNormHandle)
    x = t_(R.randn(4, 3, 2, 2).astype(np.float32))
    for h in (sw.BatchNormHandle(0.8, x.data), sw.BatchNormHandle(x, 0.8),
              sw.CudnnBatchNormHandle(0.8, x.data),
              autograd.BatchNormHandle(x.shape, momentum=0.8)):
        assert (h.factor, h.batchsize, h.channels, h.height, h.width) == (0.8, 4, 3, 2, 2)


@pytest.mark.parametrize("cls", ["BatchNormHandle", "CudnnBatchNormHandle"])
def test_batchnorm_with_singas_handle_matches_numpy_and_updates_running_stats(cls):
    x_np = R.randn(4, 3, 2, 2).astype(np.float32)
    s_np, b_np = R.uniform(0.5, 1.5, 3).astype(np.float32), R.randn(3).astype(np.float32)
    mean, var = t_(np.zeros(3, np.float32)), t_(np.ones(3, np.float32))
    x = t_(x_np)
    h = getattr(sw, cls)(0.9, x.data)
    autograd.training = True
    y = autograd.batchnorm_2d(h, x, t_(s_np), t_(b_np), mean, var)
    bm, bv = x_np.mean(axis=(0, 2, 3)), x_np.var(axis=(0, 2, 3))
    np.testing.assert_allclose(np_(y), bn_ref(x_np, s_np, b_np, bm, bv), rtol=1e-4, atol=1e-5)
    # SINGA's momentum is the weight of the old running value; the running variance is unbiased
    np.testing.assert_allclose(np_(mean), 0.1 * bm, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np_(var), 0.9 + 0.1 * bv * 16 / 15, rtol=1e-4)


@pytest.mark.parametrize("cls", ["ConvHandle", "CudnnConvHandle"])
def test_conv_handle_with_singas_arguments_forward_and_gradients(cls):
    x_np = R.randn(2, 3, 5, 5).astype(np.float32)
    W_np = R.randn(4, 3, 3, 3).astype(np.float32) * 0.3
    b_np = R.randn(4).astype(np.float32)
    # SINGA: (input core tensor, kernel, stride, padding as lists, in, out, bias, groups)
    h = getattr(sw, cls)(t_(x_np).data, [3, 3], [2, 2], [1, 1], 3, 4, True, 1)
    assert (h.kernel_h, h.stride_w, h.pad_h, h.channels, h.num_filters, h.group,
            h.bias_term, h.batchsize) == (3, 2, 1, 3, 4, 1, True, 2)
    check_op(lambda ag, x, W, b: ag.conv2d(h, x, W, b),
             lambda x, W, b: conv_ref(x, W, b, (2, 2), (1, 1)), [x_np, W_np, b_np])


def test_cudnn_conv_handle_takes_singas_workspace_and_preference():
    x = sw.Tensor((1, 2, 4, 4))
    h = sw.CudnnConvHandle(x, (3, 3), (1, 1), (0, 0), 2, 2, False, 1, 1 << 20, "no_workspace")
    assert isinstance(h, sw.ConvHandle)
    assert (h.workspace_byte_limit, h.prefer) == (1 << 20, "no_workspace")
    assert h.output_shape() == sw.ConvHandle(x, 3, 1, 0, 2, 2, False).output_shape()
    dil = sw.CudnnConvHandle(x, 2, 1, 0, 2, 2, False, dilation=2)
    assert (dil.dilation_h, dil.dilation_w, dil.conv_height) == (2, 2, 2)


def test_layers_build_the_cudnn_handle_with_dilation_by_keyword_on_a_gpu():
    """On a GPU a layer builds SINGA's CudnnConvHandle, whose 9th argument is the workspace
    limit: a dilation must reach it by keyword."""
    from singa.layers import _util

    class GpuLike(object):
        def is_host(self):
            return False
    h = _util.make_handle("ConvHandle", "CudnnConvHandle", GpuLike(), sw.Tensor((1, 2, 7, 7)),
                          (3, 3), (1, 1), (0, 0), 2, 4, True, 1, dilation=(2, 2))
    assert type(h) is sw.CudnnConvHandle
    assert (h.dilation_h, h.conv_height, h.workspace_byte_limit) == (2, 3, 1 << 30)


@pytest.mark.parametrize("cls", ["PoolingHandle", "CudnnPoolingHandle"])
def test_pooling_handle_with_singas_arguments(cls):
    x_np = R.randn(2, 3, 6, 6).astype(np.float32)
    h = getattr(sw, cls)(t_(x_np).data, [2, 2], [2, 2], [0, 0], True)
    assert isinstance(h, sw.PoolingHandle) and h.is_max_pooling
    assert (h.pooled_height, h.pooled_width) == (3, 3)
    check_op(lambda ag, x: ag.pooling_2d(h, x), lambda x: maxpool_ref(x, 2, 2), [x_np])


X4 = (2, 3, 5, 5)
BAD_HANDLES = [
    # (what, call, error class, words the message must hold)
    ("3-d input", lambda: sw.ConvHandle(sw.Tensor((2, 3, 5)), 3, 1, 0, 3, 4, True),
     sw.ShapeError, ["ConvHandle", "4-d", "(2, 3, 5)"]),
    ("kernel > input", lambda: sw.ConvHandle(sw.Tensor(X4), 7, 1, 0, 3, 4, True),
     sw.ShapeError, ["ConvHandle", "7x7", "5x5"]),
    ("in_channels", lambda: sw.ConvHandle(sw.Tensor(X4), 3, 1, 0, 2, 4, True),
     sw.ShapeError, ["ConvHandle", "in_channels"]),
    ("stride 0", lambda: sw.ConvHandle(sw.Tensor(X4), 3, 0, 0, 3, 4, True),
     sw.ArgumentError, ["ConvHandle", "stride"]),
    ("kernel triple", lambda: sw.ConvHandle(sw.Tensor(X4), (3, 3, 3), 1, 0, 3, 4, True),
     sw.ArgumentError, ["ConvHandle", "kernel_size", "(3, 3, 3)"]),
    ("negative pad", lambda: sw.ConvHandle(sw.Tensor(X4), 3, 1, -1, 3, 4, True),
     sw.ArgumentError, ["ConvHandle", "padding"]),
    ("negative shape", lambda: sw.ConvHandle((2, -3, 5, 5), 3, 1, 0, 3, 4, True),
     sw.ShapeError, ["ConvHandle", "(2, -3, 5, 5)"]),
    ("bad preference", lambda: sw.CudnnConvHandle(sw.Tensor(X4), 3, 1, 0, 3, 4, True, 1, 0,
                                                  "best"),
     sw.ArgumentError, ["CudnnConvHandle", "prefer", "'best'"]),
    ("negative workspace", lambda: sw.CudnnConvHandle(sw.Tensor(X4), 3, 1, 0, 3, 4, True, 1, -5),
     sw.ArgumentError, ["CudnnConvHandle", "workspace_byte_limit", "-5"]),
    ("pool pad >= kernel", lambda: sw.PoolingHandle(sw.Tensor(X4), 2, 1, 2),
     sw.ArgumentError, ["PoolingHandle", "padding"]),
    ("pool kernel > input", lambda: sw.CudnnPoolingHandle(sw.Tensor(X4), 6, 1, 0),
     sw.ShapeError, ["PoolingHandle", "6x6"]),
    ("bn momentum", lambda: sw.BatchNormHandle(1.5, sw.Tensor(X4)),
     sw.ArgumentError, ["BatchNormHandle", "momentum", "1.5"]),
    ("bn 1-d input", lambda: sw.CudnnBatchNormHandle(0.9, sw.Tensor((3,))),
     sw.ShapeError, ["CudnnBatchNormHandle", "(3,)"]),
]


@pytest.mark.parametrize("what,call,cls,words", BAD_HANDLES, ids=[b[0] for b in BAD_HANDLES])
def test_bad_handle_arguments_raise_the_core_error_classes(what, call, cls, words):
    with pytest.raises(cls) as e:
        call()
    assert type(e.value).__module__ == "singa.singa_wrap", type(e.value)  # not a generic check error
    for w in words:
        assert w in str(e.value), (w, str(e.value))


@pytest.mark.parametrize("call", [
    lambda: sw.ConvHandle(sw.Tensor(X4), 3.0, 1, 0, 3, 4, True),
    lambda: sw.ConvHandle(sw.Tensor(X4), 3, 1, 0, 3, True, True),
    lambda: sw.CudnnConvHandle(sw.Tensor(X4), 3, 1, 0, 3, 4, True, 1, 10, 3),
    lambda: sw.CudnnConvHandle(sw.Tensor(X4), 3, 1, 0, 3, 4, True, 1, "big"),
    lambda: sw.BatchNormHandle("0.9", sw.Tensor(X4))])
def test_handle_arguments_of_the_wrong_type_raise_type_error(call):
    with pytest.raises(TypeError):
        call()


# ---- to_onnx: constants in the input list, output names -----------------------------------------
def _export_run(inputs, y, run_inputs):
    m = sonnx.to_onnx(inputs, [y] if not isinstance(y, list) else y)
    rep = sonnx.prepare(m)
    rep.is_graph = True
    return m, rep.run(run_inputs)


def test_to_onnx_accepts_a_shape_in_the_input_list():
    autograd.training = True
    x_np = R.randn(3, 2).astype(np.float32)
    x = t_(x_np)
    y = autograd.Reshape((2, 3))(x)[0]
    m, (out,) = _export_run([x, (2, 3)], y, [x])
    assert [i.name for i in m.graph.input] == ["input:0"]
    np.testing.assert_array_equal(np_(out), x_np.reshape(2, 3))


def test_to_onnx_accepts_clip_bounds_in_the_input_list():
    autograd.training = True
    x_np = np.array([[-0.9, -0.3], [-0.1, 0.1], [0.5, 0.9]], np.float32)
    x = t_(x_np)
    lo, hi = -0.5, 0.5
    y = autograd.clip(x, lo, hi)
    m, (out,) = _export_run([x, lo, hi], y, [x])
    assert len(m.graph.input) == 1
    np.testing.assert_allclose(np_(out), np.clip(x_np, lo, hi))


def test_to_onnx_batchnorm_statistics_in_the_input_list_are_initializers():
    autograd.training = True
    x_np = R.randn(2, 3, 2, 2).astype(np.float32)
    s_np, b_np = R.uniform(0.5, 1.5, 3).astype(np.float32), R.randn(3).astype(np.float32)
    m_np, v_np = R.randn(3).astype(np.float32), R.uniform(0.5, 2, 3).astype(np.float32)
    x, s, b, mean, var = (t_(a) for a in (x_np, s_np, b_np, m_np, v_np))
    autograd.training = True  # SINGA's test exports a training forward (which updates the stats)
    y = autograd.batchnorm_2d(sw.BatchNormHandle(0.9, x.data), x, s, b, mean, var)
    m = sonnx.to_onnx([x, s, b, mean, var], [y])
    assert [i.name for i in m.graph.input] == ["input:0", "input:1", "input:2"]
    assert len(m.graph.initializer) == 2
    autograd.training = False  # the imported model normalises with the exported statistics
    out = sonnx.prepare(m).run([x_np, s_np, b_np])[0]
    want = bn_ref(x_np, s_np, b_np, np_(mean), np_(var))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_to_onnx_unused_tensor_in_the_input_list_is_not_a_graph_input():
    autograd.training = True
    x, unused = t_(R.randn(2, 2).astype(np.float32)), t_(np.ones(3, np.float32))
    m = sonnx.to_onnx([unused, x], [autograd.relu(x)])
    assert [i.name for i in m.graph.input] == ["input:1"]


def test_outputs_are_named_by_renaming_not_by_identity_nodes():
    autograd.training = True
    x_np = R.randn(2, 3).astype(np.float32)
    x = t_(x_np)
    h = autograd.tanh(x)
    y = autograd.relu(h)  # h is both an output and the input of the Relu
    m = sonnx.to_onnx([x], [h, y, y])
    assert [o.name for o in m.graph.output] == ["output:0", "output:1", "output:2"]
    types = [n.op_type for n in m.graph.node]
    assert types == ["Tanh", "Relu", "Identity"]  # an Identity only for y's second copy
    outs = sonnx.prepare(m).run([x_np])
    for got, want in zip(outs, (np.tanh(x_np), np.maximum(np.tanh(x_np), 0),
                                np.maximum(np.tanh(x_np), 0))):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# ---- SingaRep.run(x, last_layers=k) and SingaRep.layers ---------------------------------------
def _chain_model():
    """x -> Constant c -> Add(x, c) -> Relu -> Mul(., c) -> Neg: 4 layers, 1 Constant node."""
    c = np.array([0.5, -1.0, 2.0], np.float32)
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(c, "c")),
             helper.make_node("Add", ["x", "c"], ["a"], name="add.0"),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Mul", ["r", "c"], ["m"], name="mul"),
             helper.make_node("Neg", ["m"], ["y"], name="neg")]
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    x = R.randn(2, 3).astype(np.float32)
    a = x + c
    r = np.maximum(a, 0)
    steps = [a, r, r * c, -(r * c)]
    return m, x, steps


def test_last_layers_counts_the_non_constant_nodes_as_singa_does():
    m, x, steps = _chain_model()
    rep = sonnx.prepare(m)
    n = len(steps)
    assert len(rep.layers) == n
    np.testing.assert_allclose(rep.run([x])[0], steps[-1], rtol=1e-6)
    for k in range(-n, n):
        stop = k if k >= 0 else (k + 1) % n  # SINGA 3.3's rule for a negative count
        out = rep.run([x], last_layers=k)
        assert len(out) == 1
        np.testing.assert_allclose(out[0], steps[stop], rtol=1e-6, err_msg="k=%d" % k)


def test_last_layers_with_aux_output_and_tensors():
    m, x, steps = _chain_model()
    rep = sonnx.prepare(m)
    a, r = rep.run([t_(x)], last_layers=1, aux_output=["a"])
    assert isinstance(a, tensor.Tensor)
    np.testing.assert_allclose(np_(a), steps[1], rtol=1e-6)  # the Relu's output
    np.testing.assert_allclose(np_(r), steps[0], rtol=1e-6)


@pytest.mark.parametrize("k,err", [(4, sonnx.SonnxError), (-5, sonnx.SonnxError),
                                   (1.0, TypeError), (True, TypeError)])
def test_last_layers_out_of_range_or_not_an_int_raises(k, err):
    m, x, _ = _chain_model()
    with pytest.raises(err, match="last_layers"):
        sonnx.prepare(m).run([x], last_layers=k)


def test_layers_pair_each_node_with_a_runnable_operator():
    m, x, steps = _chain_model()
    rep = sonnx.prepare(m)
    names = [node.name for node, _ in rep.layers]
    assert names == ["add_0", "Relu_1", "mul", "neg"]  # SINGA's: '.' -> '_', op_index if unnamed
    assert [node.op_type for node, _ in rep.layers] == ["Add", "Relu", "Mul", "Neg"]
    node, op = rep.layers[2]
    assert (node.inputs, node.outputs) == (["r", "c"], ["m"])
    # the operator fills in what the model holds (the Constant c) and runs on the given input
    (got,) = op(t_(steps[1]))
    np.testing.assert_allclose(np_(got), steps[2], rtol=1e-6)
    (got,) = rep.layers[3].operator(t_(steps[2]))
    np.testing.assert_allclose(np_(got), steps[3], rtol=1e-6)
    with pytest.raises(sonnx.SonnxError, match="too many"):
        op(t_(steps[1]), t_(steps[1]))


def test_transfer_learning_cut_keeps_the_autograd_record():
    """SINGA's transfer learning: run an exported network up to a layer, train on top."""
    autograd.training = True
    x = t_(R.randn(2, 3, 4, 4).astype(np.float32))
    conv1, conv2 = layer.Conv2d(2, 3), layer.Conv2d(1, 2)
    y = conv2(conv1(x))
    rep = sonnx.prepare(sonnx.to_onnx([x], [y]))
    rep.is_graph = True
    feat = rep.run([x], last_layers=0)[0]  # conv1's output
    np.testing.assert_allclose(np_(feat), np_(conv1(x)), rtol=1e-5, atol=1e-6)
    head = layer.Conv2d(1, 2)
    loss = autograd.MeanSquareError(t_(np.zeros((2, 1), np.float32)))(
        autograd.flatten(head(feat)))[0]
    grads = {id(p) for p, g in autograd.backward(loss)}
    # conv1's imported weight and bias get gradients; conv2's (not run) do not
    trained = [k for k, t in sorted(rep.tensor_map.items()) if id(t) in grads]
    assert len(trained) == 2 and len(rep.tensor_map) == 4, (trained, sorted(rep.tensor_map))
    assert {tuple(rep.tensor_map[k].shape) for k in trained} == {conv1.W.shape, conv1.b.shape}


# ---- SingaBackend._rename_operators ----------------------------------------------------------
def test_rename_operators_is_a_read_only_table_of_what_import_supports():
    table = sonnx.SingaBackend._rename_operators
    assert sorted(table) == sonnx.SUPPORTED_OPS
    for op in ("Conv", "Constant", "CastLike", "Dropout", "Gemm", "Reshape"):
        assert op in table and callable(table[op])
    for op in table:
        assert onnx.defs.has(op), op  # every key is an ONNX op type
    with pytest.raises(TypeError):
        table["MyOp"] = table["Relu"]
    assert "MyOp" not in sonnx.SUPPORTED_OPS


# ---- import of Constant, CastLike, Dropout ---------------------------------------------------
def _one_node_model(node, inputs, outputs, opset=18, inits=()):
    g = helper.make_graph([node], "one", [helper.make_tensor_value_info(n, t, s)
                                          for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                          initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("attr,value,want", [
    ("value", numpy_helper.from_array(np.array([[1.5, -2.0]], np.float32)),
     np.array([[1.5, -2.0]], np.float32)),
    ("value_float", 2.5, np.array(2.5, np.float32)),
    ("value_floats", [1.0, 2.0], np.array([1.0, 2.0], np.float32)),
    ("value_int", 7, np.array(7, np.int64)),
    ("value_ints", [3, 4, 5], np.array([3, 4, 5], np.int64))])
def test_constant_node_values(attr, value, want):
    node = helper.make_node("Constant", [], ["y"], **{attr: value})
    elem = helper.np_dtype_to_tensor_dtype(want.dtype)
    m = _one_node_model(node, [], [("y", elem, list(want.shape))])
    (got,) = sonnx.prepare(m).run([])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    (alone,) = sonnx.run_node(node, [])
    np.testing.assert_array_equal(alone, want)


def test_constant_node_sparse_value():
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, -1.0], np.float32), "v"),
        numpy_helper.from_array(np.array([1, 4], np.int64), "i"), [2, 3])
    node = helper.make_node("Constant", [], ["y"], sparse_value=sparse)
    (got,) = sonnx.run_node(node, [])
    np.testing.assert_array_equal(got, [[0, 5, 0], [0, -1, 0]])


@pytest.mark.parametrize("x,like,want_dtype", [
    (np.array([1.7, -2.2, 3.0], np.float32), np.array([0], np.int64), np.int64),
    (np.array([1, -2, 3], np.int32), np.array([0.5], np.float32), np.float32)])
def test_castlike_takes_the_type_of_its_second_input(x, like, want_dtype):
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(want_dtype))
    m = _one_node_model(node, [("x", helper.np_dtype_to_tensor_dtype(x.dtype), [3]),
                               ("like", helper.np_dtype_to_tensor_dtype(like.dtype), [1])],
                        [("y", elem, [3])])
    (got,) = sonnx.prepare(m).run([x, like])
    assert got.dtype == want_dtype
    np.testing.assert_array_equal(got, x.astype(want_dtype))


def _dropout_model(training, ratio):
    node = helper.make_node("Dropout", ["x", "ratio", "mode"], ["y", "mask"])
    inits = [numpy_helper.from_array(np.array(ratio, np.float32), "ratio"),
             numpy_helper.from_array(np.array(training), "mode")]
    return _one_node_model(node, [("x", TensorProto.FLOAT, [50, 40])],
                           [("y", TensorProto.FLOAT, [50, 40]),
                            ("mask", TensorProto.BOOL, [50, 40])], inits=inits)


@pytest.mark.parametrize("training,ratio", [(False, 0.5), (True, 0.0)])
def test_dropout_is_the_identity_with_a_true_mask_outside_training(training, ratio):
    x = R.randn(50, 40).astype(np.float32)
    y, mask = sonnx.prepare(_dropout_model(training, ratio)).run([x])
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == np.bool_ and mask.shape == x.shape and mask.all()


def test_dropout_in_training_mode_drops_scales_and_returns_its_mask():
    x_np = R.uniform(0.5, 1.5, (50, 40)).astype(np.float32)  # no zeros: y == 0 iff dropped
    x = t_(x_np, grad=True)
    autograd.training = True
    y, mask = sonnx.prepare(_dropout_model(True, 0.25)).run([x])
    y_np, mask_np = np_(y), np_(mask) != 0
    np.testing.assert_array_equal(mask_np, y_np != 0)
    np.testing.assert_allclose(y_np[mask_np], x_np[mask_np] / 0.75, rtol=1e-6)
    assert 0.70 < mask_np.mean() < 0.80  # 2000 draws of keep probability 0.75
    # backward: dy scaled by the same mask
    grads = {id(p): np_(g) for p, g in autograd.backward(autograd.reduce_sum(y, None, 0))}
    np.testing.assert_allclose(grads[id(x)], mask_np / 0.75, rtol=1e-6)


def test_dropout_ratio_one_in_training_raises():
    with pytest.raises(sw.ArgumentError, match="ratio"):
        sonnx.prepare(_dropout_model(True, 1.0)).run([np.ones((50, 40), np.float32)])


# ---- SINGA's out-of-range cases stay errors -----------------------------------------------------
def test_gather_index_out_of_range_is_a_clear_error():
    # SINGA's test_gather gathers index 3 of a 3-element tensor (its C++ read past the end)
    with pytest.raises(IndexError, match=r"index 3.*size 3"):
        autograd.gather(t_(np.array([0, 1, 2], np.float32)), 0, [0, 1, 3])


def test_unsqueeze_axis_out_of_range_is_a_clear_error():
    # SINGA's test_unsqueeze inserts axes [2, 4, 5] into a 2-d tensor: rank 5 has no axis 5
    with pytest.raises(IndexError, match=r"axis 5.*rank 5"):
        autograd.unsqueeze(t_(np.ones((3, 2), np.float32)), [2, 4, 5])


# ---- ops that SINGA's test_onnx_backend.py selects through the expanded node tests ------------
@pytest.mark.parametrize("op,ref", [("ReduceMax", np.max), ("ReduceMin", np.min)])
@pytest.mark.parametrize("axes,keep", [([1], 1), ([0, 2], 0), ([-1], 0), (None, 1)])
def test_reduce_max_min_forward_and_finite_differences(op, ref, axes, keep):
    x = R.randn(3, 4, 5).astype(np.float32)  # distinct values: no ties
    ins = [None] if axes is None else [np.array(axes, np.int64)]
    check_op(lambda ag, a: HANDLERS[op]([a] + ins, {"keepdims": keep}, 18, {})[0],
             lambda a: ref(a, axis=None if axes is None else tuple(axes), keepdims=bool(keep)),
             [x])


@pytest.mark.parametrize("op,x,want", [
    ("ReduceMax", [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], [[0, 0.5, 0.5], [0.5, 0.5, 0]]),
    ("ReduceMin", [[1.0, 3.0, 1.0], [2.0, 5.0, 4.0]], [[0.5, 0, 0.5], [1, 0, 0]])])
def test_reduce_max_min_split_the_gradient_between_ties(op, x, want):
    autograd.training = True
    xt = t_(np.array(x, np.float32), grad=True)
    y = HANDLERS[op]([xt], {"keepdims": 0, "axes": [1]}, 13, {})[0]
    grads = {id(p): np_(g) for p, g in autograd.backward(autograd.reduce_sum(y, None, 0))}
    np.testing.assert_allclose(grads[id(xt)], want)


def _cast_model(to, shape, saturate=1):
    node = helper.make_node("Cast", ["x"], ["y"], to=to, saturate=saturate)
    return _one_node_model(node, [("x", TensorProto.FLOAT, shape)], [("y", to, shape)], opset=21)


def test_cast_to_float8_runs_on_the_host_with_its_rounding_and_saturation():
    # float8 e4m3fn: 3 mantissa bits (1.1 -> 1.125), largest finite 448 (saturate=1 clamps)
    x = np.array([1.1, -2.3, 1000.0, 0.0], np.float32)
    (y,) = sonnx.prepare(_cast_model(TensorProto.FLOAT8E4M3FN, [4])).run([x])
    assert not sonnx.ops_tensor.holdable(y)  # a float8 array, kept as numpy
    np.testing.assert_array_equal(y.astype(np.float32), [1.125, -2.25, 448.0, 0.0])


def test_cast_to_bfloat16_rounds_to_its_8_bit_mantissa():
    x = np.array([1.0 + 2.0 ** -9, 3.0], np.float32)  # below half a bfloat16 step: rounds down
    (y,) = sonnx.prepare(_cast_model(TensorProto.BFLOAT16, [2])).run([x])
    np.testing.assert_array_equal(y.astype(np.float32), [1.0, 3.0])


def test_cast_to_a_type_singa_lacks_refuses_to_drop_a_gradient():
    autograd.training = True
    x = t_(np.ones(4, np.float32), grad=True)
    with pytest.raises(sonnx.UnsupportedOpError, match="FLOAT8E4M3FN.*gradient"):
        sonnx.prepare(_cast_model(TensorProto.FLOAT8E4M3FN, [4])).run([x])


def test_size_is_the_element_count():
    node = helper.make_node("Size", ["x"], ["n"])
    m = _one_node_model(node, [("x", TensorProto.FLOAT, [2, 3, 4])], [("n", TensorProto.INT64, [])])
    (n,) = sonnx.prepare(m).run([np.zeros((2, 3, 4), np.float32)])
    assert n.dtype == np.int64 and int(n) == 24


# ---- Resize beyond nearest repetition (ONNX's linear / cubic / nearest modes) -----------------
def _resize_model(shape, out_shape, **attrs):
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    sizes = numpy_helper.from_array(np.array(out_shape, np.int64), "sizes")
    return _one_node_model(node, [("x", TensorProto.FLOAT, list(shape))],
                           [("y", TensorProto.FLOAT, list(out_shape))], opset=19,
                           inits=[sizes])


def _align_corners_matrix(n, m):
    """Linear interpolation with align_corners: output j samples input j (n - 1) / (m - 1)."""
    M = np.zeros((m, n))
    for j in range(m):
        p = j * (n - 1) / (m - 1)
        i = min(int(np.floor(p)), n - 2)
        M[j, i], M[j, i + 1] = 1 - (p - i), p - i
    return M


def test_resize_linear_align_corners_by_hand():
    x = np.array([[[[1.0, 3.0], [5.0, 7.0]]]], np.float32)
    (y,) = sonnx.prepare(_resize_model(
        (1, 1, 2, 2), (1, 1, 3, 3), mode="linear",
        coordinate_transformation_mode="align_corners")).run([x])
    np.testing.assert_allclose(y[0, 0], [[1, 2, 3], [3, 4, 5], [5, 6, 7]], rtol=1e-6)


def test_resize_linear_trains_like_its_interpolation_matrices():
    rep = sonnx.prepare(_resize_model((2, 1, 3, 4), (2, 1, 5, 7), mode="linear",
                                      coordinate_transformation_mode="align_corners"))
    Mh, Mw = _align_corners_matrix(3, 5), _align_corners_matrix(4, 7)
    rep.is_graph = True
    check_op(lambda ag, a: rep.run([a])[0],
             lambda a: np.einsum("hi,ncij,wj->nchw", Mh, a, Mw),
             [R.randn(2, 1, 3, 4).astype(np.float32)])


def test_resize_nearest_ceil_is_not_repetition():
    # half-pixel centres, 2 -> 4, ceil: sources ceil(-0.25, 0.25, 0.75, 1.25) = 0, 1, 1, 2->1
    x = np.array([[[[1.0, 2.0]]]], np.float32)
    (y,) = sonnx.prepare(_resize_model((1, 1, 1, 2), (1, 1, 1, 4), mode="nearest",
                                       nearest_mode="ceil")).run([x])
    np.testing.assert_array_equal(y[0, 0, 0], [1, 2, 2, 2])
