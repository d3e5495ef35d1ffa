"""The CPU's matrix products through either library (singa/ops/gemm_backend.h): oneDNN's and
OpenBLAS' sgemm give numpy's results for every layout the fronts pass (transposed views, odd
and empty shapes, batches with broadcasting, alpha/beta), propagate NaN and Inf as numpy does,
and SINGA_GEMM / device.set_gemm_backend select the library that runs (last_gemm_backend).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from singa import device, opt, tensor
from singa import singa_wrap as sw
import tiny_nets
from backend_switch import backend
from child_env import child_env

LIBS = ["openblas"] + (["dnnl"] if sw.USE_DNNL else [])


@pytest.fixture(params=LIBS)
def lib(request):
    """Runs the test with each library chosen, then restores the process's own choice."""
    device.set_gemm_backend(request.param)
    yield request.param
    device.set_gemm_backend("auto")


def exact_matmul(a, b):
    """numpy's elementwise semantics (NaN * 0 = NaN, Inf - Inf = NaN), in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return (a[..., :, :, None] * b[..., None, :, :]).sum(axis=-2)


def view(x, t, dev):
    """A singa operand: the numpy array x, as a transposed view of its transpose when t."""
    if not t:
        return tensor.from_numpy(np.ascontiguousarray(x), dev)
    axes = list(range(x.ndim))
    axes[-2:] = axes[-1], axes[-2]
    return tensor.from_numpy(np.ascontiguousarray(np.swapaxes(x, -1, -2)), dev).transpose(axes)


def run_mult(a, b, ta=False, tb=False):
    dev = device.get_default_device()
    out = tensor.to_numpy(tensor.mult(view(a, ta, dev), view(b, tb, dev)))
    return out


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 13, 5), (33, 17, 65), (64, 784, 100),
                                   (3, 1, 4), (1, 40, 1)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_2d_products_match_numpy(lib, m, k, n, ta, tb):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = run_mult(a, b, ta, tb)
    np.testing.assert_allclose(got, exact_matmul(a, b), rtol=1e-4, atol=1e-4 * np.sqrt(k))
    assert device.last_gemm_backend() == lib


def test_both_libraries_agree_on_a_large_product():
    if len(LIBS) < 2:
        pytest.skip("built without oneDNN: one library only")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 517)).astype(np.float32)
    b = rng.standard_normal((517, 129)).astype(np.float32)
    outs = {}
    for name in LIBS:
        device.set_gemm_backend(name)
        outs[name] = run_mult(a, b, ta=True)
        assert device.last_gemm_backend() == name
    device.set_gemm_backend("auto")
    np.testing.assert_allclose(outs["dnnl"], outs["openblas"], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("sa,sb", [((4, 6, 5), (4, 5, 3)),       # one product per batch index
                                   ((2, 3, 6, 5), (5, 7)),        # b broadcast over the batch
                                   ((6, 5), (3, 1, 5, 2)),        # a broadcast, b's axis of 1
                                   ((2, 1, 4, 3), (1, 5, 3, 4)),  # both broadcast
                                   ((64, 9, 8), (64, 8, 9))])     # more products than threads
def test_batched_products_match_numpy(lib, sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    np.testing.assert_allclose(run_mult(a, b), np.matmul(a, b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run_mult(a, b, ta=True, tb=True), np.matmul(a, b), rtol=1e-4,
                               atol=1e-4)
    assert device.last_gemm_backend() == lib


def test_vector_operands(lib):
    rng = np.random.default_rng(2)
    m = rng.standard_normal((5, 4)).astype(np.float32)
    v = rng.standard_normal(4).astype(np.float32)
    w = rng.standard_normal(5).astype(np.float32)
    np.testing.assert_allclose(run_mult(m, v), m @ v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run_mult(w, m), w @ m, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run_mult(v, v), v @ v, rtol=1e-5, atol=1e-5)


def test_empty_inner_size_gives_zeros_and_scales_c(lib):
    """k == 0: A B is all zeros (oneDNN's sgemm would leave C as it was; the kernel does it)."""
    dev = device.get_default_device()
    a, b = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32)
    np.testing.assert_array_equal(run_mult(a, b), np.zeros((3, 4), np.float32))
    c = tensor.from_numpy(np.full((3, 4), 2.0, np.float32), dev)
    tensor.mult(tensor.from_numpy(a, dev), tensor.from_numpy(b, dev), c, alpha=1.0, beta=0.5)
    np.testing.assert_array_equal(tensor.to_numpy(c), np.full((3, 4), 1.0, np.float32))
    empty = run_mult(np.zeros((0, 3), np.float32), np.ones((3, 2), np.float32))
    assert empty.shape == (0, 2)


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, 1.0), (-2.0, 0.25), (1.0, -1.0)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_alpha_beta_into_c(lib, alpha, beta, ta, tb):
    dev = device.get_default_device()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((9, 11)).astype(np.float32)
    b = rng.standard_normal((11, 6)).astype(np.float32)
    c0 = rng.standard_normal((9, 6)).astype(np.float32)
    c = tensor.from_numpy(c0, dev)
    tensor.mult(view(a, ta, dev), view(b, tb, dev), c, alpha=alpha, beta=beta)
    np.testing.assert_allclose(tensor.to_numpy(c), alpha * exact_matmul(a, b) + beta * c0,
                               rtol=1e-4, atol=1e-4)


def test_beta_zero_overwrites_c_even_where_it_holds_nan(lib):
    """BLAS's convention, kept by both: with beta == 0, C is output only (never read)."""
    dev = device.get_default_device()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((3, 2), np.float32)
    c = tensor.from_numpy(np.array([[np.nan, np.inf], [-np.inf, np.nan]], np.float32), dev)
    tensor.mult(tensor.from_numpy(a, dev), tensor.from_numpy(b, dev), c, beta=0.0)
    np.testing.assert_array_equal(tensor.to_numpy(c), a @ b)


NONFINITE = {
    "nan in a": (np.array([[np.nan, 1.0], [2.0, 3.0]]), np.array([[0.0, 1.0], [0.0, 2.0]])),
    "inf times zero": (np.array([[np.inf, 1.0], [2.0, 3.0]]), np.array([[0.0, 1.0], [5.0, 2.0]])),
    "inf plus -inf": (np.array([[np.inf, np.inf], [1.0, 3.0]]),
                      np.array([[1.0, 2.0], [-1.0, 0.5]])),
    "-inf in b": (np.array([[1.0, 2.0], [0.5, 3.0]]), np.array([[-np.inf, 1.0], [1.0, 2.0]])),
}


@pytest.mark.parametrize("case", sorted(NONFINITE))
@pytest.mark.parametrize("ta", [False, True])
def test_nan_and_inf_propagate_like_numpy(lib, case, ta):
    a, b = (x.astype(np.float32) for x in NONFINITE[case])
    big_a = np.tile(a, (20, 33))  # past the size where a library might take a special path
    big_b = np.tile(b, (33, 20))
    for x, y in ((a, b), (big_a, big_b)):
        got, want = run_mult(x, y, ta=ta), exact_matmul(x, y)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=case)
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want), err_msg=case)
        np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want), err_msg=case)
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-4, err_msg=case)


def test_batched_nan_propagates(lib):
    a = np.ones((8, 3, 4), np.float32)
    a[5, 1, 2] = np.nan
    b = np.zeros((4, 2), np.float32)
    got = run_mult(a, b)
    want = exact_matmul(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).sum() == 2


def test_reference_backend_always_runs_openblas():
    dev = device.get_default_device()
    if not sw.USE_DNNL:
        pytest.skip("built without oneDNN: the reference kernels are the only ones")
    device.set_gemm_backend("dnnl")
    try:
        with backend(dev, "cpu"):
            run_mult(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
            assert device.last_gemm_backend() == "openblas"
        run_mult(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
        assert device.last_gemm_backend() == "dnnl"
    finally:
        device.set_gemm_backend("auto")


def test_a_recorded_graph_follows_the_choice_at_replay():
    dev = device.get_default_device()
    net = tiny_nets.compiled(opt.SGD(lr=0.1), dev, use_graph=True)
    (x, y), = tiny_nets.batches(1)
    tx, ty = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
    try:
        for name in LIBS + LIBS[::-1]:  # the first step records, the others replay
            device.set_gemm_backend(name)
            net(tx, ty)
            assert device.last_gemm_backend() == name
    finally:
        device.set_gemm_backend("auto")


def test_set_gemm_backend_rejects_other_names():
    with pytest.raises(ValueError, match="auto, openblas or dnnl"):
        device.set_gemm_backend("mkl")
    with pytest.raises(TypeError):
        device.set_gemm_backend(1)
    assert device.gemm_backend() in ("openblas", "dnnl")


PROBE = """
import numpy as np
from singa import device, tensor
before = device.last_gemm_backend()
try:
    tensor.mult(tensor.from_numpy(np.ones((2, 3), np.float32)),
                tensor.from_numpy(np.ones((3, 2), np.float32)))
    ran = device.last_gemm_backend()
    name, why = device.gemm_backend(reason=True)
except ValueError as e:
    name = why = ran = "ValueError: %s" % e
print("|".join([name, why, before, ran]))
"""


def probe(knob):
    env = child_env()
    env.pop("SINGA_GEMM", None)
    if knob is not None:
        env["SINGA_GEMM"] = knob
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1].split("|")


def test_the_environment_knob_selects_the_library():
    """SINGA_GEMM, read once per process: each value in its own interpreter."""
    name, why, before, ran = probe("openblas")
    assert (name, before, ran) == ("openblas", "none", "openblas"), why
    name, why, _, ran = probe("dnnl")
    want = "dnnl" if sw.USE_DNNL else "openblas"
    assert (name, ran) == (want, want), why
    name, why, _, ran = probe(None)
    assert name == ran and why.startswith("auto:"), why
    assert name == probe("auto")[0]
    *_, ran = probe("fastest")  # the first product raises, naming the variable and the value
    assert ran.startswith("ValueError") and "SINGA_GEMM" in ran and "fastest" in ran, ran
