"""Mutation testing of the Python package with mutmut: how many deliberate one-line bugs the test
suite catches, per module (TESTING.md records the numbers and why each survivor is harmless).

    .venv/bin/python tools/mutate.py                       # the default modules, full run
    .venv/bin/python tools/mutate.py singa/opt.py --sample 200
    make mutate                                            # the same as the first line

mutmut (PyPI) mutates a copy of the sources in `mutants/` of a scratch copy of this checkout (the
built extension included), maps each mutant to the tests that execute its function (coverage), and
runs only those. --sample N picks N mutants per module at random (fixed seed) where a full run is
too slow on this machine; the report says which modules were sampled. --only FILE re-runs the
mutants named in FILE (e.g. mutate-survivors.txt after adding tests). Workers come from a fork
server with OMP_NUM_THREADS=1 and a wall-clock watchdog (see TESTING.md for why). Exit status 0
unless mutmut itself fails: this measures the suite, it does not gate CI.
"""
import argparse
import collections
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# test files mutmut's runs leave out (why: at their use below)
IGNORED_TESTS = ["test_imports", "test_docs", "test_metadata", "test_mypy_examples",
                 "test_examples_cli", "test_dist_loading", "test_gpu_check", "test_schema",
                 "test_typing"]
DEFAULT = ["singa/autograd", "singa/opt.py", "singa/model.py", "singa/layers", "singa/layer.py"]


def module_of(mutant):
    """'singa.autograd.math.x_add__mutmut_3' -> 'singa.autograd.math'."""
    parts = mutant.split(".")
    for i, p in enumerate(parts):
        if p.startswith("x_") or p.startswith("x\u01c1"):
            return ".".join(parts[:i])
    return ".".join(parts[:-1])


_mutmut_pid = []  # the running `mutmut run` process, for the watchdog


def _children():
    """{pid: [child pids]} of every process."""
    kids = collections.defaultdict(list)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids[ppid].append(int(pid))
    return kids


def watchdog(limit):
    """Kills mutant workers older than ``limit`` seconds of wall time: mutmut only limits CPU
    time, and a worker blocked on a lock uses none. Workers are the grandchildren of `mutmut
    run` (forked by its fork server; mutmut's own stats and clean runs are its children)."""
    seen = {}
    while True:
        now = time.time()
        kids = _children()
        for root in list(_mutmut_pid):
            for server in kids.get(root, []):
                for pid in kids.get(server, []):
                    seen.setdefault(pid, now)
                    if now - seen[pid] > limit:
                        try:
                            os.kill(pid, 9)
                        except OSError:
                            pass
        time.sleep(5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=DEFAULT)
    ap.add_argument("--sample", type=int, default=0, help="mutants per module (0: all)")
    ap.add_argument("--tests", nargs="+", default=["tests/python"],
                    help="test files or folders whose tests may kill a mutant (a narrower set "
                         "maps the mutants faster)")
    ap.add_argument("--only", metavar="FILE",
                    help="run exactly the mutants named in FILE, one a line (e.g. the "
                    "survivors of an earlier run, to re-measure them after adding tests)")
    ap.add_argument("--wall-limit", type=int, default=600,
                    help="seconds after which a mutant's worker is killed (reported as "
                    "'segfault' by mutmut, counted under timeout/other here)")
    ap.add_argument("--max-children", type=int, default=2,
                    help="mutants run at once (the machine is shared: keep it small)")
    args = ap.parse_args()
    mutmut = os.path.join(os.path.dirname(sys.executable), "mutmut")
    work = tempfile.mkdtemp(prefix="singa-mutate-")
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    files += [os.path.join("singa", f) for f in os.listdir(os.path.join(ROOT, "singa"))
              if f.endswith(".so")]
    for f in files:
        os.makedirs(os.path.join(work, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), os.path.join(work, f))
    # Every top-level entry goes into mutants/ as well: some tests read files outside singa/ and
    # tests/ (test_kernel_registry parses cpp/include/singa/ops/*.def); without them the clean
    # run fails and mutmut records nothing.
    also = sorted({f.split("/")[0] for f in files} - {"pyproject.toml", "setup.cfg"})
    with open(os.path.join(work, "setup.cfg"), "w") as f:
        f.write("[mutmut]\nsource_paths=%s\nalso_copy=%s\n"
                "pytest_add_cli_args_test_selection=%s\n"
                # Workers forked from mutmut's main process (which ran the suite, so libsinga's
                # threads exist there) deadlock on a futex in their first parallel kernel
                # (batch norm, convolution) and use no CPU, so mutmut's CPU-time limit never
                # fires: fork them from a clean server that has not imported singa.
                "process_isolation=forkserver\nforkserver_warmup=none\n"
                # pytest's own output (which test failed) reaches the logs only in debug mode
                "debug=true\n"
                # test_imports reads the sources' import statements with ast; mutmut rewrites
                # every function of a mutated module (trampolines), so there it sees imports
                # that are not ours and fails the clean run.
                # test_docs lists the public methods by introspection and sees the
                # trampolines' renamed originals (xǁClassǁname__mutmut_orig) as undocumented.
                # test_metadata and test_mypy_examples read pyproject.toml, removed below; the
                # files after them start Python in another folder, where a mutated module's
                # trampoline finds no mutmut configuration and the child fails.
                # One argument a line: mutmut splits this value on newlines only (on one line
                # pytest took the whole list as one path and ignored nothing).
                "pytest_add_cli_args=%s\n"
                % ("\n    ".join(args.paths), "\n    ".join(also), "\n    ".join(args.tests),
                   "\n    ".join("--ignore=tests/python/%s.py" % t for t in IGNORED_TESTS)))
    os.remove(os.path.join(work, "pyproject.toml"))  # its [tool.*] tables would shadow setup.cfg
    env = dict(os.environ, PYTHONPATH="", OMP_NUM_THREADS="1")
    threading.Thread(target=watchdog, args=(args.wall_limit,), daemon=True).start()
    _logs = []  # each mutmut call's whole output, kept in the scratch copy

    def run(*a, check=False):
        proc = subprocess.Popen([mutmut, *a], cwd=work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        _mutmut_pid.append(proc.pid)
        out, err = proc.communicate()
        _mutmut_pid.remove(proc.pid)
        with open(os.path.join(work, "mutmut-%s.log" % len(_logs)), "w") as log:
            log.write("$ mutmut %s\n%s%s" % (" ".join(a[:3]), out, err))
        _logs.append(log.name)
        r = subprocess.CompletedProcess(a, proc.returncode, out, err)
        if check and r.returncode != 0:
            # mutmut stops (recording nothing) when the unmutated suite fails: say why
            sys.exit("mutmut %s failed (exit %d; whole output in %s):\n%s"
                     % (a[0], r.returncode, _logs[-1], (r.stdout + r.stderr)[-4000:]))
        return r

    children = "--max-children=%d" % args.max_children
    if args.sample or args.only:
        def listed():
            return [ln.split(":")[0].strip() for ln in run("results", "--all", "true").stdout
                    .splitlines() if ":" in ln]

        # generates the mutants and the coverage map (then stops: no mutant has that name)
        first = run("run", children, "no.such.mutant")
        if "failed to collect stats" in first.stdout:
            sys.exit("mutmut's run of the unmutated suite failed: see %s" % _logs[0])
        names = listed()
        if not names:
            # mutmut 3.8 lists nothing after the run that collected the stats; a second run
            # (stats cached: seconds) writes the mutants' records
            run("run", children, "no.such.mutant")
            names = listed()
        if not names:
            sys.exit("mutmut generated no mutants (its output: %s)" % _logs[0])
        if args.only:
            with open(args.only) as f:
                wanted = {ln.strip() for ln in f if ln.strip()}
            chosen = [n for n in names if n in wanted]
        else:
            by_mod = collections.defaultdict(list)
            for n in names:
                by_mod[module_of(n)].append(n)
            rng = random.Random(0)
            chosen = [n for mod in sorted(by_mod) for n in
                      rng.sample(sorted(by_mod[mod]), min(args.sample, len(by_mod[mod])))]
        # one invocation: each one re-runs the clean suite first
        run("run", children, *chosen, check=True)
    else:
        run("run", children, check=True)
    counts = collections.defaultdict(collections.Counter)
    survivors = []
    for ln in run("results", "--all", "true").stdout.splitlines():
        if ":" not in ln:
            continue
        name, status = (s.strip() for s in ln.rsplit(":", 1))
        counts[module_of(name)][status] += 1
        if status == "survived":
            survivors.append(name)
    print("| module | mutants run | killed | survived | timeout/other | kill rate |")
    print("|---|---:|---:|---:|---:|---:|")
    for mod in sorted(counts):
        c = counts[mod]
        ran = sum(v for k, v in c.items() if k != "not checked")
        other = ran - c["killed"] - c["survived"]
        rate = 100.0 * (c["killed"] + c["timeout"]) / ran if ran else 0.0
        print("| %s | %d | %d | %d | %d | %.1f%% |" % (mod, ran, c["killed"], c["survived"],
                                                      other, rate))
    with open(os.path.join(ROOT, "mutate-survivors.txt"), "w") as f:
        f.write("\n".join(survivors) + "\n")
    print("\nsurvivors listed in mutate-survivors.txt; inspect one with "
          "`cd %s && %s show NAME`" % (work, mutmut))


if __name__ == "__main__":
    main()
