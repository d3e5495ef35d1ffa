"""bfloat16 as a dtype (tensor.bfloat16): storage and rounding, numpy, every elementwise row,
reductions, matmul / conv / pooling / batch norm against float32, autograd through bf16 ops, and
the refusal on a CPU without AVX512_BF16 (pretended with SINGA_CPU_FEATURES_MASK).

The reference for a bf16 op is the float32 op on the same (bf16-representable) inputs, rounded
to bf16: the bf16 kernels compute in float and round once, so they agree to one bf16 step at
most. Finite differences mean nothing at 8 bits of mantissa: backward is compared with the
float32 run instead.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from singa import autograd, device, singa_wrap, tensor

try:
    import ml_dtypes
except ImportError:  # the uint16 fallback is tested then
    ml_dtypes = None

BF16 = tensor.bfloat16
HAS_BF16_CPU = "avx512_bf16" in device.cpu_features()
native = pytest.mark.skipif(not (HAS_BF16_CPU and singa_wrap.USE_DNNL),
                            reason="needs oneDNN and a CPU with avx512_bf16 (device.cpu_features())")


# ---- a reference of round-to-nearest-even written on the bits, independent of the library ----
def rne_bits(f):
    """bf16 bits of float32 values by choosing the nearer of the two neighbours in float64."""
    f = np.asarray(f, dtype=np.float32)
    bits = f.view(np.uint32)
    lo = (bits & 0xFFFF0000).astype(np.uint64)
    hi = lo + 0x10000
    x = f.astype(np.float64)
    vlo = lo.astype(np.uint32).view(np.float32).astype(np.float64)
    # the neighbour past the largest bf16 is Inf, reached from 2^128 on (rounding's view of it)
    vhi = np.where((hi & 0x7FFFFFFF) == 0x7F800000, np.copysign(2.0 ** 128, x),
                   (hi & 0xFFFFFFFF).astype(np.uint32).view(np.float32).astype(np.float64))
    dlo, dhi = np.abs(x - vlo), np.abs(vhi - x)
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (((lo >> 16) & 1) == 1))
    return np.where(pick_hi, hi >> 16, lo >> 16).astype(np.uint16)


def bits_of(t):
    """The bf16 bit patterns of a tensor.Tensor of dtype bfloat16."""
    a = tensor.to_numpy(t)
    return a.view(np.uint16)


def from_bits(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


def bf16_tensor(a):
    """A bf16 tensor holding a (rounded to nearest even)."""
    t = tensor.Tensor(np.shape(a), dtype=BF16)
    t.copy_from_numpy(np.asarray(a, np.float32))
    return t


def rounded(a):
    """float32 values that bf16 represents exactly: a rounded to bf16."""
    return from_bits(rne_bits(np.asarray(a, np.float32)))


def f32(a):
    return tensor.from_numpy(np.ascontiguousarray(a, np.float32))


# ---- storage, conversions, numpy --------------------------------------------------------------
def test_dtype_is_ours_and_two_bytes():
    assert BF16 == singa_wrap.kBFloat16 == 6
    assert tensor.sizeof(BF16) == 2
    assert tensor.dtype_name(BF16) == "bfloat16"
    assert BF16 not in tensor.Tensor.dtype_name  # SINGA 3.3's table stays as it was
    t = tensor.Tensor((3, 5), dtype=BF16)
    assert t.dtype == BF16 and t.data.MemSize() == 30


def test_rounding_matches_a_reference_on_the_bits():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, size=20000, dtype=np.uint64).astype(np.uint32)
    f = bits.view(np.float32)
    f = f[np.isfinite(f)]
    ties = from_bits(np.arange(0, 4000, dtype=np.uint32) + 0x3F80) + 0  # exact bf16 values
    ties_bits = ties.view(np.uint32) | 0x8000  # exactly halfway to the next bf16
    f = np.concatenate([f, ties_bits.view(np.float32), np.float32([0.0, -0.0, 1e-40, -1e-41])])
    got = bits_of(bf16_tensor(f))
    np.testing.assert_array_equal(got, rne_bits(f))
    if ml_dtypes is not None:
        np.testing.assert_array_equal(got, f.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_nan_stays_nan_and_inf_stays_inf():
    low_payload_nan = np.uint32(0x7F800001).view(np.float32)  # truncation would give Inf
    f = np.float32([np.nan, -np.nan, low_payload_nan, np.inf, -np.inf, 3.4e38, -3.4e38])
    back = tensor.to_numpy(bf16_tensor(f).as_type(tensor.float32))
    assert np.isnan(back[:3]).all()
    np.testing.assert_array_equal(back[3:], np.float32([np.inf, -np.inf, np.inf, -np.inf]))


def test_round_trip_and_as_type():
    x = rounded(np.linspace(-3, 3, 24, dtype=np.float32)).reshape(4, 6)
    t = f32(x).as_type(BF16)
    assert t.dtype == BF16
    np.testing.assert_array_equal(tensor.to_numpy(t.as_type(tensor.float32)), x)
    np.testing.assert_array_equal(tensor.to_numpy(t.as_type("float16")).astype(np.float32),
                                  x.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(tensor.to_numpy(t.as_type(tensor.int32)), x.astype(np.int32))
    # a transposed view converts through its strides
    np.testing.assert_array_equal(tensor.to_numpy(t.T().as_type(tensor.float32)), x.T)


def test_numpy_face():
    x = rounded(np.arange(-4, 4, dtype=np.float32) / 3)
    a = tensor.to_numpy(bf16_tensor(x))
    assert a.dtype == singa_wrap.BFLOAT16_NUMPY
    if ml_dtypes is None:  # uint16 bit patterns
        np.testing.assert_array_equal(from_bits(a), x)
        return
    assert a.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(a.astype(np.float32), x)
    t = tensor.from_numpy(x.astype(ml_dtypes.bfloat16))  # bf16 in, bf16 tensor out
    assert t.dtype == BF16
    np.testing.assert_array_equal(bits_of(t), rne_bits(x))
    assert tensor.Tensor((2,), dtype=ml_dtypes.bfloat16).dtype == BF16


def test_check_finite_counts_bf16_nan_and_inf():
    dev = singa_wrap.create_cpu_device()
    dev.SetCheckFinite(True)
    x = tensor.from_numpy(np.float32([[-1.0, 1.0, 0.0], [2.0, -3.0, 4.0]]), dev).as_type(BF16)
    with pytest.raises(singa_wrap.NonFiniteError) as e:
        autograd.log(x)
    assert "'Log'" in str(e.value) and "2 NaN" in str(e.value) and "1 Inf" in str(e.value)
    assert "bfloat16" in str(e.value)


def test_mixing_with_float32_promotes():
    a = bf16_tensor([1.0, 2.0])
    assert (a + f32([0.5, 0.25])).dtype == tensor.float32
    assert (a + 1.5).dtype == BF16  # a scalar keeps the tensor's dtype
    assert (a * a).dtype == BF16


# ---- elementwise rows and reductions ---------------------------------------------------------
UNARY = [r for r in singa_wrap.ELEMENTWISE_OPS if r[1] == 1]
BINARY = [r for r in singa_wrap.ELEMENTWISE_OPS if r[1] == 2]


def assert_within_one_step(got_bits, want_bits, what):
    g, w = got_bits.astype(np.int64), want_bits.astype(np.int64)
    nan_g, nan_w = np.isnan(from_bits(got_bits)), np.isnan(from_bits(want_bits))
    np.testing.assert_array_equal(nan_g, nan_w, err_msg=what)
    ok = ~nan_g
    assert np.abs(g[ok] - w[ok]).max(initial=0) <= 1, what


@pytest.mark.parametrize("name", [r[0] for r in UNARY])
def test_unary_row(name):
    rng = np.random.default_rng(1)
    x = rounded(rng.uniform(0.05, 0.95, size=(7, 33)).astype(np.float32))
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.5]
    fn = getattr(singa_wrap, name)
    got = fn(bf16_tensor(x).data)
    assert got.data_type() == BF16
    with np.errstate(all="ignore"):
        want = rne_bits(singa_wrap.to_numpy(fn(f32(x).data)).astype(np.float32))
    assert_within_one_step(singa_wrap.to_numpy(got).view(np.uint16), want, name)


@pytest.mark.parametrize("name", [r[0] for r in BINARY])
def test_binary_row(name):
    rng = np.random.default_rng(2)
    a = rounded(rng.uniform(0.1, 2.0, size=(5, 17)).astype(np.float32))
    b = rounded(rng.uniform(0.5, 1.5, size=(17,)).astype(np.float32))  # broadcast row
    a[0, 0] = np.nan
    fn = getattr(singa_wrap, name)
    got = fn(bf16_tensor(a).data, bf16_tensor(b).data)
    want = rne_bits(singa_wrap.to_numpy(fn(f32(a).data, f32(b).data)).astype(np.float32))
    assert_within_one_step(singa_wrap.to_numpy(got).view(np.uint16), want, name)


@pytest.mark.parametrize("fn,args", [("ReduceSum", ([1], False)), ("ReduceMean", ([0, 2], True)),
                                     ("ReduceMax", ([], False)), ("ReduceMin", ([2], False))])
def test_reductions_accumulate_in_float32(fn, args):
    x = rounded(np.random.default_rng(3).normal(size=(4, 300, 3)).astype(np.float32))
    got = getattr(singa_wrap, fn)(bf16_tensor(x).data, *args)
    assert got.data_type() == BF16
    want = rne_bits(singa_wrap.to_numpy(getattr(singa_wrap, fn)(f32(x).data, *args)))
    assert_within_one_step(singa_wrap.to_numpy(got).view(np.uint16), want, fn)
    am = singa_wrap.Argmax(bf16_tensor(x).data, 1, False)
    np.testing.assert_array_equal(singa_wrap.to_numpy(am), x.argmax(axis=1))


def test_softmax_runs_in_float32_and_rounds():
    x = rounded(np.random.default_rng(4).normal(size=(6, 10)).astype(np.float32))
    got = singa_wrap.SoftMax(bf16_tensor(x).data, 1)
    want = rne_bits(singa_wrap.to_numpy(singa_wrap.SoftMax(f32(x).data, 1)))
    assert_within_one_step(singa_wrap.to_numpy(got).view(np.uint16), want, "SoftMax")


# ---- matmul, convolution, pooling, batch norm ---------------------------------------------
def close_to_f32(got_bf16, want_f32, scale):
    """bf16 output vs the float32 op on the same inputs: one rounding of the result, plus
    accumulation order, relative to the size of the values."""
    got = tensor.to_numpy(got_bf16.as_type(tensor.float32))
    np.testing.assert_allclose(got, want_f32, rtol=1 / 128, atol=scale / 128)


def matmul_case(shape_a, shape_b, transpose_b=False):
    rng = np.random.default_rng(5)
    a = rounded(rng.normal(size=shape_a).astype(np.float32))
    b = rounded(rng.normal(size=shape_b).astype(np.float32))
    tb = bf16_tensor(b)
    if transpose_b:  # a transposed view is read through its strides
        tb, b = bf16_tensor(b.swapaxes(-1, -2).copy()).T() if b.ndim == 2 else tb, b
    got = tensor.Tensor(data=singa_wrap.Mult(bf16_tensor(a).data, tb.data))
    assert got.dtype == BF16
    want = a @ b
    close_to_f32(got, want, np.abs(want).max())


@native
@pytest.mark.parametrize("backend", ["dnnl", "cpu"])
@pytest.mark.parametrize("sa,sb,tb", [((33, 70), (70, 19), False), ((8, 16), (16, 8), True),
                                      ((3, 5, 40), (40, 7), False), ((2, 1, 6, 9), (4, 9, 5), False),
                                      ((70,), (70, 3), False)])
def test_matmul(backend, sa, sb, tb):
    dev = device.get_default_device()
    old = dev.backend()
    dev.set_backend(backend)
    try:
        matmul_case(sa, sb, tb)
    finally:
        dev.set_backend(old)


def conv_case(xs, oc, k, s, p, g, relu=False):
    rng = np.random.default_rng(6)
    x = rounded(rng.normal(size=xs).astype(np.float32))
    w = rounded(rng.normal(size=(oc, xs[1] // g, k, k)).astype(np.float32) * 0.3)
    b = rounded(rng.normal(size=(oc,)).astype(np.float32))
    h = singa_wrap.ConvHandle(xs, k, s, p, xs[1], oc, True, g, 1)
    y16 = singa_wrap.Conv2dForward(bf16_tensor(x).data, bf16_tensor(w).data,
                                   bf16_tensor(b).data, h, relu)
    y32 = singa_wrap.Conv2dForward(f32(x).data, f32(w).data, f32(b).data, h, relu)
    want = singa_wrap.to_numpy(y32)
    close_to_f32(tensor.Tensor(data=y16), want, np.abs(want).max())
    dy = rounded(rng.normal(size=want.shape).astype(np.float32))
    for f16, f_32 in (
            (singa_wrap.Conv2dBackwardX(bf16_tensor(dy).data, bf16_tensor(w).data, h),
             singa_wrap.Conv2dBackwardX(f32(dy).data, f32(w).data, h)),
            (singa_wrap.Conv2dBackwardW(bf16_tensor(dy).data, bf16_tensor(x).data, h),
             singa_wrap.Conv2dBackwardW(f32(dy).data, f32(x).data, h)),
            (singa_wrap.Conv2dBackwardB(bf16_tensor(dy).data, h),
             singa_wrap.Conv2dBackwardB(f32(dy).data, h))):
        assert f16.data_type() == BF16
        w32 = singa_wrap.to_numpy(f_32)
        close_to_f32(tensor.Tensor(data=f16), w32, np.abs(w32).max())


@native
@pytest.mark.parametrize("xs,oc,k,s,p,g,relu", [((2, 3, 9, 9), 8, 3, 1, 1, 1, False),
                                                ((3, 16, 10, 7), 32, 3, 2, 1, 1, True),
                                                ((2, 8, 8, 8), 8, 3, 1, 1, 4, False)])
def test_conv(xs, oc, k, s, p, g, relu):
    conv_case(xs, oc, k, s, p, g, relu)


def test_conv_on_the_reference_backend_goes_through_float32():
    dev = device.get_default_device()
    old = dev.backend()
    dev.set_backend("cpu")
    try:
        conv_case((2, 4, 6, 6), 5, 3, 1, 1, 1)
        matmul_case((9, 12), (12, 4))
    finally:
        dev.set_backend(old)


@pytest.mark.parametrize("is_max", [True, False])
def test_pooling(is_max):
    rng = np.random.default_rng(7)
    x = rounded(rng.normal(size=(2, 3, 8, 8)).astype(np.float32))
    x[0, 0, 0, 0] = np.nan  # NaN propagates through max pooling, as in float32
    h = singa_wrap.PoolingHandle((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], is_max, False)
    y16 = singa_wrap.Pool2dForward(bf16_tensor(x).data, h)
    y32 = singa_wrap.to_numpy(singa_wrap.Pool2dForward(f32(x).data, h))
    assert y16.data_type() == BF16
    assert_within_one_step(singa_wrap.to_numpy(y16).view(np.uint16), rne_bits(y32), "pool")
    dy = rounded(rng.normal(size=y32.shape).astype(np.float32))
    dx16 = singa_wrap.Pool2dBackward(bf16_tensor(dy).data, bf16_tensor(x).data, y16, h)
    dx32 = singa_wrap.Pool2dBackward(f32(dy).data, f32(x).data, f32(y32).data, h)
    assert_within_one_step(singa_wrap.to_numpy(dx16).view(np.uint16),
                           rne_bits(singa_wrap.to_numpy(dx32)), "pool backward")


def test_batchnorm_statistics_in_float32():
    rng = np.random.default_rng(8)
    x = rounded(rng.normal(2.0, 3.0, size=(4, 3, 5, 5)).astype(np.float32))
    scale, bias = f32(rng.uniform(0.5, 1.5, 3)), f32(rng.normal(size=3))
    rm, rv = f32(np.zeros(3)), f32(np.ones(3))
    rm2, rv2 = f32(np.zeros(3)), f32(np.ones(3))
    y16, m16, v16 = singa_wrap.BatchNormForwardTraining(bf16_tensor(x).data, scale.data,
                                                        bias.data, rm.data, rv.data, 0.1, 1e-5)
    y32, m32, v32 = singa_wrap.BatchNormForwardTraining(f32(x).data, scale.data, bias.data,
                                                        rm2.data, rv2.data, 0.1, 1e-5)
    assert y16.data_type() == BF16 and m16.data_type() == tensor.float32
    want = singa_wrap.to_numpy(y32)
    close_to_f32(tensor.Tensor(data=y16), want, np.abs(want).max())
    np.testing.assert_array_equal(singa_wrap.to_numpy(m16), singa_wrap.to_numpy(m32))
    np.testing.assert_array_equal(tensor.to_numpy(rm), tensor.to_numpy(rm2))
    dy = rounded(rng.normal(size=x.shape).astype(np.float32))
    g16 = singa_wrap.BatchNormBackward(bf16_tensor(dy).data, bf16_tensor(x).data, scale.data,
                                       m16, v16, 1e-5)
    g32 = singa_wrap.BatchNormBackward(f32(dy).data, f32(x).data, scale.data, m32, v32, 1e-5)
    assert g16[0].data_type() == BF16
    for a, b in zip(g16, g32):
        want = singa_wrap.to_numpy(b)
        close_to_f32(tensor.Tensor(data=a).as_type(tensor.float32), want, np.abs(want).max())


def test_ops_without_bf16_name_the_op_and_the_dtype():
    x = bf16_tensor(np.ones((2, 3), np.float32))
    labels = tensor.from_numpy(np.zeros(2, np.int32))
    with pytest.raises(singa_wrap.DTypeError,
                       match=r"SoftmaxCrossEntropy\w*: expects float32 .*got bfloat16"):
        singa_wrap.SoftmaxCrossEntropyForward(x.data, labels.data)


# ---- autograd ---------------------------------------------------------------------------------
@native
def test_autograd_backward_matches_float32():
    rng = np.random.default_rng(9)
    xv = rounded(rng.normal(size=(6, 2, 7, 7)).astype(np.float32))
    wv = rounded(rng.normal(size=(4, 2, 3, 3)).astype(np.float32) * 0.3)
    lv = rounded(rng.normal(size=(4 * 5 * 5, 3)).astype(np.float32) * 0.1)
    grads = {}
    for dt in (tensor.float32, BF16):
        autograd.training = True
        x = f32(xv).as_type(dt)
        w, lw = f32(wv).as_type(dt), f32(lv).as_type(dt)
        w.requires_grad = lw.requires_grad = True
        w.stores_grad = lw.stores_grad = True
        h = singa_wrap.ConvHandle(xv.shape, [3, 3], [1, 1], [0, 0], 2, 4, False, 1, [1, 1])
        y = autograd.relu(autograd.conv2d(h, x, w))
        y = autograd.reshape(y, (6, 4 * 5 * 5))
        out = autograd.tanh(autograd.matmul(y, lw))
        loss = autograd.reduce_mean(autograd.mul(out, out))
        got = {id(p): g for p, g in autograd.backward(loss)}
        grads[dt] = [tensor.to_numpy(got[id(p)].as_type(tensor.float32)) for p in (w, lw)]
        assert got[id(w)].dtype == dt
    autograd.training = False
    for g16, g32 in zip(grads[BF16], grads[tensor.float32]):
        np.testing.assert_allclose(g16, g32, rtol=0.05, atol=0.02 * np.abs(g32).max())


# ---- cpu_features and the refusal -------------------------------------------------------------
def test_cpu_features_agree_with_proc_cpuinfo():
    have = device.cpu_features()
    assert isinstance(have, frozenset)
    if not os.path.exists("/proc/cpuinfo") or os.environ.get("SINGA_CPU_FEATURES_MASK"):
        pytest.skip("needs Linux's /proc/cpuinfo and no mask")
    flags = set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    assert have <= flags, sorted(have - flags)
    for name in ("sse4_2", "avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"):
        assert (name in have) == (name in flags), name


REFUSAL = """
import numpy as np
from singa import device, singa_wrap, tensor
assert "avx512_bf16" not in device.cpu_features(), device.cpu_features()
a = tensor.from_numpy(np.ones((4, 4), np.float32)).as_type(tensor.bfloat16)
print("add", tensor.to_numpy((a + a).as_type(tensor.float32))[0, 0])  # elementwise still runs
try:
    singa_wrap.Mult(a.data, a.data)
except NotImplementedError as e:
    print("refused:", e)
"""


@pytest.mark.skipif(not singa_wrap.USE_DNNL, reason="built without oneDNN (USE_DNNL=OFF)")
def test_a_cpu_without_avx512_bf16_refuses_naming_it():
    env = dict(os.environ, SINGA_CPU_FEATURES_MASK="avx512_bf16,amx_bf16")
    r = subprocess.run([sys.executable, "-c", REFUSAL], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "add 2.0" in r.stdout
    assert "refused: Mult (bfloat16): needs the avx512_bf16 instruction set" in r.stdout, r.stdout
