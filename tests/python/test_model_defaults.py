"""Model defaults and checkpoint value types that SINGA code relies on (found by mutation
testing: TESTING.md)."""
import numpy as np
import pytest

from singa import layer, model, opt, tensor


class _Net(model.Model):
    def __init__(self):
        super(_Net, self).__init__()
        self.fc = layer.Linear(3)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc(x)

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


def _x():
    return tensor.from_numpy(np.random.RandomState(0).randn(4, 5).astype(np.float32))


def test_compile_trains_by_default():
    m = _Net()
    m.set_optimizer(opt.SGD(lr=0.1))
    m.eval()
    m.compile([_x()])  # SINGA 3.3: compile(inputs, is_train=True, use_graph=False, ...)
    assert m.training is True
    m.compile([_x()], is_train=False)
    assert m.training is False


def test_python_number_states_come_back_with_their_type(tmp_path):
    m = _Net()
    m.set_optimizer(opt.SGD(lr=0.1))
    m.compile([_x()], is_train=True, use_graph=False)
    path = str(tmp_path / "ckpt.zip")
    m.save_states(path, aux_states={"flag": True, "epoch": 3, "best": 0.25})
    aux = m.load_states(path)
    assert aux["flag"] is True
    assert aux["epoch"] == 3 and type(aux["epoch"]) is int
    assert aux["best"] == 0.25 and type(aux["best"]) is float
    assert list(tmp_path.iterdir()) == [tmp_path / "ckpt.zip"]  # no temporary file left behind


def test_a_failed_save_leaves_no_temporary_file(tmp_path):
    m = _Net()
    m.set_optimizer(opt.SGD(lr=0.1))
    m.compile([_x()], is_train=True, use_graph=False)
    target = tmp_path / "ckpt.zip"
    target.mkdir()  # os.replace(file, directory) fails after the temporary file is written
    (target / "keep").write_text("x")
    try:
        m.save_states(str(target))
    except OSError:
        pass
    else:
        raise AssertionError("saving over a directory must raise OSError")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.zip"]


class _Fwd(model.Model):
    def __init__(self, seed):
        super(_Fwd, self).__init__()
        self.fc = layer.Linear(3)
        self.seed = seed

    def forward(self, x):
        return self.fc(x)

    def train_one_batch(self, x):
        return self.forward(x)


def test_two_graph_models_on_one_device_each_replay_their_own_graph():
    x = _x()
    outs = {}
    models = []
    for seed in (1, 2):
        m = _Fwd(seed)
        m.compile([x], is_train=True, use_graph=True)
        w = np.random.RandomState(seed).randn(5, 3).astype(np.float32)
        m.fc.W.copy_from_numpy(w)
        m.fc.b.copy_from_numpy(np.zeros(m.fc.b.shape, np.float32))
        outs[seed] = tensor.to_numpy(x) @ w
        models.append(m)
    for _ in range(2):  # alternate: each call must run that model's own operations
        for m in models:
            np.testing.assert_allclose(tensor.to_numpy(m(x)), outs[m.seed], rtol=1e-5, atol=1e-5)


class _Two(_Net):
    def __init__(self):
        super(_Two, self).__init__()
        self.fc2 = layer.Linear(2)

    def forward(self, x):
        return self.fc2(self.fc(x))


def test_loading_extra_states_names_only_them(tmp_path):
    big = _Two()
    big.set_optimizer(opt.SGD(lr=0.1))
    big.compile([_x()], is_train=True, use_graph=False)
    path = str(tmp_path / "big.zip")
    big.save_states(path)
    small = _Net()
    small.set_optimizer(opt.SGD(lr=0.1))
    small.compile([_x()], is_train=True, use_graph=False)
    try:
        small.load_states(path)
    except ValueError as e:
        msg = str(e)
    else:
        raise AssertionError("a checkpoint with states the model lacks must not load")
    assert "no state named fc2.W, fc2.b" in msg
    assert "lacks" not in msg  # nothing is missing: only the extra states are named


def test_a_graph_reset_by_hand_between_steps_is_recorded_again():
    # SINGA code may call dev.ResetGraph() (or record other operations with EnableGraph) between
    # two steps of a graph model: the next step must run the model's operations again, not the
    # emptied (or foreign) graph.
    x = _x()
    dev = x.device
    m = _Fwd(0)
    m.compile([x], is_train=True, use_graph=True)
    rs = np.random.RandomState(3)
    for meddle in ("reset", "record"):
        w = rs.randn(5, 3).astype(np.float32)
        m.fc.W.copy_from_numpy(w)
        m.fc.b.copy_from_numpy(np.zeros(3, np.float32))
        np.testing.assert_allclose(tensor.to_numpy(m(x)), tensor.to_numpy(x) @ w, rtol=1e-5,
                                   atol=1e-5)
        if meddle == "reset":
            dev.ResetGraph()
        else:
            dev.EnableGraph(True)
            tensor.relu(x)
            dev.EnableGraph(False)
        w2 = rs.randn(5, 3).astype(np.float32)
        m.fc.W.copy_from_numpy(w2)
        np.testing.assert_allclose(tensor.to_numpy(m(x)), tensor.to_numpy(x) @ w2, rtol=1e-5,
                                   atol=1e-5)


def test_graph_version_changes_with_every_recorded_operation_and_reset():
    x = _x()
    dev = x.device
    v0 = dev.graph_version()
    dev.EnableGraph(True)
    try:
        tensor.relu(x)
        v1 = dev.graph_version()
        tensor.relu(x)
        v2 = dev.graph_version()
    finally:
        dev.EnableGraph(False)
    tensor.relu(x)  # eager: records nothing
    assert dev.graph_version() == v2
    dev.ResetGraph()
    v3 = dev.graph_version()
    assert len({v0, v1, v2, v3}) == 4


def test_errors_start_with_the_method_that_raised():
    # messages name the op first ("compile: ...", "load_states: ..."), as every singa error does
    m = _Net()
    try:
        m.compile("x")
    except TypeError as e:
        assert str(e).startswith("compile: expected a non-empty list of Tensors"), str(e)
    else:
        raise AssertionError("compile('x') must raise")


def _compiled(features=5):
    m = _Net()
    m.set_optimizer(opt.SGD(lr=0.1))
    m.compile([tensor.from_numpy(np.zeros((4, features), np.float32))], is_train=True,
              use_graph=False)
    return m


def test_load_states_errors_start_with_load_states(tmp_path):
    import zipfile
    other = str(tmp_path / "other.zip")
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "hello")
    m = _compiled()
    with pytest.raises(model.CheckpointError) as e:
        m.load_states(other)
    assert str(e.value).startswith("load_states: %r is not a singa checkpoint" % other)
    assert str(e.value).endswith("inside)")
    path = str(tmp_path / "wide.zip")
    _compiled(features=6).save_states(path)
    with pytest.raises(model.CheckpointError) as e:
        m.load_states(path)
    assert str(e.value).startswith("load_states: %r holds 'fc.W' of shape (6, 3)" % path)
    assert str(e.value).endswith("shape (5, 3) (load_states(..., strict=False) loads what "
                                 "fits and reports the rest)")


def test_compile_leaves_the_device_buffering_as_it_found_it():
    x = _x()
    dev = x.device
    for buffering in (True, False):
        m = _Fwd(0)
        dev.EnableGraph(buffering)
        try:
            m.compile([x], is_train=True, use_graph=True)
            assert dev.graph_enabled() is buffering
        finally:
            dev.EnableGraph(False)
            dev.ResetGraph()


def test_a_dropped_graph_releases_the_inputs_it_recorded():
    from singa import device
    dev = device.create_cpu_device(7)
    n = 1 << 18  # a 1 MiB input, far above everything else on this device

    def batch():
        return tensor.from_numpy(np.ones((n // 5, 5), np.float32), dev)

    a, b = _Fwd(0), _Fwd(1)
    a.compile([batch()], is_train=True, use_graph=True)
    b.compile([tensor.from_numpy(np.ones((2, 5), np.float32), dev)], is_train=True,
              use_graph=True)
    a(batch())   # a records, holding the input it recorded (the caller dropped it)
    assert dev.mem_stats()["in_use"] >= n * 4
    b(tensor.from_numpy(np.ones((2, 5), np.float32), dev))  # b's graph replaces a's
    assert dev.mem_stats()["in_use"] < n * 4 // 2, dev.mem_stats()
    dev.ResetGraph()


def test_a_model_without_forward_or_step_says_which_method_to_define():
    class Bare(model.Model):
        pass

    m = Bare()
    with pytest.raises(NotImplementedError) as e:
        m.forward(_x())
    assert str(e.value) == "Bare must define forward()"
    with pytest.raises(NotImplementedError) as e:
        m.train_one_batch(_x())
    assert str(e.value) == "Bare must define train_one_batch()"
