"""singa.tensor against numpy: construction, interop, every function and operator."""
import copy

import numpy as np
import pytest

from singa import device, singa_wrap, tensor
from conftest import close, t_

F32, I32 = np.float32, np.int32


# ---- construction and attributes ----------------------------------------------------------
def test_constructor_defaults():
    t = tensor.Tensor((2, 3))
    assert t.shape == (2, 3)
    assert t.dtype == tensor.float32
    assert t.device == device.get_default_device()
    assert isinstance(t.data, singa_wrap.Tensor)
    assert t.requires_grad is True and t.stores_grad is False
    assert t.ndim() == 2 and t.size() == 6 and t.memsize() == 24
    assert t.name.startswith("Dummy#") and t.is_dummy()


def test_constructor_arguments():
    t = tensor.Tensor((4,), dtype=tensor.int32, requires_grad=False, stores_grad=True, name="w")
    assert t.dtype == tensor.int32 and t.memsize() == 16
    assert t.requires_grad is False and t.stores_grad is True
    assert t.name == "w" and not t.is_dummy()
    marker = object()
    assert tensor.Tensor((1,), creator=marker).creator is marker
    assert tensor.Tensor((2,), dtype=tensor.float16).memsize() == 4


def test_dummy_names_are_unique():
    a, b = tensor.Tensor(), tensor.Tensor()
    assert a.name != b.name


def test_constructor_from_numpy_data_converts_to_dtype():
    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = tensor.Tensor(data=arr)
    close(t, arr.astype(F32))
    ti = tensor.Tensor(data=arr, dtype=tensor.int32)
    close(ti, arr.astype(I32))


def test_constructor_wraps_core_tensor_without_copy():
    core = singa_wrap.from_numpy(np.ones((2, 2), F32))
    t = tensor.Tensor(data=core)
    assert t.data is core and t.shape == (2, 2)
    t.set_value(3)
    np.testing.assert_array_equal(singa_wrap.to_numpy(core), np.full((2, 2), 3, F32))


def test_default_tensor_is_empty_until_written():
    t = tensor.Tensor()
    assert t.shape == () and t.is_empty()
    t.set_value(2.0)
    assert not t.is_empty()
    assert tensor.Tensor((0, 3)).is_empty()
    assert not tensor.Tensor((1,)).set_value(1).is_empty()


def test_shape_dtype_device_setters():
    t = t_(np.arange(6, dtype=F32))
    t.shape = (2, 3)
    close(t, np.arange(6, dtype=F32).reshape(2, 3))
    t.dtype = tensor.int32
    assert t.dtype == tensor.int32
    close(t, np.arange(6, dtype=I32).reshape(2, 3))


def test_placeholder_alias():
    assert tensor.PlaceHolder is tensor.Tensor


# ---- numpy interop ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,code", [(np.float32, tensor.float32), (np.int32, tensor.int32),
                                        (np.float16, tensor.float16)])
def test_numpy_round_trip(dtype, code, rng):
    arr = (rng.standard_normal((3, 4)) * 10).astype(dtype)
    t = tensor.from_numpy(arr)
    assert t.dtype == code and t.shape == (3, 4)
    out = tensor.to_numpy(t)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, arr)
    np.testing.assert_array_equal(np.asarray(t), arr)
    np.testing.assert_array_equal(t.to_numpy(), arr)


@pytest.mark.parametrize("src,dst", [(np.float64, np.float32), (np.int64, np.int32),
                                     (np.uint8, np.int32)])
def test_from_numpy_narrows_like_singa(src, dst):
    arr = np.arange(5).astype(src)
    out = tensor.to_numpy(tensor.from_numpy(arr))
    assert out.dtype == dst
    np.testing.assert_array_equal(out, arr.astype(dst))


def test_from_numpy_accepts_lists_and_device():
    dev = device.get_default_device()
    t = tensor.from_numpy([[1.0, 2.0], [3.0, 4.0]], dev)
    assert t.device == dev
    close(t, np.array([[1, 2], [3, 4]], F32))


def test_asarray_with_dtype_and_of_views():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    t = t_(a)
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), a.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(t.T()), a.T)


def test_from_numpy_of_non_contiguous_array():
    a = np.arange(12, dtype=F32).reshape(3, 4)[:, ::2].T
    close(t_(a), np.ascontiguousarray(a))


def test_zero_size_tensors():
    t = tensor.from_numpy(np.zeros((0, 3), F32))
    assert t.shape == (0, 3) and t.size() == 0
    assert tensor.to_numpy(t).shape == (0, 3)
    close(t + 1, np.zeros((0, 3), F32))


def test_numpy_operand_on_either_side():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    t = t_(a)
    r = np.ones((2, 3), F32) + t
    assert isinstance(r, tensor.Tensor)
    close(r, a + 1)
    close(t * np.full(3, 2, F32), a * 2)
    close(np.full((2, 3), 10, F32) - t, 10 - a)


# ---- element-wise functions ------------------------------------------------------------------
UNARY = [
    ("abs", np.abs, (-3, 3)), ("negative", np.negative, (-3, 3)), ("sign", np.sign, (-3, 3)),
    ("square", np.square, (-3, 3)), ("relu", lambda x: np.maximum(x, 0), (-3, 3)),
    ("ceil", np.ceil, (-3, 3)), ("floor", np.floor, (-3, 3)),
    ("exp", np.exp, (-3, 3)), ("log", np.log, (0.1, 5)), ("sqrt", np.sqrt, (0, 5)),
    ("reciprocal", np.reciprocal, (0.5, 3)), ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), (-5, 5)),
    ("softplus", lambda x: np.log1p(np.exp(x)), (-5, 5)),
    ("softsign", lambda x: x / (1 + np.abs(x)), (-5, 5)), ("tanh", np.tanh, (-3, 3)),
    ("sin", np.sin, (-3, 3)), ("cos", np.cos, (-3, 3)), ("tan", np.tan, (-1, 1)),
    ("asin", np.arcsin, (-0.9, 0.9)), ("acos", np.arccos, (-0.9, 0.9)),
    ("atan", np.arctan, (-3, 3)), ("sinh", np.sinh, (-3, 3)), ("cosh", np.cosh, (-3, 3)),
    ("asinh", np.arcsinh, (-3, 3)), ("acosh", np.arccosh, (1.1, 4)),
    ("atanh", np.arctanh, (-0.9, 0.9)),
]


@pytest.mark.parametrize("name,ref,dom", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float32(name, ref, dom, rng):
    x = rng.uniform(dom[0], dom[1], size=(3, 5)).astype(F32)
    fn = getattr(tensor, name)
    close(fn(t_(x)), ref(x).astype(F32), rtol=1e-5, atol=1e-5)
    # transposed (non-contiguous) input
    close(fn(t_(x).T()), ref(x.T).astype(F32), rtol=1e-5, atol=1e-5)
    out = tensor.Tensor((3, 5))
    assert fn(t_(x), out=out) is out
    close(out, ref(x).astype(F32), rtol=1e-5, atol=1e-5)


def test_erf():
    x = np.array([-2, -0.5, 0, 0.3, 1.5], F32)
    import math
    close(tensor.erf(t_(x)), np.array([math.erf(v) for v in x], F32))


@pytest.mark.parametrize("name,ref", [("abs", np.abs), ("negative", np.negative),
                                      ("sign", np.sign), ("square", np.square),
                                      ("relu", lambda x: np.maximum(x, 0))])
def test_unary_int32_keeps_int(name, ref):
    x = np.array([[-3, 0, 2], [5, -1, 7]], I32)
    close(getattr(tensor, name)(t_(x)), ref(x).astype(I32))


def test_float_only_unary_on_int_gives_float():
    x = np.array([0, 1, 2], I32)
    close(tensor.exp(t_(x)), np.exp(x).astype(F32))
    close(tensor.sqrt(t_(x)), np.sqrt(x).astype(F32))


def test_round_and_rounde():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2, -1.7], F32)
    away = np.sign(x) * np.floor(np.abs(x) + 0.5)
    close(tensor.round(t_(x)), away.astype(F32))
    close(tensor.rounde(t_(x)), np.round(x).astype(F32))


def test_clip_and_leakyrelu():
    x = np.linspace(-3, 3, 7).astype(F32)
    close(tensor.clip(t_(x), -1, 2), np.clip(x, -1, 2))
    close(tensor.leakyrelu(t_(x), 0.1), np.where(x > 0, x, 0.1 * x).astype(F32))


BINARY = [
    ("add", "__add__", np.add), ("sub", "__sub__", np.subtract),
    ("eltwise_mult", "__mul__", np.multiply), ("div", "__truediv__", np.divide),
    ("pow", "__pow__", np.power), ("maximum", None, np.maximum), ("minimum", None, np.minimum),
    ("lt", "__lt__", np.less), ("le", "__le__", np.less_equal), ("gt", "__gt__", np.greater),
    ("ge", "__ge__", np.greater_equal), ("eq", "__eq__", np.equal), ("ne", "__ne__", np.not_equal),
]
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1,), (2, 3)), ((4, 1), (1, 5)),
          ((), (2, 2))]


def _operands(rng, sa, sb):
    a = rng.uniform(0.5, 3, size=sa).astype(F32)
    b = rng.uniform(0.5, 3, size=sb).astype(F32)
    b.flat[0] = a.flat[0]  # so eq/ne/le/ge see an equal pair
    return a, b


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name,dunder,ref", BINARY, ids=[b[0] for b in BINARY])
def test_binary_broadcasting(name, dunder, ref, shapes, rng):
    a, b = _operands(rng, *shapes)
    expected = ref(a, b).astype(F32)
    close(getattr(tensor, name)(t_(a), t_(b)), expected, rtol=1e-5)
    if dunder:
        close(getattr(t_(a), dunder)(t_(b)), expected, rtol=1e-5)


@pytest.mark.parametrize("name,dunder,ref", BINARY, ids=[b[0] for b in BINARY])
def test_binary_with_scalar(name, dunder, ref, rng):
    a = rng.uniform(0.5, 3, size=(2, 3)).astype(F32)
    a[0, 0] = 2.0
    close(getattr(tensor, name)(t_(a), 2.0), ref(a, F32(2.0)).astype(F32), rtol=1e-5)
    close(getattr(tensor, name)(t_(a), np.float32(2)), ref(a, F32(2.0)).astype(F32), rtol=1e-5)
    if dunder:
        close(getattr(t_(a), dunder)(2), ref(a, F32(2)).astype(F32), rtol=1e-5)


@pytest.mark.parametrize("name,dunder,ref", BINARY, ids=[b[0] for b in BINARY])
def test_binary_transposed_operands(name, dunder, ref, rng):
    a, b = _operands(rng, (4, 3), (3, 4))
    close(getattr(tensor, name)(t_(a).T(), t_(b)), ref(a.T, b).astype(F32), rtol=1e-5)
    close(getattr(tensor, name)(t_(b), t_(a).transpose((1, 0))), ref(b, a.T).astype(F32),
          rtol=1e-5)


def test_reflected_operators():
    a = np.array([[1, 2], [4, 8]], F32)
    t = t_(a)
    close(3 + t, 3 + a)
    close(3 - t, 3 - a)
    close(3 * t, 3 * a)
    close(3 / t, 3 / a)
    close(2 ** t, 2 ** a)
    close(7 // t, 7 // a)
    close(7 % t, 7 % a)


@pytest.mark.parametrize("name,ref", [("add", np.add), ("sub", np.subtract),
                                      ("eltwise_mult", np.multiply), ("maximum", np.maximum),
                                      ("lt", np.less), ("eq", np.equal)])
def test_binary_int32(name, ref):
    a = np.array([[1, -2, 3], [4, 5, -6]], I32)
    b = np.array([3, -2, 1], I32)
    close(getattr(tensor, name)(t_(a), t_(b)), ref(a, b).astype(I32))


def test_int_float_promotion():
    a = np.array([1, 2, 3], I32)
    b = np.array([0.5, 0.25, 2.0], F32)
    close(t_(a) + t_(b), (a + b).astype(F32))
    close(t_(a) + 0.5, (a + 0.5).astype(F32))
    close(t_(a) + 2, a + 2)               # int scalar keeps int32
    close(t_(a) / t_(a), np.ones(3, F32))  # true division gives float32


def test_floordiv_mod_pow_with_ints():
    a = np.array([7, -7, 9, 10], I32)
    close(t_(a) // 2, a // 2)
    close(t_(a) % 3, a % 3)
    close(t_(a) ** 2, a ** 2)
    f = np.array([7.5, -7.5, 2.0], F32)
    close(t_(f) // 2, f // 2)
    close(t_(f) % 2, np.mod(f, 2).astype(F32))


def test_unary_operators():
    a = np.array([[-1.5, 2], [0, -3]], F32)
    close(-t_(a), -a)
    close(abs(t_(a)), np.abs(a))
    t = t_(a)
    assert +t is t


def test_matmul_operator(rng):
    a = rng.standard_normal((3, 4)).astype(F32)
    b = rng.standard_normal((4, 2)).astype(F32)
    close(t_(a) @ t_(b), a @ b, rtol=1e-5, atol=1e-5)


def test_eq_none_and_hash():
    t = tensor.Tensor((2,))
    assert (t == None) is False  # noqa: E711
    assert (t != None) is True   # noqa: E711
    d = {t: 1}
    assert d[t] == 1


def test_binary_ret_argument():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    ret = tensor.Tensor((2, 3))
    assert tensor.add(t_(a), t_(a), ret) is ret
    close(ret, a + a)
    tensor.sub(t_(a), 1.0, ret)
    close(ret, a - 1)
    tensor.eltwise_mult(t_(a), 2.0, ret)
    close(ret, a * 2)
    tensor.div(t_(a), 2.0, ret)
    close(ret, a / 2)
    out = tensor.Tensor((2, 3))
    assert tensor.pow(t_(a), 2.0, out) is out
    close(out, a ** 2)
    tensor.pow(t_(a), t_(a), out)
    close(out, a ** a)


# ---- in-place operators ----------------------------------------------------------------------
def test_inplace_operators():
    a = np.arange(1, 7, dtype=F32).reshape(2, 3)
    t = t_(a)
    data = t.data
    t += 1
    t -= t_(np.array([1, 2, 3], F32))
    t *= 2
    t /= t_(np.array([[2], [4]], F32))
    exp = ((a + 1 - np.array([1, 2, 3])) * 2) / np.array([[2], [4]])
    close(t, exp.astype(F32))
    assert t.data is data  # in place: same core tensor
    t **= 2
    close(t, (exp ** 2).astype(F32))


def test_inplace_keeps_aliases():
    t = t_(np.zeros((2, 3), F32))
    alias = t.copy()  # shallow copy shares memory
    alias += 5
    close(t, np.full((2, 3), 5, F32))
    view = t.reshape((3, 2))
    view *= 2
    close(t, np.full((2, 3), 10, F32))


def test_inplace_on_transposed_view_writes_source():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    t = t_(a)
    v = t.T()
    v += t_(np.array([10, 20], F32))
    close(v, a.T + np.array([10, 20], F32))
    close(t, a + np.array([[10], [20]], F32))


def test_inplace_int_tensor():
    t = t_(np.array([1, 2, 3], I32))
    t += 2
    t *= t_(np.array([1, 0, 2], I32))
    close(t, np.array([3, 0, 10], I32))


# ---- reductions -------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, (0, 2), (1, 2)])
def test_sum(axis, rng):
    a = rng.standard_normal((2, 3, 4)).astype(F32)
    want = np.sum(a, axis=axis).astype(F32)
    if axis is None:  # SINGA's sum of every element is a (1, 1) tensor
        want = want.reshape(1, 1)
    close(tensor.sum(t_(a), axis), want, rtol=1e-5, atol=1e-5)
    want_t = np.sum(a.transpose(2, 0, 1), axis=axis).astype(F32)
    close(tensor.sum(t_(a).transpose((2, 0, 1)), axis),
          want_t.reshape(1, 1) if axis is None else want_t, rtol=1e-5, atol=1e-5)


def test_sum_out_and_int():
    a = np.arange(12, dtype=I32).reshape(3, 4)
    close(tensor.sum(t_(a), 0), a.sum(0).astype(I32))
    out = tensor.Tensor((4,))
    assert tensor.sum(t_(a.astype(F32)), 0, out=out) is out
    close(out, a.sum(0).astype(F32))


def test_average():
    a = np.arange(12, dtype=F32).reshape(3, 4)
    assert tensor.average(t_(a)) == pytest.approx(a.mean())
    close(tensor.average(t_(a), 0), a.mean(0))
    close(tensor.average(t_(a), 1), a.mean(1))
    close(tensor.average(t_(a), (0, 1)), np.array(a.mean(), F32))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax(rng):
    v = rng.standard_normal(5).astype(F32)
    close(tensor.softmax(t_(v)), _softmax(v, 0), rtol=1e-5)
    m = rng.standard_normal((3, 4)).astype(F32)
    close(tensor.softmax(t_(m)), _softmax(m, 1), rtol=1e-5)
    # rank > 2: each x[i] as a whole (SINGA's rows)
    c = rng.standard_normal((2, 3, 4)).astype(F32)
    exp = _softmax(c.reshape(2, -1), 1).reshape(2, 3, 4)
    close(tensor.softmax(t_(c)), exp, rtol=1e-5)
    close(tensor.softmax(t_(c), axis=1), _softmax(c, 1), rtol=1e-5)
    out = tensor.Tensor((3, 4))
    assert tensor.softmax(t_(m), out) is out
    close(out, _softmax(m, 1), rtol=1e-5)


def test_sum_columns_and_rows():
    a = np.arange(12, dtype=F32).reshape(3, 4)
    close(tensor.sum_columns(t_(a)), a.sum(1, keepdims=True))
    close(tensor.sum_rows(t_(a)), a.sum(0, keepdims=True))


def test_norms_follow_singa():
    a = np.array([3, -4, 0, 1], F32)
    t = t_(a)
    assert t.l1() == pytest.approx(np.abs(a).sum() / a.size)
    assert t.l2() == pytest.approx(np.linalg.norm(a) / a.size)


# ---- products ---------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((3, 4), (4,)), ((4,), (4, 2)),
                                   ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)),
                                   ((2, 2, 3, 4), (2, 2, 4, 5))])
def test_mult(sa, sb, rng):
    a = rng.standard_normal(sa).astype(F32)
    b = rng.standard_normal(sb).astype(F32)
    close(tensor.mult(t_(a), t_(b)), np.matmul(a, b), rtol=1e-4, atol=1e-5)


def test_mult_transposed_and_scaled(rng):
    a = rng.standard_normal((4, 3)).astype(F32)
    b = rng.standard_normal((5, 4)).astype(F32)
    close(tensor.mult(t_(a).T(), t_(b).T()), a.T @ b.T, rtol=1e-4, atol=1e-5)
    c0 = rng.standard_normal((3, 5)).astype(F32)
    C = t_(c0)
    assert tensor.mult(t_(a).T(), t_(b).T(), C, alpha=2.0, beta=0.5) is C
    close(C, 2 * (a.T @ b.T) + 0.5 * c0, rtol=1e-4, atol=1e-5)
    close(tensor.mult(t_(a).T(), t_(b).T(), alpha=3.0), 3 * (a.T @ b.T), rtol=1e-4, atol=1e-5)


def test_axpy():
    x = np.arange(4, dtype=F32)
    y = t_(np.ones(4, F32))
    assert tensor.axpy(2.0, t_(x), y) is y
    close(y, 1 + 2 * x)


@pytest.mark.parametrize("sa,sb,axes", [((3, 4), (4, 5), 1), ((3, 4, 5), (4, 5, 2), 2),
                                        ((3, 2, 4), (4, 2, 5), ([1, 2], [1, 0])),
                                        ((2, 3), (3, 2), ([0, 1], [1, 0])),
                                        ((3, 4), (5,), 0), ((4, 3), (4, 2), (0, 0))])
def test_tensordot(sa, sb, axes, rng):
    a = rng.standard_normal(sa).astype(F32)
    b = rng.standard_normal(sb).astype(F32)
    close(tensor.tensordot(t_(a), t_(b), axes), np.tensordot(a, b, axes).astype(F32),
          rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("spec,shapes", [
    ("ij,jk->ik", [(4, 3), (3, 4)]), ("ki,ki->ki", [(4, 3), (4, 3)]),
    ("ki,kj->kij", [(4, 3), (4, 3)]), ("kia,kja->kij", [(3, 2, 2), (3, 2, 2)]),
    ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("ij,jk", [(2, 3), (3, 4)]),
    ("i,i->", [(5,), (5,)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)])])
def test_einsum(spec, shapes, rng):
    ops = [rng.standard_normal(s).astype(F32) for s in shapes]
    close(tensor.einsum(spec, *[t_(o) for o in ops]), np.einsum(spec, *ops).astype(F32),
          rtol=1e-4, atol=1e-5)


def test_einsum_result_is_not_a_view():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    t = t_(a)
    r = tensor.einsum("ij->ji", t)
    t.set_value(0)
    close(r, a.T)


# ---- shapes, views and copies -----------------------------------------------------------------
def test_reshape_is_view_when_contiguous():
    a = np.arange(6, dtype=F32)
    t = t_(a)
    r = t.reshape((2, 3))
    close(r, a.reshape(2, 3))
    close(t.reshape(3, -1), a.reshape(3, -1))
    close(tensor.reshape(t, (-1, 2)), a.reshape(-1, 2))
    r += 1
    close(t, a + 1)


def test_transpose_and_T():
    a = np.arange(24, dtype=F32).reshape(2, 3, 4)
    t = t_(a)
    for axes in [None, (0, 2, 1), (2, 0, 1), [1, 0, 2], (-1, 0, 1)]:
        close(tensor.transpose(t, axes), np.transpose(a, axes))
    v = t.T()
    assert v.shape == (4, 3, 2) and v.is_transpose() and not t.is_transpose()
    close(v, a.T)
    c = v.contiguous()
    assert not c.is_transpose()
    close(c, a.T)
    close(tensor.contiguous(v), a.T)


def test_copy_clone_deepcopy():
    a = np.arange(4, dtype=F32)
    t = t_(a)
    shallow, deep, dc = t.copy(), t.clone(), t.deepcopy()
    pyc = copy.deepcopy(t)
    t.set_value(9)
    close(shallow, np.full(4, 9, F32))
    for other in (deep, dc, pyc):
        close(other, a)
    assert copy.copy(t).data is not t.data


@pytest.mark.parametrize("repeats,axis", [(2, None), (3, 0), (2, 1), ([1, 0, 2], 0),
                                          ([2, 1], 1), (2, -1), (0, 0)])
def test_repeat(repeats, axis):
    a = np.arange(6, dtype=F32).reshape(3, 2)
    close(tensor.repeat(t_(a), repeats, axis), np.repeat(a, repeats, axis))
    close(t_(a).repeat(repeats, axis), np.repeat(a, repeats, axis))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate(axis, rng):
    parts = [rng.standard_normal((2, 3)).astype(F32) for _ in range(3)]
    close(tensor.concatenate([t_(p) for p in parts], axis), np.concatenate(parts, axis))


def test_concatenate_transposed_and_int():
    a = np.arange(6, dtype=I32).reshape(2, 3)
    close(tensor.concatenate([t_(a), t_(a.T.copy()).T()], 0), np.concatenate([a, a], 0))


GETITEM = [0, -1, 2, slice(1, 3), slice(None, None, 2), slice(-3, None), slice(1, 100),
           (0, 1), (slice(None), 1), (1, slice(0, 4, 3)), (Ellipsis, 2),
           (slice(0, 3, 2), slice(1, 4, 2)), (None, 1), slice(2, 2)]


def _singa_key(key):
    """numpy's key with SINGA's rule that an integer index keeps its axis."""
    key = key if isinstance(key, tuple) else (key,)
    return tuple(slice(k, k + 1 if k != -1 else None) if isinstance(k, int) else k for k in key)


@pytest.mark.parametrize("key", GETITEM, ids=str)
def test_getitem(key):
    a = np.arange(20, dtype=F32).reshape(4, 5)
    t = t_(a)
    r = t[key]
    close(r, a[_singa_key(key)])
    r.set_value(-1)  # a copy: the source is unchanged
    close(t, a)


def test_getitem_on_transposed_and_3d():
    a = np.arange(24, dtype=F32).reshape(2, 3, 4)
    t = t_(a)
    close(t.T()[1:3, ::2], a.T[1:3, ::2])
    close(t[1, 1:, -1], a[1:2, 1:, 3:4])


def test_iteration_stops():
    t = t_(np.arange(6, dtype=F32).reshape(3, 2))
    rows = [tensor.to_numpy(r) for r in t]
    assert len(rows) == 3 and rows[2].tolist() == [[4.0, 5.0]]


@pytest.mark.parametrize("key,value", [
    ((slice(None),), 7.0), ((1,), np.array([1, 2, 3, 4], F32)), ((slice(1, 3), 2), -1.0),
    ((Ellipsis, slice(2, 4)), np.array([[9, 8]], F32)), ((2, 3), 5), ((slice(0, 2),), "tensor")])
def test_setitem(key, value):
    a = np.arange(12, dtype=F32).reshape(3, 4)
    t = t_(a)
    if isinstance(value, str):
        value = t_(np.full((2, 4), 3, F32))
        a[key] = 3
    else:
        a[key] = value
    t[key] = value
    close(t, a)


def test_setitem_through_transposed_view_writes_source():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    t = t_(a)
    v = t.T()
    v[0] = 100.0
    a.T[0] = 100.0
    close(t, a)


def test_len_bool_float_int():
    t = t_(np.arange(6, dtype=F32).reshape(3, 2))
    assert len(t) == 3
    one = t_(np.array([2.5], F32))
    assert float(one) == 2.5 and int(one) == 2
    with pytest.raises(TypeError):
        len(tensor.from_numpy(np.array(1.0, F32)))


def test_every_tensor_is_true_as_in_singa():
    # SINGA's Tensor has no __bool__/__len__: ``if labels:`` (its char-RNN example) must not
    # look at the values, whatever the shape or content.
    for a in (np.array([0.0], F32), np.zeros((3, 2), F32), np.zeros((0,), F32),
              np.array(0, np.int32)):
        t = t_(a)
        assert bool(t) is True
        assert (1 if t else 0) == 1
    assert bool(tensor.Tensor()) is True


def test_repr_shows_values():
    t = t_(np.array([[1.5, 2]], F32))
    assert repr(t) == np.array2string(np.array([[1.5, 2]], F32))
    assert str(t) == repr(t)


# ---- dtype and device -------------------------------------------------------------------------
@pytest.mark.parametrize("name,code,np_type", [("int", tensor.int32, I32),
                                                ("float", tensor.float32, F32),
                                                (tensor.float16, tensor.float16, np.float16),
                                                (np.int32, tensor.int32, I32)])
def test_as_type(name, code, np_type):
    a = np.array([1.7, -2.2, 3.0], F32)
    t = t_(a)
    r = t.as_type(name)
    assert r.dtype == code and t.dtype == tensor.float32
    close(r, a.astype(np_type), atol=1e-2)


def test_to_type_in_place_and_float16_math_through_float32():
    t = t_(np.array([0.5, 1.5], F32))
    assert t.to_type(tensor.float16) is t and t.dtype == tensor.float16
    assert tensor.to_numpy(t).dtype == np.float16
    close(t.as_type(tensor.float32) * 2, np.array([1, 3], F32))


def test_to_host_and_to_device():
    dev = device.create_cpu_device(5)
    a = np.arange(3, dtype=F32)
    t = t_(a)
    assert t.to_device(dev) is t
    assert t.device == dev and t.device.id() == 5
    close(t, a)
    h = tensor.to_host(t)
    assert h.device.is_host()
    close(h, a)
    t.to_host()
    close(t, a)


# ---- writing values ---------------------------------------------------------------------------
def test_set_value_and_fills():
    t = tensor.Tensor((2, 2))
    assert t.set_value(1.5) is t
    close(t, np.full((2, 2), 1.5, F32))
    n = t.set_value(4, inplace=False)
    close(n, np.full((2, 2), 4, F32))
    close(t, np.full((2, 2), 1.5, F32))
    ti = tensor.Tensor((3,), dtype=tensor.int32).set_value(7)
    close(ti, np.full(3, 7, I32))


def test_set_value_on_transposed_view_writes_source():
    t = tensor.zeros((2, 3))
    t.T().set_value(2)
    close(t, np.full((2, 3), 2, F32))


def test_copy_from_numpy_and_offset():
    t = tensor.zeros((2, 3))
    t.copy_from_numpy(np.arange(6, dtype=np.float64).reshape(2, 3))
    close(t, np.arange(6, dtype=F32).reshape(2, 3))
    t.copy_from_numpy(np.array([-1, -2], F32), offset=4)
    close(t, np.array([[0, 1, 2], [3, -1, -2]], F32))
    v = t.T()
    v.copy_from_numpy(np.arange(6, dtype=F32).reshape(3, 2))
    close(t, np.arange(6, dtype=F32).reshape(3, 2).T)
    c = tensor.Tensor((2, 2))
    tensor.copy_from_numpy(c, np.ones((2, 2), F32))
    close(c, np.ones((2, 2), F32))


def test_copy_data_and_copy_from():
    src = t_(np.arange(6, dtype=F32).reshape(2, 3))
    dst = tensor.Tensor((3, 2))
    dst.copy_data(src)
    close(dst, np.arange(6, dtype=F32).reshape(3, 2))
    dst.copy_from(t_(np.ones((3, 2), F32)))
    close(dst, np.ones((3, 2), F32))
    dst.copy_from(np.zeros((3, 2), F32))
    close(dst, np.zeros((3, 2), F32))
    dst.copy_data(t_(np.arange(6, dtype=I32).reshape(3, 2)))  # converted to float32
    close(dst, np.arange(6, dtype=F32).reshape(3, 2))


def test_copy_data_to_from():
    dst = tensor.zeros((6,))
    src = t_(np.arange(1, 7, dtype=F32))
    tensor.copy_data_to_from(dst, src, 3, dst_offset=2, src_offset=1)
    close(dst, np.array([0, 0, 2, 3, 4, 0], F32))


def test_creation_helpers():
    close(tensor.zeros((2, 3)), np.zeros((2, 3), F32))
    close(tensor.ones((2,)), np.ones(2, F32))
    close(tensor.ones((2,), dtype=tensor.int32), np.ones(2, I32))
    x = tensor.from_numpy(np.array([[1, 2]], I32))
    close(tensor.zeros_like(x), np.zeros((1, 2), I32))
    close(tensor.ones_like(x), np.ones((1, 2), I32))
    r = tensor.to_numpy(tensor.random((100,)))
    assert r.shape == (100,) and r.min() >= 0 and r.max() < 1 and r.std() > 0.1
    assert tensor.product((2, 3, 4)) == 24 and tensor.product(()) == 1
    assert tensor.sizeof(tensor.float32) == 4 and tensor.sizeof(tensor.float16) == 2
    assert tensor.sizeof(tensor.int32) == 4


def test_raw_tensor_helpers():
    core = singa_wrap.from_numpy(np.ones(3, F32))
    t = tensor.from_raw_tensor(core)
    assert t.data is core
    ts = tensor.from_raw_tensors([core, core])
    assert len(ts) == 2 and all(x.data is core for x in ts)
    r = tensor._call_singa_func(singa_wrap.Exp, core)
    close(r, np.exp(np.ones(3, F32)))


# ---- random -----------------------------------------------------------------------------------
def test_uniform_gaussian_bernoulli_statistics():
    dev = device.get_default_device()
    dev.SetRandSeed(0)
    u = tensor.to_numpy(tensor.Tensor((20000,)).uniform(-2, 4))
    assert u.min() >= -2 and u.max() < 4 and abs(u.mean() - 1) < 0.05
    g = tensor.to_numpy(tensor.Tensor((20000,)).gaussian(3, 0.5))
    assert abs(g.mean() - 3) < 0.02 and abs(g.std() - 0.5) < 0.02
    b = tensor.to_numpy(tensor.Tensor((20000,)).bernoulli(0.3))
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.02


def test_module_random_functions_fill_and_return():
    t = tensor.Tensor((1000,))
    assert tensor.uniform(5, 6, t) is t
    assert tensor.to_numpy(t).min() >= 5
    assert tensor.gaussian(0, 0, t) is t
    close(t, np.zeros(1000, F32))
    assert tensor.bernoulli(1.0, t) is t
    close(t, np.ones(1000, F32))


def test_seed_makes_fills_reproducible():
    dev = device.get_default_device()
    dev.SetRandSeed(42)
    a = tensor.to_numpy(tensor.Tensor((50,)).gaussian(0, 1))
    dev.SetRandSeed(42)
    b = tensor.to_numpy(tensor.Tensor((50,)).gaussian(0, 1))
    np.testing.assert_array_equal(a, b)
    c = tensor.to_numpy(tensor.Tensor((50,)).gaussian(0, 1))
    assert not np.array_equal(a, c)


def test_random_fill_of_transposed_view_writes_source():
    t = tensor.zeros((3, 4))
    t.T().uniform(1, 2)
    x = tensor.to_numpy(t)
    assert x.min() >= 1 and x.max() < 2


def test_random_not_inplace():
    t = tensor.zeros((10,))
    r = t.uniform(1, 2, inplace=False)
    close(t, np.zeros(10, F32))
    assert tensor.to_numpy(r).min() >= 1


# ---- row / column helpers ---------------------------------------------------------------------
@pytest.mark.parametrize("method,ref", [
    ("add_column", lambda m, c, r: m + c[:, None]), ("add_row", lambda m, c, r: m + r),
    ("sub_column", lambda m, c, r: m - c[:, None]), ("sub_row", lambda m, c, r: m - r),
    ("mult_column", lambda m, c, r: m * c[:, None]), ("mult_row", lambda m, c, r: m * r),
    ("div_column", lambda m, c, r: m / c[:, None]), ("div_row", lambda m, c, r: m / r)])
def test_row_column_methods(method, ref):
    m = np.arange(1, 13, dtype=F32).reshape(3, 4)
    col = np.array([1, 2, 4], F32)
    row = np.array([1, 2, 4, 8], F32)
    t = t_(m)
    getattr(t, method)(t_(col if "column" in method else row))
    close(t, ref(m, col, row).astype(F32))


def test_row_column_methods_on_transposed_matrix():
    m = np.arange(1, 7, dtype=F32).reshape(2, 3)
    src = t_(m)
    v = src.T()  # (3, 2)
    v.add_row(t_(np.array([10, 20], F32)))
    close(src, m + np.array([[10], [20]], F32))


def test_add_column_add_row_functions():
    m = np.ones((2, 3), F32)
    M = t_(m)
    assert tensor.add_column(2.0, t_(np.array([1, 2], F32)), 3.0, M) is M
    close(M, 2 * np.array([[1], [2]], F32) + 3 * m)
    M = t_(m)
    assert tensor.add_row(1.0, t_(np.array([1, 2, 3], F32)), 0.5, M) is M
    close(M, np.array([1, 2, 3], F32) + 0.5 * m)
