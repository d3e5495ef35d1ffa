"""The GPU-day script (tools/gpu_check.sh) keeps working on a machine without a GPU: its dry
mode's cheap steps (unpack the carried .debs into a prefix, configure against that prefix) run
here, so the one device call a lent GPU gets does not fail on a rotten script.

    GPU_CHECK_DRY=1 GPU_CHECK_STEPS=unpack,configure tools/gpu_check.sh
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "gpu_check.sh")
DEPS = os.path.join(ROOT, ".gpu-deps")

needs_debs = pytest.mark.skipif(
    not os.path.exists(os.path.join(DEPS, ".ok")),
    reason="no .gpu-deps/ (make gpu-deps downloads it; make test does so first)")


def run_check(tmp_path, steps, **env_extra):
    env = dict(os.environ, GPU_CHECK_DRY="1", GPU_CHECK_STEPS=steps, PY=sys.executable,
               OUT=str(tmp_path / "out"), GPU_BUILD=str(tmp_path / "build"),
               GPU_PREFIX=str(tmp_path / "prefix"))
    env.update(env_extra)
    p = subprocess.run(["bash", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    summary = (tmp_path / "out" / "summary.txt").read_text()
    return p, summary


@needs_debs
def test_dry_unpack_and_configure_use_the_prefix(tmp_path):
    p, summary = run_check(tmp_path, "unpack,configure")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "PASS unpack" in summary and "PASS configure" in summary
    prefix = str(tmp_path / "prefix")
    # what the device lacks came from the prefix, not from this machine's /usr
    assert os.path.exists(os.path.join(prefix, "usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h"))
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    for var in ("SINGA_BLAS_LIBRARY", "dnnl_DIR", "GTest_DIR"):
        line = re.search(r"^%s:\w+=(.*)$" % var, cache, re.M).group(1)
        assert line.startswith(prefix), (var, line)
    # the working tree and the packages fit in what one device call carries
    m = re.search(r"working tree (\d+) MiB \+ \.gpu-deps (\d+) MiB", p.stdout)
    assert m and int(m.group(1)) + int(m.group(2)) < 64, p.stdout[-2000:]
    assert "USE_DIST=OFF" in p.stdout  # Open MPI stays behind


def test_missing_packages_fail_with_the_command_to_fetch_them(tmp_path):
    empty = tmp_path / "nodebs"
    empty.mkdir()
    p, summary = run_check(tmp_path, "unpack,configure", GPU_DEPS_DIR=str(empty))
    assert p.returncode != 0
    assert "FAIL unpack" in summary and "configure" not in summary.split("FAIL unpack")[1]
    assert "make gpu-deps" in p.stdout


@needs_debs
def test_a_library_found_outside_the_prefix_fails_configure(tmp_path):
    # without GoogleTest among the packages, CMake would find this machine's own: on the device
    # there is none, so the rehearsal must fail here rather than pass on the system's copy
    some = tmp_path / "somedebs"
    some.mkdir()
    for f in os.listdir(DEPS):
        if f.endswith(".deb") and not f.startswith("libgtest-dev"):
            os.symlink(os.path.join(DEPS, f), some / f)
    p, summary = run_check(tmp_path, "unpack,configure", GPU_DEPS_DIR=str(some))
    assert p.returncode != 0
    assert "PASS unpack" in summary and "FAIL configure" in summary
    # here: CMake found this machine's GoogleTest outside the prefix; on a machine without one
    # (the GPU image): SINGA_BUILD_TESTS=ON finds none. Either way configure fails naming it.
    assert re.search(r"GTest|GoogleTest", p.stdout + p.stderr)
    assert "SOME STEPS FAILED" in summary


def test_bench_train_runs_gpu_only_modes_only_on_the_gpu():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_train.py"),
                        "--models", "mlp", "--batch", "4", "--iters", "1", "--warmup", "1",
                        "--modes", "eager", "bfs-nocap", "torch-compile"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [l for l in p.stdout.splitlines() if l.startswith("| model") or l.startswith("| pytorch")]
    assert [r.split("|")[1].strip() for r in rows] == ["model: disable graph"], p.stdout


# The GPU day's other benchmarks (tools/gpu_check.sh's bench and probe steps), at toy sizes on
# the CPU: each prints its table, every row measured, so none fails for the first time there.
@pytest.mark.parametrize("script,args,rows", [
    ("bench_gpt.py", ["--layers", "1", "--seq", "16", "--batch", "2", "--iters", "1",
                      "--warmup", "1", "--modes", "graph", "torch"], 2),
    ("bench_rnn.py", ["--seq", "4", "--batch", "2", "--hidden", "8", "--iters", "1",
                      "--warmup", "1", "--modes", "graph", "torch"], 2),
    ("bench_gpu_ops.py", ["--batch", "2", "--seq", "16", "--repeat", "1", "--inner", "1"], 7),
])
def test_gpu_day_benchmarks_print_their_tables_on_the_cpu(script, args, rows):
    pytest.importorskip("torch")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script)] + args,
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    table = [line for line in p.stdout.splitlines()
             if line.startswith("| ") and not line.startswith(("| Cases", "| operation"))]
    assert len(table) == rows, p.stdout
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert "failed" not in cells and all(cells[1:3]), line  # measured, singa and torch


HIDE = os.path.join(ROOT, "tools", "hide_system_deps.sh")


@pytest.mark.skipif(subprocess.run(["bash", HIDE, "--can"]).returncode != 0,
                    reason="needs root and unshare -m")
def test_hide_system_deps_shows_the_command_a_machine_without_them(tmp_path):
    # what make gpu-check-suite-dry relies on: inside, no mpirun, no GoogleTest headers, and the
    # system's OpenBLAS reads empty; outside, nothing changed
    probe = ("command -v mpirun; ls /usr/include/gtest 2>/dev/null | head -1; "
             "for f in /usr/lib/*/libopenblas*.so* /usr/lib/*/openblas-*/libopenblas*.so*; do "
             "[ -s \"$f\" ] && echo \"$f\"; done; echo done")
    inside = subprocess.run(["bash", HIDE, "sh", "-c", probe], capture_output=True, text=True,
                            timeout=60)
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.split() == ["done"], inside.stdout
    outside = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, timeout=60)
    if shutil.which("mpirun"):
        assert "mpirun" in outside.stdout
    assert subprocess.run(["bash", HIDE], capture_output=True).returncode == 2  # usage
