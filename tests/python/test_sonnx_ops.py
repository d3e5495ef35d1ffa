"""Every operator of singa.autograd maps both ways (issue 11, point 2): each Operator subclass
has an example below (or an entry of EXCLUDED saying why not); the example is traced, exported
with sonnx.to_onnx, run in onnxruntime and compared with singa's eager output, then imported
back with sonnx and compared again.

    pytest -q tests/python/test_sonnx_ops.py
"""
import inspect

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from singa import autograd, device, tensor, sonnx  # noqa: E402
from singa import singa_wrap as sw  # noqa: E402
from singa.autograd import base as ag_base  # noqa: E402

DEV = device.get_default_device()
ag = autograd

# Operator classes with no ONNX mapping, and why
EXCLUDED = {
    "Operator": "the base class", "Operation": "an alias of Operator",
    "Dummy": "the creator of leaf tensors (inputs, parameters): they become graph inputs and "
             "initializers, not nodes",
    "SoftMaxCrossEntropy": "a loss: the end of a training graph, not part of the exported "
                           "inference model (SINGA 3.3 does not export losses either)",
    "CrossEntropy": "a loss (see SoftMaxCrossEntropy)",
    "BinaryCrossEntropy": "a loss (see SoftMaxCrossEntropy)",
    "MeanSquareError": "a loss (see SoftMaxCrossEntropy)",
    "RankingLoss": "a loss (see SoftMaxCrossEntropy)",
    "QALSTMLoss": "a loss (see SoftMaxCrossEntropy)",
}


class Consts(object):
    """Constants and parameters of one example, from a fixed seed, kept alive until the
    export (autograd holds leaf inputs weakly)."""

    def __init__(self):
        self.rng = np.random.default_rng(7)
        self.keep = []
        self.replaying = None

    def replay(self):
        """Hand out the same tensors again, in order (batch norm's running statistics, which
        the traced forward updated, for the eval-mode reference)."""
        self.replaying = iter(list(self.keep))
        self.rng = np.random.default_rng(7)  # the same draws for the constants not kept
        return self

    def c(self, array, param=False):
        if self.replaying is not None:
            return next(self.replaying)
        t = tensor.from_numpy(np.asarray(array, dtype=np.asarray(array).dtype
                                         if np.asarray(array).dtype == np.int32
                                         else np.float32))
        t.requires_grad = t.stores_grad = param
        self.keep.append(t)
        return t

    def w(self, *shape):
        return self.c(self.rng.standard_normal(shape), True)


def _conv(x, k):
    # the handle sees the input after the odd padding (one more row and column)
    h = sw.ConvHandle((2, 4, 7, 7), (3, 3), (2, 1), (1, 0), 4, 5, True, 1, (1, 2))
    return ag.conv2d(h, x, k.w(5, 4, 3, 3), k.w(5), (0, 1, 1, 0))


def _pool(x, k):
    return ag.pooling_2d(sw.PoolingHandle(x.data, (3, 3), (2, 2), (1, 1), False, True), x)


def _bn(x, k):
    h = ag.BatchNormHandle(x.data, 0.9, 1e-3)
    mean = k.c(k.rng.standard_normal(4) * 0.1)
    var = k.c(k.rng.random(4) + 0.5)
    return ag.batchnorm_2d(h, x, k.w(4), k.w(4), mean, var)


def _rnn(mode, bidirectional, return_sequences):
    """autograd._RNN (2 layers): its inner graph of cell operators is what is exported."""
    def run(x, k):
        h = ag.RNNHandle(x, 4, mode=mode, num_layers=2, bidirectional=bidirectional)
        states = (2 * (1 + bidirectional), x.shape[1], 4)
        hx, cx = k.c(0.1 * k.rng.standard_normal(states)), k.c(0.1 * k.rng.standard_normal(states))
        w = k.c(0.3 * k.rng.standard_normal(h.weights_size), True)
        return ag._RNN(h, return_sequences=return_sequences)(x, hx, cx, w)[0]
    return run


def _sdpa(x, k):
    """A keep mask (with a query that keeps no key: zeros), a float mask, causal with a given
    scale; keys and values broadcast over the heads."""
    key, val = k.w(2, 1, 5, 4), k.w(2, 1, 5, 3)
    keep = np.ones((3, 5), bool)
    keep[1], keep[2, :2] = False, False
    a = ag.scaled_dot_product_attention(x, key, val, attn_mask=keep)
    b = ag.scaled_dot_product_attention(x, key, val,
                                        attn_mask=k.c(k.rng.standard_normal((2, 1, 3, 5))))
    c = ag.scaled_dot_product_attention(x, key, val, is_causal=True, scale=0.7)
    return ag.add(ag.add(a, b), c)


# class name -> (example(x, consts) -> output Tensor or tuple, input kind)
EXAMPLES = {
    # elementwise, from the op table
    "Abs": (lambda x, k: ag.abs(x), "normal"), "Negative": (lambda x, k: ag.negative(x), "normal"),
    "Sign": (lambda x, k: ag.sign(x), "normal"), "Square": (lambda x, k: ag.square(x), "normal"),
    "ReLU": (lambda x, k: ag.relu(x), "normal"), "Ceil": (lambda x, k: ag.ceil(x), "normal"),
    "Floor": (lambda x, k: ag.floor(x), "normal"), "Round": (lambda x, k: ag.round(x), "halves"),
    "Rounde": (lambda x, k: ag.rounde(x), "halves"), "Exp": (lambda x, k: ag.exp(x), "normal"),
    "Log": (lambda x, k: ag.log(x), "pos"), "Sqrt": (lambda x, k: ag.sqrt(x), "pos"),
    "Reciprocal": (lambda x, k: ag.reciprocal(x), "pos"),
    "Sigmoid": (lambda x, k: ag.sigmoid(x), "normal"),
    "SoftPlus": (lambda x, k: ag.softplus(x), "normal"),
    "SoftSign": (lambda x, k: ag.softsign(x), "normal"),
    "Tanh": (lambda x, k: ag.tanh(x), "normal"),
    "Sin": (lambda x, k: ag.sin(x), "normal"), "Cos": (lambda x, k: ag.cos(x), "normal"),
    "Tan": (lambda x, k: ag.tan(x), "unit"), "Asin": (lambda x, k: ag.asin(x), "unit"),
    "Acos": (lambda x, k: ag.acos(x), "unit"), "Atan": (lambda x, k: ag.atan(x), "normal"),
    "Sinh": (lambda x, k: ag.sinh(x), "normal"), "Cosh": (lambda x, k: ag.cosh(x), "normal"),
    "Asinh": (lambda x, k: ag.asinh(x), "normal"), "Acosh": (lambda x, k: ag.acosh(x), "big"),
    "Atanh": (lambda x, k: ag.atanh(x), "unit"), "Erf": (lambda x, k: ag.erf(x), "normal"),
    "Identity": (lambda x, k: ag.identity(x), "normal"),
    # binary and variadic
    "Add": (lambda x, k: ag.add(x, k.w(4)), "normal"),
    "Sub": (lambda x, k: ag.sub(k.w(3, 1), x), "normal"),
    "Mul": (lambda x, k: ag.mul(x, k.w(3, 4)), "normal"),
    "Div": (lambda x, k: ag.div(x, k.c(k.rng.random(4) + 0.5)), "normal"),
    "Pow": (lambda x, k: ag.pow(x, k.w(3, 4)), "pos"),
    "Sum": (lambda x, k: ag.sum(x, k.w(4), k.w(3, 4)), "normal"),
    "Mean": (lambda x, k: ag.mean(x, k.w(3, 4)), "normal"),
    "Max": (lambda x, k: ag.max(x, k.w(3, 4)), "normal"),
    "Min": (lambda x, k: ag.min(x, k.w(1, 4)), "normal"),
    # comparisons and logic (float 0/1 in singa)
    "Less": (lambda x, k: ag.less(x, k.w(3, 4)), "normal"),
    "Greater": (lambda x, k: ag.greater(x, k.w(4)), "normal"),
    "Equal": (lambda x, k: ag.equal(x, k.c(np.zeros((3, 4)))), "ints"),
    "LessEqual": (lambda x, k: ag.less_equal(x, k.c(np.zeros(4))), "ints"),
    "GreaterEqual": (lambda x, k: ag.greater_equal(x, k.c(np.ones(4))), "ints"),
    "And": (lambda x, k: ag._and(x, k.c(k.rng.integers(0, 2, (3, 4)))), "ints"),
    "Or": (lambda x, k: ag._or(x, k.c(k.rng.integers(0, 2, (3, 4)))), "ints"),
    "Xor": (lambda x, k: ag._xor(x, k.c(k.rng.integers(0, 2, (3, 4)))), "ints"),
    "Not": (lambda x, k: ag._not(x), "ints"),
    "Clip": (lambda x, k: ag.add(ag.clip(x, -0.5, None), ag.clip(x, None, 0.3)), "normal"),
    "Where": (lambda x, k: ag.where(x, k.w(3, 4), k.rng.integers(0, 2, (3, 4))), "normal"),
    "Cast": (lambda x, k: ag.cast(x, tensor.int32), "normal"),
    # activations (the op schema's rows are added below)
    "PRelu": (lambda x, k: ag.prelu(x, k.w(4)), "normal"),
    # with a mask too (nonzero = takes part): broadcast, and a row with nothing taking part
    "SoftMax": (lambda x, k: ag.add(ag.softmax(x, 0), ag.softmax(
        x, -1, mask=k.c(np.array([[1, 0, 1, 1], [0, 0, 1, 0], [0, 0, 0, 0]])))), "normal"),
    "LogSoftMax": (lambda x, k: ag.log_softmax(x, 1), "normal"),
    # linear algebra
    "Matmul": (lambda x, k: ag.matmul(x, k.w(4, 5)), "normal"),
    "Gemm": (lambda x, k: ag.gemm(x, k.w(5, 4), k.w(3, 5), 0.5, 2.0, 0, 1), "normal"),
    "AddBias": (lambda x, k: ag.add_bias(x, k.w(3), axis=1), "normal"),
    "CosSim": (lambda x, k: ag.cossim(x, k.w(3, 4)), "normal"),
    # reductions
    "ReduceSum": (lambda x, k: ag.reduce_sum(x, [1], 0), "normal"),
    "ReduceMean": (lambda x, k: ag.reduce_mean(x, [0], 1), "normal"),
    "GlobalAveragePool": (lambda x, k: ag.add(ag.globalaveragepool(x),  # (2, 4, 1, 1)
                                              ag.globalaveragepool(x, "channels_last")),
                          "nchw"),
    # shapes
    "Reshape": (lambda x, k: ag.reshape(x, [0, 2, -1]), "normal"),
    "Flatten": (lambda x, k: ag.flatten(x, 2), "nchw"),
    "Transpose": (lambda x, k: ag.transpose(x, (1, 0)), "normal"),
    "Squeeze": (lambda x, k: ag.add(ag.squeeze(x, [1]), ag.squeeze(x)), "col"),
    "Unsqueeze": (lambda x, k: ag.unsqueeze(x, [0, -1]), "normal"),
    "Concat": (lambda x, k: ag.cat([x, k.w(3, 2)], 1), "normal"),
    "Split": (lambda x, k: ag.split(x, 1, [1, 3]), "normal"),
    # (2, 6, 4) + (6, 4): more repeats than axes, and fewer (SINGA's rule: from the first axis)
    "Tile": (lambda x, k: ag.add(ag.tile(x, [2, 2, 1]), ag.tile(x, [2])), "normal"),
    "Expand": (lambda x, k: ag.expand(x, (2, 3, 4)), "normal"),
    "UpSample": (lambda x, k: ag.upsample(x, "nearest", [1, 1, 2, 3]), "nchw"),
    "DepthToSpace": (lambda x, k: ag.add(ag.depth_to_space(x, 2), ag.depth_to_space(x, 2, "CRD")),
                     "nchw"),
    "SpaceToDepth": (lambda x, k: ag.space_to_depth(x, 2), "nchw"),
    # indexing
    "Slice": (lambda x, k: ag.slice(x, [0, 3], [2, -5], [0, 1], [1, -2]), "normal"),
    "Gather": (lambda x, k: ag.gather(x, 1, [[2, 0], [-1, 1]]), "normal"),
    "Embedding": (lambda x, k: ag.embedding(x, k.w(5, 3)), "ids"),
    "Pad": (lambda x, k: ag.add(ag.pad(x, "constant", [0, 1, 1, 2], 0.5),
                                ag.add(ag.pad(x, "reflect", [0, 1, 1, 2]),
                                       ag.pad(x, "edge", [0, 1, 1, 2]))), "normal"),
    "ScatterElements": (lambda x, k: ag.scatter_elements(
        x, np.array([[1, 0], [3, -1]]), k.rng.standard_normal((2, 2)).astype(np.float32), 1),
        "normal"),
    "OneHot": (lambda x, k: ag.onehot(-1, x, 5, [0.5, 2.0]), "ids"),
    "Shape": (lambda x, k: ag.shape(x), "normal"),
    "NonZero": (lambda x, k: ag.nonzero(x), "ints"),
    "ConstantOfShape": (lambda x, k: ag.constant_of_shape(x, 1.5), "dims"),
    # nn
    "_Conv2d": (_conv, "nchw"), "_Pooling2d": (_pool, "nchw"), "_BatchNorm2d": (_bn, "nchw"),
    "Dropout": (lambda x, k: ag.dropout(ag.relu(x), ratio=0.3), "normal"),
    # transformers (issue 19); opset 17's forms in test_onnx_transformers.py
    "ScaledDotProductAttention": (_sdpa, "heads"),
    # weight and bias, neither (two axes), the weight alone, the bias alone
    "LayerNorm": (lambda x, k: ag.add(ag.add(ag.layer_norm(x, (4,), k.w(4), k.w(4), 1e-3),
                                             ag.layer_norm(x, (3, 4))),
                                      ag.add(ag.layer_norm(x, 4, k.w(4)),
                                             ag.layer_norm(x, 4, None, k.w(4)))), "normal"),
    "GELU": (lambda x, k: ag.gelu(x), "normal"),
    "GELUTanh": (lambda x, k: ag.gelu(x, "tanh"), "normal"),
    "IsNaN": (lambda x, k: ag.isnan(x), "special"),
    "IsInf": (lambda x, k: ag.isinf(x), "special"),
    "CumSum": (lambda x, k: ag.add(ag.cumsum(x, 1), ag.cumsum(x, -2, True, True)), "normal"),
    "GatherElements": (lambda x, k: ag.gather_elements(x, [[1, -1], [0, 2], [3, 3]], 1),
                       "normal"),
    "GatherND": (lambda x, k: ag.gather_nd(x, [[0, 1], [2, -1]]), "normal"),
    "MaskedFill": (lambda x, k: ag.masked_fill(x, np.array([1, 0, 0, 1], bool), -2.5),
                   "normal"),
    # a bidirectional LSTM (directions summed), a GRU's last step, a ReLU RNN
    "_RNN": (lambda x, k: ag.add(ag.reduce_sum(ag.reshape(_rnn(2, 1, True)(x, k), [5, 2, 2, 4]),
                                               [2], 0),
                                 ag.add(_rnn(3, 0, False)(x, k), _rnn(0, 0, True)(x, k))),
             "seq"),
}

_INPUTS = {
    "normal": lambda r: r.standard_normal((3, 4)),
    "pos": lambda r: r.uniform(0.5, 2.0, (3, 4)),
    "unit": lambda r: r.uniform(-0.9, 0.9, (3, 4)),
    "big": lambda r: r.uniform(1.5, 3.0, (3, 4)),
    "halves": lambda r: r.integers(-6, 7, (3, 4)) / 2.0,
    "ints": lambda r: r.integers(-1, 2, (3, 4)),
    "col": lambda r: r.standard_normal((3, 1, 4)),
    "nchw": lambda r: r.standard_normal((2, 4, 6, 6)),
    "ids": lambda r: r.integers(0, 5, (2, 3)),
    "dims": lambda r: np.array([2, 3]),
    "seq": lambda r: r.standard_normal((5, 2, 3)),
    "heads": lambda r: r.standard_normal((2, 2, 3, 4)),
    "special": lambda r: np.where(r.random((3, 4)) < 0.5, r.standard_normal((3, 4)),
                                  np.array([np.nan, np.inf, -np.inf, 0.0])),
}

# The op schema's rows (schema/activations.py), each at its defaults and exported at the first
# opset that has its ONNX op (test_activations.py round-trips them with other attributes).
_FIRST_OPSET = {}
for _cls, _row in ag.schema_ops.SCHEMA_ROWS.items():
    EXAMPLES[_cls.__name__] = ((lambda f: lambda x, k: f(x))(getattr(ag, _row[2])), "normal")
    _FIRST_OPSET[_cls.__name__] = _row[5][1]


def _operator_classes():
    return sorted(n for n, c in vars(autograd).items()
                  if inspect.isclass(c) and issubclass(c, ag_base.Operator))


def test_every_autograd_operator_has_an_example_or_a_reason():
    names = set(_operator_classes())
    assert not set(EXCLUDED) - names, "stale exclusions"
    assert names - set(EXCLUDED) == set(EXAMPLES), \
        "without export test: %s" % sorted(names - set(EXCLUDED) - set(EXAMPLES))


def _run(name, x_np, opset=13):
    """(the ONNX model at ``opset``, singa's eval-mode outputs as numpy)."""
    fn, _ = EXAMPLES[name]
    x = tensor.from_numpy(x_np)
    autograd.training = True
    k = Consts()
    ys = fn(x, k)
    ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
    m = sonnx.to_onnx([x], ys, opset_version=opset)
    autograd.training = False  # eval: dropout off, batch norm on the running statistics
    ref = fn(x, k.replay())
    ref = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    return m, [tensor.to_numpy(y) for y in ref]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_operator_exports_to_onnxruntime_and_imports_back(name, rng, opset=13):
    opset = max(opset, _FIRST_OPSET.get(name, opset))
    x_np = _INPUTS[EXAMPLES[name][1]](rng).astype(np.float32)
    m, ours = _run(name, x_np, opset)
    assert m.opset_import[0].version == opset
    types = {n.op_type for n in m.graph.node}
    assert types <= set(sonnx.SUPPORTED_OPS) | {"Constant"}, types - set(sonnx.SUPPORTED_OPS)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    refs = sess.run(None, {sess.get_inputs()[0].name: x_np})
    back = sonnx.prepare(m, DEV).run([x_np])
    assert len(refs) == len(ours) == len(back)
    for o, r, b in zip(ours, refs, back):
        assert o.shape == r.shape == b.shape, (o.shape, r.shape, b.shape)
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b, r, rtol=1e-5, atol=1e-5)


# ---- import handlers composed of several autograd ops: forward, finite differences, graph ----
def _erf(x):
    from math import erf
    return np.vectorize(erf)(x)


def _layer_norm_ref(x, s, b, eps=1e-3):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * s + b


COMPOSED = {
    "LayerNormalization": (lambda ag_, x, s, b: sonnx.ops.run_onnx_node(
        "LayerNormalization", [x, s, b], {"axis": -1, "epsilon": 1e-3}, 17)[0],
        _layer_norm_ref, [(2, 3, 5), (5,), (5,)]),
    "Gelu": (lambda ag_, x: sonnx.ops.run_onnx_node("Gelu", [x], {}, 20)[0],
             lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2.0))), [(3, 4)]),
    "Gelu_tanh": (lambda ag_, x: sonnx.ops.run_onnx_node("Gelu", [x], {"approximate": "tanh"},
                                                         20)[0],
                  lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) *
                                                   (x + 0.044715 * x ** 3))), [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_composed_import_handlers_forward_backward_graph(name, rng):
    from gradcheck import check_op, check_graph
    op, ref, shapes = COMPOSED[name]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    check_op(op, ref, arrays)
    check_graph(op, arrays)


def _recurrent_case(op_type, **attrs):
    """(op(ag, x, W, R, B), the ONNX reference of the node, the input shapes): one
    bidirectional layer, hidden 3, on a (steps 4, batch 2, input 2) sequence."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    gates = {"RNN": 1, "LSTM": 4, "GRU": 3}[op_type]
    attrs = dict(hidden_size=3, direction="bidirectional", **attrs)
    node = helper.make_node(op_type, ["x", "W", "R", "B"], ["y"], **attrs)
    evaluator = ReferenceEvaluator(node)

    def op(ag_, *ins):
        return sonnx.ops.run_onnx_node(op_type, list(ins), dict(attrs), 14)[0]

    def ref(x, W, R, B):
        return evaluator.run(None, {"x": x, "W": W, "R": R, "B": B})[0]
    return op, ref, [(4, 2, 2), (2, gates * 3, 2), (2, gates * 3, 3), (2, 6 * gates)]


@pytest.mark.parametrize("op_type,attrs", [("RNN", {}), ("LSTM", {}),
                                           ("GRU", {"linear_before_reset": 1}),
                                           ("GRU", {"linear_before_reset": 0})],
                         ids=["rnn", "lstm", "gru-lbr1", "gru-lbr0"])
def test_recurrent_import_forward_backward(op_type, attrs, rng):
    """The imported RNN/LSTM/GRU against ONNX's reference implementation, and its gradients
    (x, W, R, B) against finite differences of that reference."""
    from gradcheck import check_op
    op, ref, shapes = _recurrent_case(op_type, **attrs)
    arrays = [(0.5 * rng.standard_normal(s)).astype(np.float32) for s in shapes]
    check_op(op, ref, arrays)
