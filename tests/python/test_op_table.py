"""Every elementwise op is defined once (cpp/include/singa/ops/elementwise.def) and reaches every
level above it: a C++ reference test, the extension's table, a tensor function and an autograd
gradient rule (or an explicit "no gradient" entry).

    a new SINGA_UNARY(Foo, F, ...) line fails here until tests/cpp has a test calling Foo(...),
    tensor.foo exists (it does: tensor derives it from the table) and autograd.math
    UNARY_GRADIENTS has a "Foo" row.

The .def file and the C++ tests are parsed from the sources, so the checks also hold for a copy
of the tree (check_tree is what the tests call, with the repository's paths).
"""
import importlib.util
import pathlib
import re

import numpy as np
import pytest

from singa import autograd, singa_wrap, tensor
from singa import _tensor_funcs
from singa.autograd import math as ag_math

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEF = ROOT / "cpp" / "include" / "singa" / "ops" / "elementwise.def"
CPP_TESTS = ROOT / "tests" / "cpp"


def _load_generator():
    """cython/gen_ops.py, whose parse() the build uses to read the table."""
    spec = importlib.util.spec_from_file_location("gen_ops", ROOT / "cython" / "gen_ops.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


parse_def = _load_generator().parse


def missing(rows, cpp_sources):
    """The problems of each row: no C++ test calling it, no tensor function, no gradient row."""
    problems = []
    for name, arity, _ in rows:
        if not re.search(r"\b%s\s*\(" % re.escape(name), cpp_sources):
            problems.append("%s: no C++ test calls %s(...) in tests/cpp" % (name, name))
        if not callable(getattr(tensor, _tensor_funcs.py_name(name), None)):
            problems.append("%s: no tensor.%s" % (name, _tensor_funcs.py_name(name)))
        table = ag_math.UNARY_GRADIENTS if arity == 1 else ag_math.BINARY_GRADIENTS
        if name not in table:
            problems.append("%s: no row in autograd.math.%s" % (
                name, "UNARY_GRADIENTS" if arity == 1 else "BINARY_GRADIENTS"))
    return problems


def check_tree(def_text, cpp_sources):
    return missing(parse_def(def_text), cpp_sources)


def _cpp_sources(folder):
    return "\n".join(p.read_text() for p in sorted(folder.glob("*.cc")))


def test_extension_table_is_the_def_file():
    assert tuple(singa_wrap.ELEMENTWISE_OPS) == tuple(parse_def(DEF.read_text()))
    assert len(singa_wrap.ELEMENTWISE_OPS) > 40


def test_every_op_reaches_every_level():
    assert check_tree(DEF.read_text(), _cpp_sources(CPP_TESTS)) == []


def test_a_new_def_line_without_the_rest_fails(tmp_path):
    """A scratch copy of the sources with one more op: every level reports it missing."""
    scratch = DEF.read_text() + "\nSINGA_UNARY(Frobnicate, F, x + T(1))\n"
    (tmp_path / "elementwise.def").write_text(scratch)
    problems = check_tree((tmp_path / "elementwise.def").read_text(), _cpp_sources(CPP_TESTS))
    assert problems == ["Frobnicate: no C++ test calls Frobnicate(...) in tests/cpp",
                        "Frobnicate: no tensor.frobnicate",
                        "Frobnicate: no row in autograd.math.UNARY_GRADIENTS"]
    # and a binary line is checked against the binary table
    problems = check_tree("SINGA_BINARY(Hypot, F, sqrt(a * a + b * b))\n", "Hypot(a, b);")
    assert problems == ["Hypot: no tensor.hypot", "Hypot: no row in autograd.math.BINARY_GRADIENTS"]


def test_no_gradient_rows_are_only_the_non_differentiable_ops():
    none_binary = sorted(n for n, op in ag_math.BINARY_GRADIENTS.items() if op is None)
    assert none_binary == ["EQ", "FloorDiv", "Fmod", "GE", "GELUBackward", "GELUTanhBackward",
                           "GT", "LE", "LT", "Mod", "NE", "ReLUBackward"]
    # piecewise-constant unary ops: zero gradient
    zero = sorted(n for n, rule in ag_math.UNARY_GRADIENTS.items() if rule is None)
    assert zero == ["Ceil", "Floor", "Round", "RoundE", "Sign"]
    rows = {n for n, _, _ in singa_wrap.ELEMENTWISE_OPS}
    assert set(ag_math.UNARY_GRADIENTS) | set(ag_math.BINARY_GRADIENTS) == rows


@pytest.mark.parametrize("name", [n for n, a, _ in singa_wrap.ELEMENTWISE_OPS if a == 1])
def test_derived_unary_functions_match_the_core(name):
    """tensor.<op> and autograd.<op> (made from the table) compute the core op itself."""
    rng = np.random.RandomState(0)
    x = rng.uniform(0.2, 0.8, size=(2, 3)).astype(np.float32)  # inside every op's domain
    if name == "Acosh":
        x = x + 1.5
    t = tensor.from_numpy(x)
    want = singa_wrap.to_numpy(getattr(singa_wrap, name)(t.data))
    np.testing.assert_array_equal(tensor.to_numpy(getattr(tensor, name.lower())(t)), want)
    cls_name = {"RoundE": "Rounde"}.get(name, name)
    fn = getattr(autograd, cls_name.lower())
    assert getattr(autograd, cls_name).__name__ == cls_name
    np.testing.assert_array_equal(tensor.to_numpy(fn(t)), want)


def test_derived_binary_functions_keep_singa_signatures():
    a = tensor.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    b = tensor.from_numpy(np.array([2.0, 2.0, 2.0], np.float32))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.eltwise_mult(lhs=a, rhs=b)), [2, 4, 6])
    np.testing.assert_array_equal(tensor.to_numpy(tensor.pow(t=a, x=2.0)), [1, 4, 9])
    np.testing.assert_array_equal(tensor.to_numpy(tensor.lt(t=a, x=b)), [1, 0, 0])
    out = tensor.zeros((3,))
    assert tensor.sub(a, b, ret=out) is out
    np.testing.assert_array_equal(tensor.to_numpy(out), [-1, 0, 1])
    with pytest.raises(TypeError):
        tensor.lt(a, b, None)  # SINGA's comparisons take no output argument
