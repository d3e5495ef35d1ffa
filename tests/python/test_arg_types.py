"""Arguments of the wrong type raise a TypeError naming the function and the parameter.

tools/fuzz_api.py found ~200 public entry points where a string, None or a list given for a
number reached Python's int() / float() or numpy (``tensor.sum(x, axis='x')`` -> "invalid
literal for int() with base 10: 'x'"): the message named neither the op nor the argument. The
checks of singa/_args.py give PyTorch's "<op>(): argument '<param>' must be int, not str";
each row here is one such call (one per family of functions that converts its arguments the
same way), and numpy integer scalars and 0-d arrays stay accepted where ints are, as in numpy.
"""
import re

import numpy as np
import pytest

from singa import autograd, initializer, layer, opt, singa_wrap, tensor, utils


def T(*shape, dtype=np.float32):
    return tensor.from_numpy(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) + 1)


def _onnx_node(op, inputs, **attrs):
    onnx = pytest.importorskip("onnx")
    from singa.sonnx.backend import SingaBackend
    names = ["" if a is None else "in%d" % i for i, a in enumerate(inputs)]
    node = onnx.helper.make_node(op, names, ["out"], **attrs)
    return SingaBackend.run_node(node, [a for a in inputs])


# (id, call, op named, parameter named)
CASES = [
    # singa.tensor functions (_tensor_funcs.py)
    ("tensor.sum-axis", lambda: tensor.sum(T(2, 3), axis="x"), "sum", "axis"),
    ("tensor.sum-axis-float", lambda: tensor.sum(T(2, 3), axis=1.5), "sum", "axis"),
    ("tensor.average-axis", lambda: tensor.average(T(2, 3), axis=[0, "a"]), "average", "axis"),
    ("tensor.softmax-axis", lambda: tensor.softmax(T(2, 3), axis=[1]), "softmax", "axis"),
    ("tensor.concatenate-axis", lambda: tensor.concatenate([T(2), T(2)], "x"), "concatenate",
     "axis"),
    ("tensor.clip-low", lambda: tensor.clip(T(3), None, 1.0), "clip", "low"),
    ("tensor.leakyrelu-a", lambda: tensor.leakyrelu(T(3), (1,)), "leakyrelu", "a"),
    ("tensor.axpy-alpha", lambda: tensor.axpy("x", T(3), T(3)), "axpy", "alpha"),
    ("tensor.mult-alpha", lambda: tensor.mult(T(2, 2), T(2, 2), alpha="2"), "mult", "alpha"),
    ("tensor.add_row-beta", lambda: tensor.add_row(1.0, T(3), None, T(2, 3)), "add_row", "beta"),
    ("tensor.copy_data_to_from-size",
     lambda: tensor.copy_data_to_from(T(3), T(3), "ab"), "copy_data_to_from", "size"),
    ("tensor.tensordot-axes", lambda: tensor.tensordot(T(2, 3), T(3, 2), ([1.5], [0])),
     "tensordot", "axes"),
    ("tensor.product-shape", lambda: tensor.product(3), "product", "shape"),
    ("tensor.gaussian-std", lambda: tensor.gaussian(0.0, "float32", T(3)), "gaussian", "std"),
    ("tensor.concatenate-tensors", lambda: tensor.concatenate(3, 0), "concatenate", "tensors"),
    # Tensor methods (_core.py)
    ("Tensor.reshape-shape", lambda: T(2, 3).reshape(None), "reshape", "shape"),
    ("Tensor.reshape-element", lambda: T(2, 3).reshape([2, "3"]), "reshape", "shape"),
    ("Tensor.transpose-axes", lambda: T(2, 3).transpose(1.5), "transpose", "axes"),
    ("Tensor.repeat-axis", lambda: T(2, 3).repeat(2, "x"), "repeat", "axis"),
    ("Tensor.repeat-repeats", lambda: T(2, 3).repeat([1, "x"], 0), "repeat", "repeats"),
    ("Tensor.bernoulli-p", lambda: T(3).bernoulli(None), "bernoulli", "p"),
    ("Tensor.uniform-high", lambda: T(3).uniform(0.0, [1.0]), "uniform", "high"),
    # autograd functions
    ("autograd.clip-min", lambda: autograd.clip(T(3), "float32", 1), "clip", "min"),
    ("autograd.where-condition", lambda: autograd.where(T(3), T(3), "x"), "where", "condition"),
    ("autograd.reduce_sum-axes", lambda: autograd.reduce_sum(T(2, 3), 1.5), "reduce_sum", "axes"),
    ("autograd.reduce_mean-keepdims", lambda: autograd.reduce_mean(T(2, 3), [0], "x"),
     "reduce_mean", "keepdims"),
    ("autograd.cumsum-reverse", lambda: autograd.cumsum(T(2, 3), 0, reverse=[1]), "cumsum",
     "reverse"),
    ("autograd.flatten-axis", lambda: autograd.flatten(T(2, 3), "1"), "flatten", "axis"),
    ("autograd.reshape-shape", lambda: autograd.reshape(T(2, 3), "ab"), "reshape", "shape"),
    ("autograd.transpose-shape", lambda: autograd.transpose(T(2, 3), [1.0, 0.0]), "transpose",
     "shape"),
    ("autograd.cumsum-axis", lambda: autograd.cumsum(T(2, 3), (0,)), "cumsum", "axis"),
    ("autograd.gather_elements-axis",
     lambda: autograd.gather_elements(T(2, 3), np.zeros((2, 3), np.int32), "x"),
     "gather_elements", "axis"),
    ("autograd.gather_nd-batch_dims",
     lambda: autograd.gather_nd(T(2, 3), np.zeros((2, 1), np.int32), float("nan")),
     "gather_nd", "batch_dims"),
    ("autograd.onehot-depth", lambda: autograd.onehot(-1, T(3), "float32", [0.0, 1.0]),
     "onehot", "depth"),
    ("autograd.slice-starts", lambda: autograd.slice(T(4), 0, [2]), "slice", "starts"),
    ("autograd.pad-pads", lambda: autograd.pad(T(2, 3), "constant", 1), "pad", "pads"),
    ("autograd.pad-constant", lambda: autograd.pad(T(2, 3), "constant", [0, 0, 0, 0], "x"),
     "pad", "constant"),
    ("autograd.depth_to_space-blocksize",
     lambda: autograd.depth_to_space(T(1, 4, 2, 2), None), "depth_to_space", "blocksize"),
    ("autograd.upsample-scales", lambda: autograd.upsample(T(1, 1, 2, 2), "nearest", 2),
     "upsample", "scales"),
    ("autograd.layer_norm-shape", lambda: autograd.layer_norm(T(2, 3), "a"), "layer_norm",
     "normalized_shape"),
    ("autograd.dropout-seed", lambda: autograd.dropout(T(3), seed="a"), "dropout", "seed"),
    ("autograd.dropout-ratio", lambda: autograd.dropout(T(3), ratio=None), "dropout", "ratio"),
    ("autograd.elu-alpha", lambda: autograd.elu(T(3), [1.0]), "elu", "alpha"),
    ("autograd.gemm-beta", lambda: autograd.gemm(T(2, 2), T(2, 2), T(2, 2), 1.0, None), "gemm",
     "beta"),
    ("autograd.ranking_loss-M", lambda: autograd.ranking_loss(T(3), T(3), object()),
     "ranking_loss", "M"),
    ("autograd.conv2d-odd_padding",
     lambda: autograd.conv2d(singa_wrap.ConvHandle([1, 1, 3, 3], 1, 1, 0, 1, 1, False),
                             T(1, 1, 3, 3), T(1, 1, 1, 1), odd_padding="a"),
     "conv2d", "odd_padding"),
    ("autograd.conv2d-handle",
     lambda: autograd.conv2d(singa_wrap.BatchNormHandle([1, 1, 3, 3], 0.9), T(1, 1, 3, 3),
                             T(1, 1, 1, 1)), "conv2d", "handle"),
    ("autograd.pooling_2d-handle",
     lambda: autograd.pooling_2d(singa_wrap.BatchNormHandle([1, 1, 3, 3], 0.9), T(1, 1, 3, 3)),
     "pooling_2d", "handle"),
    ("autograd.batchnorm_2d-running_var",
     lambda: autograd.batchnorm_2d(singa_wrap.BatchNormHandle([1, 2, 3, 3], 0.9),
                                   T(1, 2, 3, 3), T(2), T(2), T(2), 1), "batchnorm_2d",
     "running_var"),
    ("autograd.constant_of_shape-value",
     lambda: autograd.constant_of_shape(T(2), None), "constant_of_shape", "value"),
    ("autograd.scaled_dot_product_attention-scale",
     lambda: autograd.scaled_dot_product_attention(T(1, 2, 2), T(1, 2, 2), T(1, 2, 2),
                                                   scale=[1.0]),
     "scaled_dot_product_attention", "scale"),
    ("autograd.split-num_output", lambda: autograd.split(T(4), 0, None, "2"), "split",
     "num_output"),
    ("autograd.axis_helper-shape", lambda: autograd.axis_helper(None, (1,)), "axis_helper",
     "y_shape"),
    # layers: constructors, and a call with the wrong number of inputs
    ("layer.Dropout-ratio", lambda: layer.Dropout([0.5]), "Dropout", "ratio"),
    ("layer.BatchNorm2d-momentum", lambda: layer.BatchNorm2d(3, "x"), "BatchNorm2d",
     "momentum"),
    ("layer.BatchNorm2d-channels", lambda: layer.BatchNorm2d("3"), "BatchNorm2d", "channels"),
    ("layer.Linear-out_features", lambda: layer.Linear("4"), "Linear", "out_features"),
    ("layer.SeparableConv2d-in_channels", lambda: layer.SeparableConv2d([3], 4, 3),
     "SeparableConv2d", "in_channels"),
    ("layer.LayerNorm-eps", lambda: layer.LayerNorm(3, eps=None), "LayerNorm", "eps"),
    ("layer.MultiHeadAttention-embed_dim", lambda: layer.MultiHeadAttention("8", 2),
     "MultiHeadAttention", "embed_dim"),
    ("layer.LearnedPositionalEmbedding-max_len",
     lambda: layer.LearnedPositionalEmbedding("float32"), "LearnedPositionalEmbedding",
     "max_len"),
    ("layer.CudnnRNN-rnn_mode", lambda: layer.CudnnRNN(4, rnn_mode=["lstm"]), "CudnnRNN",
     "rnn_mode"),
    ("layer.Transformer-custom_encoder", lambda: layer.Transformer(8, 2, custom_encoder=1),
     "Transformer", "custom_encoder"),
    ("layer.CudnnRNN-hidden_size", lambda: layer.CudnnRNN([4]), "CudnnRNN", "hidden_size"),
    ("layer.RNN-dropout", lambda: layer.RNN(3, 4, dropout=(0.1,)), "RNN", "dropout"),
    ("layer.TransformerEncoder-num_layers",
     lambda: layer.TransformerEncoder(layer.TransformerEncoderLayer(8, 2), None),
     "TransformerEncoder", "num_layers"),
    ("layer.Add-forward", lambda: layer.Add()(T(3)), "Add", "'b'"),
    ("layer.ReLU-forward", lambda: layer.ReLU()(T(3), T(3)), "ReLU", "too many"),
    # initializer, optimizer schedules, utils
    ("initializer.compute_fans-shape", lambda: initializer.compute_fans(3), "compute_fans",
     "shape"),
    ("initializer.uniform-fan_in", lambda: initializer.uniform(T(2, 2), "x"), "uniform",
     "fan_in"),
    ("initializer.constant-value", lambda: initializer.constant(T(2, 2), [1.0]), "constant",
     "value"),
    ("initializer.variance_scaling-scale",
     lambda: initializer.variance_scaling(T(2, 2), object()), "variance_scaling", "scale"),
    ("opt.StepDecay-gamma", lambda: opt.StepDecay(0.1, 2, None), "StepDecay", "gamma"),
    ("opt.CosineDecay-min_value", lambda: opt.CosineDecay(0.1, 2, "int32"), "CosineDecay",
     "min_value"),
    ("opt.MultiStepDecay-milestones", lambda: opt.MultiStepDecay(0.1, 3), "MultiStepDecay",
     "milestones"),
    ("utils.update_progress-info", lambda: utils.update_progress(0.5, 3), "update_progress",
     "info"),
]


@pytest.mark.parametrize("call, op, param", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_wrong_type_names_the_op_and_the_parameter(call, op, param):
    with pytest.raises(TypeError) as e:
        call()
    msg = str(e.value)
    assert re.search(r"\b%s\b" % re.escape(op), msg), msg
    assert param in msg, msg


SONNX_CASES = [
    # ONNX models: errors name the op type (SonnxError, a ValueError)
    ("Resize-inf-scale", lambda: _onnx_node("Resize", [np.ones((1, 1, 2, 2), np.float32), None,
                                                       np.array([1, 1, np.inf, 1], np.float32)]),
     "Resize", "scales"),
    ("Resize-no-scales", lambda: _onnx_node("Resize", [np.ones((1, 1, 2, 2), np.float32)]),
     "Resize", "scales"),
    ("Resize-odd-roi", lambda: _onnx_node("Resize", [
        np.ones((1, 1, 2, 2), np.float32), np.zeros(1, np.float32),
        np.array([1, 1, 2, 2], np.float32)], mode="linear", coordinate_transformation_mode=
        "tf_crop_and_resize"), "Resize", "roi"),
    ("CumSum-inf-axis", lambda: _onnx_node("CumSum", [np.ones(2, np.float32),
                                                      np.array(np.inf, np.float32)]),
     "CumSum", "axis"),
    ("Split-axis", lambda: _onnx_node("Split", [np.ones(2, np.float32)], axis=-5), "Split",
     "axis"),
]


@pytest.mark.parametrize("call, op, what", [c[1:] for c in SONNX_CASES],
                         ids=[c[0] for c in SONNX_CASES])
def test_sonnx_bad_attributes_name_the_op(call, op, what):
    from singa.sonnx.errors import SonnxError
    with pytest.raises(SonnxError) as e:
        call()
    assert op in str(e.value) and what in str(e.value), str(e.value)


def test_resize_to_an_empty_axis_matches_onnx():
    """Scales that round an axis down to no elements: the reference runs on (n, 0) maps that
    could not be reshaped (ValueError from numpy); now the result is empty, as onnx's."""
    onnx = pytest.importorskip("onnx")
    from onnx.reference import ReferenceEvaluator
    x = np.ones((1, 1, 4, 4), np.float32)
    scales = np.array([1, 1, 0.1, 1], np.float32)
    node = onnx.helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")
    want = ReferenceEvaluator(node).run(None, {"x": x, "s": scales})[0]
    got = _onnx_node("Resize", [x, None, scales], mode="linear")[0]
    assert np.asarray(got).shape == want.shape


def test_a_float_is_not_an_int_but_a_numpy_integer_is():
    x = T(2, 3)
    for i in (np.int64(1), np.int32(1), np.array(1)):  # numpy's integers, 0-d arrays too
        np.testing.assert_array_equal(tensor.to_numpy(tensor.sum(x, axis=i)),
                                      tensor.to_numpy(x).sum(axis=1))
        np.testing.assert_array_equal(tensor.to_numpy(autograd.reduce_sum(x, axes=[i], keepdims=0)),
                                      tensor.to_numpy(x).sum(axis=1))
        assert x.reshape([np.int64(3), i * 2]).shape == (3, 2)
        assert autograd.onehot(-1, T(2, dtype=np.int32), i + 2, [0.0, 1.0]).shape == (2, 3)
        assert tensor.softmax(x, axis=i).shape == (2, 3)
    assert x.reshape(np.arange(1, 3) * [3, 1]).shape == (3, 2)  # a 1-d integer array
    assert tensor.clip(x, np.float32(0), np.int64(2)).shape == (2, 3)  # any real number
    assert tensor.clip(x, tensor.from_numpy(np.array([1.0], np.float32)), 2).shape == (2, 3)
    for bad in (2.0, 1.5):  # as numpy: np.ones((2, 3)).sum(axis=1.0) is a TypeError
        with pytest.raises(TypeError, match=r"sum\(\): argument 'axis' must be int"):
            tensor.sum(x, axis=bad)
    with pytest.raises(TypeError, match="must be int"):  # numpy refuses a bool axis too
        tensor.sum(x, axis=True)


def test_a_bad_value_of_the_right_type_stays_a_value_error():
    with pytest.raises(IndexError):  # singa_wrap.AxisError
        tensor.concatenate([T(2), T(2)], 3)
    with pytest.raises(ValueError):
        layer.Dropout(1.5)
    with pytest.raises(ValueError):
        autograd.dropout(T(3), 1.5)  # a ratio in the seed position, as before
    with pytest.raises(ValueError, match="positive int"):
        layer.Linear(2.0)
    with pytest.raises(ValueError, match="negative"):
        initializer.compute_fans([-2])  # was math.sqrt's 'math domain error'
    # an axis past the binding's C int: the conversion's OverflowError named nothing
    with pytest.raises(IndexError, match=r"softmax\(\): axis 9223372036854775808"):
        tensor.softmax(T(2, 3), axis=2 ** 63)
