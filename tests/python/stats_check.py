"""Statistical checks of random draws, with tolerances from the sample size (6 standard errors:
a correct generator fails about once in 10^8 runs; a wrong scale fails every time).

    assert_normal(samples, std)              # mean 0, the given std, the normal's 3-sigma tail
    assert_uniform(samples, limit)           # within [-limit, limit], spread over all of it
"""
import math

import numpy as np


def assert_normal(w, std, what=""):
    """w against N(0, std^2): the mean's standard error is std / sqrt(n), the sample std's
    about std / sqrt(2 n); the mass beyond 3 std (0.27%) separates a normal from a uniform."""
    w = np.asarray(w, np.float64).ravel()
    n = w.size
    assert abs(w.mean()) < 6 * std / math.sqrt(n), (what, "mean", w.mean(), std)
    assert abs(w.std() - std) < 6 * std / math.sqrt(2 * n), (what, "std", w.std(), std)
    tail = np.mean(np.abs(w) > 3 * std)
    assert abs(tail - 0.0027) < 6 * math.sqrt(0.0027 / n) + 1e-4, (what, "tail", tail)


def assert_uniform(w, limit, what=""):
    """w against U(-limit, limit): inside the bounds, reaching near both ends (the chance that
    n draws all miss a 1% end is 0.99^n), mean 0 and std limit / sqrt(3) within their errors
    (the std of a uniform sample's std is about 0.15 * limit / sqrt(n))."""
    w = np.asarray(w, np.float64).ravel()
    n = w.size
    sd = limit / math.sqrt(3)
    assert w.min() >= -limit and w.max() <= limit, (what, "bounds", w.min(), w.max(), limit)
    assert w.min() < -0.99 * limit and w.max() > 0.99 * limit, (what, "range", w.min(), w.max())
    assert abs(w.mean()) < 6 * sd / math.sqrt(n), (what, "mean", w.mean())
    assert abs(w.std() - sd) < 6 * 0.15 * limit / math.sqrt(n), (what, "std", w.std(), sd)
