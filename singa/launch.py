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

This replaces SINGA's multiprocessing start (NcclIdHolder), which needs NCCL and CUDA.
"""
import argparse
import os
import shutil
import sys

__all__ = ["mpirun_command", "main"]


def mpirun_command(n, script_args, mpirun=None, cores=None, is_root=None, python=None,
                   extra=()):
    """The argument list of ``mpirun -np n [...] python script args``.

    Raises FileNotFoundError when mpirun is not installed, ValueError for a bad n or no script.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError("singa.launch: the number of processes must be a positive int, got %r"
                         % (n,))
    if not script_args:
        raise ValueError("singa.launch: no script given (python -m singa.launch -n N "
                         "script.py [args...])")
    mpirun = mpirun if mpirun is not None else shutil.which("mpirun")
    if mpirun is None:
        raise FileNotFoundError(
            "singa.launch: mpirun was not found on PATH; install Open MPI (Debian: apt-get "
            "install openmpi-bin libopenmpi-dev) and rebuild singa with MPI, or start the %d "
            "processes with another MPI launcher" % n)
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
