"""The example data loaders read small files that these tests write in the standard formats."""
import gzip
import os
import pickle
import struct
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import datasets  # noqa: E402


def write_idx(path, arr, compress=False):
    codes = {np.dtype(np.uint8): 0x08}
    head = bytes([0, 0, codes[arr.dtype], arr.ndim]) + struct.pack(">" + "i" * arr.ndim, *arr.shape)
    opener = gzip.open if compress else open
    with opener(path + (".gz" if compress else ""), "wb") as f:
        f.write(head + arr.tobytes())


@pytest.mark.parametrize("compress", [False, True])
def test_mnist_idx_round_trip(tmp_path, compress):
    rng = np.random.default_rng(0)
    data = {}
    for prefix, n in (("train", 7), ("t10k", 3)):
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        y = rng.integers(0, 10, n).astype(np.uint8)
        write_idx(str(tmp_path / (prefix + "-images-idx3-ubyte")), x, compress)
        write_idx(str(tmp_path / (prefix + "-labels-idx1-ubyte")), y, compress)
        data[prefix] = (x, y)
    (xtr, ytr), (xte, yte) = datasets.load_mnist(str(tmp_path))
    assert xtr.shape == (7, 1, 28, 28) and xtr.dtype == np.float32
    np.testing.assert_allclose(xtr[:, 0] * 255, data["train"][0], atol=1e-3)
    np.testing.assert_array_equal(ytr, data["train"][1])
    np.testing.assert_array_equal(yte, data["t10k"][1])
    assert xte.shape == (3, 1, 28, 28)


def test_idx_rejects_bad_files(tmp_path):
    p = tmp_path / "bad"
    p.write_bytes(b"\x01\x02\x08\x01" + struct.pack(">i", 3) + b"abc")
    with pytest.raises(ValueError, match="not an IDX"):
        datasets.read_idx(str(p))
    p.write_bytes(b"\x00\x00\x08\x01" + struct.pack(">i", 5) + b"abc")
    with pytest.raises(ValueError, match="promises 5"):
        datasets.read_idx(str(p))
    with pytest.raises(FileNotFoundError):
        datasets.read_idx(str(tmp_path / "missing"))


def test_cifar_python_version(tmp_path):
    rng = np.random.default_rng(1)
    batches = []
    for i in range(1, 3):
        x = rng.integers(0, 256, (4, 3072), dtype=np.uint8)
        y = list(rng.integers(0, 10, 4))
        with open(tmp_path / ("data_batch_%d" % i), "wb") as f:
            pickle.dump({b"data": x, b"labels": y}, f)
        batches.append((x, y))
    with open(tmp_path / "test_batch", "wb") as f:
        pickle.dump({b"data": batches[0][0][:2], b"labels": batches[0][1][:2]}, f)
    (xtr, ytr), (xte, yte) = datasets.load_cifar10(str(tmp_path))
    assert xtr.shape == (8, 3, 32, 32)
    np.testing.assert_allclose(xtr[5].reshape(-1) * 255, batches[1][0][1], atol=1e-3)
    np.testing.assert_array_equal(ytr, batches[0][1] + batches[1][1])
    assert xte.shape == (2, 3, 32, 32)


def test_cifar_binary_version(tmp_path):
    rng = np.random.default_rng(2)
    recs = rng.integers(0, 256, (3, 3073), dtype=np.uint8)
    recs[:, 0] = [1, 7, 9]
    recs.tofile(tmp_path / "data_batch_1.bin")
    recs[:1].tofile(tmp_path / "test_batch.bin")
    (xtr, ytr), (xte, yte) = datasets.load_cifar10(str(tmp_path))
    np.testing.assert_array_equal(ytr, [1, 7, 9])
    np.testing.assert_allclose(xtr[2].reshape(-1) * 255, recs[2, 1:], atol=1e-3)
    assert yte.tolist() == [1]
    (tmp_path / "test_batch.bin").write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match="3073"):
        datasets.load_cifar10(str(tmp_path))


def test_digits_are_28x28_and_batches_drop_the_tail():
    pytest.importorskip("sklearn")
    (xtr, ytr), (xte, yte) = datasets.load_digits_28()
    assert xtr.shape[1:] == (1, 28, 28) and len(xtr) + len(xte) == 1797
    assert 0.0 <= xtr.min() and xtr.max() <= 1.0
    assert set(np.unique(ytr)) == set(range(10))
    sizes = [len(b[0]) for b in datasets.batches(xtr, ytr, 100)]
    assert sizes == [100] * (len(xtr) // 100)
