"""The environment of a child Python process that must import the singa under test.

    from child_env import child_env
    subprocess.run([sys.executable, "-c", code], env=child_env(OMP_NUM_THREADS="1"))

One source tree is tested against several builds: the in-tree one (`make test`), the CUDA
variant's build/cuda/py, a GPU machine's build/gpu/py (tools/gpu_check.sh), each put first on
PYTHONPATH. A child that put the repository root first instead would import the repository's
singa: another build than the one under test, or, on the GPU machine, a package without its
extension at all. So the child gets the folder that holds the singa this process imported, then
this folder (the test helpers), then the rest of PYTHONPATH. Run it from a folder without a
singa/ of its own (not the repository root: `python -c` puts the working folder first).
"""
import os

import singa

HERE = os.path.dirname(os.path.abspath(__file__))
# abspath, not realpath: a build's py/singa/*.py may be links into the source tree
SINGA_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(singa.__file__)))


def child_env(**extra):
    """os.environ plus ``extra``, with PYTHONPATH starting at the imported singa's folder."""
    env = dict(os.environ, **extra)
    first = [SINGA_PARENT, HERE]
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in first]
    env["PYTHONPATH"] = os.pathsep.join(first + rest)
    return env
