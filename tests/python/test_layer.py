"""singa.layer: lazy parameters, hierarchical names, get/set params and states, shapes, errors."""
import numpy as np
import pytest

from singa import autograd, device, layer, model, singa_wrap, tensor

F32 = np.float32

needs_nn = pytest.mark.skipif(not hasattr(singa_wrap, "ConvHandle"),
                              reason="the core's convolution/pooling/batch-norm handles are not "
                                     "bound in this build of singa_wrap")
needs_bn = pytest.mark.skipif(not hasattr(singa_wrap, "BatchNormForwardTraining"),
                              reason="the core's batch norm is not bound in this build")


def T(a, dtype=F32):
    return tensor.from_numpy(np.asarray(a, dtype=dtype))


def N(t):
    return tensor.to_numpy(t)


@pytest.fixture(autouse=True)
def _training_off():
    prev = autograd.training
    yield
    autograd.training = prev


@pytest.fixture
def rng():
    return np.random.default_rng(7)


class Block(layer.Layer):
    def __init__(self, hidden):
        super().__init__()
        self.fc = layer.Linear(hidden)
        self.act = layer.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


class Net(model.Model):
    def __init__(self):
        super().__init__()
        self.block1 = Block(6)
        self.linear1 = layer.Linear(3)

    def forward(self, x):
        return self.linear1(self.block1(x))


# ---- Linear -------------------------------------------------------------------------------------
def test_linear_creates_parameters_from_first_input(rng):
    fc = layer.Linear(4)
    assert fc.get_params() == {}
    x = rng.standard_normal((2, 3)).astype(F32)
    y = fc(T(x))
    assert fc.W.shape == (3, 4) and fc.b.shape == (4,)
    assert fc.W.requires_grad and fc.W.stores_grad
    np.testing.assert_allclose(N(y), x @ N(fc.W) + N(fc.b), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(N(fc.b), np.zeros(4, F32))


def test_linear_old_signature_and_no_bias(rng):
    fc = layer.Linear(3, 5, bias=False)
    y = fc(T(rng.standard_normal((2, 3))))
    assert y.shape == (2, 5) and fc.W.shape == (3, 5) and fc.b is None
    assert list(fc.get_params()) == [fc.W.name]


def test_linear_wrong_feature_size_names_the_layer():
    m = Net()
    m.compile([tensor.Tensor((2, 784))], is_train=False)
    with pytest.raises(ValueError, match=r"block1\.fc: expected input with 784 features, got 100"):
        m(tensor.Tensor((2, 100)))
    fc = layer.Linear(784, 10)
    with pytest.raises(ValueError, match="expected input with 784 features, got 100"):
        fc(tensor.Tensor((2, 100)))
    assert fc.get_params() == {}  # nothing was created from the bad input
    with pytest.raises(ValueError, match=r"2-d input.*\(2, 3, 4\)"):
        layer.Linear(3)(tensor.Tensor((2, 3, 4)))


def test_linear_bad_construction():
    with pytest.raises(ValueError):
        layer.Linear(0)
    with pytest.raises(TypeError):
        layer.Linear(3, 4, True, 5)  # at most (in_features, out_features, bias)


# ---- names ----------------------------------------------------------------------------------
def test_hierarchical_names_in_a_model():
    m = Net()
    m.compile([tensor.Tensor((2, 5))], is_train=False)
    assert list(m.get_params()) == ["block1.fc.W", "block1.fc.b", "linear1.W", "linear1.b"]
    assert m.block1.fc.W.name == "block1.fc.W"
    assert m.block1.fc.name == "block1.fc" and m.name == ""
    assert isinstance(m.block1, Block)


def test_standalone_layers_name_parameters_as_singa():
    a = layer.Linear(2)
    x = tensor.from_numpy(np.arange(3, dtype=np.float32).reshape(1, 3))
    y = a(x)
    params = a.get_params()
    assert list(params) == ["W", "b"]
    assert params["W"] is a.W and params["b"] is a.b and a.W.name == "W"
    np.testing.assert_allclose(tensor.to_numpy(y), tensor.to_numpy(x) @ tensor.to_numpy(a.W),
                               rtol=1e-6)
    conv = layer.Conv2d(2, 3)
    conv(tensor.Tensor((1, 1, 4, 4)))
    assert sorted(conv.get_params()) == ["W", "b"]
    bn = layer.BatchNorm2d(1)
    bn(tensor.from_numpy(np.ones((2, 1, 2, 2), np.float32)))
    assert sorted(bn.get_states()) == ["bias", "running_mean", "running_var", "scale"]
    a.set_params({"W": np.ones((3, 2), np.float32)})
    np.testing.assert_array_equal(tensor.to_numpy(a.W), np.ones((3, 2)))


def test_standalone_layers_get_hierarchical_names_once_registered():
    a, b = layer.Linear(2), layer.Linear(2)
    a(tensor.Tensor((1, 3)))
    b(tensor.Tensor((1, 3)))
    assert list(a.get_params()) == list(b.get_params()) == ["W", "b"]

    class Two(layer.Layer):
        def __init__(self):
            super().__init__()
            self.first, self.second = a, b

    two = Two()
    assert list(two.get_params()) == ["first.W", "first.b", "second.W", "second.b"]
    assert a.W.name == "first.W"


def test_duplicate_names_in_a_model_still_raise():
    class Clash(layer.Layer):
        def __init__(self):
            super().__init__()
            self.fc = layer.Linear(2)
            self.W = tensor.Tensor((2,), requires_grad=True, stores_grad=True, name="fc.W")

        def forward(self, x):
            return self.fc(x)

    c = Clash()
    c(tensor.Tensor((1, 3)))
    with pytest.raises(ValueError, match="duplicate parameter name 'fc.W'"):
        c.get_params()


def test_register_layers_and_lists():
    class Seq(layer.Layer):
        def __init__(self):
            super().__init__()
            self.blocks = [layer.Linear(4), layer.Linear(2)]
            self.extra = [layer.Linear(3)]
            self.register_layers(layer.Linear(5))

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return getattr(self, "Linear_0")(self.extra[0](x))

    s = Seq()
    s.name = "seq"
    s(tensor.Tensor((1, 3)))
    assert list(s.get_params()) == ["seq.blocks.0.W", "seq.blocks.0.b", "seq.blocks.1.W",
                                    "seq.blocks.1.b", "seq.extra.0.W", "seq.extra.0.b",
                                    "seq.Linear_0.W", "seq.Linear_0.b"]
    s.blocks = []  # replacing the list unregisters its layers
    assert not any(k.startswith("seq.blocks") for k in s.get_params())


def test_custom_layer_tensor_attributes_become_parameters():
    class Scale(layer.Layer):
        def initialize(self, x):
            self.w = tensor.Tensor((x.shape[1],), x.device, requires_grad=True, stores_grad=True)
            self.w.set_value(2.0)
            self.const = tensor.Tensor((1,), x.device)  # not a parameter

        def forward(self, x):
            return autograd.mul(x, self.w)

    class M(model.Model):
        def __init__(self):
            super().__init__()
            self.scale = Scale()

        def forward(self, x):
            return self.scale(x)

    m = M()
    y = m.forward(T(np.ones((2, 3))))
    np.testing.assert_array_equal(N(y), np.full((2, 3), 2, F32))
    assert list(m.get_params()) == ["scale.w"]


def test_duplicate_parameter_names_raise():
    class Named(layer.Layer):
        def initialize(self, x):
            self.W = tensor.Tensor((x.shape[1], 2), x.device, requires_grad=True,
                                   stores_grad=True, name="weight")
            self.W.set_value(0.0)

        def forward(self, x):
            return autograd.matmul(x, self.W)

    class Two(model.Model):
        def __init__(self):
            super().__init__()
            self.a = Named()
            self.b = Named()

        def forward(self, x):
            return self.b(self.a(x))

    m = Two()
    m.compile([tensor.Tensor((1, 2))], is_train=False)
    with pytest.raises(ValueError, match=r"duplicate parameter name 'weight': a .*\(2, 2\).* b "):
        m.get_params()


# ---- get/set params and states ----------------------------------------------------------------
def test_get_set_params_round_trip(rng):
    m = Net()
    m.compile([tensor.Tensor((2, 5))], is_train=False)
    values = {k: rng.standard_normal(v.shape).astype(F32) for k, v in m.get_params().items()}
    m.set_params(values)
    for k, v in m.get_params().items():
        np.testing.assert_array_equal(N(v), values[k])
    # Tensors work too, and a partial dict only changes what it names
    m.set_params({"linear1.b": T(np.ones(3))})
    np.testing.assert_array_equal(N(m.linear1.b), np.ones(3, F32))
    np.testing.assert_array_equal(N(m.linear1.W), values["linear1.W"])
    assert set(m.get_states()) == set(m.get_params())


def test_set_params_is_all_or_nothing(rng):
    m = Net()
    m.compile([tensor.Tensor((2, 5))], is_train=False)
    before = {k: N(v) for k, v in m.get_params().items()}
    bad = {"block1.fc.W": np.ones((5, 6), F32), "linear1.W": np.ones((7, 3), F32)}
    with pytest.raises(ValueError, match=r"linear1\.W.*\(6, 3\).*\(7, 3\)"):
        m.set_params(bad)
    with pytest.raises(KeyError, match="nope"):
        m.set_params({"block1.fc.W": np.ones((5, 6), F32), "nope": np.ones(1, F32)})
    with pytest.raises(TypeError):
        m.set_params({"linear1.b": [1, 2, 3]})
    for k, v in m.get_params().items():
        np.testing.assert_array_equal(N(v), before[k])


def test_parameters_are_initialised_while_buffering():
    dev = device.create_cpu_device(7)
    fc = layer.Linear(3)
    x = tensor.Tensor((2, 4), dev)
    x.set_value(1.0)
    dev.EnableGraph(True)
    try:
        fc(x)
        assert dev.graph_enabled()  # restored after initialize
    finally:
        dev.EnableGraph(False)
        dev.ResetGraph()
    np.testing.assert_array_equal(N(fc.b), np.zeros(3, F32))
    assert np.all(np.isfinite(N(fc.W))) and np.std(N(fc.W)) > 0


# ---- layers without parameters ------------------------------------------------------------
def test_simple_layers(rng):
    x = rng.standard_normal((3, 4)).astype(F32)
    np.testing.assert_allclose(N(layer.ReLU()(T(x))), np.maximum(x, 0))
    np.testing.assert_allclose(N(layer.Sigmoid()(T(x))), 1 / (1 + np.exp(-x)), rtol=1e-5)
    np.testing.assert_allclose(N(layer.Tanh()(T(x))), np.tanh(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(N(layer.Add()(T(x), T(x))), 2 * x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(N(layer.SoftMax()(T(x))), e / e.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-6)
    x4 = rng.standard_normal((2, 3, 2, 2)).astype(F32)
    assert layer.Flatten()(T(x4)).shape == (2, 12)
    assert layer.Flatten(axis=2)(T(x4)).shape == (6, 4)
    assert layer.Cat(axis=1)([T(x), T(x)]).shape == (3, 8)
    assert layer.Reshape()(T(x), (4, 3)).shape == (4, 3)
    np.testing.assert_array_equal(N(layer.Dropout(0.5)(T(x))), x)  # identity in evaluation


def test_dropout_in_training(rng):
    autograd.training = True
    x = np.ones((200, 50), F32)
    y = N(layer.Dropout(0.25)(T(x)))
    kept = y != 0
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    assert 0.7 < kept.mean() < 0.8
    with pytest.raises(ValueError):
        layer.Dropout(1.0)


def test_gemm_matches_numpy(rng):
    a = rng.standard_normal((4, 3)).astype(F32)
    g = layer.Gemm(5, alpha=0.5, beta=2.0)  # transB: W is (5, 3)
    y = g(T(a))
    assert g.W.shape == (5, 3) and g.b.shape == (1, 5)
    g.set_params({g.b.name: np.arange(5, dtype=F32).reshape(1, 5)})
    y = g(T(a))
    np.testing.assert_allclose(N(y), 0.5 * a @ N(g.W).T + 2.0 * np.arange(5), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(ValueError, match="expected input with 3 features, got 4"):
        g(T(rng.standard_normal((4, 4))))


def test_embedding(rng):
    emb = layer.Embedding(10, 4)
    ids = tensor.from_numpy(np.array([[1, 2], [9, 1]], np.int32))
    y = emb(ids)
    assert y.shape == (2, 2, 4)
    table = N(emb.W)
    np.testing.assert_array_equal(N(y), table[[[1, 2], [9, 1]]])
    new = rng.standard_normal((10, 4)).astype(F32)
    emb.from_pretrained(new, freeze=True)
    assert not emb.W.requires_grad
    np.testing.assert_array_equal(N(emb(ids)), new[[[1, 2], [9, 1]]])
    with pytest.raises(ValueError):
        layer.Embedding(3, 2, initializer="bogus")


# ---- loss layers: shapes are checked and named ------------------------------------------------
def test_loss_layers_check_targets():
    x = tensor.Tensor((4, 3))
    x.set_value(0.25)
    with pytest.raises(ValueError, match=r"SoftMaxCrossEntropy.*\(4, 3\).*\(5,\)"):
        layer.SoftMaxCrossEntropy()(x, tensor.Tensor((5,), dtype=tensor.int32))
    with pytest.raises(ValueError, match=r"CrossEntropy.*\(4, 2\)"):
        layer.CrossEntropy()(x, tensor.Tensor((4, 2)))
    with pytest.raises(ValueError, match=r"MeanSquareError.*\(4, 3\).*\(3, 4\)"):
        layer.MeanSquareError()(x, tensor.Tensor((3, 4)))
    with pytest.raises(ValueError, match=r"BinaryCrossEntropy.*\(4,\)"):
        layer.BinaryCrossEntropy()(x, tensor.Tensor((4,)))
    with pytest.raises(TypeError, match="target"):
        layer.MeanSquareError()(x, np.zeros((4, 3)))


def test_mse_and_binary_cross_entropy_values(rng):
    x = rng.uniform(0.1, 0.9, (4, 3)).astype(F32)
    t = rng.uniform(0, 1, (4, 3)).astype(F32)
    np.testing.assert_allclose(N(layer.MeanSquareError()(T(x), T(t))),
                               [((x - t) ** 2).mean()], rtol=1e-5)  # SINGA 3.3: all elements
    bce = -(t * np.log(x + 1e-4) + (1 - t) * np.log(1 + 1e-4 - x)).sum() / 4  # SINGA's epsilon
    np.testing.assert_allclose(N(layer.BinaryCrossEntropy()(T(x), T(t))), [bce], rtol=1e-5)


# ---- recurrent layers -------------------------------------------------------------------------
def test_rnn_matches_numpy(rng):
    rnn = layer.RNN(3, 4)
    xs = [rng.standard_normal((2, 3)).astype(F32) for _ in range(3)]
    h0 = np.zeros((2, 4), F32)
    out, h = rnn([T(x) for x in xs], T(h0))
    assert len(out) == 3 and h.shape == (2, 4)
    Wx, Wh, b = N(rnn.Wx), N(rnn.Wh), N(rnn.b)
    ref = h0
    for x in xs:
        ref = np.tanh(ref @ Wh + x @ Wx + b)
    np.testing.assert_allclose(N(h), ref, rtol=1e-4, atol=1e-5)
    assert sorted(rnn.get_params()) == ["Wh", "Wx", "b"]
    with pytest.raises(ValueError, match="expected input with 3 features, got 5"):
        rnn([T(rng.standard_normal((2, 5)))], T(h0))
    with pytest.raises(ValueError, match="initial state"):
        rnn([T(xs[0])], T(np.zeros((3, 4))))


def test_lstm_shapes(rng):
    lstm = layer.LSTM(3, 5)
    xs = [T(rng.standard_normal((2, 3))) for _ in range(4)]
    h0 = T(np.zeros((2, 5)))
    out, h, c = lstm(xs, (h0, h0))
    assert len(out) == 4 and h.shape == (2, 5) and c.shape == (2, 5)
    assert len(lstm.get_params()) == 16


# ---- convolution, pooling, batch norm ----------------------------------------------------------
def test_conv2d_signatures_and_parameter_shapes():
    x = tensor.Tensor((2, 3, 8, 8))
    new = layer.Conv2d(16, 3, padding=1)
    new.initialize(x)
    assert new.W.shape == (16, 3, 3, 3) and new.b.shape == (16,)
    old = layer.Conv2d(3, 20, 5, padding=0, activation="RELU")  # (in, out, kernel)
    old.initialize(x)
    assert old.W.shape == (20, 3, 5, 5) and old.in_channels == 3
    grouped = layer.Conv2d(6, (3, 1), group=3, bias=False)
    grouped.initialize(x)
    assert grouped.W.shape == (6, 1, 3, 1) and grouped.b is None
    with pytest.raises(ValueError, match="activation"):
        layer.Conv2d(4, 3, activation="TANH")
    with pytest.raises(ValueError, match="group"):
        layer.Conv2d(4, 3, group=3)
    with pytest.raises(TypeError):
        layer.Conv2d(4, "3")
    with pytest.raises(ValueError, match="pad_mode"):
        layer.Conv2d(4, 3, pad_mode="SAME")


def test_conv2d_bad_input_names_the_layer():
    conv = layer.Conv2d(3, 8, 3)
    with pytest.raises(ValueError, match=r"Conv2d: expected input with 3 channels, got 5"):
        conv(tensor.Tensor((2, 5, 8, 8)))
    with pytest.raises(ValueError, match=r"4-d input.*\(2, 3\)"):
        layer.Conv2d(8, 3)(tensor.Tensor((2, 3)))
    with pytest.raises(ValueError, match="does not fit"):
        layer.Conv2d(8, 5)(tensor.Tensor((1, 1, 3, 3)))
    with pytest.raises(ValueError, match=r"expected input with 4 channels, got 3"):
        layer.BatchNorm2d(4)(tensor.Tensor((2, 3, 4, 4)))


def test_padding_helpers():
    from singa.layers._util import padding_spec, same_padding
    assert padding_spec(1, "x") == ((1, 1), (0, 0, 0, 0))
    assert padding_spec((2, 1, 0, 3), "x") == ((1, 0), (1, 0, 0, 3))
    # SAME keeps ceil(in / stride): in 5, k 2, s 1 -> total pad 1
    assert same_padding("SAME_UPPER", (5, 5), (2, 2), (1, 1)) == ((0, 0), (0, 1, 0, 1))
    assert same_padding("SAME_LOWER", (5, 5), (2, 2), (1, 1)) == ((0, 0), (1, 0, 1, 0))


def _conv_ref(x, W, b, stride, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, w = x.shape
    o, _, kh, kw = W.shape
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    y = np.zeros((n, o, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.tensordot(patch, W, axes=([1, 2, 3], [1, 2, 3]))
    return y + (0 if b is None else b.reshape(1, -1, 1, 1))


@needs_nn
def test_conv2d_forward_matches_numpy(rng):
    x = rng.standard_normal((2, 3, 7, 7)).astype(F32)
    conv = layer.Conv2d(3, 4, 3, stride=2, padding=1, activation="RELU")
    y = conv(T(x))
    ref = np.maximum(_conv_ref(x, N(conv.W), N(conv.b), 2, 1), 0)
    np.testing.assert_allclose(N(y), ref, rtol=1e-4, atol=1e-4)
    # a new batch size rebuilds the handle
    y2 = conv(T(x[:1]))
    np.testing.assert_allclose(N(y2), ref[:1], rtol=1e-4, atol=1e-4)


@needs_nn
def test_pooling_layers(rng):
    x = rng.standard_normal((2, 3, 6, 6)).astype(F32)
    y = N(layer.MaxPool2d(2)(T(x)))
    np.testing.assert_allclose(y, x.reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5)))
    y = N(layer.AvgPool2d(2, 2)(T(x)))
    np.testing.assert_allclose(y, x.reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5)), rtol=1e-5,
                               atol=1e-6)
    x1 = rng.standard_normal((2, 3, 1, 8)).astype(F32)
    y = N(layer.MaxPool1d(2)(T(x1)))
    np.testing.assert_allclose(y, x1.reshape(2, 3, 1, 4, 2).max(axis=4))
    assert layer.MaxPool2d(3, 1, pad_mode="SAME_UPPER")(T(x)).shape == (2, 3, 6, 6)
    with pytest.raises(ValueError, match="smaller than the kernel"):
        layer.MaxPool2d(2, padding=2)


@needs_bn
def test_batchnorm_states_training_and_eval(rng):
    bn = layer.BatchNorm2d(3, momentum=0.9)
    x = rng.standard_normal((4, 3, 2, 2)).astype(F32) * 3 + 1
    y = N(bn(T(x)))  # evaluation: running statistics (still 0 and 1)
    np.testing.assert_allclose(y, x / np.sqrt(1 + 1e-5), rtol=1e-4, atol=1e-4)
    assert set(bn.get_params()) == {"scale", "bias"}
    assert set(bn.get_states()) == set(bn.get_params()) | {"running_mean", "running_var"}
    autograd.training = True
    y = N(bn(T(x)))
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    ref = (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    # running = momentum * running + (1 - momentum) * batch statistic
    np.testing.assert_allclose(N(bn.running_mean), 0.1 * mean, rtol=1e-4, atol=1e-5)
    unbiased = x.var(axis=(0, 2, 3), ddof=1)
    np.testing.assert_allclose(N(bn.running_var), 0.9 + 0.1 * unbiased, rtol=1e-4)


@needs_nn
def test_separable_conv2d_names(rng):
    class M(model.Model):
        def __init__(self):
            super().__init__()
            self.sep = layer.SeparableConv2d(8, 3, padding=1)

        def forward(self, x):
            return self.sep(x)

    m = M()
    m.compile([T(rng.standard_normal((1, 4, 5, 5)))], is_train=False)
    assert set(m.get_params()) == {"sep.depthwise_conv.W", "sep.point_conv.W"}
    assert m.sep.depthwise_conv.W.shape == (4, 1, 3, 3)
    assert m.sep.point_conv.W.shape == (8, 4, 1, 1)


def test_reassigning_attributes():
    class Holder(layer.Layer):
        def __init__(self):
            super().__init__()
            self.down = None
            self.down = layer.Linear(2)  # a layer replaces a plain attribute
            self.shared = self.down      # one layer under two names
            self.down = None             # and a plain value replaces a layer

        def forward(self, x):
            return self.shared(x)

    h = Holder()
    h.name = "h"
    assert h.down is None and isinstance(h.shared, layer.Linear)
    h(tensor.Tensor((1, 3)))
    assert list(h.get_params()) == ["h.shared.W", "h.shared.b"]
    del h.shared
    assert h.get_params() == {}
    with pytest.raises(AttributeError):
        h.shared


def test_singa_metaclass_hooks_wrap_user_functions():
    """LayerMeta.init_wrapper / forward_wrapper and ModelMeta.buffer_operation are SINGA's
    hooks: wrapping a function of one's own gives it the layer/model behaviour."""
    calls = []

    class Scale(layer.Layer):
        pass

    def init(self, x):
        calls.append(("init", tuple(x.shape)))
        self.k = tensor.Tensor((1,), requires_grad=True, stores_grad=True).set_value(3.0)

    def fwd(self, x):
        calls.append(("forward",))
        return autograd.mul(x, self.k)

    Scale.initialize = layer.LayerMeta.init_wrapper(init)
    Scale.forward = layer.LayerMeta.forward_wrapper(fwd)
    s = Scale()
    y = s(tensor.from_numpy(np.array([[1.0, 2.0]], np.float32)))
    np.testing.assert_array_equal(tensor.to_numpy(y), [[3.0, 6.0]])
    s(tensor.from_numpy(np.array([[1.0, 2.0]], np.float32)))
    assert calls == [("init", (1, 2)), ("forward",), ("forward",)]  # initialized once
    assert list(s.get_params()) == ["k"]
    wrapped = model.ModelMeta.buffer_operation(lambda self, x: x)
    m = model.Model()
    m.graph(False)
    assert wrapped(m, y) is y  # eager: the function itself runs


def test_linear_ignores_unknown_keywords_as_singa_but_warns():
    with pytest.warns(RuntimeWarning, match="ignoring unknown keyword arguments name"):
        fc = layer.Linear(3, name="fc")
    y = fc(tensor.from_numpy(np.ones((2, 4), np.float32)))
    assert y.shape == (2, 3) and fc.bias
