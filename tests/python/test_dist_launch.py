"""Multi-process without typing mpirun: singa.launch, and SINGA's NcclIdHolder start on CPU.

The command line is checked for the flags Open MPI needs (root, more ranks than cores) and the
error without mpirun; a real `python -m singa.launch -n 2` run trains the test worker and its two
ranks end identical, equal to a run under mpirun. SINGA's train_multiprocess.py creates an
NcclIdHolder in the parent and passes nccl_id to DistOpt: in a build without CUDA both raise
and say to use mpirun or singa.launch.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from singa import launch, opt, singa_wrap

from test_dist import MPIRUN, WORKER, _env, assert_ranks_identical, params, results, run_ok


def test_command_is_mpirun_with_the_script_and_its_arguments():
    cmd = launch.mpirun_command(2, ["train.py", "--epochs", "3", "-n", "9"], mpirun="/x/mpirun",
                                cores=2, is_root=False, python="/py")
    assert cmd == ["/x/mpirun", "-np", "2", "/py", "train.py", "--epochs", "3", "-n", "9"]


def test_command_adds_root_and_oversubscribe_flags_only_when_needed():
    cmd = launch.mpirun_command(3, ["t.py"], mpirun="mpirun", cores=2, is_root=True, python="p")
    assert cmd == ["mpirun", "-np", "3", "--allow-run-as-root", "--oversubscribe", "p", "t.py"]
    cmd = launch.mpirun_command(2, ["t.py"], mpirun="mpirun", cores=2, is_root=False, python="p",
                                extra=["--bind-to", "none"])
    assert cmd == ["mpirun", "-np", "2", "--bind-to", "none", "p", "t.py"]


def test_missing_mpirun_and_bad_arguments_are_clear_errors(monkeypatch):
    monkeypatch.setattr(launch.shutil, "which", lambda name: None)
    monkeypatch.setattr(launch._mpi_libs, "extra_file", lambda rel: None)
    with pytest.raises(FileNotFoundError,
                       match=r"mpirun was not found.*pip install 'singa\[dist\]'.*openmpi-bin"):
        launch.mpirun_command(2, ["t.py"])
    with pytest.raises(ValueError, match="positive int, got 0"):
        launch.mpirun_command(0, ["t.py"], mpirun="mpirun")
    with pytest.raises(ValueError, match="no script given"):
        launch.mpirun_command(2, [], mpirun="mpirun")


def test_module_without_mpirun_exits_with_the_error(tmp_path):
    env = dict(_env(), PATH=str(tmp_path))  # no mpirun on PATH
    p = subprocess.run([sys.executable, "-m", "singa.launch", "-n", "2", "t.py"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "mpirun was not found" in p.stderr


def test_dry_run_prints_the_command(tmp_path):
    # an mpirun of our own on PATH: the command is the subject, not this machine's Open MPI (the
    # GPU image has none)
    fake = tmp_path / "mpirun"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    env = dict(_env(), PATH=str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    p = subprocess.run([sys.executable, "-m", "singa.launch", "-n", "2", "--dry-run", "t.py",
                        "--lr", "0.1"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    words = p.stdout.split()
    assert words[1:3] == ["-np", "2"] and words[-3:] == ["t.py", "--lr", "0.1"]
    assert ("--allow-run-as-root" in words) == (os.geteuid() == 0)


@pytest.mark.skipif(MPIRUN is None or not singa_wrap.USE_DIST,
                    reason="needs mpirun (openmpi-bin) and singa built with MPI")
def test_launch_runs_the_ranks_as_mpirun_does(tmp_path):
    steps = 3
    args = [sys.executable, "-m", "singa.launch", "-n", "2", WORKER, "--out",
            str(tmp_path / "l"), "--steps", str(steps), "--graph", "1"]
    p = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    ranks = results(tmp_path / "l", 2)
    assert all(int(r["world"]) == 2 for r in ranks)
    assert_ranks_identical(ranks, steps)
    ref = run_ok(tmp_path / "m", 2, steps=steps, graph=1)
    for k, v in params(ref[0], steps - 1).items():
        np.testing.assert_array_equal(params(ranks[0], steps - 1)[k], v)


@pytest.mark.skipif(getattr(singa_wrap, "USE_CUDA", False),
                    reason="a CUDA build has NCCL")
def test_singa_multiprocess_start_says_to_use_mpirun():
    with pytest.raises(NotImplementedError, match="mpirun.*singa.launch"):
        singa_wrap.NcclIdHolder()
    if singa_wrap.USE_DIST:
        with pytest.raises(NotImplementedError, match="mpirun.*singa.launch"):
            opt.DistOpt(opt.SGD(), nccl_id=object(), local_rank=0, world_size=2)
