"""The API reference: every public name has a docstring (tools/public_api.py lists them: a
module's __all__, else its own classes and functions; and their classes' public methods), and
`make docs` (Sphinx, warnings as errors) builds, here whenever Sphinx and myst-parser are
installed (`make docs` installs them; `make test` does not: there the build test skips and the
docstring tests still run).
"""
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import public_api  # noqa: E402


def test_every_public_name_has_a_docstring():
    missing = ["%s.%s" % m for m in public_api.undocumented()]
    assert missing == [], "public names without a docstring: %s" % ", ".join(missing)


def test_every_public_method_has_a_docstring():
    # an override without its own docstring shows the one of the method it overrides (autodoc
    # does the same), so Operator.forward's covers every operator's forward
    missing = public_api.undocumented_methods()
    assert missing == [], "public methods without a docstring: %s" % ", ".join(missing)


def test_public_methods_skip_the_hooks_of_private_bases():
    class _Base:
        hook = None                          # introduced here: how subclasses are written

        def run(self):
            """Runs."""

    class Public(_Base):
        def hook(self):
            pass

        def run(self):
            pass

        def extra(self):
            pass

        @property
        def size(self):
            return 1

        def _private(self):
            pass

    class Child(Public):
        def extra(self):
            pass

    # what a private base introduces (hook, run) is skipped; a public class's own names are not
    assert public_api.public_methods(Public) == ["extra", "size"]
    assert public_api.public_methods(Child) == ["extra"]


def test_public_names_follow_all_or_the_module_own_definitions():
    from singa import layer, opt, tensor
    # __all__ decides where a module defines it
    assert public_api.public_names("singa.layer") == list(dict.fromkeys(layer.__all__))
    assert public_api.public_names("singa.opt") == list(dict.fromkeys(opt.__all__))
    # otherwise: the module's own classes and functions, from private homes too (_core,
    # _tensor_funcs), not what it imported (numpy, functools.reduce) nor constants
    names = public_api.public_names("singa.tensor")
    for n in ("Tensor", "zeros", "from_numpy", "mult", "product"):
        assert n in names
    for n in ("np", "reduce", "float32", "singa", "CheckShapeError"):
        assert n not in names, n
    assert len(names) == len(set(names))
    # a name re-exported from another public module stays on that module's page
    assert "Tensor" not in public_api.public_names("singa.autograd")
    assert "relu" in public_api.public_names("singa.autograd")


def test_the_docstring_check_sees_a_missing_or_inherited_docstring():
    class Documented:
        """Has one."""

    class Bare(Documented):
        pass

    def bare():
        pass

    def blank():
        """   """

    assert public_api.has_own_doc(Documented)
    assert not public_api.has_own_doc(Bare)          # inherits Documented's: not its own
    assert not public_api.has_own_doc(bare)
    assert not public_api.has_own_doc(blank)
    assert not public_api.documentable(3) and public_api.documentable(bare)


def test_every_module_of_the_reference_has_a_page():
    index = open(os.path.join(ROOT, "docs", "index.rst")).read()
    for modname in public_api.MODULES:
        assert "api/" + modname.split(".", 1)[1] + "\n" in index, modname


@pytest.mark.skipif(importlib.util.find_spec("sphinx") is None
                    or importlib.util.find_spec("myst_parser") is None,
                    reason="Sphinx/myst-parser not installed (make docs installs them)")
def test_sphinx_builds_the_reference_without_a_warning(tmp_path):
    out = tmp_path / "html"
    p = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q",
                        "-d", str(tmp_path / "doctrees"), os.path.join(ROOT, "docs"), str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for page in ("getting_started", "design", "differences", "onnx", "distributed", "cpp",
                 "benchmarks"):
        assert (out / (page + ".html")).exists(), page
    # every public name of a module is on its API page (an alias such as PlaceHolder, the
    # same class as Tensor, without an index entry of its own), with its docstring
    html = (out / "api" / "tensor.html").read_text()
    for name in public_api.public_names("singa.tensor"):
        assert '<span class="pre">%s</span></span>' % name in html, name
    assert 'id="singa.tensor.zeros"' in html and 'id="singa.tensor.PlaceHolder"' not in html
    assert "filled with 0" in html                   # tensor.zeros's docstring
    # the differences page is README's section (one source)
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert "scale kept elements by 1 / (1 - ratio)" in readme
    assert "scale kept elements by 1 / (1 - ratio)" in (out / "differences.html").read_text()
