"""libsinga never needs the system's MPI: the MPI half (libsinga_mpi.so) is loaded at the first
Communicator, and where Open MPI is missing DistOpt says how to get it (issue 22: a wheel that
imports and trains without libmpi)."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from child_env import child_env
from singa import singa_wrap



def _loaded(name_start):
    """Paths of the mapped files whose name starts with name_start."""
    with open("/proc/self/maps") as f:
        paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
    return sorted(p for p in paths if os.path.basename(p).startswith(name_start))


def _needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    return [line.split("[")[1].rstrip("]") for line in lines if "(NEEDED)" in line]


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf (binutils)")
def test_libsinga_and_its_mpi_half_do_not_list_libmpi():
    libsinga = _loaded("libsinga.so")
    assert libsinga, "libsinga is not mapped after importing singa_wrap"
    assert not [n for n in _needed(libsinga[0]) if n.startswith("libmpi")]
    assert not _loaded("libmpi"), "importing singa loaded MPI"
    if not singa_wrap.USE_DIST:
        pytest.skip("built without MPI (USE_DIST=OFF)")
    mpi_half = os.path.join(os.path.dirname(libsinga[0]), "libsinga_mpi.so")
    assert os.path.exists(mpi_half)
    assert not [n for n in _needed(mpi_half) if n.startswith("libmpi")]


def _can_hide_files():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not singa_wrap.USE_DIST, reason="built without MPI (USE_DIST=OFF)")
@pytest.mark.skipif(not _can_hide_files(), reason="needs root and unshare -m to hide libmpi")
def test_without_libmpi_singa_trains_and_distopt_says_how_to_get_it(tmp_path):
    # A mount namespace where every libmpi file reads as /dev/null: MPI cannot load.
    script = textwrap.dedent("""
        import numpy as np
        from singa import autograd, device, opt, tensor
        dev = device.get_default_device()
        w = tensor.from_numpy(np.ones((3, 2), np.float32), dev)
        w.requires_grad = w.stores_grad = True
        autograd.training = True
        x = tensor.from_numpy(np.ones((4, 3), np.float32), dev)
        loss = autograd.reduce_sum(autograd.matmul(x, w))
        sgd = opt.SGD(lr=0.1)
        sgd(loss)
        assert np.allclose(tensor.to_numpy(w), 1 - 0.1 * 4), tensor.to_numpy(w)
        try:
            opt.DistOpt(opt.SGD(lr=0.1))
        except NotImplementedError as e:
            print(e)
        else:
            raise SystemExit("DistOpt did not raise without libmpi")
    """)
    hide = ("for f in $(find /usr/lib /usr/local/lib -xdev -type f -name 'libmpi*.so*' "
            "2>/dev/null); do mount --bind /dev/null $f; done; exec \"$@\"")
    res = subprocess.run(["unshare", "-m", "sh", "-c", hide, "hide", sys.executable, "-c", script],
                         capture_output=True, text=True, env=child_env(), cwd=tmp_path,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    msg = res.stdout
    assert "MPI is not available" in msg and "libmpi" in msg, msg
    assert "apt-get install openmpi-bin" in msg and "singa.launch" in msg, msg
    assert "pip install 'singa[dist]'" in msg, msg
