"""The table's rows whose host loops use the vectorisable math of elementwise_functors.h instead
of libm (Exp through vec::ExpAny, Tanh through vec::TanhAny, Sigmoid through vec::Exp): accuracy
against float64 over the whole float range, the overflow and denormal ends and the special
values included."""
import numpy as np

from singa import singa_wrap as sw, tensor


def run(op, x):
    return sw.to_numpy(getattr(sw, op)(tensor.from_numpy(x).data))


def ulps(a, b):
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 88.72, 88.73, -87.3,
                    -103.0, -103.97, -104.5, 1e30, -1e30], np.float32)


def test_exp_is_within_one_ulp_everywhere():
    x = np.concatenate([np.linspace(-110, 95, 1000001, dtype=np.float32), SPECIAL])
    got = run("Exp", x)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)  # correctly rounded
    finite = np.isfinite(want) & (want != 0)
    assert ulps(got[finite], want[finite]).max() <= 1
    # inf past 88.72, 0 past the denormals, NaN kept, exp(+-0) = 1
    np.testing.assert_array_equal(got[~finite], want[~finite])
    assert np.isnan(run("Exp", np.array([np.nan], np.float32)))[0]


def test_sigmoid_relative_error_and_ends():
    x = np.concatenate([np.linspace(-110, 110, 1000001, dtype=np.float32), SPECIAL])
    got = run("Sigmoid", x)
    with np.errstate(over="ignore"):
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
    normal = np.isfinite(x) & (want > 1e-37)  # below: flushed to 0 (libm's 1 / (1 + inf) too)
    assert (np.abs(got[normal] - want[normal]) / want[normal]).max() < 2.5e-7
    assert np.all(got[np.isfinite(x) & ~normal] < 1e-37)
    np.testing.assert_array_equal(run("Sigmoid", np.array([np.inf, -np.inf, 0], np.float32)),
                                  [1, 0, 0.5])
    assert np.isnan(run("Sigmoid", np.array([np.nan], np.float32)))[0]


def test_tanh_is_within_two_ulps_near_zero_too():
    # (1 - e) / (1 + e) alone lost the relative accuracy of small |x| (tanh(1e-4) to ~1e-3)
    tiny = np.geomspace(1e-38, 1, 100001).astype(np.float32)
    x = np.concatenate([np.linspace(-12, 12, 1000001, dtype=np.float32), tiny, -tiny,
                        np.nextafter(np.float32(0.4), np.float32([0, 1])), SPECIAL])
    got = run("Tanh", x)
    want = np.tanh(x.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(x)
    assert ulps(got[finite], want[finite]).max() <= 2
    # saturated (|x| >= 1): rounded once, as libm's; the gradient 1 - t^2 magnifies any ulp
    sat = finite & (np.abs(x) >= 1)
    assert ulps(got[sat], want[sat]).max() <= 1
    np.testing.assert_array_equal(got[~finite], want[~finite])  # NaN, +-1 at +-inf
    zero = run("Tanh", np.array([-0.0, 0.0], np.float32))
    assert np.signbit(zero[0]) and not np.signbit(zero[1])
