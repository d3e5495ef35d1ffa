"""singa.singa_wrap is gathered from one extension module per theme (cython/singa/_wrap_NAME.pyx,
singa/singa_wrap.py): every module's names reach singa_wrap unshadowed, the three lists of
modules (sources, CMake, singa_wrap.py) agree, each module imports alone, and each module turns
libsinga's C++ errors into singa's classes (every module has its own translation table)."""
import pathlib
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest

from child_env import child_env
from singa import singa_wrap as sw

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = sorted(p.stem for p in (ROOT / "cython" / "singa").glob("_wrap_*.pyx"))


def _gathered():
    """The modules singa_wrap.py imports, in its order."""
    text = (ROOT / "singa" / "singa_wrap.py").read_text()
    return re.findall(r"^from singa\.(_wrap_\w+) import \*", text, re.M)


def test_the_sources_cmake_and_singa_wrap_list_the_same_modules():
    cmake = (ROOT / "cython" / "CMakeLists.txt").read_text()
    listed = re.search(r"set\(SINGA_WRAP_MODULES([^)]*)\)", cmake).group(1).split()
    gathered = _gathered()
    assert sorted("_wrap_" + m for m in listed) == SOURCES
    assert sorted(m for m in gathered if m != "_wrap_errors") == SOURCES
    # import order: what the others cimport comes first
    assert ["_wrap_" + m for m in listed] == [m for m in gathered if m != "_wrap_errors"]
    assert listed[:2] == ["device", "tensor"]


@pytest.mark.parametrize("name", SOURCES)
def test_every_public_name_of_a_module_is_singa_wraps_own(name):
    mod = __import__("singa." + name, fromlist=["_"])
    public = [n for n in vars(mod) if not n.startswith("_")]
    assert len(public) > 1
    # the same object: no later module shadows a name an earlier one defines
    assert [n for n in public if getattr(sw, n, None) is not getattr(mod, n)] == []


def test_classes_say_where_users_find_them():
    for cls in (sw.ShapeError, sw.AxisError, sw.NonFiniteError, sw.SingaError):
        assert cls.__module__ == "singa.singa_wrap"
        e = pickle.loads(pickle.dumps(cls("boom")))
        assert type(e) is cls and str(e) == "boom"
    assert issubclass(sw.ShapeError, ValueError) and issubclass(sw.AxisError, IndexError)


def test_each_module_imports_alone():
    # In-place arithmetic (_wrap_elementwise) and DLPack (_wrap_dlpack) build on the Tensor
    # module; a Tensor imported alone finds them when first used.
    probes = {name: "import singa.%s" % name for name in SOURCES}
    probes["_wrap_tensor"] += ("\nimport numpy as np\nt = singa._wrap_tensor.Tensor((2,))\n"
                               "t += 1.5\nassert np.asarray(t).tolist() == [1.5, 1.5]")
    runs = {name: subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, env=child_env())  # this singa's
            for name, code in probes.items()}
    failed = {name: p.communicate()[0].decode()[-400:] for name, p in runs.items()}
    assert {n: out for n, out in failed.items() if runs[n].returncode != 0} == {}


def _conv_mismatch():
    h = sw.ConvHandle(sw.Tensor((1, 3, 8, 8)), (3, 3), (1, 1), (0, 0), 3, 4, False)
    sw.Conv2dForward(sw.Tensor((1, 2, 8, 8)), sw.Tensor((4, 3, 3, 3)), None, h)


def _bad_wait():
    sw.Communicator(1024).waitBucket(99, 1.0)


# One C++ throw through each module's own translation table (the plain builtin otherwise).
CPP_ERRORS = [
    ("_wrap_device", lambda: sw.get_default_device().set_backend("cuda"), sw.DeviceError),
    ("_wrap_tensor", lambda: sw.Tensor((2, 3)).Reshape((4,)), sw.ShapeError),
    ("_wrap_ops", lambda: sw.Mult(sw.Tensor((2, 3)), sw.Tensor((4, 5))), sw.ShapeError),
    ("_wrap_elementwise", lambda: sw.Add(sw.Tensor((2, 3)), sw.Tensor((4,))), sw.ShapeError),
    ("_wrap_activations",
     lambda: sw.LeakyReLUBackward(sw.Tensor((2, 3)), sw.Tensor((4,)), 0.1), sw.ShapeError),
    ("_wrap_nn", _conv_mismatch, sw.ShapeError),
    ("_wrap_transformer", lambda: sw.CumSum(sw.Tensor((2, 3)), 5), sw.AxisError),
    ("_wrap_attention", lambda: sw.ScaledDotProductAttention(
        sw.Tensor((2, 3)), sw.Tensor((2, 4)), sw.Tensor((2, 3))), sw.ShapeError),
    ("_wrap_rnn", lambda: sw.LSTMForward(sw.Tensor((2, 3, 8)), sw.Tensor((3, 2)),
                                         sw.Tensor((3, 2)), sw.Tensor((4, 8)), None),
     sw.ShapeError),
    ("_wrap_kernels", lambda: sw.set_gemm_backend("bogus"), sw.ArgumentError),
    ("_wrap_dlpack", lambda: sw.from_dlpack(np.zeros(3, np.float64)), sw.DTypeError),
    ("_wrap_dist", _bad_wait, sw.ArgumentError),
]


def test_every_module_has_a_case_below():
    assert sorted(m for m, _, _ in CPP_ERRORS) == SOURCES


@pytest.mark.parametrize("module,call,cls", CPP_ERRORS, ids=[c[0] for c in CPP_ERRORS])
def test_each_module_raises_singas_error_classes(module, call, cls):
    if module == "_wrap_dist" and not sw.USE_DIST:
        pytest.skip("libsinga was built without MPI")
    with pytest.raises(cls) as e:
        call()
    assert type(e.value) is cls, type(e.value)


def test_each_module_fills_its_translation_table_at_import():
    # A module whose table stayed empty raises plain ValueError/TypeError: error_translate.h's
    # table is per module unless the toolchain merges it, so each one registers.
    for name in SOURCES:
        text = (ROOT / "cython" / "singa" / (name + ".pyx")).read_text()
        assert re.search(r"^register_error_classes\(\)$", text, re.M), name


def test_libsinga_links_libstdcxx_instead_of_carrying_a_copy():
    """A libsinga that defines libstdc++'s own functions (linked from libstdc++.a where the
    compiler found no libstdc++.so: cmake/StdCxx.cmake) crashed Python at the first exception
    message on the GPU image, while its C++ tests passed."""
    import shutil
    if shutil.which("nm") is None:
        pytest.skip("no nm to read libsinga's symbols")
    maps = pathlib.Path("/proc/self/maps").read_text().split("\n")
    libs = {line.split()[-1] for line in maps if "/libsinga.so" in line}
    assert libs, "libsinga is not loaded"
    for lib in libs:
        out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True,
                             text=True, check=True).stdout
        assert "_ZNSo9_M_insertImEERSoT_" not in out, lib  # std::ostream::_M_insert<unsigned long>
        assert re.search(r" T singa::|_ZN5singa", out), lib  # read the right file
