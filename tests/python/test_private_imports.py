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


def _unit(path):
    """What owns a module's private attributes: its sub-package (singa.layers), or the module
    itself for a top-level one (singa/opt.py)."""
    rel = path.relative_to(PKG).with_suffix("").parts
    return rel[0]


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def _defined_privates(tree):
    """Private attributes a module's classes define: class-level names and `self._x = ...`."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for b in node.body:
                if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(b.name)
                elif isinstance(b, ast.Assign):
                    names |= {t.id for t in b.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
    return {n for n in names if _private(n)}


def _private_reads(tree):
    """(line, name) of each private attribute read off another object than self / cls:
    `obj._x`, or getattr / hasattr (obj, "_x")."""
    own = ("self", "cls")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and \
                not (isinstance(node.value, ast.Name) and node.value.id in own):
            yield node.lineno, node.attr
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "hasattr") and len(node.args) >= 2 and \
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
                and _private(node.args[1].value) and \
                not (isinstance(node.args[0], ast.Name) and node.args[0].id in own):
            yield node.lineno, node.args[1].value


def _private_attribute_crossings(sources):
    """'path:line: name' for each private attribute one unit (_unit) reads that only other
    units' classes define (model.py reading an optimizer's _state_dicts, sonnx an autograd
    Operator's _x_shapes)."""
    trees = {p: ast.parse(s) for p, s in sources.items()}
    owners = {}
    for p, t in trees.items():
        for name in _defined_privates(t):
            owners.setdefault(name, set()).add(_unit(p))
    bad = []
    for p, t in trees.items():
        for line, name in _private_reads(t):
            if name in owners and _unit(p) not in owners[name]:
                bad.append("%s:%d: %s" % (p.relative_to(PKG.parent), line, name))
    return bad


def test_no_module_reads_another_units_private_attributes():
    sources = {p: p.read_text() for p in sorted(PKG.rglob("*.py"))}
    assert _private_attribute_crossings(sources) == []


def test_the_attribute_check_sees_a_crossing_and_allows_its_own_unit():
    opt, model = PKG / "opt.py", PKG / "model.py"
    base, util = PKG / "layers" / "base.py", PKG / "layers" / "_util.py"
    owner = "class O:\n    _names = ()\n    def __init__(self):\n        self._seen = {}\n"
    assert _private_attribute_crossings({opt: owner, model: "a = o._names\n"}) == \
        ["singa/model.py:1: _names"]
    assert _private_attribute_crossings({opt: owner, model: "b = getattr(o, '_seen', 0)\n"}) == \
        ["singa/model.py:1: _seen"]
    # the same sub-package, self, and names no class defines are not crossings
    assert _private_attribute_crossings({base: owner, util: "a = layer._names\n"}) == []
    assert _private_attribute_crossings({opt: owner, model: "class M:\n    def f(self):\n"
                                         "        return self._names, x._other\n"}) == []
