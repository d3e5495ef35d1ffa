"""The initial parameters of SINGA's layers, checked statistically: mean, standard deviation and
(for uniform draws) bounds over many samples, with tolerances from the sample size. Apache SINGA
3.3 draws Linear/Gemm weights from N(0, 2 / (fan_in + fan_out)), i.e. the standard deviation is
sqrt(2 / (fan_in + fan_out)); Conv2d uses fan_in = in_channels / group * kh * kw and
fan_out = nb_kernels; Embedding draws N(0, 1) or U(-1, 1); biases start at 0, BatchNorm's scale
at 1; CudnnRNN draws its flat weights from U(-1/sqrt(hidden), 1/sqrt(hidden))."""
import math

import numpy as np
import pytest

from singa import layer, tensor
from stats_check import assert_normal, assert_uniform

F32 = np.float32


def N(t):
    return tensor.to_numpy(t).astype(np.float64)


@pytest.mark.parametrize("fan_in,fan_out", [(300, 500), (1000, 20)])
def test_linear_weights(fan_in, fan_out):
    fc = layer.Linear(fan_out)
    fc(tensor.Tensor((2, fan_in)))
    assert fc.W.shape == (fan_in, fan_out)
    assert_normal(N(fc.W), math.sqrt(2.0 / (fan_in + fan_out)), "Linear.W")
    np.testing.assert_array_equal(N(fc.b), np.zeros(fan_out))


def test_linear_weights_of_a_small_layer_have_std_not_variance():
    # with fan_in + fan_out = 8 the std is 0.5 and the variance 0.25: far apart
    fc = layer.Linear(4)
    w = []
    for _ in range(3000):
        fc = layer.Linear(4)
        fc(tensor.Tensor((1, 4)))
        w.append(N(fc.W))
    assert_normal(np.concatenate([a.ravel() for a in w]), 0.5, "Linear.W small")


def test_gemm_weights():
    g = layer.Gemm(400, transB=True)
    g(tensor.Tensor((2, 600)))
    assert g.W.shape == (400, 600)
    assert_normal(N(g.W), math.sqrt(2.0 / 1000), "Gemm.W")
    np.testing.assert_array_equal(N(g.b), np.zeros((1, 400)))


@pytest.mark.parametrize("group", [1, 4])
def test_conv2d_weights(group):
    conv = layer.Conv2d(64, 3, group=group)
    conv(tensor.Tensor((1, 32, 5, 5)))
    fan_in = 32 // group * 3 * 3
    assert conv.W.shape == (64, 32 // group, 3, 3)
    assert_normal(N(conv.W), math.sqrt(2.0 / (fan_in + 64)), "Conv2d.W")
    np.testing.assert_array_equal(N(conv.b), np.zeros(64))


def test_embedding_weights():
    e = layer.Embedding(500, 200)
    e(tensor.from_numpy(np.zeros((2, 3), np.int32)))
    assert_normal(N(e.W), 1.0, "Embedding.W")
    u = layer.Embedding(500, 200, initializer="uniform")
    u(tensor.from_numpy(np.zeros((2, 3), np.int32)))
    assert_uniform(N(u.W), 1.0, "Embedding.W uniform")


def test_batchnorm_starts_as_identity():
    bn = layer.BatchNorm2d(7)
    bn(tensor.Tensor((2, 7, 2, 2)))
    np.testing.assert_array_equal(N(bn.scale), np.ones(7))
    np.testing.assert_array_equal(N(bn.bias), np.zeros(7))
    np.testing.assert_array_equal(N(bn.running_mean), np.zeros(7))
    np.testing.assert_array_equal(N(bn.running_var), np.ones(7))


@pytest.mark.parametrize("mode,hidden,layers,bidirectional", [("lstm", 64, 1, False),
                                                             ("gru", 25, 2, True),
                                                             ("tanh", 100, 1, False)])
def test_cudnn_rnn_weights_are_uniform_in_one_over_sqrt_hidden(mode, hidden, layers,
                                                                bidirectional):
    # SINGA 3.3 and 5.1's CudnnRNN: W ~ U(-1/sqrt(hidden), 1/sqrt(hidden)), biases included
    rnn = layer.CudnnRNN(hidden, rnn_mode=mode, num_layers=layers, bidirectional=bidirectional)
    rnn(tensor.Tensor((3, 2, 30)))
    assert rnn.W.shape == (rnn.handle.weights_size,) and rnn.W.size() > 5000
    assert_uniform(N(rnn.W), 1.0 / math.sqrt(hidden), "CudnnRNN.W")
