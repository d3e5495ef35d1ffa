"""Type hints on singa.tensor's module functions (issue 22 point 5): every one annotates each
parameter and its return, the annotations resolve, the package carries the PEP 561 marker, and
mypy (where installed) reads them: a misuse in user code is reported, correct code passes."""
import importlib.util
import inspect
import os
import subprocess
import sys
import typing

import pytest

from singa import _tensor_funcs, tensor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FUNCS = [n for n in _tensor_funcs.__all__ if not n.startswith("_")]


def test_the_package_has_the_pep_561_marker():
    assert os.path.isfile(os.path.join(ROOT, "singa", "py.typed"))


@pytest.mark.parametrize("name", FUNCS)
def test_every_tensor_function_is_annotated(name):
    f = getattr(tensor, name)
    hints = typing.get_type_hints(f)            # raises if an annotation does not resolve
    params = [p for p in inspect.signature(f).parameters.values()]
    missing = [p.name for p in params if p.name not in hints]
    assert missing == [], "%s: parameters without a type: %s" % (name, missing)
    assert "return" in hints, "%s: no return type" % name


def test_the_hints_say_what_the_functions_return():
    import numpy as np
    assert typing.get_type_hints(tensor.zeros)["return"] is tensor.Tensor
    assert typing.get_type_hints(tensor.to_numpy)["return"] is np.ndarray
    assert typing.get_type_hints(tensor.copy_from_numpy)["return"] is type(None)
    # the generated element-wise functions too
    assert typing.get_type_hints(tensor.exp)["return"] is tensor.Tensor
    assert isinstance(tensor.exp(tensor.zeros((2,))), tensor.Tensor)


def _type_checking_block():
    """The declarations of _tensor_funcs' ``if TYPE_CHECKING:`` block: {name: signature's name},
    the signatures' parameter names, and the names it adds to __all__."""
    import ast
    tree = ast.parse(inspect.getsource(_tensor_funcs))
    block = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") ==
             "TYPE_CHECKING"]
    assert len(block) == 1
    names, sigs, extra_all = {}, {}, []
    for node in block[0].body:
        if isinstance(node, ast.FunctionDef):
            sigs[node.name] = [a.arg for a in node.args.args]
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                names[t.id] = node.value.id
        elif isinstance(node, ast.AugAssign) and node.target.id == "__all__":
            extra_all = [e.value for e in node.value.elts]
    return names, sigs, extra_all


def test_the_type_checkers_view_of_the_generated_functions_matches_the_op_table():
    names, sigs, extra_all = _type_checking_block()
    sig_of_form = {"_unary_form": "_unary_sig", "_arith_form": "_arith_sig",
                   "_pow_form": "_pow_sig", "_compare_form": "_compare_sig"}
    expected = {}
    for op, arity, _ in _tensor_funcs.singa.ELEMENTWISE_OPS:
        form = _tensor_funcs._unary_form if arity == 1 else \
            _tensor_funcs._FORMS.get(op, _tensor_funcs._arith_form)
        expected[_tensor_funcs.py_name(op)] = sig_of_form[form.__name__]
    assert names == expected
    assert sorted(extra_all) == sorted(expected)
    for name, sig in names.items():       # the declared parameters are the real ones
        assert list(inspect.signature(getattr(tensor, name)).parameters) == sigs[sig], name


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy not installed")
def test_mypy_reads_the_hints(tmp_path):
    good = tmp_path / "good.py"
    good.write_text("import numpy as np\nfrom singa import tensor\n"
                    "t = tensor.zeros((2, 3))\n"
                    "a: np.ndarray = tensor.to_numpy(tensor.add(t, 1.0))\n"
                    "e = tensor.exp(t, out=t)\nc = tensor.gt(t, 0.5)\n"
                    "s: tensor.Tensor = tensor.mult(t, tensor.ones((3, 2)))\n")
    bad = tmp_path / "bad.py"
    bad.write_text("from singa import tensor\n"
                   "n: int = tensor.zeros((2, 3))\n"
                   "tensor.zeros((2, 3), dtype='float32')\n")
    env = dict(os.environ, MYPYPATH=ROOT)
    args = [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
            "--no-incremental", "--cache-dir", os.devnull]
    ok = subprocess.run(args + [str(good)], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    ko = subprocess.run(args + [str(bad)], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=300)
    assert ko.returncode == 1, ko.stdout + ko.stderr
    assert "bad.py:2: error" in ko.stdout and "bad.py:3: error" in ko.stdout, ko.stdout
