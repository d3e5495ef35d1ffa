"""No module of singa reaches into another sub-package's private parts (`from ..layers._util
import x`, `from singa.autograd.nn import _Conv2d` in singa.utils): what two sub-packages share
lives in a module both may import (singa._padding, singa._core: private to the package, owned by
none of its sub-packages). Parsed with ast, so a new offender fails here, not in review."""
import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[2] / "singa"


def _private_crossings(path, source):
    """'line: dotted' for each import of a private name or module that belongs to a sub-package
    of singa other than the one `path` is in."""
    rel = path.relative_to(PKG.parent).with_suffix("").parts
    package = rel[:-1]  # an __init__.py belongs to its own package: rel[:-1] is that package
    own = package[1] if len(package) > 1 else None
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = base + tuple(node.module.split(".") if node.module else ())
            else:
                mod = tuple((node.module or "").split("."))
            targets = [mod + (a.name,) for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [tuple(a.name.split(".")) for a in node.names]
        else:
            continue
        for t in targets:
            if t[0] != "singa" or len(t) < 3 or t[1] == own or not (PKG / t[1]).is_dir():
                continue  # not inside another sub-package (singa._core's names are shared)
            # a private component inside sub-package t[1] (dunders are not private)
            if any(c.startswith("_") and not c.startswith("__") for c in t[2:]):
                bad.append("%d: %s" % (node.lineno, ".".join(t)))
    return bad


def test_no_module_imports_another_subpackages_private_parts():
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        bad += ["%s:%s" % (path.relative_to(PKG.parent), b)
                for b in _private_crossings(path, path.read_text())]
    assert bad == []


def test_the_check_sees_relative_and_absolute_crossings():
    utils, ops = PKG / "utils.py", PKG / "sonnx" / "ops.py"
    assert _private_crossings(utils, "from .layers._util import pair\n") == \
        ["1: singa.layers._util.pair"]
    assert _private_crossings(ops, "from ..autograd.nn import _Conv2d\n") == \
        ["1: singa.autograd.nn._Conv2d"]
    assert _private_crossings(ops, "import singa.layers._util\n") == ["1: singa.layers._util"]
    # allowed: the package's own private modules, a sub-package's own privates, public names
    assert _private_crossings(ops, "from .._padding import same_pad_split\n") == []
    assert _private_crossings(ops, "from .._core import _dtype\n") == []
    assert _private_crossings(ops, "from .ops_tensor import _np\n") == []
    assert _private_crossings(utils, "from .autograd.base import Dummy\n") == []
