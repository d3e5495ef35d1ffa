"""ReLU fusion in the graph: a convolution or batch norm whose output only a ReLU reads runs with
the ReLU as a kernel post-op (Graph: ReLU fusion). The numbers must not change."""
import numpy as np
import pytest

from singa import autograd, layer, model, opt, tensor
from test_graph_epilogue import make_device


class ConvBnRelu(model.Model):
    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(6, 3, padding=1)
        self.relu1 = layer.ReLU()            # conv -> relu: fusable
        self.conv2 = layer.Conv2d(8, 3, padding=1, bias=False)
        self.bn = layer.BatchNorm2d()
        self.relu2 = layer.ReLU()            # bn -> relu: fusable
        self.conv3 = layer.Conv2d(4, 3, padding=1)
        self.relu3 = layer.ReLU()            # conv3's output is also added below: not fusable
        self.flat = layer.Flatten()
        self.fc = layer.Linear(3)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.relu2(self.bn(self.conv2(self.relu1(self.conv1(x)))))
        c = self.conv3(y)
        return self.fc(self.flat(autograd.add(self.relu3(c), c)))

    def train_one_batch(self, x, t):
        out = self.forward(x)
        loss = self.loss(out, t)
        self.optimizer(loss)
        return out, loss


def train(fusion, backend, steps=3):
    dev = make_device(backend, fusion)
    rng = np.random.default_rng(0)
    x = tensor.from_numpy(rng.standard_normal((4, 3, 8, 8)).astype(np.float32), dev)
    t = tensor.from_numpy(rng.integers(0, 3, 4).astype(np.int32), dev)
    net = ConvBnRelu()
    net.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    net.compile([x], is_train=True, use_graph=True)
    losses = [tensor.to_numpy(net(x, t)[1]).copy() for _ in range(steps)]
    params = {k: tensor.to_numpy(v) for k, v in net.get_states().items()}
    return losses, params, dev.graph_num_fused()


@pytest.mark.parametrize("backend", ["cpu", "dnnl"])
def test_fused_relus_give_the_same_training(backend):
    fused_losses, fused_params, n_fused = train(True, backend)
    plain_losses, plain_params, n_plain = train(False, backend)
    # conv1 -> relu1 and bn -> relu2; not conv3 -> relu3; in backward, bn's reads through
    # relu2's mask
    assert n_fused == 3 and n_plain == 0
    np.testing.assert_array_equal(np.array(fused_losses), np.array(plain_losses))
    for k in plain_params:
        np.testing.assert_array_equal(fused_params[k], plain_params[k], err_msg=k)


# The batch-norm backward reading its gradient through the ReLU's mask (graph.h: kEpiReLUGrad):
# on the layout tests' net (stem + 3 blocks, 16/32 channels), kept in nChw16c (oneDNN float32),
# channels-last (bfloat16 AMP on AMX) or plain (the reference kernels).
RELU_GRAD_CASES = [("cpu", "float32"), ("dnnl", "float32"), ("dnnl", "bfloat16")]


def one_step(backend, precision, graph, fusion):
    """Net's output, its states before and after one SGD step with lr 1 (so p0 - p1 is each
    parameter's gradient) and the graph's fusion counts."""
    import test_graph_layouts as layouts
    dev = make_device(backend, fusion)
    if precision == "bfloat16" and not layouts.BF16:
        pytest.skip("bfloat16 AMP needs avx512_bf16")
    x, t = layouts.data(dev)
    net = layouts.Net((5, 6))
    net.set_optimizer(opt.SGD(lr=1.0))
    net.compile([x], is_train=True, use_graph=graph, precision=precision)
    before = {k: tensor.to_numpy(v) for k, v in net.get_states().items()}
    out = tensor.to_numpy(net(x, t)[0])
    after = {k: tensor.to_numpy(v) for k, v in net.get_states().items()}
    counts = dev.graph_fusion_counts() if graph else None
    dev.ResetGraph()
    return out, before, after, counts


@pytest.mark.parametrize("backend,precision", RELU_GRAD_CASES)
def test_batch_norm_backward_through_the_relu_mask_equals_eager(backend, precision):
    fused = one_step(backend, precision, True, True)
    unfused = one_step(backend, precision, True, False)
    eager = one_step(backend, precision, False, False)
    # the stem's batch norm and each block's first: their gradient is the ReLU's alone
    assert fused[3]["relu_backward"] == 4 and unfused[3]["relu_backward"] == 0
    tol = dict(rtol=2e-2, atol=2e-3) if precision == "bfloat16" else dict(rtol=1e-5, atol=1e-6)
    for other, what in ((unfused, "unfused graph"), (eager, "eager")):
        np.testing.assert_allclose(fused[0], other[0], err_msg=what + ": output", **tol)
        for k in fused[1]:
            np.testing.assert_array_equal(fused[1][k], other[1][k], err_msg=k)  # same start
            # gradients (p0 - p1 at lr 1) and the running statistics
            np.testing.assert_allclose(fused[1][k] - fused[2][k], other[1][k] - other[2][k],
                                       err_msg="%s: %s" % (what, k), **tol)
