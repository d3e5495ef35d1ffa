"""Build and import cost of the Cython bindings: two checkouts side by side (e.g. the single
singa_wrap.pyx with its included .pxi files before, the singa._wrap_* modules after).

    python benchmarks/bench_bindings.py --before /path/to/old-checkout --after . [--rounds 2]

Each checkout must be configured and built in its build/ folder (the Makefile's `make build`).
Per round and checkout, alternating which goes first:
  clean     the bindings compiled from nothing: the generated C++ and the objects of the
            bindings' targets deleted, `cmake --build build --target singa_wrap -j2` with ccache
            off (libsinga is up to date, so only Cython and the bindings' C++ run);
  one edit  the same after touching the ops wrappers only (ops.pxi before, _wrap_ops.pyx after);
  import    `from singa import singa_wrap` in a fresh interpreter after `import singa`: median
            of 9 runs (milliseconds).
Prints one row per checkout with the median over rounds; the load average beside it says how
busy the machine was (compare rows of one run only).
"""
import argparse
import glob
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time


def _run_timed(cmd, env):
    """(wall seconds, CPU seconds of the children) of one command; raises when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), p.stdout.decode()[-3000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _build(checkout, jobs):
    env = dict(os.environ, CCACHE_DISABLE="1")
    return _run_timed(["cmake", "--build", str(checkout / "build"), "--target", "singa_wrap",
                       "-j%d" % jobs], env)


def clean_build(checkout, jobs):
    b = checkout / "build" / "cython"
    for f in glob.glob(str(b / "gen" / "*.cpp")) + glob.glob(str(b / "CMakeFiles" / "*.dir" /
                                                                     "gen" / "*.o")):
        os.remove(f)
    return _build(checkout, jobs)


def one_edit(checkout, jobs):
    ops = checkout / "cython" / "singa" / "_wrap_ops.pyx"
    if not ops.exists():
        ops = checkout / "cython" / "ops.pxi"
    os.utime(ops)
    return _build(checkout, jobs)


def import_ms(checkout, n=9):
    code = ("import time, singa; t = time.perf_counter(); from singa import singa_wrap; "
            "print((time.perf_counter() - t) * 1e3)")
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out = []
    for _ in range(n):
        p = subprocess.run([sys.executable, "-c", code], env=env, cwd="/tmp",
                           stdout=subprocess.PIPE, check=True)
        out.append(float(p.stdout.decode().split()[-1]))
    return statistics.median(out)


def modules(checkout):
    sos = glob.glob(str(checkout / "singa" / "*.so"))
    sos = [s for s in sos if "wrap" in os.path.basename(s)]
    return len(sos), sum(os.path.getsize(s) for s in sos) / 2 ** 20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=pathlib.Path)
    ap.add_argument("--after", required=True, type=pathlib.Path)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for t in trees.values():
        _build(t, args.jobs)  # up to date first (libsinga included), outside the timings
    rows = {k: {"clean": [], "clean_cpu": [], "edit": [], "import": []} for k in trees}
    loads = []
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(list(trees)))
        for name in order:
            loads.append(os.getloadavg()[0])
            wall, cpu = clean_build(trees[name], args.jobs)
            rows[name]["clean"].append(wall)
            rows[name]["clean_cpu"].append(cpu)
            rows[name]["edit"].append(one_edit(trees[name], args.jobs)[0])
            rows[name]["import"].append(import_ms(trees[name]))
    print("| checkout | modules (.so, MiB) | clean compile wall s | its CPU s | one edit wall s "
          "| import ms |")
    print("|---|---|---|---|---|---|")
    for name, t in trees.items():
        m = rows[name]
        n, mib = modules(t)
        print("| %s (%s) | %d, %.1f | %.1f | %.1f | %.1f | %.1f |"
              % (name, t, n, mib, statistics.median(m["clean"]), statistics.median(m["clean_cpu"]),
                 statistics.median(m["edit"]), statistics.median(m["import"])))
    print("%d round(s), -j%d, ccache off; load average (1 min) at each measurement: %s"
          % (args.rounds, args.jobs, ", ".join("%.1f" % x for x in loads)))


if __name__ == "__main__":
    main()
