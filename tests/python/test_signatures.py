"""Our public signatures against Apache SINGA 3.3.0's, so that an API drift fails CI.

The data files in ``singa33_signatures/`` hold SINGA 3.3.0's public signatures, one per line,
written by us from SINGA's python/singa/*.py (see each file's header):

    autograd.dropout(x, seed=0, ratio=0.5)
    tensor.Tensor.reshape(self, shape)
    layer.Linear.__init__(self, out_features, *args, **kwargs)

The dotted path is resolved under the ``singa`` package. For each line we check that every SINGA
parameter is accepted the way a caller could pass it: same names in the same positional order,
the same defaults, ``*args``/``**kwargs`` accepted where SINGA accepts them. Ours may be more
permissive: extra parameters after SINGA's (with defaults, or keyword-only), a default where
SINGA has none. Lines starting with '#' are comments.
"""
import ast
import importlib
import inspect
import pathlib

import numpy as np
import pytest

import singa

DATA = pathlib.Path(__file__).parent / "singa33_signatures"
_MISSING = object()


def _entries():
    for path in sorted(DATA.glob("*.txt")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            line = line.strip()
            if line and not line.startswith("#"):
                yield pytest.param(line, id="%s:%d:%s" % (path.stem, lineno, line.split("(")[0]))


def _resolve(dotted):
    parts = dotted.split(".")
    obj = importlib.import_module("singa." + parts[0])
    for p in parts[1:]:
        obj = getattr(obj, p)
    return obj


def _eval_default(node):
    """The value of a SINGA default expression, or _MISSING when it cannot be evaluated here."""
    src = ast.unparse(node)
    try:
        return ast.literal_eval(src)
    except (ValueError, SyntaxError):
        pass
    from singa import device, singa_wrap, tensor
    ns = {"tensor": tensor, "singa": singa_wrap, "singa_wrap": singa_wrap, "np": np,
          "numpy": np, "device": device, "float32": tensor.float32, "int32": tensor.int32}
    try:
        return eval(src, ns)  # noqa: S307  (our own data file)
    except Exception:  # noqa: BLE001
        return _MISSING


def _parse(line):
    path, _, rest = line.partition("(")
    fn = ast.parse("def f(" + rest + ": pass").body[0]
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    params = [(arg.arg, d) for arg, d in zip(positional, defaults)]
    kwonly = [(arg.arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults)]
    return path.strip(), params, kwonly, a.vararg is not None, a.kwarg is not None


def _same_default(ours, theirs):
    if theirs is _MISSING:
        return True
    try:
        eq = ours == theirs
        return bool(eq) if not isinstance(eq, np.ndarray) else bool(eq.all())
    except Exception:  # noqa: BLE001
        return ours is theirs


@pytest.mark.parametrize("line", list(_entries()))
def test_signature_matches_singa33(line):
    path, params, kwonly, varargs, varkw = _parse(line)
    try:
        obj = _resolve(path)
    except (ImportError, AttributeError) as e:
        pytest.fail("%s: missing (%s)" % (path, e))
    sig = inspect.signature(obj)
    ours = list(sig.parameters.values())
    pos_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    our_pos = [p for p in ours if p.kind in pos_kinds]
    has_var = any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in ours)
    has_kw = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in ours)
    by_name = {p.name: p for p in ours}
    problems = []
    for i, (name, dnode) in enumerate(params):
        if i < len(our_pos):
            if our_pos[i].name != name:
                problems.append("position %d is %r, SINGA has %r" % (i, our_pos[i].name, name))
                continue
            p = our_pos[i]
        elif has_var and has_kw:
            continue  # accepted through *args/**kwargs
        else:
            problems.append("parameter %r (position %d) is missing" % (name, i))
            continue
        if dnode is not None:
            want = _eval_default(dnode)
            if p.default is inspect.Parameter.empty:
                problems.append("%r has no default, SINGA's is %s" % (name, ast.unparse(dnode)))
            elif not _same_default(p.default, want):
                problems.append("%r defaults to %r, SINGA's is %s"
                                % (name, p.default, ast.unparse(dnode)))
    for name, dnode in kwonly:
        p = by_name.get(name)
        if p is None:
            if not has_kw:
                problems.append("keyword %r is missing" % name)
            continue
        if dnode is not None and p.default is not inspect.Parameter.empty:
            if not _same_default(p.default, _eval_default(dnode)):
                problems.append("%r defaults to %r, SINGA's is %s"
                                % (name, p.default, ast.unparse(dnode)))
    for p in our_pos[len(params):]:
        if p.default is inspect.Parameter.empty:
            problems.append("extra required parameter %r (SINGA has none there)" % p.name)
    if varargs and not has_var:
        problems.append("SINGA accepts *args, ours does not")
    if varkw and not has_kw:
        problems.append("SINGA accepts **kwargs, ours does not")
    assert not problems, "%s: ours is %s%s; SINGA 3.3: %s" % (
        path, path.split(".")[-1], sig, "; ".join(problems))


def test_signature_files_cover_the_modules():
    """Each file is named for the module it describes (``layer.txt``, or ``layer.rnn.txt`` for a
    second file on one module), and that module imports."""
    have = {p.stem.split(".")[0] for p in DATA.glob("*.txt")}
    assert have, "no signature files"
    for module in have:
        importlib.import_module("singa." + module)
