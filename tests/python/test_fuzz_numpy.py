"""tools/fuzz_numpy.py (singa against numpy on valid edge-case inputs, and backward on special
values against torch) runs clean briefly, and its comparisons do fail: deliberately wrong
references and a wrong gradient are reported."""
import io
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import fuzz_numpy  # noqa: E402
from fuzz_numpy_gen import Target  # noqa: E402
from singa import autograd  # noqa: E402
from singa import singa_wrap as sw  # noqa: E402


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


class WrongExp(autograd.Operator):
    """exp with its forward right and its backward twice the truth."""

    def forward(self, x):
        self.y = sw.Exp(x)
        return self.y

    def backward(self, dy):
        return sw.EltwiseMult(sw.EltwiseMult(dy, self.y), 2.0)


def wrong_exp(x):
    return WrongExp()(x)[0]


def test_a_wrong_gradient_is_reported():
    status, report = run([_like("autograd.exp", call=wrong_exp)], calls=10)
    assert status == 1 and "GRAD  autograd.exp-wrong:" in report, report


def test_backward_on_special_values_matches_torch(monkeypatch):
    pytest.importorskip("torch")
    from fuzz_numpy_torch import torch_check
    assert torch_check(io.StringIO()) == 0
    monkeypatch.setattr(autograd, "exp", wrong_exp)  # a wrong gradient there is caught
    out = io.StringIO()
    assert torch_check(out) > 0
    assert "GRAD  autograd.exp" in out.getvalue()
