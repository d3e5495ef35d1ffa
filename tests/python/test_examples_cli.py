"""The examples as a new user meets them (issue 16, point 10): --help works, no progress-bar
litter in a redirected log, accuracy over every test sample, per-epoch times, a clear message
for missing data, a loss/accuracy curve at the end, and `make demo` installs and builds only what
the demo needs."""
import io
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

from child_env import child_env
from singa import tensor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, EXAMPLES)

pytest.importorskip("sklearn")
import datasets  # noqa: E402
import monitor  # noqa: E402
import train  # noqa: E402


def _run(*args, timeout=120):
    env = child_env(OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable] + list(args), env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("script", ["demo.py", "train.py", "cnn.py", "dist/train_mpi.py", "gpt.py",
                                    "transformer_classifier.py"])
def test_help(script):
    p = _run(os.path.join(EXAMPLES, script), "--help")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage:") and "--curve" in p.stdout, p.stdout


def test_redirected_output_has_no_progress_bars(tmp_path):
    # stdout and stderr are pipes here, as in `make demo > log 2>&1` or CI
    p = _run(os.path.join(EXAMPLES, "train.py"), "cnn", "--epochs", "1", "--max-steps", "3",
             "--curve", "")
    assert p.returncode == 0, p.stderr
    assert "\r" not in p.stdout + p.stderr, repr(p.stderr[-300:])
    assert "epoch 1:" in p.stdout and "final test accuracy" in p.stdout


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_draws_a_bar_only_on_a_terminal():
    items = [1, 2, 3]
    pipe = io.StringIO()
    assert monitor.progress(items, total=3, stream=pipe) is items  # untouched
    assert pipe.getvalue() == ""
    pytest.importorskip("tqdm")
    tty = _Tty()
    assert list(monitor.progress(items, total=3, desc="epoch 1", stream=tty)) == items
    assert "\r" in tty.getvalue() and "epoch 1" in tty.getvalue()


class _ArgmaxIsInput:
    """A stand-in model whose output is its input: class = argmax of the sample's row."""

    def __init__(self):
        self.modes = []

    def eval(self):
        self.modes.append("eval")

    def train(self):
        self.modes.append("train")

    def __call__(self, tx):
        return tx


def test_evaluate_counts_every_sample_including_the_last_partial_batch():
    rng = np.random.default_rng(0)
    n, bs, classes = 10, 4, 3                  # batches of 4, 4 and 2
    y = rng.integers(0, classes, n).astype(np.int32)
    x = np.eye(classes, dtype=np.float32)[y]
    wrong = np.array([1, 9])                   # one in a full batch, one in the partial one
    x[wrong] = np.eye(classes, dtype=np.float32)[(y[wrong] + 1) % classes]
    net = _ArgmaxIsInput()
    tx = tensor.Tensor((bs, classes))
    assert train.evaluate(net, x, y, tx, bs) == (n - 2, n)
    assert net.modes == ["eval", "train"]
    assert train.accuracy(net, x, y, tx, bs) == pytest.approx((n - 2) / n)


class _Clock:
    """time.time() advancing 10 s per call."""

    def __init__(self):
        self.now = 0.0

    def time(self):
        self.now += 10.0
        return self.now


def test_training_reports_per_epoch_times_and_all_test_samples(monkeypatch, capsys):
    monkeypatch.setattr(train, "time", _Clock())
    train.run(["mlp", "--epochs", "3", "--max-steps", "2", "--curve", ""])
    out = capsys.readouterr().out
    epochs = re.findall(r"^epoch \d+: .*\((\d+)/(\d+)\), ([\d.]+) s training \+ ([\d.]+) s test$",
                        out, re.M)
    assert len(epochs) == 3, out
    # each epoch reads the clock three times: 10 s of training, 10 s of testing, never cumulative
    assert [(float(a), float(b)) for _, _, a, b in epochs] == [(10.0, 10.0)] * 3
    n_test = len(datasets.load_digits_28()[1][1])
    assert n_test % 64 != 0                    # a partial last batch exists
    assert {int(t) for _, t, _, _ in epochs} == {n_test}
    final = re.search(r"final test accuracy: ([\d.]+) \((\d+)/(\d+) test samples\)", out)
    assert final and int(final.group(3)) == n_test
    assert float(final.group(1)) == pytest.approx(int(final.group(2)) / n_test, abs=1e-4)


def test_missing_mnist_says_where_to_put_the_files(tmp_path):
    folder = tmp_path / "nowhere"
    p = _run(os.path.join(EXAMPLES, "train.py"), "mlp", "--data", "mnist", "--data-dir",
             str(folder))
    assert p.returncode != 0
    assert "Traceback" not in p.stderr, p.stderr
    for name in datasets.MNIST_FILES:
        assert name in p.stderr
    assert str(folder) in p.stderr and "--data-dir" in p.stderr
    # one file present: the message names only the missing ones
    folder.mkdir()
    (folder / "train-images-idx3-ubyte").write_bytes(b"\0\0\x08\x01" + struct.pack(">i", 0))
    with pytest.raises(datasets.DataNotFoundError) as e:
        datasets.load_mnist(str(folder))
    assert "train-images-idx3-ubyte" not in str(e.value).split(" not found")[0]
    assert "t10k-labels-idx1-ubyte" in str(e.value)
    with pytest.raises(FileNotFoundError, match="cifar-10-python.tar.gz"):
        train.load("cifar10", str(folder))


def test_training_writes_a_loss_and_accuracy_curve(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    train.run(["mlp", "--epochs", "2", "--max-steps", "3"])
    default = tmp_path / "mlp-digits-curve.png"
    assert default.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "curve: mlp-digits-curve.png" in capsys.readouterr().out
    import matplotlib.image
    img = matplotlib.image.imread(str(default))
    assert img.shape[0] > 100 and img.shape[1] > 100 and img.std() > 0  # not blank
    train.run(["mlp", "--epochs", "1", "--max-steps", "2", "--curve", ""])
    assert sorted(os.listdir(tmp_path)) == ["mlp-digits-curve.png"]  # '' writes none


def test_history_means_per_epoch():
    h = monitor.History()
    for v in (1.0, 3.0):
        h.step(v)
    assert h.epoch(5.0, 0.5) == 2.0
    h.step(6.0)
    assert h.epoch(7.0) == 6.0
    assert h.seconds == [5.0, 7.0] and h.accuracies == [0.5, None]
    assert monitor.History().save_curve("x.png") is None and not os.path.exists("x.png")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_installs_and_builds_only_what_the_demo_needs():
    # -n: print the commands; -B: as if nothing were installed or built yet
    p = subprocess.run(["make", "-n", "-B", "-C", ROOT, "demo"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    cmds = p.stdout
    assert "pip install" in cmds and "numpy" in cmds and "examples/demo.py" in cmds
    # the words of the commands, paths cut to their last part: a tool's path may hold any name
    # (the GPU image's cmake is /opt/torch/.venv/bin/cmake)
    words = {w.strip("'\";").rsplit("/", 1)[-1] for w in cmds.split()}
    for heavy in ("torch", "pytest", "onnx", "libgtest-dev", "ctest"):
        assert not [w for w in words if w.startswith(heavy)], heavy
    build = [ln for ln in cmds.splitlines() if "--build" in ln]
    assert build and all("--target singa_wrap" in ln for ln in build), build
    # while `make test` still installs the test tools and builds everything
    p = subprocess.run(["make", "-n", "-B", "-C", ROOT, "build"], capture_output=True, text=True,
                       timeout=60)
    for needed in ("pytest", "libgtest-dev", "-DSINGA_BUILD_TESTS=ON"):
        assert needed in p.stdout, needed
