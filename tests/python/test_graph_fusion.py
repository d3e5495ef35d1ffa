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
    assert n_fused == 2 and n_plain == 0  # conv1 -> relu1 and bn -> relu2; not conv3 -> relu3
    np.testing.assert_array_equal(np.array(fused_losses), np.array(plain_losses))
    for k in plain_params:
        np.testing.assert_array_equal(fused_params[k], plain_params[k], err_msg=k)
