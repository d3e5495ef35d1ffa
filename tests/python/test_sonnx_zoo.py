"""Networks built by others (issue 11, point 3c): torchvision's resnet18, mobilenet_v2 and
squeezenet1_1 layouts and a transformer encoder block, written in torch (torch_zoo.py) with
random weights, exported by torch.onnx.export (TorchScript exporter, dynamo=False), imported
with sonnx: the outputs equal onnxruntime's.

    pytest -q tests/python/test_sonnx_zoo.py

Tolerance: max |sonnx - onnxruntime| <= 1e-4 * max |onnxruntime| (relative to the output's
scale: both run float32 convolutions with different summation orders).
"""
import io
import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
torch = pytest.importorskip("torch", reason="torch is not installed")

sys.path.insert(0, os.path.dirname(__file__))
import torch_zoo  # noqa: E402

from singa import device, sonnx  # noqa: E402

TOL = 1e-4

# (model, its input shape, the opsets it is exported at)
CASES = [("resnet18", (1, 3, 64, 64), (11, 13, 17)),
         ("mobilenet_v2", (1, 3, 64, 64), (13,)),
         ("squeezenet1_1", (2, 3, 64, 64), (13,)),
         ("transformer", (2, 8, 32), (11, 13, 17)),
         ("transformer_lm", (2, 8), (13, 17))]  # token ids in: embedding (Gather), 2 blocks
PARAMS = [(name, shape, opset) for name, shape, opsets in CASES for opset in opsets]


def _export(name, shape, opset):
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    net = torch_zoo.MODELS[name]() if name.startswith("transformer") else \
        torch_zoo.MODELS[name](10)
    net = net.eval()
    torch_zoo.randomise_bn(net, gen)
    x = torch.randint(0, 50, shape, generator=gen) if name == "transformer_lm" else \
        torch.randn(*shape, generator=gen)
    buf = io.BytesIO()
    torch.onnx.export(net, (x,), buf, opset_version=opset, dynamo=False,
                      input_names=["x"], output_names=["y"])
    with torch.no_grad():
        y_torch = net(x).numpy()
    return buf.getvalue(), x.numpy(), y_torch


@pytest.mark.parametrize("name,shape,opset", PARAMS,
                         ids=["%s-opset%d" % (n, o) for n, _, o in PARAMS])
def test_zoo_model_matches_onnxruntime(name, shape, opset):
    data, x, y_torch = _export(name, shape, opset)
    ref, = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    # the exported graph is torch's own network (a sanity check of the export itself)
    assert np.abs(ref - y_torch).max() <= TOL * np.abs(y_torch).max()
    assert np.abs(ref).max() > 0
    m = onnx.load_from_string(data)
    got = sonnx.prepare(m, device.get_default_device()).run([x])[0]
    assert got.shape == ref.shape and got.dtype == ref.dtype
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err <= TOL, "%s at opset %d: relative error %.3g" % (name, opset, err)


def test_zoo_graph_uses_the_ops_it_claims():
    """The exports exercise what the test is for: ReLU6 as Clip, depthwise convolutions,
    ceil-mode max pooling, and the attention's MatMul / Softmax / Transpose / Reshape with a
    Shape chain."""
    def ops(name, shape, opset=13):
        m = onnx.load_from_string(_export(name, shape, opset)[0])
        return m, {n.op_type for n in m.graph.node}
    m, types = ops("mobilenet_v2", (1, 3, 64, 64))
    assert "Clip" in types
    groups = [a.i for n in m.graph.node if n.op_type == "Conv" for a in n.attribute
              if a.name == "group"]
    assert max(groups) > 1
    m, types = ops("squeezenet1_1", (2, 3, 64, 64))
    assert {"Concat", "MaxPool"} <= types
    assert all(a.i == 1 for n in m.graph.node if n.op_type == "MaxPool" for a in n.attribute
               if a.name == "ceil_mode")
    _, types = ops("transformer", (2, 8, 32))
    assert {"MatMul", "Softmax", "Transpose", "Reshape", "Shape", "Erf"} <= types
    _, types = ops("transformer", (2, 8, 32), 17)
    assert "LayerNormalization" in types
