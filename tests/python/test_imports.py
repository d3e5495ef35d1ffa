"""The package's imports point one way, along a declared layering (parsed with ast), and every
module imports alone in a fresh interpreter.

    singa_wrap, _state <- errors <- device <- _core <- _tensor_funcs <- tensor <- autograd
        <- layers <- layer, utils, initializer, snapshot, ... <- model, opt

A module may import from a lower layer, or from its own package (autograd.math from
autograd.base) as long as those imports form no cycle. A new module must be given a layer here.
"""
import ast
import os
import pathlib
import subprocess
import sys

import pytest

from child_env import child_env
from singa import _state, autograd, layer, model, tensor

PKG = pathlib.Path(__file__).resolve().parents[2] / "singa"

# The extension modules (cython/singa/_wrap_NAME.pyx), which singa_wrap gathers.
WRAP_MODULES = {p.stem for p in (PKG.parent / "cython" / "singa").glob("_wrap_*.pyx")}

# Lowest first. A group is a module of singa, or a sub-package (all its modules).
LAYERS = [
    # a CUDA wheel's nvidia-* libraries, loaded before the extension; the [dist] extra's libmpi
    {"_cuda_libs", "_mpi_libs"},
    {"_wrap_errors"},  # the extension modules' error classes (plain Python)
    WRAP_MODULES,
    {"singa_wrap", "_state"},
    {"_padding"},  # SAME padding arithmetic: plain integers
    {"proto"},  # SINGA's core_pb2 dtype names: singa_wrap's constants
    {"errors"},
    {"_args"},  # the API's argument checks (as_int, as_axes...): singa_wrap's AxisError
    {"device"},
    {"_indexing"},  # the Tensor class's indexing helpers, on core tensors
    {"_core"},
    {"_tensor_funcs"},
    {"tensor"},
    {"autograd"},
    {"layers"},
    {"layer", "utils", "initializer", "snapshot", "graph", "data", "image_tool", "_schedules",
     "loss_scale"},
    {"model", "opt"},
    {"sonnx"},  # ONNX import and export: builds models from the layers below
    {"launch"},  # python -m singa.launch: an mpirun command line, imports _mpi_libs only
]
RANK = {g: i for i, layer_set in enumerate(LAYERS) for g in layer_set}

# The imports against the layering, each for a reason:
ALLOWED_UP = {
    # SINGA's autograd re-exported the layer classes (autograd.Linear...): looked up on first
    # use by the package's __getattr__, inside the function, never while importing.
    ("singa.autograd", "singa.layer"),
    # singa.NonFiniteError (singa_wrap's): looked up by the package's __getattr__, so that a
    # bare `import singa` (python -m singa.launch) does not load the extension.
    ("singa", "singa.singa_wrap"),
}


def _module_name(path):
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted):
    rel = pathlib.Path(*dotted.split(".")[1:]) if "." in dotted else pathlib.Path()
    base = PKG / rel
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists() or \
        dotted == "singa.singa_wrap"


def _imports(path):
    """(imported singa module, inside a function?) for every import in the file."""
    name = _module_name(path)
    return name, _parse(name, path.name == "__init__.py", path.read_text())


def _parse(name, is_package, source):
    package = name if is_package else name.rsplit(".", 1)[0]
    tree = ast.parse(source)
    nested = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested.update(id(n) for n in ast.walk(fn) if n is not fn)
    out = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.split(".")[0] == "singa"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "singa":
                continue
            for a in node.names:  # `from . import base` imports a module
                sub = mod + "." + a.name
                targets.append(sub if _is_module(sub) else mod)
        out.extend((t, id(node) in nested) for t in targets)
    return out


def _group(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _graph():
    edges = {}
    for path in sorted(PKG.rglob("*.py")):
        name, imps = _imports(path)
        edges[name] = imps
    return edges


def test_every_module_has_a_layer():
    groups = {_group(m) for m in _graph() if _group(m)}
    assert groups - set(RANK) == set()


def _upward(graph):
    bad = []
    for mod, imps in graph.items():
        for target, _ in imps:
            ga, gb = _group(mod), _group(target)
            if ga is None or gb is None or ga == gb or (mod, target) in ALLOWED_UP:
                continue
            if RANK[ga] <= RANK[gb]:
                bad.append("%s imports %s" % (mod, target))
    return bad


def test_imports_point_down_the_layering():
    assert _upward(_graph()) == []


def test_no_import_cycles():
    graph = {m: {t for t, _ in imps if t != m and (m, t) not in ALLOWED_UP}
             for m, imps in _graph().items()}
    # a package imports its parent package implicitly: only explicit edges count here
    state, cycles = {}, []

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycles.append(" -> ".join(path[path.index(t):] + [t]) if t in path else t)
            elif t not in state:
                visit(t, path + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_imports_of_singa_modules_are_at_the_top():
    """Only the declared exceptions import inside a function (so the arrows above are all the
    arrows there are)."""
    late = sorted((m, t) for m, imps in _graph().items() for t, inside in imps if inside)
    assert late == sorted(ALLOWED_UP)


def test_the_layering_would_catch_an_upward_import():
    """The parser resolves relative imports, and an upward one (a tensor helper importing
    autograd, as _core once did) is reported."""
    src = ("from . import _state\n"
           "def f():\n    from . import autograd\n    from .autograd import base\n")
    imps = _parse("singa._core", False, src)
    assert imps == [("singa._state", False), ("singa.autograd", True),
                    ("singa.autograd.base", True)]
    graph = dict(_graph(), **{"singa._core": imps})
    assert _upward(graph) == ["singa._core imports singa.autograd",
                              "singa._core imports singa.autograd.base"]
    _, imps = _imports(PKG / "layers" / "conv.py")
    assert ("singa.autograd", False) in imps and ("singa.tensor", False) in imps
    # the layer sub-package from the autograd package's point of view
    assert _parse("singa.autograd.math", False, "from ..layers import base\n") == [
        ("singa.layers.base", False)]


@pytest.mark.parametrize("module", sorted(m for m in _graph()))
def test_each_module_imports_alone(module):
    code = "import importlib, sys; importlib.import_module(%r); print('ok')" % module
    # the imported singa's folder first (child_env), then this process's whole path
    env = child_env()
    env["PYTHONPATH"] += os.pathsep + os.pathsep.join(p for p in sys.path if p)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


def test_training_flag_is_one_variable():
    was = _state.training
    try:
        autograd.training = True  # SINGA scripts assign it
        assert _state.training is True and autograd.training is True
        autograd.training = 0
        assert _state.training is False and autograd.training is False
        m = model.Model()
        m.train()
        assert _state.training is True and autograd.training is True
        m.eval()
        assert autograd.training is False
    finally:
        _state.training = was


def test_leaf_tensors_get_a_dummy_creator():
    t = tensor.Tensor((2,), name="w")
    assert isinstance(t.creator, autograd.Dummy) and t.creator.name == "w"
    assert t.creator is t.creator
    assert autograd.Linear is layer.Linear


def test_a_child_process_imports_the_singa_under_test(tmp_path):
    # the CUDA variant and the GPU machine test builds outside the source tree: a child process
    # (examples, resume, MPI ranks) must load that build's extension, not the repository's
    import singa
    code = "import singa, singa.singa_wrap as w; print(singa.__file__); print(w.__file__)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=child_env(), cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    pkg, wrap = res.stdout.split()
    assert os.path.abspath(pkg) == os.path.abspath(singa.__file__)
    assert os.path.abspath(wrap) == os.path.abspath(singa.singa_wrap.__file__)
