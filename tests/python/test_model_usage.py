"""Mode mistakes explain themselves: a model called with arguments that do not fit its mode
(training: train_one_batch; evaluation: forward), and training without an optimizer."""
import numpy as np
import pytest

import tiny_nets
from singa import device, model, opt, tensor


def _x(dev, n=tiny_nets.B):
    return tensor.from_numpy(np.ones((n, tiny_nets.D), np.float32), dev)


def _y(dev, n=tiny_nets.B):
    return tensor.from_numpy(np.zeros((n, tiny_nets.C), np.float32), dev)


def test_a_new_model_called_with_one_input_says_to_eval_or_compile():
    """The issue's `CNN()(x)`: a new model is in training mode, so m(x) runs
    train_one_batch(x), which lacks y."""
    dev = device.create_cpu_device(81)
    m = tiny_nets.Net()
    with pytest.raises(model.ModelCallError) as e:
        m(_x(dev))
    msg = str(e.value)
    assert isinstance(e.value, TypeError)
    assert "Net is in training mode" in msg and "never compiled" in msg
    assert "train_one_batch(x, y)" in msg and "missing a required argument: 'y'" in msg
    assert "eval()" in msg and "compile(" in msg
    m.set_optimizer(opt.SGD(lr=0.1))
    m.compile([_x(dev)], is_train=True, use_graph=False)
    with pytest.raises(model.ModelCallError) as e:
        m(_x(dev))
    assert "never compiled" not in str(e.value) and "training mode" in str(e.value)
    m.eval()
    out = m(_x(dev))  # what the user meant
    assert out.shape == (tiny_nets.B, tiny_nets.C)


@pytest.mark.parametrize("use_graph", [False, True])
def test_eval_then_calling_with_labels_says_to_train(use_graph):
    """The issue's `m.eval(); m(x, y)`."""
    dev = device.create_cpu_device(82)
    m = tiny_nets.compiled(opt.SGD(lr=0.1), dev, use_graph)
    m.eval()
    with pytest.raises(model.ModelCallError) as e:
        m(_x(dev), _y(dev))
    msg = str(e.value)
    assert "Net is in evaluation mode" in msg and "forward(x)" in msg
    assert "too many positional arguments" in msg and "train()" in msg
    m.train()
    out, loss = m(_x(dev), _y(dev))  # what the user meant
    assert loss.shape in ((), (1,))
    dev.ResetGraph()


def test_keyword_mistakes_and_errors_inside_the_method_are_left_alone():
    dev = device.create_cpu_device(83)
    m = tiny_nets.compiled(opt.SGD(lr=0.1), dev, use_graph=False)
    with pytest.raises(model.ModelCallError, match="unexpected keyword argument 'label'"):
        m(_x(dev), _y(dev), label=_y(dev))
    m(x=_x(dev), y=_y(dev))  # keywords that fit are fine
    # a TypeError raised inside train_one_batch is the method's own, not a mode mistake
    with pytest.raises(TypeError) as e:
        m(_x(dev), "not a tensor")
    assert not isinstance(e.value, model.ModelCallError)


def test_training_without_set_optimizer_says_to_call_it():
    dev = device.create_cpu_device(84)
    m = tiny_nets.Net()
    m.compile([_x(dev)], is_train=True, use_graph=False)
    with pytest.raises(model.NoOptimizerError) as e:
        m(_x(dev), _y(dev))
    assert isinstance(e.value, AttributeError)
    assert "Net has no optimizer" in str(e.value) and "set_optimizer(" in str(e.value)
    assert not hasattr(m, "optimizer")
    m.set_optimizer(opt.SGD(lr=0.1))
    m(_x(dev), _y(dev))
    assert isinstance(m.optimizer, opt.SGD)


def test_models_whose_methods_take_anything_are_not_checked():
    class Loose(model.Model):
        def forward(self, *xs):
            return xs[0]

        def train_one_batch(self, *args, **kwargs):
            return args

    m = Loose()
    m.graph(False)
    assert m(1, 2, 3) == (1, 2, 3)
    m.eval()
    a, b = _x(None), _y(None)
    assert m(a, b) is a
