"""Every autograd operator against numpy: forward values, and gradients by finite differences
(see gradcheck.py). One row of CASES per check; each row is its own test id.

Inputs keep away from kinks (ReLU/abs at 0, max ties, rounding boundaries, clip bounds).
"""
import math
from collections import namedtuple

import numpy as np
import pytest

from gradcheck import check_graph, check_op
from singa import autograd, tensor
from singa import singa_wrap as sw

R = np.random.RandomState(7)


def u(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, size=shape).astype(np.float32)


def away(*shape, gap=0.15, hi=1.0):
    """Values with gap <= |x| <= hi and random signs."""
    return (R.choice([-1.0, 1.0], size=shape) * R.uniform(gap, hi, size=shape)).astype(np.float32)


def off_grid(*shape):
    """Values k + 0.15..0.35 (away from integers and halves)."""
    return (R.randint(-3, 3, size=shape) + R.uniform(0.15, 0.35, size=shape)).astype(np.float32)


def ints(*values):
    return np.asarray(values, dtype=np.int32)


Case = namedtuple("Case", "id op ref inputs grad tol")


def case(id, op, ref, inputs, grad=None, **tol):
    return pytest.param(Case(id, op, ref, inputs, grad, tol), id=id)


def softmax_coerced_np(x, axis):
    """SINGA's softmax: x as a (prod(shape[:axis]), prod(shape[axis:])) matrix, rows normalised
    (its C++ SoftMax coerces to 2-d; ONNX's Softmax before opset 13)."""
    m = x.reshape(int(np.prod(x.shape[:axis])), -1)
    return softmax_np(m, 1).reshape(x.shape)


def softmax_np(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def sigmoid_np(x):
    return 1 / (1 + np.exp(-x))


def elu_np(x, alpha):
    return np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1))


erf_np = np.vectorize(math.erf)


def take_np(x, axis, idx):
    return np.take(x, np.asarray(idx), axis=axis)


def scatter_np(x, idx, upd, axis):
    out = np.array(x, copy=True)
    for pos in np.ndindex(*idx.shape):
        target = list(pos)
        target[axis] = idx[pos]
        out[tuple(target)] = upd[pos]
    return out


def d2s_np(x, b, mode):
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, b, b, c // b ** 2, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // b ** 2, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // b ** 2, h * b, w * b)


def s2d_np(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def sce_np(x, t):
    logp = np.log(softmax_np(x, 1))
    if t.ndim == 2 and t.shape == x.shape:
        return np.array([-np.sum(t * logp) / x.shape[0]])
    t = t.reshape(-1).astype(np.int64)
    return np.array([-np.mean(logp[np.arange(x.shape[0]), t])])


PROBS = softmax_np(u(4, 3, lo=-2, hi=2).astype(np.float64), 1).astype(np.float32)
ONEHOT = np.eye(3, dtype=np.float32)[[0, 2, 1, 2]]

UNARY = [
    case("relu", lambda ag, x: ag.relu(x), lambda x: np.maximum(x, 0), [away(3, 4)]),
    case("sigmoid", lambda ag, x: ag.sigmoid(x), sigmoid_np, [u(3, 4, lo=-3, hi=3)]),
    case("tanh", lambda ag, x: ag.tanh(x), np.tanh, [u(3, 4, lo=-2, hi=2)]),
    case("exp", lambda ag, x: ag.exp(x), np.exp, [u(3, 4)]),
    case("log", lambda ag, x: ag.log(x), np.log, [u(3, 4, lo=0.3, hi=2)]),
    case("sqrt", lambda ag, x: ag.sqrt(x), np.sqrt, [u(3, 4, lo=0.3, hi=2)]),
    case("abs", lambda ag, x: ag.abs(x), np.abs, [away(3, 4)]),
    case("sign", lambda ag, x: ag.sign(x), np.sign, [away(3, 4)]),
    case("negative", lambda ag, x: ag.negative(x), np.negative, [u(3, 4)]),
    case("reciprocal", lambda ag, x: ag.reciprocal(x), lambda x: 1 / x, [away(3, 4, gap=0.4)]),
    case("square", lambda ag, x: ag.square(x), np.square, [u(3, 4)]),
    case("sin", lambda ag, x: ag.sin(x), np.sin, [u(3, 4, lo=-3, hi=3)]),
    case("cos", lambda ag, x: ag.cos(x), np.cos, [u(3, 4, lo=-3, hi=3)]),
    case("tan", lambda ag, x: ag.tan(x), np.tan, [u(3, 4, lo=-1.2, hi=1.2)]),
    case("asin", lambda ag, x: ag.asin(x), np.arcsin, [u(3, 4, lo=-0.9, hi=0.9)]),
    case("acos", lambda ag, x: ag.acos(x), np.arccos, [u(3, 4, lo=-0.9, hi=0.9)]),
    case("atan", lambda ag, x: ag.atan(x), np.arctan, [u(3, 4, lo=-3, hi=3)]),
    case("sinh", lambda ag, x: ag.sinh(x), np.sinh, [u(3, 4, lo=-2, hi=2)]),
    case("cosh", lambda ag, x: ag.cosh(x), np.cosh, [u(3, 4, lo=-2, hi=2)]),
    case("asinh", lambda ag, x: ag.asinh(x), np.arcsinh, [u(3, 4, lo=-3, hi=3)]),
    case("acosh", lambda ag, x: ag.acosh(x), np.arccosh, [u(3, 4, lo=1.2, hi=3)]),
    case("atanh", lambda ag, x: ag.atanh(x), np.arctanh, [u(3, 4, lo=-0.8, hi=0.8)]),
    case("softplus", lambda ag, x: ag.softplus(x), lambda x: np.log1p(np.exp(x)),
         [u(3, 4, lo=-3, hi=3)]),
    case("softsign", lambda ag, x: ag.softsign(x), lambda x: x / (1 + np.abs(x)), [away(3, 4)]),
    case("erf", lambda ag, x: ag.erf(x), erf_np, [u(3, 4, lo=-2, hi=2)]),
    case("ceil", lambda ag, x: ag.ceil(x), np.ceil, [off_grid(3, 4)]),
    case("floor", lambda ag, x: ag.floor(x), np.floor, [off_grid(3, 4)]),
    case("round", lambda ag, x: ag.round(x), np.round, [off_grid(3, 4)]),
    case("rounde", lambda ag, x: ag.rounde(x), np.round, [off_grid(3, 4)]),
    case("identity", lambda ag, x: ag.identity(x), lambda x: x, [u(3, 4)]),
]

ACTIVATIONS = [
    case("leakyrelu", lambda ag, x: ag.leakyrelu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x),
         [away(3, 4)]),
    case("elu", lambda ag, x: ag.elu(x, 0.7), lambda x: elu_np(x, 0.7), [away(3, 4, hi=2)]),
    case("selu", lambda ag, x: ag.selu(x), lambda x: 1.0507 * elu_np(x, 1.67326),
         [away(3, 4, hi=2)]),
    case("hardsigmoid", lambda ag, x: ag.hardsigmoid(x),
         lambda x: np.clip(0.2 * x + 0.5, 0, 1),
         [np.concatenate([u(2, 4, lo=-2.3, hi=2.3), u(1, 4, lo=2.7, hi=4)])]),
    case("prelu", lambda ag, x, s: ag.prelu(x, s), lambda x, s: np.where(x > 0, x, s * x),
         [away(2, 3, 4), u(3, 1, lo=0.1, hi=0.5)]),
    case("softmax", lambda ag, x: ag.softmax(x), lambda x: softmax_np(x, 1),
         [u(3, 4, lo=-2, hi=2)]),
    case("softmax_axis0", lambda ag, x: ag.softmax(x, 0), lambda x: softmax_coerced_np(x, 0),
         [u(3, 4, lo=-2, hi=2)]),
    case("log_softmax", lambda ag, x: ag.log_softmax(x, 1), lambda x: np.log(softmax_np(x, 1)),
         [u(3, 4, lo=-2, hi=2)]),
    case("clip", lambda ag, x: ag.clip(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5),
         [np.concatenate([u(2, 4, lo=-0.45, hi=0.45), away(2, 4, gap=0.55)])]),
    case("clip_min_only", lambda ag, x: ag.clip(x, 0.2), lambda x: np.maximum(x, 0.2),
         [np.concatenate([u(2, 4, lo=0.25, hi=1), u(2, 4, lo=-1, hi=0.15)])]),
]

ARITHMETIC = [
    case("add", lambda ag, a, b: ag.add(a, b), np.add, [u(3, 4), u(3, 4)]),
    case("add_broadcast", lambda ag, a, b: ag.add(a, b), np.add, [u(2, 1, 4), u(3, 1)]),
    case("add_scalar", lambda ag, a: ag.add(a, 2.0), lambda a: a + 2.0, [u(3, 4)]),
    case("sub", lambda ag, a, b: ag.sub(a, b), np.subtract, [u(3, 4), u(4)]),
    case("sub_scalar_left", lambda ag, b: ag.sub(1.5, b), lambda b: 1.5 - b, [u(3, 4)]),
    case("mul", lambda ag, a, b: ag.mul(a, b), np.multiply, [u(3, 4), u(3, 4)]),
    case("mul_broadcast", lambda ag, a, b: ag.mul(a, b), np.multiply, [u(3, 1), u(1, 4)]),
    case("mul_same_tensor", lambda ag, a: ag.mul(a, a), lambda a: a * a, [u(3, 4)]),
    case("div", lambda ag, a, b: ag.div(a, b), np.divide, [u(3, 4), away(3, 4, gap=0.5)]),
    case("div_broadcast", lambda ag, a, b: ag.div(a, b), np.divide, [u(2, 3), away(3, gap=0.5)]),
    case("pow", lambda ag, a, b: ag.pow(a, b), np.power, [u(3, 4, lo=0.5, hi=2), u(3, 4)]),
    case("pow_broadcast", lambda ag, a, b: ag.pow(a, b), np.power,
         [u(3, 4, lo=0.5, hi=2), u(4, lo=0.5, hi=2)]),
    case("sum", lambda ag, a, b, c: ag.sum(a, b, c), lambda a, b, c: a + b + c,
         [u(3, 4), u(4), u(3, 1)]),
    case("mean", lambda ag, a, b: ag.mean(a, b), lambda a, b: (a + b) / 2, [u(3, 4), u(3, 4)]),
    case("max", lambda ag, a, b, c: ag.max(a, b, c),
         lambda a, b, c: np.maximum(np.maximum(a, b), c),
         [u(3, 4), u(3, 4), u(4)]),
    case("min", lambda ag, a, b: ag.min(a, b), np.minimum, [u(3, 4), u(3, 4)]),
    case("add_all", lambda ag, a, b, c: ag.add_all(a, b, c), lambda a, b, c: a + b + c,
         [u(2, 3), u(2, 3), u(2, 3)]),
    case("where", lambda ag, a, b: ag.where(a, b, np.array([[1, 0, 1, 0]] * 3)),
         lambda a, b: np.where(np.array([[1, 0, 1, 0]] * 3) != 0, a, b), [u(3, 4), u(4)]),
    case("cast_float", lambda ag, a: ag.cast(a, "float32"), lambda a: a, [u(3, 4)]),
    case("cast_int", lambda ag, a: ag.cast(a, "int32"), lambda a: a.astype(np.int32),
         [off_grid(3, 4) + 4], grad=[]),
]

PREDICATES = [
    case(name, (lambda f: lambda ag, a, b: getattr(ag, f)(a, b))(name),
         (lambda f: lambda a, b: f(a, b).astype(np.float32))(fn),
         [u(3, 4).round(1), u(3, 4).round(1)], grad=[])
    for name, fn in [("less", np.less), ("greater", np.greater), ("equal", np.equal),
                     ("less_equal", np.less_equal), ("greater_equal", np.greater_equal),
                     ("_and", np.logical_and), ("_or", np.logical_or), ("_xor", np.logical_xor)]
] + [case("_not", lambda ag, a: ag._not(a), lambda a: (a == 0).astype(np.float32),
          [np.array([[0, 1.5], [0, -2]], np.float32)], grad=[])]

LINALG = [
    case("matmul", lambda ag, a, b: ag.matmul(a, b), np.matmul, [u(3, 4), u(4, 5)]),
    case("matmul_batched", lambda ag, a, b: ag.matmul(a, b), np.matmul, [u(2, 3, 4), u(4, 5)]),
    case("matmul_batch_broadcast", lambda ag, a, b: ag.matmul(a, b), np.matmul,
         [u(2, 1, 3, 4), u(3, 4, 2)]),
    case("matmul_vec_mat", lambda ag, a, b: ag.matmul(a, b), np.matmul, [u(4), u(4, 5)]),
    case("matmul_mat_vec", lambda ag, a, b: ag.matmul(a, b), np.matmul, [u(3, 4), u(4)]),
    case("gemm", lambda ag, a, b, c: ag.gemm(a, b, c, 0.5, 2.0),
         lambda a, b, c: 0.5 * a @ b + 2 * c,
         [u(3, 4), u(4, 5), u(5)]),
    case("gemm_trans", lambda ag, a, b, c: ag.gemm(a, b, c, 1.0, 1.0, 1, 1),
         lambda a, b, c: a.T @ b.T + c, [u(4, 3), u(5, 4), u(3, 1)]),
    case("gemm_no_c", lambda ag, a, b: ag.gemm(a, b, transB=1), lambda a, b: a @ b.T,
         [u(3, 4), u(5, 4)]),
    case("add_bias_rows", lambda ag, x, b: ag.add_bias(x, b), lambda x, b: x + b.reshape(1, -1),
         [u(3, 4), u(1, 4)]),
    case("add_bias_cols", lambda ag, x, b: ag.add_bias(x, b, 1), lambda x, b: x + b.reshape(-1, 1),
         [u(3, 4), u(3)]),
    case("cossim", lambda ag, a, b: ag.cossim(a, b),
         lambda a, b: np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1),
         [u(3, 5), u(3, 5)]),
]

REDUCE = [
    case("reduce_sum_all", lambda ag, x: ag.reduce_sum(x), lambda x: np.sum(x, keepdims=True),
         [u(2, 3, 4)]),
    case("reduce_sum_axes", lambda ag, x: ag.reduce_sum(x, [0, -1], 0), lambda x: np.sum(x, (0, 2)),
         [u(2, 3, 4)]),
    case("reduce_mean_all", lambda ag, x: ag.reduce_mean(x, None, 0), lambda x: np.mean(x),
         [u(2, 3, 4)]),
    case("reduce_mean_axis", lambda ag, x: ag.reduce_mean(x, [1]),
         lambda x: np.mean(x, 1, keepdims=True), [u(2, 3, 4)]),
    case("globalaveragepool", lambda ag, x: ag.globalaveragepool(x),
         lambda x: np.mean(x, (2, 3), keepdims=True), [u(2, 3, 4, 5)]),
    case("globalaveragepool_last", lambda ag, x: ag.globalaveragepool(x, "channels_last"),
         lambda x: np.mean(x, (1, 2), keepdims=True), [u(2, 4, 5, 3)]),
]

SHAPE = [
    case("reshape", lambda ag, x: ag.reshape(x, (0, -1)), lambda x: x.reshape(2, 12), [u(2, 3, 4)]),
    case("flatten", lambda ag, x: ag.flatten(x, 2), lambda x: x.reshape(6, 4), [u(2, 3, 4)]),
    case("flatten_axis0", lambda ag, x: ag.flatten(x, 0), lambda x: x.reshape(1, 24), [u(2, 3, 4)]),
    case("transpose", lambda ag, x: ag.transpose(x, (2, 0, 1)), lambda x: x.transpose(2, 0, 1),
         [u(2, 3, 4)]),
    case("transpose_reverse", lambda ag, x: ag.transpose(x), lambda x: x.T, [u(2, 3, 4)]),
    case("squeeze", lambda ag, x: ag.squeeze(x, [1]), lambda x: x.reshape(2, 3, 1),
         [u(2, 1, 3, 1)]),
    case("squeeze_all", lambda ag, x: ag.squeeze(x), lambda x: x.reshape(2, 3), [u(2, 1, 3, 1)]),
    case("unsqueeze", lambda ag, x: ag.unsqueeze(x, [0, 3]), lambda x: x.reshape(1, 2, 3, 1),
         [u(2, 3)]),
    case("cat", lambda ag, a, b, c: ag.cat([a, b, c], 1),
         lambda a, b, c: np.concatenate([a, b, c], 1),
         [u(2, 1), u(2, 3), u(2, 2)]),
    case("split", lambda ag, x: ag.split(x, 1, [1, 2, 3]), lambda x: tuple(np.split(x, [1, 3], 1)),
         [u(4, 6)]),
    case("split_equal", lambda ag, x: ag.split(x, 0, None, 2), lambda x: tuple(np.split(x, 2, 0)),
         [u(4, 3)]),
    case("tile", lambda ag, x: ag.tile(x, [2, 1]), lambda x: np.tile(x, [2, 1]), [u(2, 3)]),
    case("tile_more_axes", lambda ag, x: ag.tile(x, [2, 1, 2]), lambda x: np.tile(x, [2, 1, 2]),
         [u(2, 3)]),
    case("expand", lambda ag, x: ag.expand(x, (2, 3, 4)),
         lambda x: np.broadcast_to(x, (2, 3, 4)), [u(3, 1)]),
    case("upsample", lambda ag, x: ag.upsample(x, "nearest", [1, 1, 2, 3]),
         lambda x: x.repeat(2, 2).repeat(3, 3), [u(1, 2, 2, 3)]),
    case("depth_to_space_dcr", lambda ag, x: ag.depth_to_space(x, 2), lambda x: d2s_np(x, 2, "DCR"),
         [u(1, 8, 2, 3)]),
    case("depth_to_space_crd", lambda ag, x: ag.depth_to_space(x, 2, "CRD"),
         lambda x: d2s_np(x, 2, "CRD"), [u(1, 8, 2, 3)]),
    case("space_to_depth", lambda ag, x: ag.space_to_depth(x, 2), lambda x: s2d_np(x, 2),
         [u(1, 2, 4, 6)]),
]

INDEX = [
    case("gather", lambda ag, x: ag.gather(x, 0, [2, 0, 2]), lambda x: take_np(x, 0, [2, 0, 2]),
         [u(4, 3)]),
    case("gather_nested_axis1", lambda ag, x: ag.gather(x, 1, [[0, -1], [1, 1]]),
         lambda x: take_np(x, 1, [[0, 2], [1, 1]]), [u(2, 3)]),
    case("gather_tensor_indices", lambda ag, x, i: ag.gather(x, 1, i),
         lambda x, i: take_np(x, 1, i), [u(2, 4), ints([3, 0], [3, -1])], grad=[0]),
    case("slice", lambda ag, x: ag.slice(x, [1, 0], [4, 5], [0, 1]), lambda x: x[1:4, 0:5],
         [u(5, 6)]),
    case("slice_steps", lambda ag, x: ag.slice(x, [0, -1], [5, 0], [0, 1], [2, -2]),
         lambda x: x[0:5:2, -1:0:-2], [u(5, 6)]),
    case("pad_constant", lambda ag, x: ag.pad(x, "constant", [1, 0, 2, 1], 0.5),
         lambda x: np.pad(x, ((1, 2), (0, 1)), constant_values=0.5), [u(3, 4)]),
    case("pad_reflect", lambda ag, x: ag.pad(x, "reflect", [2, 1, 1, 2]),
         lambda x: np.pad(x, ((2, 1), (1, 2)), mode="reflect"), [u(3, 4)]),
    case("pad_edge", lambda ag, x: ag.pad(x, "edge", [1, 2, 2, 0]),
         lambda x: np.pad(x, ((1, 2), (2, 0)), mode="edge"), [u(3, 4)]),
    case("scatter_elements", lambda ag, x: ag.scatter_elements(
        x, np.array([[1, 0, 2], [0, 2, 1]]), np.array([[9, 8, 7], [6, 5, 4]], np.float32), 0),
        lambda x: scatter_np(x, np.array([[1, 0, 2], [0, 2, 1]]),
                             np.array([[9, 8, 7], [6, 5, 4]]), 0), [u(3, 3)]),
    case("embedding", lambda ag, i, w: ag.embedding(i, w), lambda i, w: w[i],
         [ints([0, 3, 3], [4, 1, 0]), u(5, 4)], grad=[1]),
    case("onehot", lambda ag, i: ag.onehot(-1, i, 3, [0.0, 2.0]),
         lambda i: 2.0 * np.eye(3, dtype=np.float32)[i], [ints([0, 2], [-1, 1])]),
    case("shape", lambda ag, x: ag.shape(x), lambda x: np.array(x.shape, np.int32), [u(2, 3, 4)],
         grad=[]),
    case("constant_of_shape", lambda ag, s: ag.constant_of_shape(s, 1.5),
         lambda s: np.full(tuple(s), 1.5, np.float32), [ints(2, 3)]),
    case("nonzero", lambda ag, x: ag.nonzero(x), lambda x: np.array(np.nonzero(x), np.int32),
         [np.array([[0, 1.0], [2.0, 0]], np.float32)], grad=[]),
]

LOSS = [
    case("softmax_cross_entropy_labels", lambda ag, x, t: ag.softmax_cross_entropy(x, t), sce_np,
         [u(4, 3, lo=-2, hi=2), ints(0, 2, 1, 2)]),
    case("softmax_cross_entropy_onehot", lambda ag, x, t: ag.softmax_cross_entropy(x, t), sce_np,
         [u(4, 3, lo=-2, hi=2), ONEHOT], grad=[0]),
    case("softmax_cross_entropy_int_onehot", lambda ag, x, t: ag.softmax_cross_entropy(x, t),
         sce_np, [u(4, 3, lo=-2, hi=2), ONEHOT.astype(np.int32)]),
    case("cross_entropy", lambda ag, y, t: ag.cross_entropy(y, t),
         lambda y, t: np.array([-np.sum(t * np.log(y)) / y.shape[0]]), [PROBS, ONEHOT], grad=[0]),
    case("cross_entropy_labels", lambda ag, y, t: ag.cross_entropy(y, t),
         lambda y, t: np.array([-np.mean(np.log(y[np.arange(4), t]))]), [PROBS, ints(0, 2, 1, 2)]),
    case("binary_cross_entropy", lambda ag, x, t: ag.binary_cross_entropy(x, t),
         lambda x, t: np.array([-np.sum(t * np.log(x + 1e-4) + (1 - t) * np.log(1 + 1e-4 - x))
                                / x.shape[0]]),
         [u(4, 3, lo=0.1, hi=0.9), u(4, 3, lo=0, hi=1)], grad=[0]),
    case("mse_loss", lambda ag, x, t: ag.mse_loss(x, t),
         lambda x, t: np.array([np.mean((x - t) ** 2)]), [u(3, 4), u(3, 4)], grad=[0]),
    case("ranking_loss", lambda ag, p, n: ag.ranking_loss(p, n, 0.2),
         lambda p, n: np.array([np.mean(np.maximum(0, 0.2 - p + n))]),
         [np.array([0.9, 0.1, 0.5, 0.3, 0.8], np.float32),
          np.array([0.2, 0.5, 0.6, 0.2, 0.1], np.float32)]),
]

def conv_np(x, w, b=None, stride=1, pad=0):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, f, oh, ow), dtype=np.result_type(x, w))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def pool_np(x, k, stride, pad, is_max):
    n, c, h, w = x.shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=np.nan)
    y = np.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            y[:, :, i, j] = np.nanmax(win, (2, 3)) if is_max else np.nanmean(win, (2, 3))
    return y


def bn_np(x, scale, bias, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = [1, -1] + [1] * (x.ndim - 2)
    mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale.reshape(shape) + bias.reshape(shape)


def conv_handle(x, k, stride, pad, cin, cout, bias):
    return sw.ConvHandle(x.data, (k, k), (stride, stride), (pad, pad), cin, cout, bias, 1)


def pool_handle(x, k, stride, pad, is_max):
    return sw.PoolingHandle(x.data, (k, k), (stride, stride), (pad, pad), is_max)


def batchnorm(ag, x, scale, bias):
    c = x.shape[1]
    rm, rv = tensor.zeros((c,), x.device), tensor.ones((c,), x.device)
    return ag.batchnorm_2d(ag.BatchNormHandle(x, 0.9), x, scale, bias, rm, rv)


NN = [
    case("conv2d", lambda ag, x, w, b: ag.conv2d(conv_handle(x, 3, 1, 1, 3, 4, True), x, w, b),
         lambda x, w, b: conv_np(x, w, b, 1, 1), [u(2, 3, 5, 5), u(4, 3, 3, 3), u(4)],
         rtol=1e-4, atol=1e-4),
    case("conv2d_stride_no_bias", lambda ag, x, w: ag.conv2d(conv_handle(x, 3, 2, 0, 2, 3, False),
                                                             x, w),
         lambda x, w: conv_np(x, w, None, 2, 0), [u(2, 2, 7, 6), u(3, 2, 3, 3)],
         rtol=1e-4, atol=1e-4),
    case("conv2d_odd_padding", lambda ag, x, w: ag.conv2d(
        sw.ConvHandle(sw.Tensor((1, 2, 6, 6)), (2, 2), (2, 2), (0, 0), 2, 3, False, 1), x, w,
        None, (0, 1, 0, 1)),
        lambda x, w: conv_np(np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1))), w, None, 2, 0),
        [u(1, 2, 5, 5), u(3, 2, 2, 2)], rtol=1e-4, atol=1e-4),
    case("max_pooling_2d", lambda ag, x: ag.pooling_2d(pool_handle(x, 2, 2, 0, True), x),
         lambda x: pool_np(x, 2, 2, 0, True), [u(2, 3, 4, 6)]),
    case("max_pooling_2d_padded", lambda ag, x: ag.pooling_2d(pool_handle(x, 3, 1, 1, True), x),
         lambda x: pool_np(x, 3, 1, 1, True), [u(1, 2, 4, 5)]),
    case("avg_pooling_2d", lambda ag, x: ag.pooling_2d(pool_handle(x, 3, 2, 1, False), x),
         lambda x: pool_np(x, 3, 2, 1, False), [u(2, 2, 5, 5)]),
    case("batchnorm_2d", batchnorm, bn_np, [u(4, 3, 2, 2, lo=-2, hi=2), u(3, lo=0.5, hi=1.5), u(3)],
         rtol=1e-4, atol=1e-4),
    case("batchnorm_2d_matrix", batchnorm, bn_np, [u(6, 3, lo=-2, hi=2), u(3, lo=0.5), u(3)],
         rtol=1e-4, atol=1e-4),
    case("dropout_ratio_0", lambda ag, x: ag.dropout(x, ratio=0.0), lambda x: x, [u(3, 4)]),
]

ALL = UNARY + ACTIVATIONS + ARITHMETIC + PREDICATES + LINALG + REDUCE + SHAPE + INDEX + LOSS + NN


@pytest.mark.parametrize("c", ALL)
def test_op(c):
    check_op(c.op, c.ref, c.inputs, c.grad, **c.tol)


EAGER_ONLY = {"constant_of_shape", "nonzero"}  # they read tensor values by design


@pytest.mark.parametrize("c", [p for p in ALL if p.values[0].id not in EAGER_ONLY])
def test_op_in_graph(c):
    check_graph(c.op, c.inputs, c.grad)


@pytest.mark.parametrize("name", sorted(EAGER_ONLY))
def test_eager_only_ops_refuse_graphs(name):
    (c,) = [p.values[0] for p in ALL if p.values[0].id == name]
    dev = sw.create_cpu_device()
    ts = [tensor.from_numpy(a, dev) for a in c.inputs]
    dev.EnableGraph(True)
    try:
        with pytest.raises(Exception, match="buffered"):
            c.op(autograd, *ts)
    finally:
        dev.EnableGraph(False)
