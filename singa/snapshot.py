"""Named tensors saved to and loaded from disk, with Apache SINGA 3.3's ``Snapshot`` API.

Example::

    from singa import snapshot
    sn = snapshot.Snapshot("params", True)      # True: write -> params.bin (+ params.desc)
    for name, t in net.get_params().items():
        sn.write(name, t)
    sn.close()                                  # or drop it / leave a ``with`` block
    params = snapshot.Snapshot("params", False).read()   # {name: Tensor}, in write order

Note: the file format is ours
  SINGA writes ``<f>.bin`` with its C++ BinFile of protobuf TensorProtos; we have neither, so
  ``<f>.bin`` here is a zip archive (ZIP_STORED, zip64) that SINGA cannot read and vice versa::

    * ``singa_snapshot``  first member: b"singa-snapshot <version>\\n" (identifies the file);
    * ``t/<i>.npy``       the i-th tensor in numpy's .npy format (bit-exact, no pickles);
    * ``header.json``     last member: the format version and, per tensor in write order,
                          its name, member, dtype and shape.

  Every member carries a CRC-32 that zipfile checks when reading, and the zip directory sits at
  the end of the file, so a damaged or truncated file raises SnapshotError (a ValueError) naming
  the file and the problem; nothing partial is returned. ``<f>.desc`` is a text description
  (one line per tensor, as SINGA's), written for people and never read back.

Note: writing is atomic
  write() streams each tensor into a temporary file next to ``<f>.bin``; close() (also run by a
  ``with`` block, when the writer is garbage collected, and at interpreter exit) finalises it and
  renames it over ``<f>.bin`` with os.replace, so a reader sees the old file or the whole new
  one, never half of one. As with SINGA's C++ writer, which flushes on destruction, the file is
  complete only once the writer is closed or dropped. ``buffer_size`` (SINGA: the largest
  parameter in MB) is accepted and kept; our format has no size limit.
"""
import io
import json
import os
import tempfile
import weakref
import zipfile
from collections import OrderedDict

import numpy as np

from . import tensor

FORMAT_VERSION = 1
_MARKER_MEMBER = "singa_snapshot"
_MARKER = b"singa-snapshot "
_HEADER_MEMBER = "header.json"

__all__ = ["Snapshot", "SnapshotError", "FORMAT_VERSION"]


class SnapshotError(ValueError):
    """A snapshot file that is damaged, truncated or not a snapshot of ours."""


def _parse_mode(mode):
    """True for write, False for read; SINGA passes a bool (we also take 'w' / 'r')."""
    if isinstance(mode, (bool, int, np.integer)) and mode in (0, 1):
        return bool(mode)
    if mode in ("w", "r", "wb", "rb"):
        return mode.startswith("w")
    raise ValueError("Snapshot: mode must be True (write) or False (read), got %r" % (mode,))


def _describe(name, arr):
    """SINGA's .desc line for one tensor (its data type code is singa's: float32 is 0)."""
    code = {np.dtype(np.float32): tensor.float32, np.dtype(np.float16): tensor.float16,
            np.dtype(np.int32): tensor.int32}.get(arr.dtype, arr.dtype.str)
    return "parameter name: %s\tdata type: %s\tdim: %d\tshape:%s\n" % (
        name, code, arr.ndim, "".join(" %d" % s for s in arr.shape))


def _replace_atomically(path, write):
    """Calls write(file) on a temporary file next to ``path``, then renames it over ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


class _Writer(object):
    """The open temporary archive of a write-mode Snapshot (kept apart from the Snapshot so that
    its finaliser holds no reference to the Snapshot)."""

    def __init__(self, prefix):
        self.bin_path = prefix + ".bin"
        self.desc_path = prefix + ".desc"
        folder = os.path.dirname(os.path.abspath(self.bin_path))
        fd, self.tmp = tempfile.mkstemp(prefix="." + os.path.basename(self.bin_path) + ".",
                                        suffix=".tmp", dir=folder)
        self.file = os.fdopen(fd, "w+b")
        self.zip = zipfile.ZipFile(self.file, "w", zipfile.ZIP_STORED, allowZip64=True)
        self.zip.writestr(_MARKER_MEMBER, _MARKER + b"%d\n" % FORMAT_VERSION)
        self.entries = []
        self.names = set()
        self.desc = []
        self.closed = False

    def add(self, name, arr):
        member = "t/%d.npy" % len(self.entries)
        with self.zip.open(member, "w", force_zip64=True) as f:
            np.lib.format.write_array(f, arr, allow_pickle=False)
        self.names.add(name)
        self.entries.append({"name": name, "member": member, "dtype": arr.dtype.str,
                             "shape": list(arr.shape)})
        self.desc.append(_describe(name, arr))

    def close(self, publish=True):
        """Finalises the archive and renames it over <prefix>.bin (or discards it)."""
        if self.closed:
            return
        self.closed = True
        try:
            if publish:
                header = {"format": "singa-snapshot", "version": FORMAT_VERSION,
                          "entries": self.entries}
                self.zip.writestr(_HEADER_MEMBER, json.dumps(header))
            self.zip.close()
            if publish:
                self.file.flush()
                os.fsync(self.file.fileno())
            self.file.close()
            if publish:
                text = "SINGA_VERSION: snapshot format %d\n%s" % (FORMAT_VERSION,
                                                                  "".join(self.desc))
                _replace_atomically(self.desc_path, lambda f: f.write(text.encode("utf-8")))
                os.replace(self.tmp, self.bin_path)
        finally:
            if not self.file.closed:
                self.file.close()
            _remove(self.tmp)  # a no-op once renamed


def _load(path):
    """The (name -> numpy array) of snapshot file ``path``, fully validated first."""
    def damaged(problem):
        return SnapshotError("Snapshot: %s is damaged or not a singa snapshot: %s"
                             % (path, problem))

    try:
        with zipfile.ZipFile(path, "r") as zf:
            names = zf.namelist()
            if not names or names[0] != _MARKER_MEMBER:
                raise damaged("it does not start with the snapshot marker")
            marker = zf.read(_MARKER_MEMBER)
            if not marker.startswith(_MARKER):
                raise damaged("bad marker %r" % marker[:40])
            version = int(marker[len(_MARKER):].strip())
            if version > FORMAT_VERSION:
                raise SnapshotError("Snapshot: %s has format version %d; this singa reads up "
                                    "to %d" % (path, version, FORMAT_VERSION))
            if _HEADER_MEMBER not in names:
                raise damaged("no header (the writer did not finish)")
            header = json.loads(zf.read(_HEADER_MEMBER).decode("utf-8"))
            params = OrderedDict()
            for e in header["entries"]:
                name, member = e["name"], e["member"]
                if name in params:
                    raise damaged("tensor %r appears twice" % name)
                arr = np.lib.format.read_array(io.BytesIO(zf.read(member)), allow_pickle=False)
                if arr.dtype.str != e["dtype"] or list(arr.shape) != list(e["shape"]):
                    raise damaged("tensor %r is %s %s, the header says %s %s"
                                  % (name, arr.dtype.str, list(arr.shape), e["dtype"],
                                     list(e["shape"])))
                params[name] = arr
            return params
    except SnapshotError:
        raise
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, TypeError, ValueError,
            EOFError, OSError, UnicodeDecodeError) as e:
        # zlib errors, bad CRCs, truncated members, malformed json or .npy headers
        raise damaged("%s: %s" % (type(e).__name__, e)) from e


class Snapshot(object):
    """Writes named tensors to ``<f>.bin`` (mode True) or reads them back (mode False).

    Args:
        f (str): the file name prefix.
        mode (bool): True for write, False for read.
        buffer_size (int): SINGA's largest parameter size in MB; kept, not a limit here.
    """

    def __init__(self, f, mode, buffer_size=10):
        if isinstance(f, bytes):
            f = f.decode("utf-8")
        if not isinstance(f, (str, os.PathLike)):
            raise TypeError("Snapshot: f must be a file name, got %s" % type(f).__name__)
        if not isinstance(buffer_size, (int, np.integer)) or buffer_size <= 0:
            raise ValueError("Snapshot: buffer_size must be a positive int (MB), got %r"
                             % (buffer_size,))
        self.prefix = os.fspath(f)
        self.write_mode = _parse_mode(mode)
        self.buffer_size = int(buffer_size)
        self._writer = None
        self._params = None
        if self.write_mode:
            self._writer = _Writer(self.prefix)
            self._finalizer = weakref.finalize(self, self._writer.close)
        else:
            path = self.prefix + ".bin"
            if not os.path.exists(path):
                raise FileNotFoundError("Snapshot: no snapshot file %s" % path)
            self._params = _load(path)

    def write(self, param_name, param_val):
        """Adds tensor ``param_val`` (a Tensor or numpy array) under the name ``param_name``."""
        if not self.write_mode:
            raise io.UnsupportedOperation("Snapshot.write: %s was opened for reading"
                                          % self.prefix)
        if self._writer.closed:
            raise ValueError("Snapshot.write: %s is closed" % self.prefix)
        if isinstance(param_name, bytes):
            param_name = param_name.decode("utf-8")
        if not isinstance(param_name, str):
            raise TypeError("Snapshot.write: param_name must be a str, got %s"
                            % type(param_name).__name__)
        if param_name in self._writer.names:
            raise ValueError("Snapshot.write: a tensor named %r was already written to %s"
                             % (param_name, self.prefix))
        if isinstance(param_val, tensor.Tensor):
            arr = tensor.to_numpy(param_val)
        elif isinstance(param_val, np.ndarray):
            arr = param_val
        else:
            raise TypeError("Snapshot.write(%r): param_val must be a singa Tensor or numpy "
                            "array, got %s" % (param_name, type(param_val).__name__))
        if arr.dtype.hasobject:
            raise TypeError("Snapshot.write(%r): cannot store an object array" % param_name)
        self._writer.add(param_name, np.ascontiguousarray(arr))

    def read(self):
        """{name: Tensor} of every tensor in the file, in the order they were written."""
        if self.write_mode:
            raise io.UnsupportedOperation("Snapshot.read: %s was opened for writing"
                                          % self.prefix)
        return OrderedDict((k, tensor.from_numpy(v)) for k, v in self._params.items())

    def close(self):
        """Finishes a write-mode snapshot: <f>.bin and <f>.desc appear (idempotent)."""
        if self._writer is not None:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._writer is not None:
            if exc_type is None:
                self._finalizer()
            else:  # an error inside the block: keep whatever file was there
                self._finalizer.detach()
                self._writer.close(publish=False)
        return False
