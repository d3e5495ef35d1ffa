"""singa.snapshot: SINGA's Snapshot API over our own file format: bit-exact round trips, atomic
replacement, and clear errors for damaged, truncated or foreign files."""
import gc
import io
import os
import zipfile

import numpy as np
import pytest

from singa import snapshot, tensor


@pytest.fixture
def prefix(tmp_path):
    return str(tmp_path / "params")


def _write(prefix, arrays):
    sn = snapshot.Snapshot(prefix, True)
    for k, v in arrays.items():
        sn.write(k, tensor.from_numpy(v) if isinstance(v, np.ndarray) else v)
    sn.close()


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _arrays(rng):
    f = rng.standard_normal((3, 4)).astype(np.float32)
    f[0, 0], f[0, 1], f[0, 2] = np.nan, -0.0, np.float32(1e-45)   # NaN, signed zero, denormal
    return {"conv1.W": f,
            "conv1.b": np.array([np.inf, -np.inf, 3.25], np.float32),
            "counts": rng.integers(-2**31, 2**31 - 1, size=(2, 3, 2), dtype=np.int32),
            "scalar": np.array([7.5], np.float32),
            "empty": np.zeros((0, 3), np.float32),
            "bn/running mean \u00e9": rng.standard_normal(5).astype(np.float32)}


def test_round_trip_is_bit_exact_and_ordered(prefix, rng):
    arrays = _arrays(rng)
    _write(prefix, arrays)
    got = snapshot.Snapshot(prefix, False).read()
    assert list(got) == list(arrays)                        # write order kept
    for name, t in got.items():
        assert isinstance(t, tensor.Tensor)
        assert _same_bits(tensor.to_numpy(t), arrays[name]), name
    assert got["counts"].dtype == tensor.int32 and got["conv1.W"].dtype == tensor.float32


def test_read_returns_fresh_tensors_each_call(prefix):
    _write(prefix, {"w": np.arange(4, dtype=np.float32)})
    sn = snapshot.Snapshot(prefix, False)
    a, b = sn.read()["w"], sn.read()["w"]
    a += 1.0
    np.testing.assert_array_equal(tensor.to_numpy(b), np.arange(4, dtype=np.float32))


def test_description_file_lists_the_tensors(prefix):
    _write(prefix, {"W": np.zeros((2, 3), np.float32), "n": np.zeros(4, np.int32)})
    lines = open(prefix + ".desc").read().splitlines()
    assert lines[1:] == ["parameter name: W\tdata type: %d\tdim: 2\tshape: 2 3" % tensor.float32,
                         "parameter name: n\tdata type: %d\tdim: 1\tshape: 4" % tensor.int32]


def test_file_appears_only_when_the_writer_is_done(prefix):
    old = {"w": np.ones(3, np.float32)}
    _write(prefix, old)
    sn = snapshot.Snapshot(prefix, True)
    sn.write("w", tensor.from_numpy(np.full(3, 2.0, np.float32)))
    # the old file is intact while the new one is written
    np.testing.assert_array_equal(tensor.to_numpy(snapshot.Snapshot(prefix, False).read()["w"]),
                                  old["w"])
    del sn                                               # dropped: finished, as SINGA's writer
    gc.collect()
    np.testing.assert_array_equal(tensor.to_numpy(snapshot.Snapshot(prefix, False).read()["w"]),
                                  np.full(3, 2.0, np.float32))
    assert sorted(os.listdir(os.path.dirname(prefix))) == ["params.bin", "params.desc"]


def test_context_manager_and_error_inside_keeps_old_file(prefix):
    with snapshot.Snapshot(prefix, True) as sn:
        sn.write("a", np.array([1, 2], np.int32))       # numpy arrays are accepted too
    with pytest.raises(KeyError):
        with snapshot.Snapshot(prefix, True) as sn:
            sn.write("a", np.array([9, 9], np.int32))
            raise KeyError("boom")
    got = snapshot.Snapshot(prefix, False).read()
    np.testing.assert_array_equal(tensor.to_numpy(got["a"]), [1, 2])
    assert sorted(os.listdir(os.path.dirname(prefix))) == ["params.bin", "params.desc"]


def test_empty_snapshot(prefix):
    snapshot.Snapshot(prefix, True).close()
    assert snapshot.Snapshot(prefix, False).read() == {}


def test_misuse_raises_clear_errors(prefix):
    sn = snapshot.Snapshot(prefix, True)
    sn.write("w", tensor.from_numpy(np.zeros(2, np.float32)))
    with pytest.raises(ValueError, match="already written"):
        sn.write("w", tensor.from_numpy(np.zeros(2, np.float32)))
    with pytest.raises(TypeError, match="param_val must be"):
        sn.write("v", [1.0, 2.0])
    with pytest.raises(io.UnsupportedOperation):
        sn.read()
    sn.close()
    sn.close()                                           # idempotent
    with pytest.raises(ValueError, match="closed"):
        sn.write("z", np.zeros(1, np.float32))
    with pytest.raises(io.UnsupportedOperation):
        snapshot.Snapshot(prefix, False).write("x", np.zeros(1, np.float32))
    with pytest.raises(FileNotFoundError, match="nothing.bin"):
        snapshot.Snapshot(prefix + "nothing", False)
    with pytest.raises(ValueError, match="mode"):
        snapshot.Snapshot(prefix, "append")
    with pytest.raises(ValueError, match="buffer_size"):
        snapshot.Snapshot(prefix, True, buffer_size=0)


# ---- damaged files -----------------------------------------------------------------------------
def _damage(prefix, rng, how):
    _write(prefix, _arrays(rng))
    path = prefix + ".bin"
    data = bytearray(open(path, "rb").read())
    if how == "truncated":
        data = data[:len(data) * 2 // 3]
    elif how == "cut_tail":
        data = data[:-5]
    elif how == "flipped_bit":
        # a bit inside the values of the last tensor (its .npy header starts with \x93NUMPY)
        i = data.rfind(b"\x93NUMPY")
        data[i + 140] ^= 0x10
    elif how == "empty":
        data = b""
    elif how == "not_zip":
        data = b"SINGA BinFile: not ours" * 10
    open(path, "wb").write(bytes(data))
    return path


@pytest.mark.parametrize("how", ["truncated", "cut_tail", "flipped_bit", "empty", "not_zip"])
def test_damaged_file_raises_snapshot_error(prefix, rng, how):
    path = _damage(prefix, rng, how)
    with pytest.raises(snapshot.SnapshotError, match="damaged") as e:
        snapshot.Snapshot(prefix, False)
    assert path in str(e.value)
    assert isinstance(e.value, ValueError)


def _rewrite(path, members):
    """Replaces the archive at path with ``members`` (name -> bytes), in order."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _members(path):
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def test_unfinished_or_inconsistent_archives_are_rejected(prefix):
    _write(prefix, {"a": np.zeros(2, np.float32), "b": np.ones((2, 2), np.int32)})
    path = prefix + ".bin"
    good = _members(path)

    no_header = {k: v for k, v in good.items() if k != "header.json"}
    _rewrite(path, no_header)
    with pytest.raises(snapshot.SnapshotError, match="no header"):
        snapshot.Snapshot(prefix, False)

    wrong_shape = dict(good)
    wrong_shape["header.json"] = good["header.json"].replace(b"[2, 2]", b"[4]")
    _rewrite(path, wrong_shape)
    with pytest.raises(snapshot.SnapshotError, match="the header says"):
        snapshot.Snapshot(prefix, False)

    missing_member = {k: v for k, v in good.items() if k != "t/1.npy"}
    _rewrite(path, missing_member)
    with pytest.raises(snapshot.SnapshotError, match="t/1.npy"):
        snapshot.Snapshot(prefix, False)

    newer = dict(good)
    newer["singa_snapshot"] = b"singa-snapshot 99\n"
    _rewrite(path, newer)
    with pytest.raises(snapshot.SnapshotError, match="version 99"):
        snapshot.Snapshot(prefix, False)

    foreign = {"data.txt": b"hello"}
    _rewrite(path, foreign)
    with pytest.raises(snapshot.SnapshotError, match="marker"):
        snapshot.Snapshot(prefix, False)


def test_layer_parameters_survive_a_snapshot(prefix, rng):
    """SINGA's documented use: write every parameter, later read them back into the layer."""
    from singa import layer
    x = tensor.from_numpy(rng.standard_normal((4, 6)).astype(np.float32))
    lin = layer.Linear(3)
    want = tensor.to_numpy(lin(x))
    sn = snapshot.Snapshot(prefix, True)
    for k, v in lin.get_params().items():
        sn.write(k, v)
    del sn
    lin.set_params({k: tensor.from_numpy(np.zeros(v.shape, np.float32))
                    for k, v in lin.get_params().items()})
    assert not tensor.to_numpy(lin(x)).any()
    lin.set_params(snapshot.Snapshot(prefix, False).read())
    np.testing.assert_array_equal(tensor.to_numpy(lin(x)), want)
