"""Valid edge-case inputs on which singa gave numbers, shapes or dtypes other than numpy's (or
torch's), found by the differential fuzzer tools/fuzz_numpy.py; each test fails before its fix."""
import numpy as np
import pytest

from singa import autograd, tensor
from singa.errors import AxisError

R = np.random.RandomState(11)


def t(a, grad=False):
    x = tensor.from_numpy(np.asarray(a))
    x.requires_grad = x.stores_grad = grad
    return x


def grads_of(y, dy, *xs):
    g = autograd.gradients(y, tensor.from_numpy(np.asarray(dy, np.float32)))
    return [tensor.to_numpy(g[x]) for x in xs]


@pytest.mark.parametrize("shape", [(2, 3), (2, 1, 5), (3, 4, 2, 2), (4,)])
def test_flatten_negative_axis_counts_from_the_rank(shape):
    # flatten(x, -1) of a (2, 3) tensor was (6, 1): -1 was taken modulo rank + 1
    a = R.randn(*shape).astype(np.float32)
    r = a.ndim
    for axis in range(-r, r + 1):
        k = axis + r if axis < 0 else axis
        want = a.reshape(int(np.prod(a.shape[:k])), -1)
        np.testing.assert_array_equal(tensor.to_numpy(autograd.flatten(t(a), axis)), want)


def test_flatten_axis_below_minus_rank_raises():
    with pytest.raises(AxisError, match="flatten"):
        autograd.flatten(t(np.zeros((2, 3), np.float32)), -3)


def test_prelu_ignores_the_slope_where_x_is_positive():
    # relu(x) + min(x, 0) * slope gave NaN where x > 0 and the slope was inf or NaN
    x = np.array([[1.5, -2.0, 0.5, -1.0]], np.float32)
    slope = np.array([[np.inf], [np.nan], [0.25]], np.float32)
    autograd.training = True
    tx, ts = t(x, True), t(slope, True)
    y = autograd.prelu(tx, ts)
    with np.errstate(invalid="ignore"):
        want = np.where(x > 0, x, slope * x)
    np.testing.assert_array_equal(tensor.to_numpy(y), want)
    dy = np.ones(want.shape, np.float32)
    dx, = grads_of(y, dy, tx)
    with np.errstate(invalid="ignore"):
        want_dx = np.where(x > 0, 1.0, slope).sum(axis=0, keepdims=True)
    np.testing.assert_array_equal(dx, want_dx)


def test_scatter_elements_overwrites_nan_and_inf():
    # x * keep + updates kept x's NaN/inf at written positions (NaN * 0)
    x = np.array([[np.nan, 1.0], [np.inf, -np.inf]], np.float32)
    idx = np.array([[0, 1], [1, 0]], np.int32)
    upd = np.array([[5.0, 6.0], [7.0, 8.0]], np.float32)
    y = tensor.to_numpy(autograd.scatter_elements(t(x), t(idx), t(upd), axis=1))
    want = x.copy()
    np.put_along_axis(want, idx.astype(np.int64), upd, 1)
    np.testing.assert_array_equal(y, want)


def test_hardswish_of_minus_inf_is_nan_as_in_torch():
    # below -3 the result was a plain 0; x * relu6(x + 3) / 6 is -inf * 0 there
    x = np.array([-np.inf, -5.0, -3.0, 0.5, 3.0, np.inf, np.nan], np.float32)
    with np.errstate(invalid="ignore"):
        want = x * np.clip(x + 3, 0, 6) / 6
    got = tensor.to_numpy(autograd.hardswish(t(x)))
    np.testing.assert_array_equal(got, want)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(got, torch.nn.functional.hardswish(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("op", ["ceil", "floor", "round", "rounde"])
def test_integral_rounding_of_int32_keeps_int32(op):
    # they went through the float32 kernel: a float32 result, 16777217 became 16777216
    a = np.array([[16777217, -3], [2 ** 31 - 1, 0]], np.int32)
    for f in (getattr(tensor, op), getattr(autograd, op)):
        y = tensor.to_numpy(f(t(a)))
        assert y.dtype == np.int32
        np.testing.assert_array_equal(y, a)
    y = tensor.to_numpy(getattr(tensor, op)(tensor.transpose(t(a))))
    np.testing.assert_array_equal(y, a.T)


def test_tensor_softmax_of_an_empty_batch():
    # Reshape(x, [rows, -1]) could not infer -1 with a 0 dimension; numpy gives an empty result
    for shape in [(0, 3, 2), (2, 0, 3), (0,)]:
        y = tensor.softmax(t(np.zeros(shape, np.float32)))
        assert tensor.to_numpy(y).shape == shape


def _log_softmax(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis=axis, keepdims=True)
    return (x - m) - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def test_log_softmax_keeps_log_sum_when_the_maximum_is_large():
    # x - (max + log(sum)) lost log(sum) next to a max of 1e30: [1e30, 1e30] gave [0, 0]
    x = np.array([[1e30, 1e30, -0.3], [1e8, 1e8 + 8, 0.0], [1.0, 2.0, 3.0]], np.float32)
    for axis in (1, -1):
        got = tensor.to_numpy(autograd.log_softmax(t(x), axis))
        np.testing.assert_allclose(got, _log_softmax(x, axis), rtol=1e-6)


def test_softmax_cross_entropy_of_large_logits():
    # the loss was lse - z with lse = max + log(sum) in float: 0 for logits [1e30, 1e30], whose
    # loss is log 2, and the gradient rows summed to 2
    x = np.array([[1e30, 1e30, 0.0], [1e8, 1e8, 1e8]], np.float32)
    labels = np.array([0, 2], np.int32)
    want = -_log_softmax(x, 1)[[0, 1], labels].mean()
    autograd.training = True
    for target in (labels, np.eye(3, dtype=np.float32)[labels]):
        tx = t(x, True)
        loss = autograd.softmax_cross_entropy(tx, t(target))
        np.testing.assert_allclose(tensor.to_numpy(loss), [want], rtol=1e-6)
        dx, = grads_of(loss, [1.0], tx)
        p = np.exp(_log_softmax(x, 1))
        np.testing.assert_allclose(dx, (p - np.eye(3)[labels]) / 2, atol=1e-7)


def test_softmax_cross_entropy_one_hot_with_a_minus_inf_logit():
    # a one-hot row summed t * (lse - z) over every class: 0 * inf = NaN at a -inf logit, where
    # the labels (and SINGA, which clamps the probability) give the finite loss
    x = np.array([[-np.inf, 0.5, 1.0], [0.0, -np.inf, 2.0]], np.float32)
    labels = np.array([1, 2], np.int32)
    by_label = tensor.to_numpy(autograd.softmax_cross_entropy(t(x), t(labels)))
    one_hot = tensor.to_numpy(autograd.softmax_cross_entropy(
        t(x), t(np.eye(3, dtype=np.float32)[labels])))
    want = -_log_softmax(x, 1)[[0, 1], labels].mean()
    np.testing.assert_allclose(by_label, [want], rtol=1e-6)
    np.testing.assert_allclose(one_hot, [want], rtol=1e-6)


def test_attention_row_with_every_key_masked_is_zeros_whatever_the_values():
    # the CPU kernel wrote acc * 0, and its tile product had made acc NaN from p = 0 times an
    # inf value: zeros only when the values were finite
    q = R.randn(1, 1, 2, 4).astype(np.float32)
    k = R.randn(1, 1, 3, 4).astype(np.float32)
    v = R.randn(1, 1, 3, 4).astype(np.float32)
    v[0, 0, 1, 2] = np.inf
    v[0, 0, 2, 0] = np.nan
    keep = np.array([[0, 0, 0], [1, 1, 1]], np.int32)  # query 0 sees no key
    y = tensor.to_numpy(autograd.scaled_dot_product_attention(t(q), t(k), t(v),
                                                              attn_mask=t(keep)))
    np.testing.assert_array_equal(y[0, 0, 0], np.zeros(4, np.float32))


def test_int_floor_division_and_mod_by_zero_give_numpys_zero():
    # the float32 quotient +-inf became -2147483648, and a % 0 was a itself
    a = np.array([5, -5, 7, 0], np.int32)
    b = np.array([2, 2, 0, 0], np.int32)
    with np.errstate(divide="ignore"):
        for got, want in [(t(a) // t(b), a // b), (t(a) % t(b), a % b), (t(a) // 0, a // 0),
                          (t(a) % 0, a % 0), (7 // t(b), 7 // b), (7 % t(b), 7 % b)]:
            assert got.dtype == tensor.int32
            np.testing.assert_array_equal(tensor.to_numpy(got), want)


def test_int_tensor_with_an_int_numpy_operand_stays_int():
    # an int numpy array was not seen as an integer operand: //, % and ** gave float32
    a = np.array([[5, -7], [3, 9]], np.int32)
    b = np.array([2, 3], np.int32)
    for op in (lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x ** y):
        got = op(t(a), b)
        assert got.dtype == tensor.int32
        np.testing.assert_array_equal(tensor.to_numpy(got), op(a, b))


def test_float_mod_is_exact_with_a_huge_quotient():
    # a - floor(a / b) * b gave 0 or -inf once a / b passed float32's 2^24 or its range
    a = np.array([1.8e20, -1.9e19, 7.5, -7.5, 2.0, 2.0, 0.0], np.float32)
    b = np.array([3.0, 1.4e-20, 2.0, 2.0, np.inf, -np.inf, -1.0], np.float32)
    got = tensor.to_numpy(t(a) % t(b))
    np.testing.assert_array_equal(got, np.mod(a, b))
    np.testing.assert_array_equal(tensor.to_numpy(2.5 % t(b[:4])), np.mod(np.float32(2.5), b[:4]))


def test_l1_and_l2_of_an_empty_tensor_are_nan():
    # 0 / 0 is NaN, as numpy's mean of nothing; they returned 0.0
    e = t(np.zeros((0, 3), np.float32))
    assert np.isnan(e.l1()) and np.isnan(e.l2())


def test_einsum_with_empty_subscripts_of_a_0d_operand():
    # '' was refused as no subscripts at all; numpy reads it as one 0-d operand
    x = np.array(2.5, np.float32)
    for spec in ("", "->"):
        got = tensor.to_numpy(tensor.einsum(spec, t(x)))
        np.testing.assert_array_equal(got, np.einsum(spec, x))
        assert got.shape == ()
    with pytest.raises(ValueError, match="einsum"):
        tensor.einsum("", t(np.ones(3, np.float32)))


def test_int_tensor_with_a_float_number_gives_float32():
    # the core's number overloads kept int32 for an integral float: t + 2.0 was int32, as was
    # t == 0.0 (numpy and torch give floats)
    a = np.array([[1, -2], [3, 4]], np.int32)
    for op, ref in [(lambda x: x + 2.0, None), (lambda x: 2.0 - x, None),
                    (lambda x: x * 3.0, None), (lambda x: x >= 0.0, None),
                    (lambda x: tensor.add(x, 2.0), lambda x: x + 2.0),
                    (lambda x: tensor.eq(x, 3.0), lambda x: x == 3.0)]:
        got = op(t(a))
        assert got.dtype == tensor.float32
        want = (ref or op)(a)
        np.testing.assert_array_equal(tensor.to_numpy(got), np.asarray(want, np.float32))
    assert (t(a) + 2).dtype == tensor.int32  # an int number keeps int32


def test_int_floor_division_is_exact_past_float32s_integers():
    # the float32 quotient lost the low digits: 16777217 // 1 was 16777216
    rng = np.random.default_rng(5)
    a = rng.integers(-2 ** 31, 2 ** 31, 2000).astype(np.int32)
    for b in (rng.integers(-40, 40, 2000).astype(np.int32),
              rng.integers(-2 ** 31, 2 ** 31, 2000).astype(np.int32)):
        with np.errstate(divide="ignore"):
            np.testing.assert_array_equal(tensor.to_numpy(t(a) // t(b)), a // b)
            np.testing.assert_array_equal(tensor.to_numpy(t(a) % t(b)), a % b)
    np.testing.assert_array_equal(tensor.to_numpy(t(a) // 7), a // 7)
    np.testing.assert_array_equal(tensor.to_numpy(1000000007 // t(a[:50])), 1000000007 // a[:50])


def test_float_floor_division_has_numpys_bits():
    # floor(a / b) rounded the quotient first: 1 // 0.1 was 10 (numpy: 9, as 1 = 9 * 0.1 + 0.1 - e)
    v = np.array([0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 2.5, -7.0, 1e30, -1e-30, 16777217.0, np.inf,
                  -np.inf, np.nan], np.float32)
    a, b = (x.ravel() for x in np.meshgrid(v, v))
    with np.errstate(all="ignore"):
        for got, want in [(t(a) // t(b), a // b), (t(a) % t(b), a % b),
                          (tensor.floordiv(t(a), t(b)), a // b), (tensor.mod(t(a), 0.1), a % np.float32(0.1)),
                          (3.0 // t(b), np.float32(3.0) // b)]:
            got = tensor.to_numpy(got)
            # the same bits (the signs of zeros included), NaN where numpy has NaN
            same = (got.view(np.int32) == want.view(np.int32)) | (np.isnan(got) & np.isnan(want))
            assert same.all(), (a[~same], b[~same], got[~same], want[~same])


def test_int_number_operand_is_exact_past_float32s_integers():
    # the core's number overloads took a float: int32 t + 16777217 added 16777216, and
    # t * 100000007 multiplied by 100000008
    a = np.array([0, 1, -3, 2 ** 31 - 1], np.int32)
    for op in (lambda x: x + 16777217, lambda x: x * 100000007, lambda x: x - (2 ** 31 - 1),
               lambda x: -2 ** 31 + x, lambda x: x // 16777217, lambda x: 1000000007 % x):
        got = op(t(a))
        assert got.dtype == tensor.int32
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(tensor.to_numpy(got), op(a))
    np.testing.assert_array_equal(tensor.to_numpy(t(a[:3]) == 16777217), [0, 0, 0])


def test_int_number_past_int32_raises_for_an_int32_tensor():
    # numpy 2: a Python int out of an int32 array's range raises; singa computed in float32
    x = t(np.array([1, 2], np.int32))
    for op in (lambda: x + 2 ** 31, lambda: 2 ** 40 * x, lambda: x // (-2 ** 31 - 1),
               lambda: tensor.sub(x, 2 ** 33)):
        with pytest.raises(OverflowError, match="out of bounds for int32"):
            op()
    assert np.all(tensor.to_numpy(x < 2 ** 40))  # comparisons take any int, as numpy's


def test_int_power_is_exact_and_wraps_as_numpys():
    # int32 ** int32 went through the float32 pow: 5 ** 13 was 1220703104, 3 ** 21 (past
    # int32) -2147483648 instead of numpy's wrapped 1870418611; tensor.pow returned float32
    a = np.array([5, 3, -3, 7, 2, 0, -1, 46341], np.int32)
    b = np.array([13, 21, 21, 11, 31, 0, 7, 2], np.int32)
    with np.errstate(over="ignore"):
        want = a ** b
    for got in (t(a) ** t(b), tensor.pow(t(a), t(b)), t(a) ** b):
        assert got.dtype == tensor.int32
        np.testing.assert_array_equal(tensor.to_numpy(got), want)
    np.testing.assert_array_equal(tensor.to_numpy(t(a) ** 3), a ** 3)
    np.testing.assert_array_equal(tensor.to_numpy(2 ** t(b[:5])), 2 ** b[:5])
    assert (t(a) ** 0.5).dtype == tensor.float32


def test_int_power_with_a_negative_exponent():
    # a Python int exponent raises as in numpy and torch; a tensor of exponents gives torch's
    # integer results (1 / a^-b truncated: 1, -1 or 0)
    with pytest.raises(ValueError, match="negative integer powers"):
        t(np.array([2, 3], np.int32)) ** -1
    a = np.array([1, -1, -1, 2, 0, -3], np.int32)
    b = np.array([-5, -3, -4, -1, -2, -1], np.int32)
    np.testing.assert_array_equal(tensor.to_numpy(t(a) ** t(b)), [1, -1, 1, 0, 0, 0])
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(tensor.to_numpy(t(a) ** t(b)),
                                  (torch.from_numpy(a) ** torch.from_numpy(b)).numpy())


def test_int_cumsum_wraps_as_numpys():
    # the int32 scan added in int: past 2^31 that is undefined behaviour (UBSan stopped
    # tools/fuzz_numpy.py there); now it wraps as numpy's int32 cumsum, forward and reversed
    a = np.array([[2 ** 31 - 5, 7, -2 ** 31, -2 ** 31, 3]], np.int32)
    with np.errstate(over="ignore"):
        want = np.cumsum(a, axis=1, dtype=np.int32)
        want_rev = np.cumsum(a[:, ::-1], axis=1, dtype=np.int32)[:, ::-1]
    np.testing.assert_array_equal(tensor.to_numpy(autograd.cumsum(t(a), 1)), want)
    np.testing.assert_array_equal(tensor.to_numpy(autograd.cumsum(t(a), 1, reverse=1)), want_rev)


def test_average_of_int32_does_not_wrap():
    # the int32 sum wrapped past 2^31 before the division
    a = np.array([2 ** 30, 2 ** 30, 2 ** 30, 5], np.int32)
    assert tensor.average(t(a)) == pytest.approx(a.mean(), rel=1e-6)


@pytest.mark.parametrize("op", ["asin", "acos"])
def test_asin_acos_gradient_is_nan_where_the_forward_is(op):
    # (1 - x^2) ** -0.5 is pow(-inf, -0.5) = +0 for |x| = inf or 1e30: a 0 gradient next to a NaN
    # forward (torch: NaN); inside the domain it is unchanged
    x = np.array([np.inf, -np.inf, 1e30, 2.0, 0.5, -0.25], np.float32)
    autograd.training = True
    tx = t(x, True)
    y = getattr(autograd, op)(tx)
    dx, = grads_of(y, np.ones(x.shape), tx)
    assert np.isnan(dx[:4]).all()
    want = 1 / np.sqrt(1 - x[4:].astype(np.float64) ** 2) * (1 if op == "asin" else -1)
    np.testing.assert_allclose(dx[4:], want, rtol=1e-6)


def test_pow_gradient_limits_at_zero_as_torch():
    # b * a^(b-1) at a = 0, b = 0 is 0 * inf (NaN), and a^b * log(a) at a = 0 is 0 * -inf or
    # 1 * -inf: torch's limits are 0 (a ** 0 is 1 for every a; 0 ** b, b >= 0, is flat in b)
    a = np.array([0.0, 0.0, 0.0, np.nan, 2.0, 0.0], np.float32)
    b = np.array([0.0, 2.0, 0.5, 0.0, 3.0, -1.0], np.float32)
    autograd.training = True
    ta, tb = t(a, True), t(b, True)
    da, db = grads_of(autograd.pow(ta, tb), np.ones(a.shape), ta, tb)
    torch = pytest.importorskip("torch")
    xa, xb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    torch.pow(xa, xb).backward(torch.ones(len(a)))
    np.testing.assert_array_equal(da, xa.grad.numpy())
    np.testing.assert_array_equal(db, xb.grad.numpy())
