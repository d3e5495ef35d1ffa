"""Malformed ONNX nodes raise SonnxError (a ValueError) naming the op, not whatever numpy, onnx's
reference implementation or a division by zero raised inside the importer. Each case was found
by tools/fuzz_api.py (its sonnx.* targets run one node through SingaBackend.run_node)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install onnx)")
from onnx import helper  # noqa: E402

from singa.sonnx import SingaBackend  # noqa: E402
from singa.sonnx.errors import SonnxError  # noqa: E402

F32 = np.float32
X4 = np.ones((1, 2, 5, 5), F32)


def run(op, inputs, outputs=1, **attrs):
    node = helper.make_node(op, ["in%d" % i for i in range(len(inputs))],
                            ["out%d" % i for i in range(outputs)], **attrs)
    return SingaBackend.run_node(node, inputs)


CASES = [
    ("cast-unknown-type", lambda: run("Cast", [np.ones(3, F32)], to=-5), ["Cast", "-5"]),
    ("cast-undefined", lambda: run("Cast", [np.ones(3, F32)], to=0), ["Cast", "to=0"]),
    ("softmax-scalar", lambda: run("Softmax", [np.array(1.0, F32)]), ["Softmax", "()"]),
    ("softmax-axis", lambda: run("Softmax", [np.ones((2, 3), F32)], axis=5),
     ["Softmax", "axis 5", "(2, 3)"]),
    ("logsoftmax-axis", lambda: run("LogSoftmax", [np.ones((2, 3), F32)], axis=-3),
     ["LogSoftmax", "axis -3"]),
    ("resize-antialias", lambda: run("Resize", [X4, np.array([], F32),
                                                np.array([1, 1, .6, .6], F32)],
                                     mode="nearest", antialias=1),
     ["Resize", "reference"]),
    ("resize-empty-axis", lambda: run("Resize", [np.ones((0, 3), F32), np.array([], F32),
                                                 np.array([], F32), np.array([2, 3], np.int64)]),
     ["Resize", "empty axis", "(0, 3)"]),
    ("resize-axes", lambda: run("Resize", [X4, np.array([], F32), np.array([], F32),
                                           np.array([7, 7], np.int64)], axes=[2, 9],
                                mode="linear"), ["Resize", "axes", "[2, 9]"]),
    ("resize-policy", lambda: run("Resize", [X4, np.array([], F32), np.array([], F32),
                                             np.array([7, 7], np.int64)], axes=[2, 3],
                                  mode="linear", keep_aspect_ratio_policy="VALID"),
     ["Resize", "keep_aspect_ratio_policy", "VALID"]),
    ("pool-zero-stride", lambda: run("AveragePool", [X4], kernel_shape=[2, 2], strides=[0, 1],
                                     ceil_mode=1), ["AveragePool", "strides", "[0, 1]"]),
    ("pool-zero-kernel", lambda: run("MaxPool", [X4], kernel_shape=[0, 2]),
     ["MaxPool", "kernel_shape", "[0, 2]"]),
    ("conv-scalar-weight", lambda: run("Conv", [X4, np.array(1.0, F32)]),
     ["Conv", "4-d", "()"]),
    ("clip-empty-bound", lambda: run("Clip", [np.ones(3, F32), np.array([], F32)]),
     ["Clip", "min", "0"]),
    ("constant-of-shape-value", lambda: run("ConstantOfShape", [np.array([2, 2], np.int64)],
                                            value=helper.make_tensor("v", 1, [0], [])),
     ["ConstantOfShape", "value", "0"]),
    ("dropout-ratio", lambda: run("Dropout", [np.ones(3, F32), np.array([], F32)]),
     ["Dropout", "ratio"]),
    ("onehot-values", lambda: run("OneHot", [np.array([0, 1], np.int64), np.array(3, np.int64),
                                             np.array([0, 1, 2], F32)]),
     ["OneHot", "3 values"]),
    ("mod-shapes", lambda: run("Mod", [np.ones((3, 1), np.int64), np.ones((2, 4), np.int64)]),
     ["Mod", "(3, 1)", "(2, 4)"]),
    ("expand-nan-shape", lambda: run("Expand", [np.ones(3, F32), np.array([np.nan, 3], F32)]),
     ["non-integer", "nan"]),
    ("pad-axes", lambda: run("Pad", [np.ones((3, 1), F32), np.array([1, 1], np.int64), None,
                                     np.array([5], np.int64)]), ["Pad", "axes", "(3, 1)"]),
    ("gru-rank", lambda: run("GRU", [np.ones((2, 3), F32), np.ones((1, 6, 3), F32),
                                     np.ones((1, 6, 2), F32)], hidden_size=2),
     ["GRU", "X", "3-d", "(2, 3)"]),
    ("lstm-direction", lambda: run("LSTM", [np.ones((2, 1, 3), F32), np.ones((1, 8, 3), F32),
                                            np.ones((1, 8, 2), F32)], hidden_size=2,
                                   direction="sideways"), ["LSTM", "direction", "sideways"]),
    ("conv-negative-pads", lambda: run("Conv", [X4, np.ones((3, 2, 3, 3), F32)],
                                       pads=[0, -1, 1, 2]), ["Conv", "pads", "-1"]),
]


@pytest.mark.parametrize("call,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_node_raises_sonnx_error(call, words):
    with pytest.raises(SonnxError) as info:
        call()
    for w in words:
        assert w in str(info.value), "%r not in %r" % (w, str(info.value))


def test_expand_to_more_axes_than_numpy_handles_is_a_shape_error():
    from singa import singa_wrap
    with pytest.raises(singa_wrap.ShapeError, match="expand"):
        run("Expand", [np.ones((1, 3), F32), np.ones(70, np.int64)])


@pytest.mark.parametrize("opset,axis", [(13, 1), (13, -1), (11, 1), (11, 2)])
def test_softmax_axes_in_range_still_work(opset, axis):
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(F32)
    node = helper.make_node("Softmax", ["x"], ["y"], axis=axis)
    y, = SingaBackend.run_node(node, [x], opset_version=opset)
    if opset >= 13 or axis == 1:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(axis=-1, keepdims=True), rtol=1e-5)
    else:  # opset 11, axis == rank: each element is its own group
        np.testing.assert_allclose(y, np.ones_like(x), rtol=1e-6)
