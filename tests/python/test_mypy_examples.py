"""mypy passes on examples/ with singa's type hints (pyproject.toml's [tool.mypy]: the files,
check_untyped_defs, and the third-party packages that ship no hints). Runs where mypy is
installed (make test pins it)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("mypy")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _mypy(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mypy", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)


def test_mypy_passes_on_the_examples():
    res = _mypy()
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no issues found" in res.stdout and "source files" in res.stdout, res.stdout


def test_mypy_reports_a_misuse_of_singa_in_an_example(tmp_path):
    # The same configuration finds a wrong call into singa's hinted API: the check has teeth.
    bad = tmp_path / "bad_example.py"
    bad.write_text("from singa import tensor\n\nt = tensor.zeros('not a shape', 3.5)\n")
    res = _mypy(str(bad))
    assert res.returncode == 1 and "bad_example.py:3" in res.stdout, res.stdout + res.stderr
    assert "[arg-type]" in res.stdout, res.stdout
