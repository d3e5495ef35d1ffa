"""CMake's SINGA_BUILD_PYTHON / SINGA_BUILD_TESTS (issue 16, point 9): AUTO skips a part whose
dependencies are missing and says which; ON fails the configure naming them; a bad value is
refused. Runs cmake's configure step (no compilation) in a temporary build folder, with a
Python whose numpy import fails and GoogleTest hidden."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CMAKE = shutil.which("cmake")
pytestmark = pytest.mark.skipif(CMAKE is None, reason="cmake is not on PATH")


@pytest.fixture(scope="module")
def python_without_numpy(tmp_path_factory):
    d = tmp_path_factory.mktemp("nonumpy")
    (d / "numpy").mkdir()
    (d / "numpy" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    exe = d / "python"
    exe.write_text('#!/bin/sh\nPYTHONPATH="%s" exec "%s" "$@"\n' % (d, sys.executable))
    exe.chmod(0o755)
    return str(exe)


def configure(build, *defs):
    cmd = [CMAKE, "-S", ROOT, "-B", str(build), "-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON"]
    p = subprocess.run(cmd + list(defs), capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def test_auto_skips_what_is_missing_and_on_fails_loudly(tmp_path, python_without_numpy):
    py = "-DPython_EXECUTABLE=" + python_without_numpy
    rc, out = configure(tmp_path / "b", py)  # AUTO is the default
    if rc != 0 and "Could not find SINGA_BLAS_LIBRARY" in out:
        # the GPU image: its OpenBLAS lives in tools/gpu_check.sh's prefix only
        pytest.skip("no system OpenBLAS to configure against")
    assert rc == 0, out
    assert ("Python extension (singa.singa_wrap) skipped (SINGA_BUILD_PYTHON=AUTO): missing "
            "numpy") in out
    assert "C++ tests (tests/cpp) skipped (SINGA_BUILD_TESTS=AUTO): missing GoogleTest" in out
    assert "C++ tests FALSE, Python extension FALSE" in out
    assert not os.path.exists(tmp_path / "b" / "cython")  # the extension's folder is not there

    rc, out = configure(tmp_path / "b", py, "-DSINGA_BUILD_PYTHON=ON")
    assert rc != 0 and "SINGA_BUILD_PYTHON=ON but the Python extension" in out, out
    assert "numpy" in out

    rc, out = configure(tmp_path / "b", py, "-DSINGA_BUILD_PYTHON=OFF", "-DSINGA_BUILD_TESTS=ON")
    assert rc != 0 and "GoogleTest" in out and "libgtest-dev" in out, out

    rc, out = configure(tmp_path / "b", py, "-DSINGA_BUILD_PYTHON=OFF", "-DSINGA_BUILD_TESTS=OFF")
    assert rc == 0 and "skipped" not in out, out

    rc, out = configure(tmp_path / "b", "-DSINGA_BUILD_TESTS=maybe")
    assert rc != 0 and "expected AUTO, ON or OFF" in out, out
