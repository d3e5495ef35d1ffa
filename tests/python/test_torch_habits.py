"""PyTorch habits that cost nothing: t.numpy(), t.item(), tensor.dtype_name(t), integer-list and
boolean-mask indexing, Model.parameters()/named_parameters(), PyTorch-style repr of layers and
models; and SINGA's t[0] (the axis is kept) stays."""
import re

import numpy as np
import pytest

import tiny_nets
from singa import device, layer, model, singa_wrap, tensor

F32 = np.float32


def T(a):
    return tensor.from_numpy(np.asarray(a))


# ---- numpy(), item(), dtype_name ----------
def test_numpy_is_a_copy_of_the_values(rng):
    a = rng.standard_normal((3, 4)).astype(F32)
    t = T(a)
    got = t.numpy()
    np.testing.assert_array_equal(got, a)
    np.testing.assert_array_equal(got, tensor.to_numpy(t))
    got[0, 0] = 100.0
    assert t.numpy()[0, 0] == a[0, 0]


def test_item_gives_a_python_number_of_one_element_tensors():
    f = T(np.array([[2.5]], F32)).item()
    assert f == 2.5 and type(f) is float
    i = T(np.array([7], np.int32)).item()
    assert i == 7 and type(i) is int
    h = T(np.array([1.5], F32)).as_type(tensor.float16).item()
    assert h == 1.5 and type(h) is float
    assert T(np.arange(6, dtype=F32).reshape(2, 3))[1, 2].item() == 5.0
    for shape in [(2,), (2, 3), (0,)]:
        with pytest.raises(ValueError, match=r"one-element.*shape %s" % re.escape(str(shape))):
            tensor.Tensor(shape).item()


def test_dtype_name():
    for code, name in [(tensor.float32, "float32"), (tensor.int32, "int32"),
                       (tensor.float16, "float16")]:
        t = tensor.Tensor((2,), dtype=code)
        assert tensor.dtype_name(t) == name
        assert tensor.dtype_name(t.data) == name
        assert tensor.dtype_name(code) == name
        assert tensor.Tensor.dtype_name[code] == name  # SINGA 3.3's class attribute
    assert tensor.dtype_name("half") == "float16"
    with pytest.raises(singa_wrap.DTypeError):
        tensor.dtype_name("float64")


# ---- indexing ----------
def test_an_integer_index_keeps_the_axis_as_in_singa():
    a = np.arange(12, dtype=F32).reshape(3, 4)
    t = T(a)
    assert t[0].shape == (1, 4) and t[1, 2].shape == (1, 1) and t[:, 1].shape == (3, 1)
    np.testing.assert_array_equal(t[2].numpy(), a[2:3])
    doc = tensor.Tensor.__getitem__.__doc__
    assert "keeps its axis" in doc and "(1, 4)" in doc


INDEXES = {
    "list": [2, 0, 2],
    "negative": [-1, 0],
    "nested": [[0, 1], [2, 2]],
    "ndarray": np.array([1, 2]),
    "empty": [],
    "mask-rows": np.array([True, False, True]),
    "mask-list": [False, True, False],
    "mask-full": "full",
}


@pytest.mark.parametrize("name", sorted(INDEXES))
def test_integer_lists_and_boolean_masks_index_as_numpy(name, rng):
    a = rng.standard_normal((3, 4, 2)).astype(F32)
    key = a > 0 if name == "mask-full" else INDEXES[name]
    t = T(a)
    got = t[key]
    expected = a[np.asarray(key) if name != "empty" else np.array([], np.int64)]
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got.numpy(), expected)
    if got.size():
        got.set_value(0.0)  # a new tensor: the source is unchanged
        np.testing.assert_array_equal(t.numpy(), a)


def test_index_tensors_and_transposed_sources():
    a = np.arange(12, dtype=F32).reshape(3, 4)
    t = T(a)
    np.testing.assert_array_equal(t[T(np.array([2, 1], np.int32))].numpy(), a[[2, 1]])
    np.testing.assert_array_equal(t.T()[[3, 0]].numpy(), a.T[[3, 0]])
    np.testing.assert_array_equal(t.T()[a.T > 4].numpy(), a.T[a.T > 4])


def test_bad_index_arrays_raise_index_errors():
    t = T(np.zeros((3, 4), F32))
    with pytest.raises(IndexError, match="out of range"):
        t[[0, 3]]
    with pytest.raises(IndexError, match="out of range"):
        t[[-4]]
    with pytest.raises(IndexError, match="boolean mask of shape"):
        t[np.array([True, False])]
    with pytest.raises(IndexError, match="integers or booleans"):
        t[np.array([0.5])]
    with pytest.raises(TypeError, match="whole index"):
        t[0, [1, 2]]


# ---- parameters ----------
class Block(layer.Layer):
    def __init__(self):
        super().__init__()
        self.lin = layer.Linear(3)
        self.bn = layer.BatchNorm2d()

    def forward(self, x):
        return self.lin(x)


class Ordered(model.Model):
    """Layers set in an order that is not alphabetical, one nested."""

    def __init__(self):
        super().__init__()
        self.zeta = layer.Linear(4)
        self.alpha = Block()
        self.mid = layer.Linear(2, bias=False)

    def forward(self, x):
        return self.mid(self.alpha(self.zeta(x)))


def test_named_parameters_follow_registration_order_with_get_params_names():
    m = Ordered()
    m.compile([tensor.Tensor((2, 5))], is_train=False)
    names = [n for n, _ in m.named_parameters()]
    assert names == ["zeta.W", "zeta.b", "alpha.lin.W", "alpha.lin.b", "mid.W"]
    assert names == list(m.get_params())
    params = list(m.parameters())
    assert all(p is q for p, q in zip(params, m.get_params().values())) and len(params) == 5
    assert [n for n, _ in m.alpha.named_parameters()] == ["alpha.lin.W", "alpha.lin.b"]


def test_parameters_feed_a_pytorch_style_loop():
    dev = device.create_cpu_device(91)
    m = tiny_nets.compiled(None, dev, use_graph=False)
    total = sum(p.size() for p in m.parameters())
    assert total == tiny_nets.D * tiny_nets.H + tiny_nets.H + tiny_nets.H * tiny_nets.C + \
        tiny_nets.C
    for name, p in m.named_parameters():
        assert p.stores_grad and p.name == name


# ---- repr ----------
def test_layer_repr_shows_its_settings():
    conv = layer.Conv2d(20, 5)
    assert repr(conv) == "Conv2d(20, kernel_size=5, stride=1, padding=0)"
    conv(tensor.Tensor((1, 1, 8, 8)))
    assert repr(conv) == "Conv2d(1, 20, kernel_size=5, stride=1, padding=0)"  # the issue's
    assert repr(layer.Conv2d(3, 8, (3, 1), stride=2, padding=(1, 0), bias=False,
                             activation="RELU")) == \
        "Conv2d(3, 8, kernel_size=(3, 1), stride=2, padding=(1, 0), bias=False, " \
        "activation='RELU')"
    assert repr(layer.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0)"
    assert repr(layer.AvgPool2d(3, 1, 1)) == "AvgPool2d(kernel_size=3, stride=1, padding=1)"
    assert repr(layer.MaxPool1d(4)) == "MaxPool1d(kernel_size=4, stride=4, padding=0)"
    assert repr(layer.Linear(5, 7)) == "Linear(5, 7, bias=True)"
    assert repr(layer.Linear(7, bias=False)) == "Linear(7, bias=False)"
    assert repr(layer.ReLU()) == "ReLU()"
    assert repr(layer.Dropout(0.2)) == "Dropout(ratio=0.2)"
    assert repr(layer.BatchNorm2d(16)) == "BatchNorm2d(16, momentum=0.9)"
    assert repr(layer.LSTM(3, 4, num_layers=2)) == "LSTM(3, 4, num_layers=2)"
    assert repr(layer.Flatten()) == "Flatten(axis=1)"


def test_model_repr_nests_its_layers():
    m = Ordered()
    m.compile([tensor.Tensor((2, 5))], is_train=False)
    assert repr(m) == "\n".join([
        "Ordered(",
        "  (zeta): Linear(5, 4, bias=True)",
        "  (alpha): Block(",
        "    (lin): Linear(4, 3, bias=True)",
        "    (bn): BatchNorm2d(momentum=0.9)",
        "  )",
        "  (mid): Linear(3, 2, bias=False)",
        ")"])


def test_extra_repr_is_the_hook_for_ones_own_layers():
    class Scale(layer.Layer):
        def __init__(self, factor):
            super().__init__()
            self.factor = factor
            self.inner = layer.ReLU()

        def extra_repr(self):
            return "factor=%r" % self.factor

        def forward(self, x):
            return self.inner(x) * self.factor

    assert repr(Scale(2.0)) == "Scale(\n  factor=2.0\n  (inner): ReLU()\n)"


@pytest.mark.parametrize("cls", ["ReLU", "Sigmoid", "Tanh", "Add", "Reshape", "SoftMax",
                                 "MaxPool2d", "AvgPool2d", "MeanSquareError", "Linear",
                                 "Conv2d", "BatchNorm2d", "Dropout", "Flatten",
                                 "SoftMaxCrossEntropy"])
def test_common_layers_have_their_own_docstring(cls):
    doc = getattr(layer, cls).__dict__.get("__doc__")
    assert doc and len(doc.split()) >= 4
