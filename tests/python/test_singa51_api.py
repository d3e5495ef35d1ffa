"""The SINGA API that Apache SINGA 5.1's examples use beyond its own 3.3 tests (issue 16, points
2 and 3): in-place operators on the core tensor (`W.data += delta.data`, the LoRA merge of
singa_peft), `singa_wrap.Axpy` with the scale as a one-element device tensor (SINGA's optimizers,
cnn_ms), `singa_wrap.SumAll` returning a (1,) tensor, `autograd.tile` with fewer repeats than
axes (SINGA's rule, the healthcare models) and `autograd.dropout(x, 0.5)` (the ratio in the seed
position, SINGA's own test_dropout_cpu). Every expectation comes from numpy."""
import warnings

import numpy as np
import pytest

from gradcheck import check_graph, check_op
from singa import autograd, device, tensor
from singa import singa_wrap as sw
from singa.autograd import nn as autograd_nn

R = np.random.RandomState(51)


def u(*shape):
    return R.uniform(-1, 1, size=shape).astype(np.float32)


def ct(a):
    return sw.from_numpy(np.asarray(a))


N = sw.to_numpy


# ---- in-place operators on singa_wrap.Tensor -----------------------------------------------
INPLACE = [("+=", np.add), ("-=", np.subtract), ("*=", np.multiply), ("/=", np.divide)]


def apply(sym, left, right):
    if sym == "+=":
        left += right
    elif sym == "-=":
        left -= right
    elif sym == "*=":
        left *= right
    else:
        left /= right
    return left


@pytest.mark.parametrize("sym,ref", INPLACE, ids=[s for s, _ in INPLACE])
@pytest.mark.parametrize("rshape", [(3, 4), (4,), (3, 1), (1, 4), (1, 1, 4), ()])
def test_inplace_with_a_tensor_broadcasts_into_the_left_and_keeps_its_memory(sym, ref, rshape):
    a, b = u(3, 4), u(*rshape) + (2.0 if sym == "/=" else 0.0)
    if rshape == (1, 1, 4):  # would grow the left to (1, 3, 4): not in place
        return
    x = ct(a)
    view = sw.Reshape(x, (12,))  # a second handle of the same block
    block = x.block_id()
    y = apply(sym, x, ct(b))
    assert y is x and x.block_id() == block and x.shape() == (3, 4)
    np.testing.assert_allclose(N(x), ref(a, b), rtol=1e-6)
    np.testing.assert_allclose(N(view), ref(a, b).reshape(12), rtol=1e-6)


@pytest.mark.parametrize("sym,ref", INPLACE, ids=[s for s, _ in INPLACE])
@pytest.mark.parametrize("scalar", [0.5, -3, np.float32(2.5), np.int64(4)])
def test_inplace_with_a_number(sym, ref, scalar):
    a = u(2, 5)
    x = ct(a)
    apply(sym, x, scalar)
    np.testing.assert_allclose(N(x), ref(a, np.float32(scalar)), rtol=1e-6)
    assert N(x).dtype == np.float32


@pytest.mark.parametrize("left,right", [((4,), (3, 4)), ((3, 1), (3, 4)), ((3, 4), (3,)),
                                        ((3, 4), (1, 3, 4)), ((2, 3), (3, 2))])
def test_an_operand_that_would_grow_or_not_fit_the_left_raises_shape_error(left, right):
    a = u(*left)
    x = ct(a)
    with pytest.raises(sw.ShapeError) as e:
        x += ct(u(*right))
    msg = str(e.value)
    assert "+=" in msg and str(tuple(right)) in msg and str(tuple(left)) in msg
    np.testing.assert_array_equal(N(x), a)  # untouched


def test_dtype_mismatch_raises_dtype_error_and_leaves_the_tensor_alone():
    i = ct(np.array([1, 2, 3], np.int32))
    with pytest.raises(sw.DTypeError) as e:
        i += ct(np.array([0.5, 0.5, 0.5], np.float32))
    assert "+=" in str(e.value) and "int32" in str(e.value)
    with pytest.raises(sw.DTypeError):
        i *= 0.5  # numpy refuses the same cast
    with pytest.raises(sw.DTypeError):
        i /= 2  # true division gives floats
    np.testing.assert_array_equal(N(i), [1, 2, 3])
    i *= 3  # an integral number keeps int32
    i -= ct(np.array([1, 1, 1], np.int32))
    assert N(i).dtype == np.int32
    np.testing.assert_array_equal(N(i), [2, 5, 8])
    f = ct(np.array([0.5, 1.5], np.float32))
    f += ct(np.array([1, 2], np.int32))  # float32 += int32 stays float32, as in numpy
    np.testing.assert_array_equal(N(f), [1.5, 3.5])


def test_aliasing_operands_give_numpys_result():
    a = u(4, 4)
    x = ct(a)
    x += x
    np.testing.assert_allclose(N(x), a + a)
    x = ct(a)
    x -= sw.Transpose(x)  # a view of the same memory in another layout
    np.testing.assert_allclose(N(x), a - a.T)
    x = ct(a)
    x *= x
    np.testing.assert_allclose(N(x), a * a)
    x = ct(a)
    x /= sw.Reshape(sw.Transpose(x), (4, 4))
    np.testing.assert_allclose(N(x), a / a.T, rtol=1e-6)


def test_inplace_into_a_transposed_view_writes_through_its_strides():
    a, b = u(3, 5), u(5, 3)
    x = ct(a)
    xt = sw.Transpose(x)
    xt += ct(b)
    np.testing.assert_allclose(N(x), a + b.T)


def test_a_broadcast_view_on_the_left_is_refused():
    x = sw.Broadcast(ct(u(1, 4)), (3, 4))
    with pytest.raises(ValueError, match="broadcast view"):
        x += 1.0


@pytest.mark.parametrize("bad", ["1", None, np.ones((3,), np.float32), [1.0, 2.0, 3.0]])
def test_anything_but_a_tensor_or_a_number_is_a_type_error(bad):
    x = ct(u(3))
    with pytest.raises(TypeError):
        x += bad
    assert isinstance(x, sw.Tensor)


def test_a_python_tensor_operand_is_refused_with_a_hint():
    x = ct(u(3))
    with pytest.raises(TypeError, match=r"\.data"):
        x += tensor.from_numpy(u(3))


def test_nan_and_inf_propagate_like_numpy():
    a = np.array([1.0, np.nan, np.inf, -2.0], np.float32)
    b = np.array([np.nan, 1.0, -np.inf, 0.0], np.float32)
    with np.errstate(all="ignore"):
        for sym, ref in INPLACE:
            x = ct(a)
            apply(sym, x, ct(b))
            np.testing.assert_array_equal(N(x), ref(a, b))


def test_inplace_ops_record_into_a_graph_and_replay_in_place():
    dev = device.create_cpu_device(2)
    a, b = u(2, 3), u(3)
    x, y = sw.from_numpy(a, dev), sw.from_numpy(b, dev)
    dev.EnableGraph(True)
    x += y
    x *= 0.5
    dev.EnableGraph(False)
    np.testing.assert_array_equal(N(x), a)  # recorded, not run
    dev.RunGraph()
    dev.RunGraph()
    np.testing.assert_allclose(N(x), ((a + b) * 0.5 + b) * 0.5, rtol=1e-6)
    dev.ResetGraph()


def test_lora_merge_through_the_parameter_data():
    # singa_peft's LinearLoRALayer.merge_weights, then unmerge
    W = tensor.from_numpy(u(6, 4))
    w0 = tensor.to_numpy(W)
    A, B = tensor.from_numpy(u(2, 6)), tensor.from_numpy(u(4, 2))
    scaling = tensor.Tensor((1,))
    scaling.set_value(0.5)
    delta = tensor.mult(A.transpose((1, 0)), B.transpose((1, 0))) * scaling
    W.data += delta.data
    np.testing.assert_allclose(tensor.to_numpy(W), w0 + 0.5 * (N(A.data).T @ N(B.data).T),
                               rtol=1e-5, atol=1e-6)
    W.data -= delta.data
    np.testing.assert_allclose(tensor.to_numpy(W), w0, rtol=1e-5, atol=1e-6)


# ---- Axpy with a tensor scale ----------------------------------------------------------------
@pytest.mark.parametrize("ashape", [(1,), (), (1, 1)])
def test_axpy_with_a_one_element_tensor(ashape):
    x, y = u(3, 4), u(3, 4)
    alpha = ct(np.full(ashape, -0.25, np.float32))
    cy = ct(y)
    assert sw.Axpy(alpha, ct(x), cy) is cy
    np.testing.assert_allclose(N(cy), y - 0.25 * x, rtol=1e-6)


def test_axpy_with_a_number_still_works_and_sizes_may_differ_in_shape():
    x, y = u(12), u(3, 4)
    cy = ct(y)
    sw.Axpy(2, ct(x), cy)
    np.testing.assert_allclose(N(cy), y + 2 * x.reshape(3, 4), rtol=1e-6)
    cy = ct(y)
    sw.Axpy(ct(np.float32([2])), ct(x), cy)
    np.testing.assert_allclose(N(cy), y + 2 * x.reshape(3, 4), rtol=1e-6)


def test_axpy_tensor_scale_is_read_on_the_device_when_a_graph_replays():
    dev = device.create_cpu_device(2)
    alpha = sw.from_numpy(np.float32([0.5]), dev)
    x = sw.from_numpy(np.ones((2, 3), np.float32), dev)
    y = sw.from_numpy(np.zeros((2, 3), np.float32), dev)
    dev.EnableGraph(True)
    sw.Axpy(alpha, x, y)  # nothing may be read back while recording
    dev.EnableGraph(False)
    np.testing.assert_array_equal(N(y), np.zeros((2, 3)))
    dev.RunGraph()
    np.testing.assert_allclose(N(y), np.full((2, 3), 0.5))
    sw.copy_from_numpy(alpha, np.float32([-2.0]))
    dev.RunGraph()
    np.testing.assert_allclose(N(y), np.full((2, 3), -1.5))
    dev.ResetGraph()


@pytest.mark.parametrize("alpha,x,y,cls,words", [
    (np.float32([1, 2]), (3,), (3,), sw.ShapeError, "one value"),
    (np.int32([1]), (3,), (3,), sw.DTypeError, "float32"),
    (np.float32([1]), (3,), (4,), sw.ShapeError, "(3,)"),
])
def test_axpy_errors_name_the_op(alpha, x, y, cls, words):
    cy = ct(u(*y))
    before = N(cy)
    with pytest.raises(cls) as e:
        sw.Axpy(ct(alpha), ct(u(*x)), cy)
    assert "Axpy" in str(e.value) and words in str(e.value)
    np.testing.assert_array_equal(N(cy), before)
    with pytest.raises(TypeError):
        sw.Axpy("0.5", ct(u(3)), ct(u(3)))


def test_axpy_with_a_nan_scale_gives_nan():
    cy = ct(u(4))
    sw.Axpy(ct(np.float32([np.nan])), ct(u(4)), cy)
    assert np.isnan(N(cy)).all()


def test_sgd_momentum_step_written_with_tensor_axpy_matches_numpy():
    # cnn_ms's MSSGD.apply: decay, momentum buffer, update, every scale a device tensor
    p, g = u(5, 3), u(5, 3)
    lr, mom, wd = 0.1, 0.9, 1e-2
    buf = np.full_like(p, 0.3)
    cp, cg, cb = ct(p), ct(g), ct(buf)
    sw.Axpy(ct(np.float32([wd])), cp, cg)
    cb *= ct(np.float32([mom]))
    sw.Axpy(ct(np.float32([1.0])), cg, cb)
    sw.Axpy(ct(np.float32([-lr])), cb, cp)
    g2 = g + wd * p
    buf2 = mom * buf + g2
    np.testing.assert_allclose(N(cp), p - lr * buf2, rtol=1e-5, atol=1e-7)


# ---- SumAll --------------------------------------------------------------------------------
@pytest.mark.parametrize("a", [u(3, 4), u(7), np.arange(6, dtype=np.int32).reshape(2, 3),
                               np.zeros((0, 3), np.float32)])
def test_sum_all_is_a_one_element_tensor_of_the_inputs_dtype(a):
    s = sw.SumAll(ct(a))
    assert isinstance(s, sw.Tensor) and s.shape() == (1,)
    assert N(s).dtype == a.dtype
    np.testing.assert_allclose(N(s), [a.sum()], rtol=1e-6)
    assert sw.SumAsFloat(ct(a)) == pytest.approx(float(a.sum()), rel=1e-6)


def test_sum_all_records_into_a_graph_without_reading_values():
    dev = device.create_cpu_device(2)
    x = sw.from_numpy(np.ones((4, 5), np.float32), dev)
    dev.EnableGraph(True)
    s = sw.SumAll(x)
    dev.EnableGraph(False)
    dev.RunGraph()
    np.testing.assert_array_equal(N(s), [20.0])
    dev.ResetGraph()


def test_tensor_average_still_returns_a_float():
    a = u(3, 5)
    assert tensor.average(tensor.from_numpy(a)) == pytest.approx(float(a.mean()), rel=1e-5)


# ---- tile: fewer repeats than axes apply from the first axis ---------------------------------
def singa_tile(x, reps):
    reps = [reps] if isinstance(reps, int) else list(reps)
    return np.tile(x, reps + [1] * (x.ndim - len(reps)))


def test_tile_with_an_int_as_the_healthcare_model_calls_it():
    a = u(1, 10)
    y = autograd.tile(tensor.from_numpy(a), repeats=64)
    assert y.shape == (64, 10)
    np.testing.assert_array_equal(tensor.to_numpy(y), np.repeat(a, 64, axis=0))


@pytest.mark.parametrize("shape,reps", [((3, 4), [2]), ((2, 3, 4), [2, 3]), ((2, 3), 3),
                                        ((3, 4), [2, 1, 2]), ((3, 4), [1, 3])])
def test_tile_forward_and_backward(shape, reps):
    check_op(lambda ag, x: ag.tile(x, reps), lambda x: singa_tile(x, reps), [u(*shape)])


def test_tile_in_a_graph_equals_eager():
    check_graph(lambda ag, x: ag.tile(x, [3]), [u(2, 3)])


def test_tile_keeps_numpys_result_when_repeats_cover_every_axis():
    a = u(2, 3)
    for reps in ([2, 3], [1, 2, 2]):
        np.testing.assert_array_equal(tensor.to_numpy(autograd.tile(tensor.from_numpy(a), reps)),
                                      np.tile(a, reps))


# ---- dropout(x, 0.5): a ratio in the seed position -------------------------------------------
@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(autograd_nn, "_warned_ratio_as_seed", False)
    was = autograd.training
    autograd.training = True
    yield
    autograd.training = was


def kept_fraction(y):
    a = tensor.to_numpy(y)
    kept = a != 0
    return kept.mean(), a[kept]


def test_dropout_with_a_float_seed_warns_once_and_does_what_singa_does(fresh_warning):
    x = tensor.from_numpy(np.ones((200, 100), np.float32))
    with pytest.warns(UserWarning, match=r"ratio=0\.3") as rec:
        y = autograd.dropout(x, 0.3)
    assert len(rec) == 1 and "seed" in str(rec[0].message)
    assert rec[0].filename == __file__  # points at the caller
    # SINGA: seed int(0.3) = 0, the ratio keeps its default 0.5
    frac, vals = kept_fraction(y)
    assert abs(frac - 0.5) < 0.02
    np.testing.assert_allclose(vals, 2.0, rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = autograd.dropout(x, 0.5, 0.2)  # the second time is silent; the ratio is honoured
    frac, vals = kept_fraction(y)
    assert abs(frac - 0.8) < 0.02
    np.testing.assert_allclose(vals, 1.25, rtol=1e-6)


def test_singas_test_dropout_cpu_call(fresh_warning):
    x = tensor.from_numpy(R.randn(3, 4, 5).astype(np.float32))
    dy = tensor.from_numpy(R.randn(3, 4, 5).astype(np.float32))
    with pytest.warns(UserWarning):
        result = autograd.dropout(x, 0.5)
    dx = result.creator.backward(dy.data)
    assert result.shape == (3, 4, 5) and dx.shape() == (3, 4, 5)
    # the gradient uses the forward's mask
    mask = tensor.to_numpy(result) / tensor.to_numpy(x)
    np.testing.assert_allclose(N(dx), tensor.to_numpy(dy) * mask, rtol=1e-6)


@pytest.mark.parametrize("seed", [1.5, -0.5, 2.25])
def test_other_non_integral_seeds_still_raise(seed):
    with pytest.raises(ValueError, match="ratio="):
        autograd.dropout(tensor.from_numpy(u(2, 2)), seed)


def test_integral_seeds_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        autograd.Dropout(3)
        autograd.Dropout(3.0)
        autograd.Dropout(seed=0, ratio=0.1)
