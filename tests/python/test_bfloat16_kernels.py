"""bfloat16 batch norm and pooling computed by the CPU kernels themselves (no float32 copies):
the bits equal the float32 op on the widened inputs, rounded once (the path they replace), on
the reference and the oneDNN backends; a bf16 AMP step's batch norms take their ReLU and
residual Add as a graph epilogue, graph == eager bit for bit, and no cast runs around them.

    pytest -q tests/python/test_bfloat16_kernels.py
"""
import numpy as np
import pytest

from singa import autograd, device, layer, model, opt, singa_wrap, tensor

BF16 = tensor.bfloat16
N = tensor.to_numpy
BACKENDS = ["cpu"] + (["dnnl"] if singa_wrap.USE_DNNL else [])
native = pytest.mark.skipif(
    not (singa_wrap.USE_DNNL and "avx512_bf16" in device.cpu_features()),
    reason="needs oneDNN and a CPU with avx512_bf16 (device.cpu_features())")


def widen(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


def round_bits(f):
    """bf16 bits of float32 values, round to nearest even, NaN kept (quiet)."""
    u = np.ascontiguousarray(f, np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


def bf16(a):
    t = tensor.Tensor(np.shape(a), dtype=BF16)
    t.copy_from_numpy(np.asarray(a, np.float32))
    return t.data


def f32(a):
    return tensor.from_numpy(np.ascontiguousarray(a, np.float32)).data


def bits(ct):
    return singa_wrap.to_numpy(ct).view(np.uint16)


def same_bits(got16, want32, what):
    """got16 (a bf16 core tensor) holds want32 (float32) rounded, bit for bit."""
    assert got16.data_type() == BF16, what
    np.testing.assert_array_equal(bits(got16), round_bits(singa_wrap.to_numpy(want32)),
                                  err_msg=what)


@pytest.fixture(params=BACKENDS)
def backend(request):
    dev = device.get_default_device()
    old = dev.backend()
    dev.set_backend(request.param)
    yield request.param
    dev.set_backend(old)


def _bf16_values(rng, shape, loc=0.0, scale=1.0):
    return widen(round_bits(rng.normal(loc, scale, size=shape).astype(np.float32)))


@pytest.mark.parametrize("shape", [(4, 3, 5, 5), (6, 7), (2, 300, 2, 1)])
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_equals_float32_rounded(backend, shape, relu):
    rng = np.random.default_rng(3)
    x = _bf16_values(rng, shape, 2.0, 3.0)
    x.flat[1] = np.nan  # its channel's statistics and outputs are NaN, as in float32
    C = shape[1]
    scale, bias = f32(rng.uniform(0.5, 1.5, C)), f32(rng.normal(size=C))
    run16 = [f32(np.zeros(C)), f32(np.ones(C))]
    run32 = [f32(np.zeros(C)), f32(np.ones(C))]
    y16, m16, v16 = singa_wrap.BatchNormForwardTraining(bf16(x), scale, bias, *run16, 0.1, 1e-5,
                                                        relu)
    y32, m32, v32 = singa_wrap.BatchNormForwardTraining(f32(x), scale, bias, *run32, 0.1, 1e-5,
                                                        relu)
    same_bits(y16, y32, "forward y")
    for a, b in [(m16, m32), (v16, v32)] + list(zip(run16, run32)):
        assert a.data_type() == tensor.float32
        np.testing.assert_array_equal(singa_wrap.to_numpy(a), singa_wrap.to_numpy(b))
    dy = _bf16_values(rng, shape)
    g16 = singa_wrap.BatchNormBackward(bf16(dy), bf16(x), scale, m16, v16, 1e-5)
    g32 = singa_wrap.BatchNormBackward(f32(dy), f32(x), scale, m32, v32, 1e-5)
    same_bits(g16[0], g32[0], "dx")
    for a, b in zip(g16[1:], g32[1:]):
        np.testing.assert_array_equal(singa_wrap.to_numpy(a), singa_wrap.to_numpy(b))
    i16 = singa_wrap.BatchNormForwardInference(bf16(x), scale, bias, *run16, 1e-5, relu)
    i32 = singa_wrap.BatchNormForwardInference(f32(x), scale, bias, *run32, 1e-5, relu)
    same_bits(i16, i32, "inference y")


@pytest.mark.parametrize("is_max,k,s,p,include_pad", [(True, 3, 2, 1, False), (True, 2, 2, 0, False),
                                                      (False, 3, 1, 1, True), (False, 3, 2, 1, False)])
def test_pooling_equals_float32_rounded(backend, is_max, k, s, p, include_pad):
    rng = np.random.default_rng(5)
    shape = (2, 3, 9, 9)
    x = _bf16_values(rng, shape)
    x[1, 2, 4, 4] = np.nan  # a NaN plane: oneDNN's max skips NaN, the fix-up reruns the plane
    x[0, 0, :2, :2] = 1.0  # ties: the gradient goes to the first maximum
    h = singa_wrap.PoolingHandle(shape, [k, k], [s, s], [p, p], is_max, include_pad)
    y16 = singa_wrap.Pool2dForward(bf16(x), h)
    y32 = singa_wrap.Pool2dForward(f32(x), h)
    dy = _bf16_values(rng, singa_wrap.to_numpy(y32).shape)
    dx16 = singa_wrap.Pool2dBackward(bf16(dy), bf16(x), y16, h)
    dx32 = singa_wrap.Pool2dBackward(f32(dy), f32(x), y32, h)
    if is_max or backend == "cpu":
        same_bits(y16, y32, "pool forward")
        same_bits(dx16, dx32, "pool backward")
    else:  # oneDNN's bf16 average may sum in another order: one bf16 step at most
        for got, want in [(y16, y32), (dx16, dx32)]:
            a = bits(got).astype(np.int32)
            b = round_bits(singa_wrap.to_numpy(want)).astype(np.int32)
            assert np.abs(a - b).max() <= 1


class Block(model.Model):
    """A stem (conv -> BN -> ReLU), then ResNet's basic block (conv -> BN -> ReLU -> conv -> BN,
    + the stem's output, ReLU), pooling and a linear layer."""

    def __init__(self):
        super().__init__()
        self.conv0 = layer.Conv2d(4, 3, padding=1, bias=False)
        self.bn0 = layer.BatchNorm2d()
        self.relu0 = layer.ReLU()
        self.conv1 = layer.Conv2d(4, 3, padding=1, bias=False)
        self.bn1 = layer.BatchNorm2d()
        self.relu1 = layer.ReLU()
        self.conv2 = layer.Conv2d(4, 3, padding=1, bias=False)
        self.bn2 = layer.BatchNorm2d()
        self.add = layer.Add()
        self.relu2 = layer.ReLU()
        self.pool = layer.AvgPool2d(2, 2)
        self.flat = layer.Flatten()
        self.fc = layer.Linear(5)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        x = self.relu0(self.bn0(self.conv0(x)))
        y = self.relu1(self.bn1(self.conv1(x)))
        y = self.relu2(self.add(self.bn2(self.conv2(y)), x))
        return self.fc(self.flat(self.pool(y)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


def _train(use_graph, init, x, y, steps=3):
    net = Block()
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    tx, ty = tensor.from_numpy(x), tensor.from_numpy(y)
    net.compile([tx], is_train=True, use_graph=use_graph, precision="bfloat16")
    if init is None:
        init = {k: N(v).copy() for k, v in net.get_states().items()}
    net.set_states({k: tensor.from_numpy(v) for k, v in init.items()})
    losses = [N(net(tx, ty)[1].as_type(tensor.float32)).ravel()[0] for _ in range(steps)]
    return net, losses, init


@native
def test_amp_block_fuses_around_bf16_batch_norms_and_graph_equals_eager():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(8, 4, 6, 6)).astype(np.float32)
    y = rng.integers(0, 5, 8).astype(np.int32)
    eager, eager_losses, init = _train(False, None, x, y)
    dev = device.get_default_device()
    graph, graph_losses, _ = _train(True, init, x, y)
    fused = dev.graph_fusion_counts()
    names = dev.graph_op_names()
    dev.ResetGraph()
    assert fused["relu"] == 3 and fused["add"] == 1, fused
    # casts: at most the input, each conv / linear parameter forward and its gradient back, the
    # logits to float32 and their gradient back; none around the batch norms or the pooling
    # (which took 3 x 5 and 5 more through float32)
    params = [k for k in eager.get_params() if not k.startswith("bn")]
    assert names.count("AsType") <= 2 * len(params) + 3, (params, names)
    assert graph_losses == eager_losses
    for k, v in eager.get_states().items():
        np.testing.assert_array_equal(N(v), N(graph.get_states()[k]), err_msg=k)
