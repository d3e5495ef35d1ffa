"""tools/fuzz_numpy.py (singa against numpy on valid edge-case inputs) runs clean briefly, and its
comparison does fail: a deliberately wrong reference is reported as a mismatch."""
import io
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import fuzz_numpy  # noqa: E402
from fuzz_numpy_gen import Target  # noqa: E402


def run(targets, calls=4, seed=3):
    out = io.StringIO()
    status = fuzz_numpy.fuzz(targets, calls, seed, out=out)
    return status, out.getvalue()


def test_every_target_matches_numpy_briefly():
    status, report = run(fuzz_numpy.select(None), calls=20)
    assert status == 0, report
    assert "| **all %d targets** |" % len(fuzz_numpy.TARGETS) in report


def test_main_runs_one_target_by_name(capsys):
    assert fuzz_numpy.main(["--calls", "3", "--only", "autograd.slice"]) == 0
    assert "autograd.slice" in capsys.readouterr().out


def _like(name, **changes):
    tg = next(t for t in fuzz_numpy.TARGETS if t.name == name)
    kw = dict(exact=tg.exact, accum=tg.accum, grad=tg.grad, domain=tg.domain, rtol=tg.rtol,
              atol=tg.atol)
    kw.update({k: v for k, v in changes.items() if k in kw})
    return Target(name + "-wrong", tg.gen, changes.get("call", tg.call),
                  changes.get("ref", tg.ref), **kw)


@pytest.mark.parametrize("wrong, what", [
    (lambda x: np.exp(x) * (1 + 1e-3), "values differ"),     # values past rtol
    (lambda x: np.exp(x)[None], "shape"),                    # an extra axis
    (lambda x: np.exp(x).astype(np.int32), "dtype"),         # another dtype class
])
def test_a_wrong_reference_is_reported(wrong, what):
    status, report = run([_like("tensor.exp", ref=wrong)], calls=6)
    assert status == 1, report
    assert "MISMATCH  tensor.exp-wrong:" in report and what in report, report


def test_nan_where_the_reference_has_a_number_is_a_mismatch():
    status, report = run([_like("tensor.exp", ref=lambda x: np.where(np.isnan(x), 0, np.exp(x)))],
                         calls=40)
    assert status == 1 and "NaN at" in report, report


def test_a_wrong_gradient_is_reported():
    from singa import autograd
    from singa import singa_wrap as sw

    class WrongExp(autograd.Operator):  # forward right, backward twice the truth
        def forward(self, x):
            self.y = sw.Exp(x)
            return self.y

        def backward(self, dy):
            return sw.EltwiseMult(sw.EltwiseMult(dy, self.y), 2.0)

    status, report = run([_like("autograd.exp", call=lambda x: WrongExp()(x)[0])], calls=10)
    assert status == 1 and "GRAD  autograd.exp-wrong:" in report, report
