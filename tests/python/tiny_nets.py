"""A small model and data for the tests of training settings, checkpoints and model usage
(test_opt_settings.py, test_checkpoint_resume.py, test_model_usage.py).

    m = tiny_nets.compiled(opt.SGD(lr=0.05), dev, use_graph=True)
    for x, y in tiny_nets.batches(3):
        tiny_nets.step(m, x, y)
"""
import numpy as np

from singa import layer, model, tensor

F32 = np.float32
B, D, H, C = 6, 5, 7, 3


class Net(model.Model):
    """Linear -> ReLU -> Linear with a mean-square loss."""

    def __init__(self):
        super().__init__()
        self.fc1 = layer.Linear(H)
        self.relu = layer.ReLU()
        self.fc2 = layer.Linear(C)
        self.loss_fn = layer.MeanSquareError()

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss_fn(out, y)
        self.optimizer(loss)
        return out, loss


def batches(n, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((B, D)).astype(F32), rng.standard_normal((B, C)).astype(F32))
            for _ in range(n)]


def initial_params(seed=7):
    """Fixed initial values for Net's parameters, by name."""
    rng = np.random.default_rng(seed)
    return {"fc1.W": rng.standard_normal((D, H)).astype(F32) * 0.5,
            "fc1.b": rng.standard_normal(H).astype(F32) * 0.1,
            "fc2.W": rng.standard_normal((H, C)).astype(F32) * 0.5,
            "fc2.b": rng.standard_normal(C).astype(F32) * 0.1}


def compiled(optimizer, dev, use_graph, params=True):
    """A compiled Net on ``dev`` training with ``optimizer``; its parameters set to
    initial_params() unless params is False."""
    m = Net()
    m.set_optimizer(optimizer)
    m.compile([tensor.Tensor((B, D), dev)], is_train=True, use_graph=use_graph)
    if params:
        m.set_params({k: v for k, v in initial_params().items()})
    return m


def step(m, x, y):
    """One training step on numpy data; returns the loss as a float."""
    dev = m.fc1.W.device
    _, loss = m(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
    return float(tensor.to_numpy(loss).reshape(-1)[0])


def params(m):
    return {k: tensor.to_numpy(v) for k, v in m.get_params().items()}
