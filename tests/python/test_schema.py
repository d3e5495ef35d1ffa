"""The op schema (schema/<theme>.py) is the one place its ops are written: every row's generated
pieces are reachable from Python, and no hand-written file restates what a row says (an OpId
line, a kernel slot, a front, a functor, a Cython declaration or wrapper, an Operator class, an
ONNX map entry in either direction). Generated files live in the build tree, never in git.

    pytest -q tests/python/test_schema.py
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from singa import autograd, sonnx, tensor
from singa import singa_wrap as sw
from singa.sonnx import ops as sonnx_ops

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "schema"))
import rows  # noqa: E402

OPS, NOT_IN_SCHEMA = rows.load(os.path.join(ROOT, "schema", "activations.py"))
GENERATED = ("activation_ids.def", "activation.h", "activation_functors.h",
             "activation_fronts.inc", "activation_cpu.inc", "activation_cuda.inc",
             "activation_ops.pxi")


def _sources(folders, exts):
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                if f.endswith(exts):
                    path = os.path.join(dirpath, f)
                    with open(path, encoding="utf-8") as fh:
                        yield os.path.relpath(path, ROOT), fh.read()


def _restatements(op):
    """(folders, extensions, regex) of what a hand-written file must not say about ``op``."""
    names = "|".join(re.escape(n) for n in (op.name, op.backward_name))
    cpp = (r"SINGA_OP\((%s)\)|SINGA_KERNEL_SLOT(_DECL)?\((%s),|SINGA_REGISTER_KERNEL\((%s),"
           r"|struct (%s)Op\b|Tensor (%s)\(" % ((names,) * 5))
    cython = r'"singa::(%s)"|^def (%s)\(' % (names, names)
    python = r"^class %s\(|^def %s\(" % (re.escape(op.py_class), re.escape(op.py_fn))
    out = [(("cpp",), (".h", ".cc", ".cu", ".cuh", ".def"), cpp),
           (("cython",), (".pxd", ".pxi", ".pyx"), cython),
           (("singa/autograd", "singa/layers", "singa/sonnx"), (".py",), python)]
    if op.onnx:
        onnx = r'"%s":|_op_%s\b' % (re.escape(op.onnx.name), re.escape(op.py_class))
        out.append((("singa/sonnx",), (".py",), onnx))
    return out


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
def test_no_hand_written_file_restates_a_schema_row(op):
    found = []
    for folders, exts, pattern in _restatements(op):
        rx = re.compile(pattern, re.M)
        for path, text in _sources(folders, exts):
            found += ["%s: %s" % (path, m.group(0)) for m in rx.finditer(text)]
    assert not found, "written by hand although schema/activations.py has %s:\n  %s" % (
        op.name, "\n  ".join(found))


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
def test_every_generated_piece_is_reachable(op):
    for fn in (op.name, op.backward_name):  # Cython wrappers
        assert callable(getattr(sw, fn)), fn
    cls, function = autograd.schema_ops.OPS[op.name]
    assert getattr(autograd, op.py_class) is cls and getattr(autograd, op.py_fn) is function
    assert cls.__name__ == op.py_class and issubclass(cls, autograd.Operator)
    table = {(name, backend): status for name, backend, status in sw.kernel_table()}
    for slot in (op.name, op.backward_name):  # kernel slots, registered per backend
        assert table.get((slot, "cpu")) == "kernel", slot
        if sw.USE_DNNL:
            assert table.get((slot, "dnnl")) == "fallback -> cpu", slot
    if op.onnx:
        assert op.onnx.name in sonnx_ops.HANDLERS and op.onnx.name in sonnx.SUPPORTED_OPS


def test_the_extension_carries_the_schema_as_written():
    assert sw.ACTIVATION_OPS == tuple(op.as_tuple() for op in OPS)


def test_a_graph_prints_the_schema_op_ids():
    """The generated OpIds name their rows in graph dumps and profiles."""
    dev = sw.create_cpu_device()
    x = tensor.from_numpy(np.linspace(-4, 4, 12, dtype=np.float32).reshape(3, 4), dev)
    x.requires_grad = x.stores_grad = True
    autograd.training = True
    dev.EnableGraph(True)
    try:
        for op in OPS:
            y = getattr(autograd, op.py_fn)(x)
            autograd.gradients(y)
    finally:
        dev.EnableGraph(False)
        autograd.training = False
    dev.RunGraph()
    names = set(dev.graph_op_names())
    for op in OPS:
        assert {op.name, op.backward_name} <= names, (op.name, sorted(names))


def test_generated_files_are_not_in_the_source_tree():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    names = {os.path.basename(p) for p in tracked.stdout.split()}
    assert not names & set(GENERATED), sorted(names & set(GENERATED))


def test_ops_left_out_of_the_schema_say_why():
    assert NOT_IN_SCHEMA and all(len(why) > 20 for why in NOT_IN_SCHEMA.values())
