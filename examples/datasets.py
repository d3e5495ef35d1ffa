"""Data sets for the examples, read from the standard files when the user has them.

    from datasets import load_digits_28, load_mnist, load_cifar10
    (x_train, y_train), (x_test, y_test) = load_digits_28()     # offline: scikit-learn's digits
    (x_train, y_train), (x_test, y_test) = load_mnist("~/data/mnist")
    (x_train, y_train), (x_test, y_test) = load_cifar10("~/data/cifar-10-batches-py")

Images come back as float32 arrays (N, C, H, W) scaled to [0, 1], labels as int32 (N,).
- MNIST: the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
  t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte), plain or gzipped (.gz).
- CIFAR-10: the "python version" folder (data_batch_1..5 and test_batch, pickled dicts with
  b"data" (N, 3072) uint8 and b"labels"), or the "binary version" (data_batch_*.bin,
  test_batch.bin: records of 1 label byte + 3072 pixel bytes).
"""
import gzip
import os
import pickle
import struct

import numpy as np

__all__ = ["load_digits_28", "load_mnist", "load_cifar10", "read_idx", "batches",
           "DataNotFoundError", "MNIST_FILES"]

MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
               "t10k-labels-idx1-ubyte")
_MNIST_HELP = ("Download the four MNIST files (%s; plain or .gz), e.g. from "
               "https://ossci-datasets.s3.amazonaws.com/mnist/, into one folder and pass it with "
               "--data-dir (default ~/data/mnist)." % ", ".join(MNIST_FILES))
_CIFAR_HELP = ("Download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz (or the binary "
               "version, cifar-10-binary.tar.gz), unpack it and pass the folder holding "
               "data_batch_1..5 and test_batch with --data-dir (default "
               "~/data/cifar-10-batches-py).")


class DataNotFoundError(FileNotFoundError):
    """A data set's files are not where the example looks; the message says where to put them."""


def _open(path):
    if os.path.exists(path):
        return open(path, "rb")
    if os.path.exists(path + ".gz"):
        return gzip.open(path + ".gz", "rb")
    raise FileNotFoundError("no file %s (or %s.gz)" % (path, path))


def read_idx(path):
    """Reads an IDX file (the MNIST format): magic, dimensions (big-endian int32), then data."""
    with _open(path) as f:
        head = f.read(4)
        if len(head) != 4 or head[0] != 0 or head[1] != 0:
            raise ValueError("%s is not an IDX file (bad magic %r)" % (path, head))
        dtypes = {code: np.dtype(t) for code, t in
                  ((0x08, np.uint8), (0x09, np.int8), (0x0B, ">i2"), (0x0C, ">i4"),
                   (0x0D, ">f4"), (0x0E, ">f8"))}
        if head[2] not in dtypes:
            raise ValueError("%s: unknown IDX element type 0x%02x" % (path, head[2]))
        ndim = head[3]
        dims = struct.unpack(">" + "i" * ndim, f.read(4 * ndim))
        data = np.frombuffer(f.read(), dtype=dtypes[head[2]])
    expected = int(np.prod(dims)) if dims else 1
    if data.size != expected:
        raise ValueError("%s: header promises %d values of shape %s, file holds %d"
                         % (path, expected, dims, data.size))
    return data.reshape(dims)


def load_mnist(folder):
    folder = os.path.expanduser(folder)
    missing = [n for n in MNIST_FILES if not (os.path.exists(os.path.join(folder, n)) or
                                              os.path.exists(os.path.join(folder, n + ".gz")))]
    if missing:
        what = ("%s not found in %s" % (", ".join(missing), folder) if len(missing) < 4 else
                "no MNIST file in %s" % folder)
        raise DataNotFoundError("MNIST: %s. %s" % (what, _MNIST_HELP))
    out = []
    for prefix in ("train", "t10k"):
        x = read_idx(os.path.join(folder, prefix + "-images-idx3-ubyte"))
        y = read_idx(os.path.join(folder, prefix + "-labels-idx1-ubyte"))
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise ValueError("MNIST %s: images %s and labels %s do not match"
                             % (prefix, x.shape, y.shape))
        out.append(((x.astype(np.float32) / 255.0)[:, None, :, :], y.astype(np.int32)))
    return out[0], out[1]


def _cifar_python(folder):
    def read(name):
        with open(os.path.join(folder, name), "rb") as f:
            d = pickle.load(f, encoding="bytes")
        x = np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        return x, np.asarray(d[b"labels"], dtype=np.int32)
    parts = [read("data_batch_%d" % i) for i in range(1, 6)
             if os.path.exists(os.path.join(folder, "data_batch_%d" % i))]
    if not parts:
        raise FileNotFoundError("no data_batch_* files in %s" % folder)
    test = read("test_batch")
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])), test


def _cifar_binary(folder):
    def read(name):
        raw = np.fromfile(os.path.join(folder, name), dtype=np.uint8)
        if raw.size % 3073:
            raise ValueError("%s: size %d is not a multiple of 3073-byte records" % (name, raw.size))
        rec = raw.reshape(-1, 3073)
        return rec[:, 1:].reshape(-1, 3, 32, 32), rec[:, 0].astype(np.int32)
    parts = [read("data_batch_%d.bin" % i) for i in range(1, 6)
             if os.path.exists(os.path.join(folder, "data_batch_%d.bin" % i))]
    test = read("test_batch.bin")
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])), test


def load_cifar10(folder):
    folder = os.path.expanduser(folder)
    if not any(os.path.exists(os.path.join(folder, n)) for n in ("test_batch", "test_batch.bin")):
        raise DataNotFoundError("CIFAR-10: no test_batch (or test_batch.bin) in %s. %s"
                                % (folder, _CIFAR_HELP))
    binary = os.path.exists(os.path.join(folder, "test_batch.bin"))
    (xtr, ytr), (xte, yte) = _cifar_binary(folder) if binary else _cifar_python(folder)
    scale = lambda x: x.astype(np.float32) / 255.0
    return (scale(xtr), ytr), (scale(xte), yte)


def load_digits_28(test_fraction=0.2, seed=0):
    """scikit-learn's bundled 8x8 digits (1797 images, offline), upsampled to 1x28x28.

    Each pixel becomes a 3x3 block (24x24) and a 2-pixel border is added, so the seed's CNN
    (two 5x5 convolutions and two 2x2 poolings, written for MNIST) runs unchanged.
    """
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)
    x = np.kron(x, np.ones((1, 3, 3), dtype=np.float32))
    x = np.pad(x, ((0, 0), (2, 2), (2, 2)))[:, None, :, :]
    y = d.target.astype(np.int32)
    idx = np.random.default_rng(seed).permutation(len(x))
    n_test = int(len(x) * test_fraction)
    te, tr = idx[:n_test], idx[n_test:]
    return (x[tr], y[tr]), (x[te], y[te])


def batches(x, y, batch_size, shuffle=True, seed=0, drop_last=True):
    """Yields (x_batch, y_batch); the last partial batch is dropped by default (a graph is built
    for one batch shape)."""
    idx = np.random.default_rng(seed).permutation(len(x)) if shuffle else np.arange(len(x))
    stop = len(x) - len(x) % batch_size if drop_last else len(x)
    for i in range(0, stop, batch_size):
        j = idx[i:i + batch_size]
        yield x[j], y[j]
