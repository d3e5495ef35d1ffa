"""tools/fuzz_api.py: the public API survives hostile calls (no crash, hang or internal error),
and the harness itself reports what it promises: a crash, a hang, an internal error and a leak
in functions written to fail so, with the run going on after each."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from child_env import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "fuzz_api.py")


def fuzz(*args, timeout=600):
    proc = subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True,
                          env=child_env(), timeout=timeout, cwd=ROOT)
    return proc.returncode, proc.stdout + proc.stderr


def totals(out):
    """(targets, calls, ok, error, leak, bug, crash, hang) of the report's last table row."""
    m = re.search(r"\*\*all (\d+) targets\*\* \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| "
                  r"(\d+) \| (\d+) \|", out)
    assert m, out[-3000:]
    return tuple(int(v) for v in m.groups())


def test_the_public_api_survives_hostile_calls():
    # A slice of `tools/fuzz_api.py --calls 1000`: every target, 20 calls each, fixed seed.
    rc, out = fuzz("--calls", "20", "--seed", "11", "--mem-gib", "2")
    n, calls, ok, error, leak, bug, crash, hang = totals(out)
    assert (bug, crash, hang) == (0, 0, 0), out[-6000:]
    assert rc == 0
    assert n > 400 and calls == 20 * n  # every public function, Tensor method, layer, binding
    assert ok > calls // 4 and error > calls // 4  # the draws reach both sides


PROBE = '''
import os, signal, time
import numpy as np
from singa import tensor

def probe(x):
    """Crashes, hangs, fails inside or leaks by the shape of x; else returns x."""
    shape = tuple(getattr(x, "shape", (-1,)))
    if shape == (0,):
        os.kill(os.getpid(), signal.SIGSEGV)
    if shape == (3, 0):
        time.sleep(60)
    if shape == (1,):
        return {}["missing"]             # a KeyError: an internal bug
    if shape == (3,):
        return np.ones(2) + np.ones(3)   # numpy's ValueError: a leak
    if shape == (2, 3):
        raise ValueError("probe: a checked error")
    return x


def lies_in_graphs(x):
    """2x eagerly, 3x when recorded in a graph."""
    from singa import device
    if not isinstance(x, tensor.Tensor) or x.dtype != tensor.float32:
        raise TypeError("lies_in_graphs: float32 tensors only")
    twice = tensor.add(x, x)
    return tensor.add(twice, x) if device.get_default_device().graph_enabled() else twice
'''


def test_the_harness_reports_crashes_hangs_bugs_and_leaks(tmp_path):
    # The file name holds "singa" so that its own `raise` counts as the library's check.
    probe = tmp_path / "singa_fuzz_probe.py"
    probe.write_text(PROBE)
    rc, out = fuzz("--only", "extra", "--extra", "%s:probe" % probe, "--calls", "40",
                   "--timeout", "1", "--show-leaks")
    n, calls, ok, error, leak, bug, crash, hang = totals(out)
    assert rc == 1
    assert n == 1 and calls == 40
    assert crash >= 1 and hang >= 1 and bug >= 1 and leak >= 1 and error >= 1 and ok >= 1, out
    assert ok + error + leak + bug + crash + hang == calls  # every case ran, after each crash too
    assert "CRASH  extra.probe:" in out and "rc -11" in out
    assert "HANG  extra.probe:" in out and "KeyError" in out
    # each reproducer names the drawn input, and replaying it in-process shows the same failure
    i = re.search(r"BUG  extra\.probe:(\d+)", out).group(1)
    proc = subprocess.run([sys.executable, TOOL, "--extra", "%s:probe" % probe, "--case",
                           "extra.probe:%s" % i], capture_output=True, text=True,
                          env=child_env(), cwd=ROOT, timeout=120)
    assert proc.returncode != 0 and "KeyError" in proc.stderr


def test_graph_mode_equals_eager_mode_on_hostile_calls():
    rc, out = fuzz("--calls", "8", "--seed", "12", "--graph", "--mem-gib", "2")
    n, calls, ok, error, leak, bug, crash, hang = totals(out)[:8]
    assert (bug, crash, hang) == (0, 0, 0) and rc == 0, out[-6000:]
    assert "| graph | refused |" in out


def test_the_harness_reports_a_graph_that_differs_from_eager(tmp_path):
    probe = tmp_path / "singa_fuzz_probe.py"
    probe.write_text(PROBE)
    rc, out = fuzz("--only", "extra", "--extra", "%s:lies_in_graphs" % probe, "--calls", "30",
                   "--graph")
    assert rc == 1
    m = re.search(r"\*\*all 1 targets\*\* \| 30 \| (\d+) \| (\d+) \| \d+ \| \d+ \| \d+ \| \d+ \| "
                  r"(\d+) \|", out)
    assert m and int(m.group(3)) >= 1, out
    assert "GRAPH  extra.lies_in_graphs:" in out and "differs at" in out


@pytest.mark.parametrize("flag", ["--list"])
def test_the_targets_include_each_layer_of_the_api(flag):
    rc, out = fuzz(flag)
    names = set(line.split()[0] for line in out.splitlines() if line.strip())
    for expected in ("autograd.conv2d", "tensor.einsum", "tensor.Tensor.reshape", "layer.LSTM",
                     "raw.Conv2dForward", "raw.ConvHandle", "raw.Tensor.Reshape",
                     "raw.Device.SetMemoryBudget", "opt.Adam", "opt.CosineDecay",
                     "initializer.he_normal", "utils.re_new_handle", "sonnx.Conv", "sonnx.Resize",
                     "model.train", "model.onnx"):
        assert expected in names, expected
    assert "raw.mpi_abort" not in names  # would end the process on purpose


SPEC = {"image": False, "input": (4,), "classes": 3, "batches": [2, 2, 3], "sequential": False,
        "optimizer": "momentum", "loss": "softmax_ce",
        "layers": [("linear", 6), ("relu",), ("dropout", 0.5), ("linear", 5)]}


def _fuzz_model():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import fuzz_model
    finally:
        sys.path.pop(0)
    return fuzz_model


def test_model_twins_agree_and_train():
    losses = _fuzz_model().run(SPEC, seed=3)
    assert len(losses) == 3 and all(np.isfinite(l).all() for l in losses)


def test_model_twins_catch_a_graph_that_trains_differently(monkeypatch):
    fm = _fuzz_model()
    made = []

    def drifting(name):  # the graph twin's optimizer steps twice as far
        from singa import opt
        made.append(name)
        return opt.SGD(lr=0.05 * len(made), momentum=0.9)
    monkeypatch.setattr(fm, "_optimizer", drifting)
    with pytest.raises(fm.GraphMismatch, match="step 1: loss"):
        fm.run(SPEC, seed=3)


def _have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


@pytest.mark.skipif(not _have("onnxruntime"), reason="needs onnxruntime")
def test_model_export_is_checked_against_onnxruntime(monkeypatch):
    fm = _fuzz_model()
    spec = dict(SPEC, layers=[("linear", 6), ("relu",), ("linear", 5)])
    assert fm.export(spec, seed=3).shape == (2, 3)
    from singa import sonnx

    real = sonnx.to_onnx

    def tampered(*args, **kwargs):  # a weight changed on its way into the file
        m = real(*args, **kwargs)
        from onnx import numpy_helper
        w = m.graph.initializer[0]
        w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w) + 1.0, w.name))
        return m
    monkeypatch.setattr(sonnx, "to_onnx", tampered)
    with pytest.raises(fm.ExportMismatch, match="singa's eval forward"):
        fm.export(spec, seed=3)
