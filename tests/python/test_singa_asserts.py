"""Where Apache SINGA 3.3 checks input with ``assert``, SINGA code may catch AssertionError: our
errors there are AssertionError subclasses too, while staying the precise exceptions
(ShapeError/ValueError, TypeError) that our own API documents. Each case names SINGA's assert."""
import numpy as np
import pytest

from singa import initializer, layer, model, opt, singa_wrap, tensor

F32 = np.float32


def T(*shape):
    return tensor.from_numpy(np.ones(shape, F32))


def _linear_wrong_features():
    fc = layer.Linear(2)
    fc(T(1, 3))
    fc(T(1, 4))  # SINGA: assert x.shape[1] == self.W.shape[0]


def _gemm_wrong_features():
    g = layer.Gemm(2)
    g(T(1, 3))
    g(T(1, 5))


def _batchnorm_wrong_channels():
    bn = layer.BatchNorm2d(3)
    bn(T(2, 4, 2, 2))  # SINGA: assert x.shape[1] == self.channels


def _conv_group_mismatch():
    conv = layer.Conv2d(4, 3, group=2)
    conv(T(1, 3, 5, 5))  # SINGA: assert in_channels % group == 0


def _set_attribute_shape():
    fc = layer.Linear(2)
    fc(T(1, 3))
    fc.set_attribute(fc.W, np.ones((2, 2), F32))  # SINGA: assert shapes equal


def _optimizer_apply_shape():
    p = tensor.from_numpy(np.ones((2, 2), F32))
    opt.SGD(lr=0.1).apply("p", p, T(4))  # SINGA: assert param.shape == grad.shape


class _M(model.Model):
    def forward(self, x):
        return x


CASES = [
    ("Linear features", _linear_wrong_features, singa_wrap.ShapeError),
    ("Gemm features", _gemm_wrong_features, singa_wrap.ShapeError),
    ("BatchNorm2d channels", _batchnorm_wrong_channels, singa_wrap.ShapeError),
    ("BatchNorm2d momentum", lambda: layer.BatchNorm2d(3, momentum=1.5), ValueError),
    ("Conv2d group", _conv_group_mismatch, singa_wrap.ShapeError),
    ("Conv2d nb_kernels/group", lambda: layer.Conv2d(3, 3, group=2), ValueError),
    ("Pooling2d stride", lambda: layer.MaxPool2d(2, stride=(0, 1)), ValueError),
    ("Layer input type", lambda: layer.Linear(2)(np.ones((1, 3), F32)), TypeError),
    ("initialize input type", lambda: layer.Linear(2).initialize([np.ones((1, 3))]), TypeError),
    ("set_attribute", _set_attribute_shape, singa_wrap.ShapeError),
    ("Optimizer.apply", _optimizer_apply_shape, singa_wrap.ShapeError),
    ("DecayScheduler step", lambda: opt.Constant(0.1)(0.5), TypeError),
    ("compile inputs", lambda: _M().compile([np.ones(2)]), TypeError),
    ("load_states path", lambda: _M().load_states("/nonexistent/ckpt.zip"), FileNotFoundError),
    ("initializer fans", lambda: initializer.uniform(T(2, 2), 0, 0), ValueError),
]


@pytest.mark.parametrize("name,call,precise", CASES, ids=[c[0] for c in CASES])
def test_singa_assert_sites_raise_assertion_errors(name, call, precise):
    with pytest.raises(AssertionError) as info:
        call()
    assert isinstance(info.value, precise), type(info.value).__mro__
    assert str(info.value)  # a message, not a bare assert


def test_good_input_at_the_same_sites_still_works():
    fc = layer.Linear(2)
    assert fc.initialize() is None and not hasattr(fc, "W")  # SINGA: no input, nothing done
    y = fc(T(1, 3))
    assert y.shape == (1, 2)
    bn = layer.BatchNorm2d(3, momentum=1.0)  # the bound itself is accepted, as in SINGA
    assert bn.momentum == 1.0
    assert layer.Conv2d(4, 3, group=2).group == 2


@pytest.mark.parametrize("call", [
    lambda: T(2, 3).reshape((4, 2)),
    lambda: T(2, 3).copy_from_numpy(np.ones(5, F32)),
    lambda: T(2, 3).copy_data(T(5)),
], ids=["reshape", "copy_from_numpy", "copy_data"])
def test_tensor_size_asserts(call):
    # SINGA's Tensor.reshape / copy_from_numpy / copy_data assert equal sizes
    with pytest.raises(AssertionError, match=r"\(2, 3\)") as info:
        call()
    assert isinstance(info.value, singa_wrap.ShapeError)
