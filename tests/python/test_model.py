"""singa.model: compile, graph mode == eager mode, input changes, bad input, checkpoints."""
import io
import json
import os
import warnings
import zipfile

import numpy as np
import pytest

from singa import autograd, device, layer, model, opt, singa_wrap, tensor

F32 = np.float32
B, D, H, C = 8, 5, 16, 3

needs_nn = pytest.mark.skipif(not hasattr(singa_wrap, "ConvHandle"),
                              reason="the core's convolution/pooling/batch-norm handles are not "
                                     "bound in this build of singa_wrap")
needs_softmax_ce = pytest.mark.skipif(not hasattr(singa_wrap, "SoftmaxCrossEntropyForward"),
                                      reason="SoftmaxCrossEntropyForward is not bound yet")


def N(t):
    return tensor.to_numpy(t)


@pytest.fixture(autouse=True)
def _restore_training():
    prev = autograd.training
    yield
    autograd.training = prev


class MLP(model.Model):
    def __init__(self, hidden=H, classes=C, loss="mse"):
        super().__init__()
        self.linear1 = layer.Linear(hidden)
        self.relu = layer.ReLU()
        self.linear2 = layer.Linear(classes)
        self.loss_fn = layer.MeanSquareError() if loss == "mse" else layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.linear2(self.relu(self.linear1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss_fn(out, y)
        self.optimizer(loss)
        return out, loss


def batches(n, batch=B, loss="mse", seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = rng.standard_normal((batch, D)).astype(F32)
        if loss == "mse":
            y = rng.standard_normal((batch, C)).astype(F32)
        else:
            y = rng.integers(0, C, batch).astype(np.int32)
        yield x, y


def placeholders(dev, batch=B, loss="mse"):
    tx = tensor.Tensor((batch, D), dev)
    ty = tensor.Tensor((batch, C), dev) if loss == "mse" else tensor.Tensor((batch,), dev,
                                                                              tensor.int32)
    return tx, ty


def twin_models(make_opt, dev, sequential=False, loss="mse"):
    """(eager model, graph model) with the same initial parameters."""
    eager, graph = MLP(loss=loss), MLP(loss=loss)
    eager.set_optimizer(make_opt())
    graph.set_optimizer(make_opt())
    tx, _ = placeholders(dev)
    eager.compile([tx], is_train=True, use_graph=False)
    graph.compile([tx], is_train=True, use_graph=True, sequential=sequential)
    graph.set_params(eager.get_params())
    return eager, graph


def params(m):
    return {k: N(v) for k, v in m.get_params().items()}


def assert_same_params(a, b, rtol=1e-6, atol=1e-7):
    pa, pb = params(a), params(b)
    assert pa.keys() == pb.keys()
    for k in pa:
        np.testing.assert_allclose(pa[k], pb[k], rtol=rtol, atol=atol, err_msg=k)


OPTIMIZERS = {
    "sgd-momentum": lambda: opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-4),
    "adam": lambda: opt.Adam(lr=0.01),
    "sgd-decay": lambda: opt.SGD(lr=opt.ExponentialDecay(0.1, 2, 0.5), momentum=0.5,
                                 nesterov=True),
}


# ---- compile ----------
def test_compile_creates_parameters_without_running():
    dev = device.create_cpu_device(21)
    m = MLP()
    tx, _ = placeholders(dev)
    m.compile([tx], is_train=True, use_graph=True, sequential=True)
    assert list(m.get_params()) == ["linear1.W", "linear1.b", "linear2.W", "linear2.b"]
    assert m.linear1.W.shape == (D, H) and m.linear2.W.shape == (H, C)
    assert m.training and autograd.training and m.graph_mode and m.sequential
    assert not dev.graph_enabled() and dev.graph_num_nodes() == 0
    m.compile([tx], is_train=False, use_graph=False)
    assert not m.training and not autograd.training and not m.graph_mode
    with pytest.raises(TypeError):
        m.compile([np.zeros((B, D))])


# ---- graph mode == eager mode ----------
@pytest.mark.parametrize("sequential", [False, True])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_graph_mode_matches_eager_mode(name, sequential):
    dev = device.create_cpu_device(22)
    eager, graph = twin_models(OPTIMIZERS[name], dev, sequential)
    ex, ey = placeholders(dev)
    gx, gy = placeholders(dev)
    outs = None
    for i, (x, y) in enumerate(batches(6)):
        ex.copy_from_numpy(x)
        ey.copy_from_numpy(y)
        gx.copy_from_numpy(x)
        gy.copy_from_numpy(y)
        e_out, e_loss = eager(ex, ey)
        g_out, g_loss = graph(gx, gy)
        np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-6, err_msg="step %d" % i)
        np.testing.assert_allclose(N(g_out), N(e_out), rtol=1e-5, atol=1e-6)
        if outs is None:
            outs = (g_out, g_loss)
        else:  # the graph returns the same tensors, updated in place
            assert g_out is outs[0] and g_loss is outs[1]
    assert_same_params(eager, graph)
    assert N(graph.optimizer.step_counter)[0] == 6
    np.testing.assert_array_equal(N(graph.optimizer.lr_value), N(eager.optimizer.lr_value))
    dev.ResetGraph()


@needs_softmax_ce
def test_graph_mode_matches_eager_mode_softmax_cross_entropy():
    dev = device.create_cpu_device(23)
    eager, graph = twin_models(OPTIMIZERS["sgd-momentum"], dev, loss="ce")
    ex, ey = placeholders(dev, loss="ce")
    for x, y in batches(5, loss="ce"):
        ex.copy_from_numpy(x)
        ey.copy_from_numpy(y)
        _, e_loss = eager(ex, ey)
        _, g_loss = graph(ex, ey)
        np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-6)
    assert_same_params(eager, graph)
    dev.ResetGraph()


def test_new_input_tensors_are_copied_into_the_recorded_ones():
    dev = device.create_cpu_device(24)
    eager, graph = twin_models(OPTIMIZERS["adam"], dev)
    for x, y in batches(4):
        _, e_loss = eager(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
        _, g_loss = graph(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
        np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-6)
    assert_same_params(eager, graph)
    dev.ResetGraph()


@pytest.mark.parametrize("style", ["keywords", "mixed", "keywords-reordered"])
def test_keyword_inputs_graph_matches_eager(style):
    """Tensors passed to train_one_batch by keyword are inputs of the replay too: new tensors
    each step, whose data must reach the recorded graph (a replay that ignored them would train
    on the first batch forever)."""
    dev = device.create_cpu_device(31)
    eager, graph = twin_models(OPTIMIZERS["sgd-momentum"], dev)
    losses = []
    for i, (x, y) in enumerate(batches(5, seed=3)):
        tx, ty = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
        gx, gy = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
        _, e_loss = eager(tx, ty)
        if style == "keywords":
            _, g_loss = graph(x=gx, y=gy)
        elif style == "mixed":
            _, g_loss = graph(gx, y=gy)
        else:  # the keyword order changes between steps
            _, g_loss = graph(x=gx, y=gy) if i % 2 else graph(y=gy, x=gx)
        np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-6, err_msg="step %d" % i)
        losses.append(float(N(g_loss).ravel()[0]))
    assert len(set(losses)) == len(losses)  # every step saw its own batch
    assert_same_params(eager, graph)
    dev.ResetGraph()


def test_a_new_input_shape_records_the_graph_again():
    dev = device.create_cpu_device(25)
    eager, graph = twin_models(OPTIMIZERS["sgd-momentum"], dev)
    sizes = [B, B, 5, 5, B]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n, (x, y) in zip(sizes, batches(len(sizes))):
            x, y = x[:n], y[:n]
            _, e_loss = eager(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
            g_out, g_loss = graph(tensor.from_numpy(x, dev), tensor.from_numpy(y, dev))
            assert g_out.shape == (n, C)
            np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-6)
    assert sum("recording the computational graph again" in str(w.message)
               for w in caught) == 1  # warned once
    assert_same_params(eager, graph)
    dev.ResetGraph()


def test_eval_and_graph_off_run_eagerly_then_the_graph_replays():
    dev = device.create_cpu_device(26)
    eager, graph = twin_models(OPTIMIZERS["sgd-momentum"], dev)
    tx, ty = placeholders(dev)
    data = list(batches(5))

    def step(i, expect_nodes=None):
        tx.copy_from_numpy(data[i][0])
        ty.copy_from_numpy(data[i][1])
        _, e_loss = eager(tx, ty)
        _, g_loss = graph(tx, ty)
        np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-6)

    step(0)
    nodes = dev.graph_num_nodes()
    assert nodes > 0
    graph.eval()
    y = graph(tx)  # forward only, eagerly
    assert isinstance(y, tensor.Tensor) and y.shape == (B, C)
    h = np.maximum(data[0][0] @ N(graph.linear1.W) + N(graph.linear1.b), 0)
    tx.copy_from_numpy(data[0][0])
    np.testing.assert_allclose(N(graph(tx)), h @ N(graph.linear2.W) + N(graph.linear2.b),
                               rtol=1e-5, atol=1e-5)
    graph.train()
    step(1)
    graph.graph(False)  # eager training steps in between
    step(2)
    step(3)
    assert dev.graph_num_nodes() == nodes
    graph.graph(True, sequential=True)
    step(4)
    assert dev.graph_num_nodes() == nodes  # replayed, not recorded again
    assert_same_params(eager, graph)
    dev.ResetGraph()


def test_two_models_on_one_device_take_turns():
    dev = device.create_cpu_device(27)
    e1, g1 = twin_models(OPTIMIZERS["sgd-momentum"], dev)
    e2, g2 = twin_models(OPTIMIZERS["adam"], dev)
    tx, ty = placeholders(dev)
    for x, y in batches(4):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        for e, g in ((e1, g1), (e2, g2)):
            _, e_loss = e(tx, ty)
            _, g_loss = g(tx, ty)
            np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-6)
    assert_same_params(e1, g1)
    assert_same_params(e2, g2)
    dev.ResetGraph()


def test_graph_mode_needs_an_input_tensor():
    m = MLP()
    m.set_optimizer(opt.SGD())
    with pytest.raises(ValueError, match="input Tensor"):
        m(np.zeros((B, D), F32), np.zeros((B, C), F32))


def test_overriding_train_one_batch_records_once():
    class Logged(MLP):
        def train_one_batch(self, x, y):
            self.calls = getattr(self, "calls", 0) + 1
            return super().train_one_batch(x, y)

    dev = device.create_cpu_device(31)
    eager = MLP()
    eager.set_optimizer(OPTIMIZERS["adam"]())
    m = Logged()
    m.set_optimizer(OPTIMIZERS["adam"]())
    tx, ty = placeholders(dev)
    eager.compile([tx], is_train=True, use_graph=False)
    m.compile([tx], is_train=True, use_graph=True)
    m.set_params(eager.get_params())
    for x, y in batches(3):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _, e_loss = eager(tx, ty)
        _, loss = m(tx, ty)
        np.testing.assert_allclose(N(loss), N(e_loss), rtol=1e-6)
    assert m.calls == 1  # recorded once, then replayed
    dev.ResetGraph()


def test_unregistered_layer_with_parameters_warns():
    class Sloppy(model.Model):
        def __init__(self):
            super().__init__()
            self.hidden = [layer.Linear(4)]  # a list of layers is registered
            self.extra = {"fc": layer.Linear(2)}  # a dict is not

        def forward(self, x):
            return self.extra["fc"](self.hidden[0](x))

    m = Sloppy()
    with pytest.warns(RuntimeWarning, match="not registered in model Sloppy"):
        m.compile([tensor.Tensor((2, 3))], is_train=False)
    assert list(m.get_params()) == ["hidden.0.W", "hidden.0.b"]


# ---- bad input leaves the model unchanged ----------
@pytest.mark.parametrize("use_graph", [True, False])
def test_bad_input_raises_and_leaves_the_model_unchanged(use_graph):
    dev = device.create_cpu_device(28)
    eager, m = twin_models(OPTIMIZERS["sgd-momentum"], dev)
    m.graph(use_graph)
    data = list(batches(3))
    x0, y0 = (tensor.from_numpy(a, dev) for a in data[0])
    eager(x0, y0)
    m(x0, y0)
    before = params(m)
    step = N(m.optimizer.step_counter)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"loss_fn.*\(8, 3\).*\(7, 3\)"):
            m(x0, tensor.from_numpy(data[1][1][:7], dev))  # labels of the wrong batch
        with pytest.raises(ValueError, match=r"linear1: expected input with 5 features, got 6"):
            m(tensor.from_numpy(np.ones((B, D + 1), F32), dev), y0)
        with pytest.raises(ValueError, match=r"2-d input"):
            m(tensor.from_numpy(np.ones((B, D, 1), F32), dev), y0)
        for k, v in params(m).items():
            np.testing.assert_array_equal(v, before[k], err_msg=k)
        assert N(m.optimizer.step_counter)[0] == step
        assert not dev.graph_enabled()
        # training goes on as if the bad calls never happened
        for x, y in data[1:]:
            x, y = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
            _, e_loss = eager(x, y)
            _, loss = m(x, y)
            np.testing.assert_allclose(N(loss), N(e_loss), rtol=1e-6)
    assert_same_params(eager, m)
    dev.ResetGraph()


# ---- checkpoints ----------
def trained_model(steps=3, hidden=H):
    m = MLP(hidden=hidden)
    m.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    tx, ty = placeholders(None)
    m.compile([tx], is_train=True, use_graph=False)
    for x, y in batches(steps):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        m(tx, ty)
    return m


def test_save_load_round_trip_is_bit_exact(tmp_path):
    src = trained_model()
    path = str(tmp_path / "ckpt.zip")
    aux = {"epoch": 3, "lr": 0.05, "w": tensor.from_numpy(np.arange(4, dtype=F32)),
           "arr": np.arange(6, dtype=np.int32).reshape(2, 3)}
    src.save_states(path, aux_states=aux)
    dst = MLP()
    dst.compile([tensor.Tensor((2, D))], is_train=False)
    got = dst.load_states(path)
    for k, v in params(src).items():
        np.testing.assert_array_equal(params(dst)[k], v)
    assert got["epoch"] == 3 and isinstance(got["epoch"], int)
    assert got["lr"] == 0.05 and isinstance(got["lr"], float)
    np.testing.assert_array_equal(N(got["w"]), np.arange(4, dtype=F32))
    np.testing.assert_array_equal(got["arr"], aux["arr"])
    # Apache SINGA's layout: a zip of tensor_dict.npz and states_attr.json
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["states_attr.json", "tensor_dict.npz"]
        attrs = json.loads(zf.read("states_attr.json"))
    assert attrs["linear1.W"]["state_type"] == model.Model.MODEL_STATE_TYPE
    assert attrs["linear1.W"]["shape"] == [D, H]
    assert attrs["epoch"]["state_type"] == model.Model.AUX_STATE_TYPE


def test_save_overwrites_atomically(tmp_path):
    m = trained_model(1)
    path = str(tmp_path / "ckpt.zip")
    m.save_states(path)
    first = open(path, "rb").read()
    with pytest.raises(TypeError):
        m.save_states(path, aux_states={"bad": object()})
    assert open(path, "rb").read() == first  # the failed save left the old file intact
    m.save_states(path, aux_states={"epoch": 1})
    assert os.listdir(str(tmp_path)) == ["ckpt.zip"]  # no temporary files left behind
    with pytest.raises(ValueError, match="name of a model state"):
        m.save_states(path, aux_states={"linear1.W": 1})


def _corruptions(path):
    data = open(path, "rb").read()
    yield "truncated", data[:len(data) // 2]
    yield "garbage", b"not a zip file at all" * 10
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF
    yield "bit-flip", bytes(flipped)
    yield "empty", b""


def test_damaged_checkpoints_raise_and_leave_the_model_unchanged(tmp_path):
    good = str(tmp_path / "good.zip")
    trained_model(2).save_states(good)
    m = trained_model(1)
    before = params(m)
    for kind, blob in _corruptions(good):
        bad = str(tmp_path / ("%s.zip" % kind))
        with open(bad, "wb") as f:
            f.write(blob)
        with pytest.raises(model.CheckpointError, match="damaged|not a singa checkpoint"):
            m.load_states(bad)
        for k, v in params(m).items():
            np.testing.assert_array_equal(v, before[k], err_msg=kind)
    assert issubclass(model.CheckpointError, ValueError)
    with pytest.raises(FileNotFoundError):
        m.load_states(str(tmp_path / "missing.zip"))
    # a zip without the checkpoint members
    other = str(tmp_path / "other.zip")
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(model.CheckpointError, match="not a singa checkpoint"):
        m.load_states(other)


def test_mismatched_checkpoints_raise_and_leave_the_model_unchanged(tmp_path):
    path = str(tmp_path / "wide.zip")
    trained_model(1, hidden=H + 1).save_states(path)
    m = trained_model(1)
    before = params(m)
    with pytest.raises(model.CheckpointError, match=r"linear1\.W.*\(5, 17\).*\(5, 16\)"):
        m.load_states(path)
    for k, v in params(m).items():
        np.testing.assert_array_equal(v, before[k])

    class Bigger(MLP):
        def __init__(self):
            super().__init__()
            self.linear3 = layer.Linear(C)

        def forward(self, x):
            return self.linear3(super().forward(x))

    big = Bigger()
    big.compile([tensor.Tensor((2, D))], is_train=False)
    small = str(tmp_path / "small.zip")
    trained_model(1).save_states(small)
    with pytest.raises(model.CheckpointError, match=r"lacks linear3\.W"):
        big.load_states(small)
    bigger = str(tmp_path / "big.zip")
    big.save_states(bigger)
    with pytest.raises(model.CheckpointError, match=r"no state named linear3\.W"):
        m.load_states(bigger)
    fresh = MLP()
    with pytest.raises(model.CheckpointError, match="compile"):
        fresh.load_states(small)


def _rewrite_checkpoint(src, dst, edit):
    """Copies checkpoint ``src`` to ``dst`` after ``edit(arrays, attrs)`` changed its content
    (arrays keep their order: the loader meets them in that order)."""
    with zipfile.ZipFile(src) as zf:
        attrs = json.loads(zf.read("states_attr.json"))
        with np.load(io.BytesIO(zf.read("tensor_dict.npz"))) as npz:
            arrays = {k: npz[k] for k in npz.files}
    edit(arrays, attrs)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr("tensor_dict.npz", buf.getvalue())
        zf.writestr("states_attr.json", json.dumps(attrs))


def test_a_bad_last_entry_leaves_the_model_entirely_unchanged(tmp_path):
    """Validation happens before any copy: a checkpoint whose entries are all good except the
    LAST one (the one a validate-while-copying loader would meet after copying the others)."""
    good = str(tmp_path / "good.zip")
    trained_model(2).save_states(good, include_optimizer=False)  # the model's entries only
    with zipfile.ZipFile(good) as zf:
        with np.load(io.BytesIO(zf.read("tensor_dict.npz"))) as npz:
            order = list(npz.files)
            saved = {k: npz[k] for k in order}
    last = order[-1]
    assert len(order) == 4 and last == "linear2.b"

    def widen_last(arrays, attrs):
        arrays[last] = np.zeros(C + 1, F32)
        attrs[last]["shape"] = [C + 1]  # consistent with its array: only the model rejects it

    bad = str(tmp_path / "bad_last.zip")
    _rewrite_checkpoint(good, bad, widen_last)
    m = trained_model(1)
    before = params(m)
    assert not np.array_equal(before["linear1.W"], saved["linear1.W"])
    with pytest.raises(model.CheckpointError, match=r"linear2\.b.*\(4,\).*\(3,\)"):
        m.load_states(bad)
    for k, v in params(m).items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
    # the good file still loads completely
    m.load_states(good)
    for k, v in params(m).items():
        np.testing.assert_array_equal(v, saved[k], err_msg=k)


@pytest.mark.parametrize("kind", ["shape-disagrees", "extra-attribute", "missing-attribute"])
def test_checkpoint_attributes_must_agree_with_the_arrays(tmp_path, kind):
    """states_attr.json and tensor_dict.npz describe the same states with the same shapes; a
    file where they disagree is damaged, even if the arrays alone would fit the model."""
    good = str(tmp_path / "good.zip")
    trained_model(2).save_states(good)

    def edit(arrays, attrs):
        if kind == "shape-disagrees":
            attrs["linear1.b"]["shape"] = [H + 1]
        elif kind == "extra-attribute":
            attrs["linear3.W"] = dict(attrs["linear1.W"])
        else:
            del attrs["linear2.b"]

    bad = str(tmp_path / "bad.zip")
    _rewrite_checkpoint(good, bad, edit)
    m = trained_model(1)
    before = params(m)
    with pytest.raises(model.CheckpointError, match="inconsistent"):
        m.load_states(bad)
    for k, v in params(m).items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)


def test_load_into_a_graph_model_is_used_by_the_replay(tmp_path):
    dev = device.create_cpu_device(29)
    eager, graph = twin_models(OPTIMIZERS["sgd-momentum"], dev)
    tx, ty = placeholders(dev)
    data = list(batches(3))
    tx.copy_from_numpy(data[0][0])
    ty.copy_from_numpy(data[0][1])
    graph(tx, ty)  # records the graph
    path = str(tmp_path / "e.zip")
    eager.save_states(path)
    graph.load_states(path)
    assert_same_params(eager, graph, rtol=0, atol=0)
    eager.optimizer = OPTIMIZERS["sgd-momentum"]()
    graph_opt_state = graph.optimizer.get_states()
    eager.optimizer.set_states({"step_counter": graph_opt_state["step_counter"],
                                "moments": {k: v.clone() for k, v in
                                            graph_opt_state["moments"].items()}})
    for x, y in data[1:]:
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _, e_loss = eager(tx, ty)
        _, g_loss = graph(tx, ty)
        np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-6)
    dev.ResetGraph()


# ---- the seed documents' models ----------
class CNN(model.Model):
    """model-graph.md's CNN, unchanged but for the image size."""

    def __init__(self, num_classes=10, num_channels=1):
        super(CNN, self).__init__()
        self.conv1 = layer.Conv2d(num_channels, 20, 5, padding=0, activation="RELU")
        self.conv2 = layer.Conv2d(20, 50, 5, padding=0, activation="RELU")
        self.linear1 = layer.Linear(500)
        self.linear2 = layer.Linear(num_classes)
        self.pooling1 = layer.MaxPool2d(2, 2, padding=0)
        self.pooling2 = layer.MaxPool2d(2, 2, padding=0)
        self.relu = layer.ReLU()
        self.flatten = layer.Flatten()
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.conv1(x)
        y = self.pooling1(y)
        y = self.conv2(y)
        y = self.pooling2(y)
        y = self.flatten(y)
        y = self.linear1(y)
        y = self.relu(y)
        y = self.linear2(y)
        return y

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


@needs_nn
@needs_softmax_ce
def test_model_graph_md_cnn_graph_matches_eager():
    dev = device.create_cpu_device(30)
    batch, size, classes = 4, 16, 10
    eager, graph = CNN(), CNN()
    for m in (eager, graph):
        m.set_optimizer(opt.SGD(lr=0.005, momentum=0.9, weight_decay=1e-5))
    tx = tensor.Tensor((batch, 1, size, size), dev, tensor.float32)
    ty = tensor.Tensor((batch, classes), dev, tensor.int32)
    eager.compile([tx], is_train=True, use_graph=False, sequential=False)
    graph.compile([tx], is_train=True, use_graph=True, sequential=False)
    graph.set_params(eager.get_params())
    assert graph.conv2.W.shape == (50, 20, 5, 5) and graph.linear1.W.shape == (50, 500)
    rng = np.random.default_rng(3)
    for _ in range(3):
        tx.copy_from_numpy(rng.standard_normal((batch, 1, size, size)).astype(F32))
        ty.copy_from_numpy(np.eye(classes, dtype=np.int32)[rng.integers(0, classes, batch)])
        _, e_loss = eager(tx, ty)
        _, g_loss = graph(tx, ty)
        np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-5)
    assert_same_params(eager, graph, rtol=1e-5, atol=1e-6)
    dev.ResetGraph()


@needs_nn
@needs_softmax_ce
def test_autograd_md_cnn_with_layers():
    """autograd.md's 'Operation + Layer' CNN (autograd.Conv2d etc.), unchanged but for sizes."""
    conv1 = autograd.Conv2d(1, 32, 3, padding=1, bias=False)
    bn1 = autograd.BatchNorm2d(32)
    pooling1 = autograd.MaxPool2d(3, 1, padding=1)
    conv21 = autograd.Conv2d(32, 16, 3, padding=1)
    conv22 = autograd.Conv2d(32, 16, 3, padding=1)
    bn2 = autograd.BatchNorm2d(32)
    linear = autograd.Linear(32 * 8 * 8, 10)
    pooling2 = autograd.AvgPool2d(3, 1, padding=1)

    def forward(x, t):
        y = conv1(x)
        y = autograd.relu(y)
        y = bn1(y)
        y = pooling1(y)
        y1 = conv21(y)
        y2 = conv22(y)
        y = autograd.cat((y1, y2), 1)
        y = autograd.relu(y)
        y = bn2(y)
        y = pooling2(y)
        y = autograd.flatten(y)
        y = linear(y)
        loss = autograd.softmax_cross_entropy(y, t)
        return loss, y

    rng = np.random.default_rng(5)
    x_train = rng.standard_normal((8, 1, 8, 8)).astype(F32)
    y_train = np.eye(10, dtype=F32)[rng.integers(0, 10, 8)]
    sgd = opt.SGD(0.05, momentum=0.9)
    autograd.training = True
    losses = []
    for epoch in range(3):
        inputs = tensor.Tensor(data=x_train, stores_grad=False)
        targets = tensor.Tensor(data=y_train, requires_grad=False, stores_grad=False)
        loss, y = forward(inputs, targets)
        for p, gp in autograd.backward(loss):
            sgd.update(p, gp)
        losses.append(float(N(loss)[0]))
    assert losses[-1] < losses[0]
    # standalone layers name their parameters as SINGA does; the optimizer still keeps one
    # momentum buffer per tensor (7 weights and biases, 2 batch-norm scales and biases)
    for layer_ in (conv1, conv21, conv22, linear):
        assert sorted(layer_.get_params()) in (["W"], ["W", "b"])
    assert len(sgd.moments) == 11
    assert len({id(m) for m in sgd.moments.values()}) == 11


class SmallResNet(model.Model):
    """Convolution, batch norm, a residual addition, both poolings and a linear classifier."""

    def __init__(self, classes=4):
        super().__init__()
        self.conv1 = layer.Conv2d(8, 3, padding=1, bias=False)
        self.bn1 = layer.BatchNorm2d()
        self.relu = layer.ReLU()
        self.conv2 = layer.Conv2d(8, 3, padding=(1, 1, 1, 1), bias=False)
        self.bn2 = layer.BatchNorm2d()
        self.add = layer.Add()
        self.pool = layer.MaxPool2d(2)
        self.avg = layer.AvgPool2d(3, stride=1, pad_mode="SAME_UPPER")
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(classes)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.add(self.bn2(self.conv2(y)), y))
        return self.fc(self.flatten(self.avg(self.pool(y))))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


@needs_nn
@pytest.mark.parametrize("sequential", [False, True])
def test_cnn_with_batchnorm_graph_matches_eager(sequential):
    dev = device.create_cpu_device(32)
    eager, graph = SmallResNet(), SmallResNet()
    for m in (eager, graph):
        m.set_optimizer(opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-4))
    tx = tensor.Tensor((4, 3, 8, 8), dev)
    eager.compile([tx], is_train=True, use_graph=False)
    graph.compile([tx], is_train=True, use_graph=True, sequential=sequential)
    graph.set_states(eager.get_states())
    assert "bn1.running_mean" in graph.get_states()
    rng = np.random.default_rng(9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the batch of 3 records the graph again
        for n in (4, 4, 3, 3, 4):
            x = tensor.from_numpy(rng.standard_normal((n, 3, 8, 8)).astype(F32), dev)
            y = tensor.from_numpy(rng.integers(0, 4, n).astype(np.int32), dev)
            e_out, e_loss = eager(x, y)
            g_out, g_loss = graph(x, y)
            assert g_out.shape == (n, 4)
            np.testing.assert_allclose(N(g_loss), N(e_loss), rtol=1e-5)
    for k, v in eager.get_states().items():
        np.testing.assert_allclose(N(graph.get_states()[k]), N(v), rtol=1e-5, atol=1e-6,
                                   err_msg=k)
    # evaluation uses the running statistics the replays updated
    eager.eval()
    graph.eval()
    np.testing.assert_allclose(N(graph(x)), N(eager(x)), rtol=1e-5, atol=1e-5)
    dev.ResetGraph()


@needs_nn
def test_checkpoint_keeps_batchnorm_running_statistics(tmp_path):
    src = SmallResNet()
    src.set_optimizer(opt.SGD(lr=0.05))
    rng = np.random.default_rng(10)
    x = tensor.from_numpy(rng.standard_normal((4, 3, 8, 8)).astype(F32))
    y = tensor.from_numpy(rng.integers(0, 4, 4).astype(np.int32))
    src.compile([x], is_train=True, use_graph=False)
    src(x, y)
    path = str(tmp_path / "resnet.zip")
    src.save_states(path)
    dst = SmallResNet()
    dst.compile([x], is_train=False)
    dst.load_states(path)
    states = src.get_states()
    assert any(k.endswith("running_var") for k in states)
    for k, v in dst.get_states().items():
        np.testing.assert_array_equal(N(v), N(states[k]), err_msg=k)


def test_eager_steps_release_the_previous_step_when_the_caller_holds_its_results():
    """Operators keep what they saved (backward may run twice on one loss, as SINGA allows), so
    an eager Model frees the previous step's saved tensors when the next step starts: holding
    every step's (out, loss) must not hold every step's activations."""
    dev = device.create_cpu_device()
    net = MLP(hidden=512)
    net.set_optimizer(opt.SGD(lr=0.01))
    tx, ty = placeholders(dev, batch=256)
    net.compile([tx], is_train=True, use_graph=False)
    peaks, held = [], []
    for x, y in batches(4, batch=256):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        held.append(net(tx, ty))
        peaks.append(dev.mem_stats()["peak_in_use"])
    # one step's activations are 256 x 512 floats (0.5 MiB) per saved tensor: without the
    # release, the peak grows by about that much at every held step
    assert peaks[-1] - peaks[1] < 256 * 512 * 4, peaks
    # the held results keep their values, and the latest loss can still run backward
    assert np.isfinite(N(held[-1][1])).all()
    autograd.backward(held[-1][1])
