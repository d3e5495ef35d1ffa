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
NN_THEME = os.path.join(ROOT, "schema", "nn.py")
NN_OPS, NN_NOT_IN_SCHEMA = rows.load(NN_THEME)
GENERATED = ("activation_ids.def", "activation.h", "activation_functors.h",
             "activation_fronts.inc", "activation_cpu.inc", "activation_cuda.inc",
             "activation_ops.pxi", "nn_ids.def", "nn_schema.h", "nn_args.inc", "nn_launch.inc",
             "nn_slots.inc", "epilogue_ops.inc", "nn_ops.pxi")
BACKENDS = {"kCpuRef": "cpu", "kCpuDnnl": "dnnl", "kCuda": "cuda"}


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


def _nn_restatements(op):
    """As _restatements, for an NN row: the front's definition and the kernels' bodies and
    registrations stay hand-written; their declarations, ids, Args, slots and launch do not."""
    names = re.escape(op.name)
    ids = "|".join(re.escape(i) for i in op.ids)
    cpp = (r"SINGA_OP\((%s)\)|OpId::k(%s)\b|SINGA_KERNEL_SLOT(_DECL)?\(%s,|struct %s\b"
           r"|^Tensor %s\([^{]*;" % (ids, ids, names, re.escape(op.args), names))
    out = [(("cpp",), (".h", ".cc", ".cu", ".cuh", ".def"), cpp),
           (("cython",), (".pxd", ".pxi", ".pyx"), r'singa::%s\b|^def %s\(' % (names, names))]
    if op.py_class:
        out.append((("singa/autograd", "singa/layers", "singa/sonnx"), (".py",),
                    r"^class %s\(|^def %s\(" % (re.escape(op.py_class), re.escape(op.py_fn))))
    return out


def _fusable_restatements():
    """The graph's epilogue partners are schema/nn.py's FUSABLE: no hand-written table."""
    ids = "|".join(re.escape(n) for n, _ in rows.fusable_table([NN_THEME]))
    return [(("cpp",), (".h", ".cc"), r"\{\s*OpId::k(%s),\s*kEpi" % ids)]


def _found(restatements):
    found = []
    for folders, exts, pattern in restatements:
        rx = re.compile(pattern, re.M)
        for path, text in _sources(folders, exts):
            found += ["%s: %s" % (path, m.group(0)) for m in rx.finditer(text)]
    return found


@pytest.mark.parametrize("op", NN_OPS, ids=[op.name for op in NN_OPS])
def test_no_hand_written_file_restates_an_nn_row(op):
    found = _found(_nn_restatements(op))
    assert not found, "written by hand although schema/nn.py has %s:\n  %s" % (
        op.name, "\n  ".join(found))


def test_no_hand_written_table_of_epilogue_partners():
    found = _found(_fusable_restatements())
    assert not found, "schema/nn.py's FUSABLE restated by hand:\n  " + "\n  ".join(found)


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
    assert sw.NN_OPS == tuple(op.as_tuple() for op in NN_OPS)


@pytest.mark.parametrize("op", NN_OPS, ids=[op.name for op in NN_OPS])
def test_every_nn_row_is_reachable_and_its_kernels_are_where_it_says(op):
    assert callable(getattr(sw, op.name))
    table = {(name, backend): status for name, backend, status in sw.kernel_table()}
    built = {"cpu": True, "dnnl": sw.USE_DNNL, "cuda": sw.USE_CUDA}
    for backend in op.backends:  # each kernel body registers itself in its backend's file
        if built[BACKENDS[backend]]:
            assert table.get((op.name, BACKENDS[backend])) == "kernel", (op.name, backend)
    if op.py_class:
        cls, function = autograd.schema_ops.OPS[op.name]
        assert getattr(autograd, op.py_class) is cls and getattr(autograd, op.py_fn) is function
        assert cls.__name__ == op.py_class and issubclass(cls, autograd.Operator)
    for onnx_op in op.onnx:  # not plain: imported and exported by hand
        assert onnx_op.name in sonnx_ops.HANDLERS and onnx_op.name in sonnx.SUPPORTED_OPS


def _generated(module, fn, ops):
    return getattr(module, fn)(ops, "test")


@pytest.mark.parametrize("recomputable", [True, False])
def test_a_rows_recomputable_reaches_the_opdesc_its_front_submits(recomputable):
    """The generated launches (NN) and fronts (activations) pass the row's value to Exec."""
    import copy
    import gen_nn
    import gen_schema
    flag = "/*recomputable=*/%s" % ("true" if recomputable else "false")
    nn_rows, act_rows = copy.deepcopy(NN_OPS), copy.deepcopy(OPS)
    for op in nn_rows + act_rows:
        op.recomputable = recomputable
    assert gen_nn.launch(nn_rows, "nn.py").count(flag) == len(nn_rows)
    assert gen_schema.fronts(act_rows, "activations.py").count(flag) == 2 * len(act_rows)


def test_a_rows_graph_hooks_reach_its_launch():
    """rerun=, as_epilogue= and flops= are the OpDesc's rerun form, epilogue role and flops:
    each reaches the generated launch of its row only (batch norm's rows name the first two)."""
    import copy
    import gen_nn
    rows_ = {op.name: op for op in copy.deepcopy(NN_OPS)}

    def launch_of(name):
        text = gen_nn.launch([rows_[name]], "test")
        return text[:text.index("inline ", text.index("Launch%s(" % name) + 1)]

    assert "/*rerun_of=*/&RerunOf)" in launch_of("BatchNormForwardTraining")
    assert "BnAsEpilogue(a), " in launch_of("BatchNormForwardInference")
    for name in ("Pool2dForward", "BatchNormBackward"):
        assert "/*rerun_of=*/nullptr)" in launch_of(name) and "Epilogue{}, " in launch_of(name)
    pool = rows_["Pool2dForward"]
    assert "FlopsOf" not in gen_nn.args([pool], "test")
    pool.flops = "2.0 * a.y.Size()"
    assert "inline double FlopsOf(const PoolFwdArgs& a) { return 2.0 * a.y.Size(); }" in \
        gen_nn.args([pool], "test")


def test_an_op_updating_an_input_in_place_reads_and_writes_it_when_given():
    """Batch norm's running statistics ("running_mean*"): a Tensor* in C++, None allowed in
    Python, read and written by the OpDesc only when given."""
    import gen_nn
    bn = [op for op in NN_OPS if op.name == "BatchNormForwardTraining"]
    assert bn[0].in_place == ("running_mean", "running_var")
    api = gen_nn.api(bn, "test")
    assert "Tensor* running_mean, Tensor* running_var, float momentum, float eps, " \
           "bool relu = false);" in " ".join(api.split())
    assert "if (!t->empty()) {" in gen_nn.launch(bn, "test")
    dev = sw.create_cpu_device()
    x = tensor.from_numpy(np.random.RandomState(1).randn(4, 2, 3).astype(np.float32), dev)
    one, zero = (tensor.from_numpy(np.full(2, v, np.float32), dev) for v in (1, 0))
    rm = tensor.from_numpy(np.zeros(2, np.float32), dev)
    y, mean, var = sw.BatchNormForwardTraining(x.data, one.data, zero.data, rm.data, None, 0.5,
                                               1e-5)
    np.testing.assert_allclose(tensor.to_numpy(rm), 0.5 * tensor.to_numpy(x).mean((0, 2)),
                               rtol=1e-5, atol=1e-6)
    assert tuple(mean.shape()) == tuple(var.shape()) == (2,)


def test_an_optional_read_is_in_the_opdesc_only_when_given():
    """Convolution's bias ("b?" and a read): a const Tensor& that may be empty (Python None),
    made contiguous and listed among the OpDesc's reads only when given; no bias computes
    what a zero bias does. The first read, which names the device, cannot be optional."""
    import gen_nn
    conv = [op for op in NN_OPS if op.name == "Conv2dForward"]
    assert conv[0].optional_reads == ("b",)
    text = gen_nn.launch(conv, "test")
    assert "if (!a.b.empty()) reads.push_back(a.b.block());" in text
    assert "const Tensor b = b_in.empty() ? Tensor() : b_in.Contiguous();" in text
    dev = sw.create_cpu_device()
    rs = np.random.RandomState(3)
    x, w = (tensor.from_numpy(rs.randn(*s).astype(np.float32), dev) for s in ((2, 3, 5, 5),
                                                                              (4, 3, 3, 3)))
    zero = tensor.from_numpy(np.zeros(4, np.float32), dev)
    h = sw.ConvHandle(x.data, 3, 1, 1, 3, 4, True)
    np.testing.assert_array_equal(sw.to_numpy(sw.Conv2dForward(x.data, w.data, None, h)),
                                  sw.to_numpy(sw.Conv2dForward(x.data, w.data, zero.data, h)))
    with pytest.raises(ValueError, match="never optional"):
        rows.NnOp("Bad", doc="", handle=None, inputs=["x?"], args="BadArgs", reads=["x"],
                  writes=["y"], ids=["Bad"], shapes={"y": "x.shape()"})


def test_the_graphs_epilogue_partners_are_generated_from_the_schema():
    import gen_nn
    text = gen_nn.epilogue(rows.fusable_table([NN_THEME]), "nn.py")
    assert sorted(ln for ln in text.splitlines() if ln.startswith("{")) == [
        "{OpId::kAdd, kEpiAdd},", "{OpId::kBatchNormForwardInference, kEpiBatchNorm},",
        "{OpId::kReLU, kEpiReLU},"]


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


def _nn_rows_step(dev, data, graph):
    """Every NN row under each of its ids: convolution (with its bias and without it but with
    its ReLU, and the three backward ops), max and average pooling (odd-padded), softmax and
    its log (and backward), batch norm in training (with and without its ReLU, and backward)
    and inference (both); returns the outputs, gradients and running statistics as numpy
    arrays."""
    x = tensor.from_numpy(data, dev)
    x.requires_grad = x.stores_grad = True
    c = data.shape[1]
    scale, bias = (tensor.from_numpy(np.linspace(lo, 1, c, dtype=np.float32), dev)
                   for lo in (0.5, -1))
    for p in (scale, bias):
        p.requires_grad = p.stores_grad = True
    running = [tensor.from_numpy(np.full(c, v, np.float32), dev) for v in (0.1, 1.5)]
    bn = sw.BatchNormHandle(0.8, data.shape)
    conv = sw.ConvHandle(data.shape, (3, 3), (1, 1), (1, 1), c, 4, True)
    w, b = (tensor.from_numpy(0.3 * np.random.RandomState(2).randn(*s).astype(np.float32), dev)
            for s in ((4, c, 3, 3), (4,)))
    for p in (w, b):
        p.requires_grad = p.stores_grad = True
    autograd.training = True
    dev.EnableGraph(graph)
    try:
        outs = []
        for bias_, relu in ((b, False), (None, True)):
            y = autograd.conv2d(conv, x, w, bias_, relu=relu)
            outs += [y] + list(autograd.gradients(autograd.reduce_sum(autograd.mul(y, y)))
                               .values())
        for is_max in (True, False):
            h = sw.PoolingHandle((2, 3, 7, 7), (3, 3), (2, 2), (1, 1), is_max)
            y = autograd.pooling_2d(h, x, (0, 1, 0, 1))
            outs += [y] + list(autograd.gradients(autograd.reduce_sum(y)).values())
        for fn in (autograd.softmax, autograd.log_softmax):
            y = fn(x, axis=1)
            loss = autograd.reduce_sum(autograd.mul(y, x))
            outs += [y] + list(autograd.gradients(loss).values())
        for relu in (False, True):
            y = autograd.batchnorm_2d(bn, x, scale, bias, *running, relu=relu)
            loss = autograd.reduce_sum(autograd.mul(y, y))
            outs += [y] + list(autograd.gradients(loss).values())
        autograd.training = False
        outs += [autograd.batchnorm_2d(bn, x, scale, bias, *running, relu=relu)
                 for relu in (False, True)]
    finally:
        dev.EnableGraph(False)
        autograd.training = False
    if graph:
        dev.RunGraph()
    return [tensor.to_numpy(t) for t in outs + running]


def test_a_graph_prints_the_nn_rows_op_ids_and_equals_eager():
    """Each NN row's ids (chosen by id_by: max or average pooling, batch norm with or without
    its ReLU) reach the graph, which computes what eager mode does."""
    data = np.random.RandomState(0).randn(2, 3, 6, 6).astype(np.float32)
    eager = _nn_rows_step(sw.create_cpu_device(), data, False)
    dev = sw.create_cpu_device()
    replay = _nn_rows_step(dev, data, True)
    names = set(dev.graph_op_names())
    for op in NN_OPS:
        assert set(op.ids) <= names, (op.name, sorted(names))
    assert len(eager) == len(replay)
    for a, b in zip(eager, replay):
        np.testing.assert_array_equal(a, b)


def test_generated_files_are_not_in_the_source_tree():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    names = {os.path.basename(p) for p in tracked.stdout.split()}
    assert not names & set(GENERATED), sorted(names & set(GENERATED))


def test_ops_left_out_of_the_schema_say_why():
    for table in (NOT_IN_SCHEMA, NN_NOT_IN_SCHEMA):
        assert table and all(len(why) > 20 for why in table.values())
