"""Benchmarks that compare builds: a worker of the same script run against another checkout.

    from trees import commit_of, worker_results
    results = worker_results(__file__, ["--worker", ...], "/tmp/before")  # its RESULT lines
    label = commit_of("/tmp/before")                                      # "4b20539" or "4b20539*"

A tree is a checkout with a built singa package; the worker imports it through PYTHONPATH and
runs from it, and prints each result as a line "RESULT <json>".
"""
import json
import os
import subprocess
import sys


def worker_results(script, argv, tree, timeout=None):
    """The decoded RESULT lines of `python script argv` run against tree's build."""
    cmd = [sys.executable, os.path.abspath(script)] + list(argv)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tree)
    results = [json.loads(ln[7:]) for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if not results:
        raise RuntimeError("%s %s failed in %s:\n%s" % (os.path.basename(script), " ".join(argv),
                                                        tree, p.stderr[-3000:]))
    return results


def commit_of(tree):
    """The tree's commit (+ "*" when its C++ differs from it), naming its row."""
    git = ["git", "-C", tree]
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or os.path.abspath(tree)
    dirty = subprocess.run(git + ["diff", "--quiet", "HEAD", "--", "cpp"]).returncode != 0
    return head + ("*" if dirty else "")
