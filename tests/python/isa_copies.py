"""Helper of the tests that compare a kernel's AVX-512 copy with the baseline loops: run a script
in a subprocess, with CPU features masked off (SINGA_CPU_FEATURES_MASK) or not, and return the
line it printed starting with DIGEST."""
import os
import subprocess
import sys


def digest(script, mask=None):
    env = dict(os.environ)
    if mask:
        env["SINGA_CPU_FEATURES_MASK"] = mask
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return [ln for ln in r.stdout.splitlines() if ln.startswith("DIGEST")][0]
