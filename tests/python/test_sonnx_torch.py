"""Networks exported by torch.onnx.export (TorchScript exporter, dynamo=False) imported with
sonnx give onnxruntime's outputs.

    pytest -q tests/python/test_sonnx_torch.py
"""
import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
torch = pytest.importorskip("torch", reason="torch is not installed")

from singa import device, sonnx  # noqa: E402

nn = torch.nn


class SmallCNN(nn.Module):
    """Conv with dilation, groups and asymmetric effect of stride; BN; max pooling with ceil
    mode; average pooling with pads; a residual add, concat and a softmax head."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=1, padding=1)
        self.bn1 = nn.BatchNorm2d(8, eps=1e-3)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2, bias=False)
        self.pool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.pool2 = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        self.conv3 = nn.Conv2d(16, 4, 1)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = y + torch.sigmoid(self.conv2(y))
        y = self.pool1(y)
        y = torch.cat([y, self.pool2(y)], 1)
        y = torch.tanh(self.conv3(y))
        y = torch.flatten(y, 1)
        return torch.softmax(self.fc(y), dim=1)


def _randomise_bn(net, gen):
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen))
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.randn(m.num_features, generator=gen))


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_torch_cnn_matches_onnxruntime(opset):
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    net = SmallCNN().eval()
    with torch.no_grad():
        _randomise_bn(net, gen)
    x = torch.randn(2, 3, 16, 16, generator=gen)
    buf = io.BytesIO()
    torch.onnx.export(net, (x,), buf, opset_version=opset, dynamo=False,
                      input_names=["x"], output_names=["y"])
    m = onnx.load_from_string(buf.getvalue())
    ref, = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.numpy()})
    got = sonnx.prepare(m, device.get_default_device()).run([x.numpy()])[0]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)


class _Recurrent(nn.Module):
    """Two stacked recurrent layers (each an ONNX RNN/LSTM/GRU node); returns the sequence
    output and the final hidden state."""

    def __init__(self, kind, bidirectional, batch_first):
        super().__init__()
        self.rnn = getattr(nn, kind)(5, 6, num_layers=2, bidirectional=bidirectional,
                                     batch_first=batch_first)

    def forward(self, x):
        y, state = self.rnn(x)
        return y, state[0] if isinstance(state, tuple) else state


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional,batch_first", [(False, False), (True, True)],
                         ids=["forward", "bidirectional-batch_first"])
def test_torch_recurrent_matches_onnxruntime(kind, bidirectional, batch_first):
    torch.manual_seed(0)
    net = _Recurrent(kind, bidirectional, batch_first).eval()
    x = torch.randn(4, 3, 5)
    buf = io.BytesIO()
    torch.onnx.export(net, (x,), buf, opset_version=14, dynamo=False, input_names=["x"])
    m = onnx.load_from_string(buf.getvalue())
    assert kind in {n.op_type for n in m.graph.node}
    refs = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.numpy()})
    got = sonnx.prepare(m, device.get_default_device()).run([x.numpy()])
    for g, r in zip(got, refs):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-6)
