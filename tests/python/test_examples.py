"""The examples train on real data: the seed's CNN reaches 95% on scikit-learn's digits, the
character GPT learns the GPL-3 text beyond its character frequencies, the transformer encoder
classifies padded sequences."""
import os
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
sys.path.insert(0, EXAMPLES)

pytest.importorskip("sklearn")
import train  # noqa: E402


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """The examples write their loss/accuracy curve into the current folder."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("graph", [True, False], ids=["graph", "eager"])
def test_seed_cnn_learns_digits(graph, capsys):
    args = ["cnn", "--data", "digits", "--epochs", "5", "--lr", "0.02"]
    acc = train.run(args + (["--graph"] if graph else []))
    out = capsys.readouterr().out
    assert "final test accuracy" in out
    assert acc >= 0.95, out


def test_mlp_learns_digits(capsys):
    acc = train.run(["mlp", "--data", "digits", "--epochs", "4", "--lr", "0.05", "--graph"])
    assert acc >= 0.9, capsys.readouterr().out


def test_resnet18_trains_a_few_steps(capsys):
    # Not to convergence (too slow for CI): a few steps must run and print an accuracy line.
    acc = train.run(["resnet18", "--data", "digits", "--epochs", "1", "--max-steps", "3",
                     "--batch-size", "16", "--graph"])
    assert 0.0 <= acc <= 1.0
    assert "final test accuracy" in capsys.readouterr().out


def test_xception_learns_digits(capsys):
    # separable convolutions, layer lists registered with register_layers, residual Add: the
    # Apache SINGA xceptionnet example's building blocks (examples/models.py: Xception)
    acc = train.run(["xception", "--data", "digits", "--epochs", "3", "--lr", "0.02", "--graph"])
    assert acc >= 0.85, capsys.readouterr().out


def test_onnx_roundtrip_example(tmp_path, capsys):
    # Export -> onnxruntime and sonnx -> fine-tune, a few steps: the reloaded outputs agree.
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    import onnx_roundtrip
    acc = onnx_roundtrip.run(["--max-steps", "4", "--out", str(tmp_path / "cnn.onnx")])
    out = capsys.readouterr().out
    diffs = [float(v.split()[-1].rstrip(",")) for v in out.split("max relative difference:")[1]
             .splitlines()[0].split(",")]
    assert 0.0 <= acc <= 1.0 and max(diffs) < 1e-4, out


def test_gpt_learns_below_the_unigram_entropy(capsys):
    # a short run (about half a minute on 2 cores): the next-character loss must fall well
    # below what character frequencies alone give, so the model uses its context
    import gpt
    entropy, loss, text = gpt.run(["--steps", "150", "--d-model", "64", "--layers", "1",
                                   "--seq-len", "32", "--batch-size", "32", "--lr", "5e-3",
                                   "--sample-len", "20", "--log-every", "50"])
    out = capsys.readouterr().out
    assert loss < 0.75 * entropy, out
    assert len(text) >= 20 and os.path.exists("gpt-loss-curve.png"), out


def test_transformer_classifier_learns(capsys):
    import transformer_classifier
    acc = transformer_classifier.run(["--epochs", "2", "--train", "1024", "--layers", "1"])
    out = capsys.readouterr().out
    assert acc >= 0.9 and os.path.exists("transformer-classifier-curve.png"), out
