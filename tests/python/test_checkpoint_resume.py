"""Checkpoints hold the optimizer's state: a run resumed in a fresh process continues bit for bit
as the uninterrupted run; aux_states takes an optimizer's get_states() (nested dicts); partial
loads (strict=False) report what they skipped, strict loads raise listing it all."""
import json
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest

import tiny_nets
from child_env import child_env
from singa import device, layer, model, opt, tensor

N_STEPS, M_STEPS = 3, 4

OPTIMIZERS = {
    "sgd-momentum": "opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-3)",
    "adam": "opt.Adam(lr=0.01, weight_decay=1e-3)",
}

# Run in a fresh interpreter: load the checkpoint into a model with other (random) parameters
# and a new optimizer, train M more steps on the same data, write the parameters.
RESUME = """
import sys
import numpy as np
import tiny_nets
from singa import device, opt
ckpt, out, use_graph, n, m = sys.argv[1], sys.argv[2], sys.argv[3] == "graph", int(sys.argv[4]), \\
    int(sys.argv[5])
net = tiny_nets.compiled(%s, device.get_default_device(), use_graph, params=False)
net.load_states(ckpt)
for x, y in tiny_nets.batches(n + m)[n:]:
    tiny_nets.step(net, x, y)
np.savez(out, **tiny_nets.params(net))
"""


def _fresh_process(optimizer, *args):
    env = child_env()
    res = subprocess.run([sys.executable, "-c", RESUME % optimizer] + [str(a) for a in args],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_resume_in_a_fresh_process_is_bit_identical(tmp_path, name, mode):
    make = lambda: eval(OPTIMIZERS[name], {"opt": opt})  # noqa: E731
    dev = device.get_default_device()
    data = tiny_nets.batches(N_STEPS + M_STEPS)
    straight = tiny_nets.compiled(make(), dev, mode == "graph")
    for x, y in data:
        tiny_nets.step(straight, x, y)
    expected = tiny_nets.params(straight)

    first = tiny_nets.compiled(make(), dev, mode == "graph")
    for x, y in data[:N_STEPS]:
        tiny_nets.step(first, x, y)
    ckpt = str(tmp_path / "ckpt.zip")
    first.save_states(ckpt)
    out = str(tmp_path / "resumed.npz")
    _fresh_process(OPTIMIZERS[name], ckpt, out, mode, N_STEPS, M_STEPS)
    with np.load(out) as got:
        assert sorted(got.files) == sorted(expected)
        for k, v in expected.items():
            np.testing.assert_array_equal(got[k], v, err_msg=k)
    # without the optimizer's state the resumed run drifts: the test can tell
    bare = str(tmp_path / "bare.zip")
    first.save_states(bare, include_optimizer=False)
    _fresh_process(OPTIMIZERS[name], bare, out, mode, N_STEPS, M_STEPS)
    with np.load(out) as got:
        assert any(not np.array_equal(got[k], v) for k, v in expected.items())
    dev.ResetGraph()


def test_the_file_holds_the_optimizers_state_beside_the_model(tmp_path):
    dev = device.create_cpu_device(71)
    m = tiny_nets.compiled(opt.Adam(lr=0.01), dev, use_graph=False)
    for x, y in tiny_nets.batches(2):
        tiny_nets.step(m, x, y)
    m.optimizer.lr = 0.003  # set by hand: a number, saved and restored
    path = str(tmp_path / "c.zip")
    m.save_states(path, aux_states={"epoch": 4})
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["states_attr.json", "tensor_dict.npz"]  # one file
        attrs = json.loads(zf.read("states_attr.json"))
    kinds = {k: a["state_type"] for k, a in attrs.items()}
    assert kinds["fc1.W"] == model.Model.MODEL_STATE_TYPE
    assert kinds["epoch"] == model.Model.AUX_STATE_TYPE
    opt_keys = sorted(k for k, t in kinds.items() if t == model.Model.OPTIMIZER_STATE_TYPE)
    params = ["fc1.W", "fc1.b", "fc2.W", "fc2.b"]
    assert opt_keys == sorted(["optimizer/step_counter"] +
                              ["optimizer/hyper_parameters/%s" % h for h in
                               ("lr", "beta_1", "beta_2", "epsilon", "weight_decay")] +
                              ["optimizer/%s/%s" % (d, p) for d in "mv" for p in params])

    other = tiny_nets.compiled(opt.Adam(lr=0.5), dev, use_graph=False, params=False)
    aux = other.load_states(path)
    assert aux == {"epoch": 4} and not aux.missing_keys and not aux.unexpected_keys
    o, src = other.optimizer, m.optimizer
    assert float(o.step_counter) == 2.0 and o.lr.init_value == 0.003
    assert float(o.lr_value) == pytest.approx(0.003)
    for d in ("m", "v"):
        for p in params:
            np.testing.assert_array_equal(tensor.to_numpy(getattr(o, d)[p]),
                                          tensor.to_numpy(getattr(src, d)[p]))


def test_aux_states_takes_an_optimizers_get_states(tmp_path):
    """The issue's call: `m.save_states(p, aux_states=sgd.get_states())` (nested dicts of
    tensors) round-trips, and set_states of a fresh optimizer continues exactly."""
    dev = device.create_cpu_device(72)
    data = tiny_nets.batches(5)
    straight = tiny_nets.compiled(opt.SGD(lr=0.05, momentum=0.9), dev, use_graph=False)
    first = tiny_nets.compiled(opt.SGD(lr=0.05, momentum=0.9), dev, use_graph=False)
    for x, y in data[:2]:
        tiny_nets.step(first, x, y)
    path = str(tmp_path / "aux.zip")
    aux_in = {"sgd": first.optimizer.get_states(), "epoch": 2,
              "nested": {"a": {"b": np.arange(3)}, "empty": {}}}
    first.save_states(path, aux_states=aux_in, include_optimizer=False)
    second = tiny_nets.compiled(opt.SGD(lr=0.05, momentum=0.9), dev, use_graph=False,
                                params=False)
    aux = second.load_states(path)
    assert set(aux) == {"sgd", "epoch", "nested"} and aux["epoch"] == 2
    np.testing.assert_array_equal(aux["nested"]["a"]["b"], np.arange(3))
    assert aux["nested"]["empty"] == {}
    assert set(aux["sgd"]["moments"]) == {"fc1.W", "fc1.b", "fc2.W", "fc2.b"}
    assert float(second.optimizer.step_counter) == 0.0  # include_optimizer=False: untouched
    second.optimizer.set_states(aux["sgd"])
    for x, y in data:
        tiny_nets.step(straight, x, y)
    for x, y in data[2:]:
        tiny_nets.step(second, x, y)
    for k, v in tiny_nets.params(straight).items():
        np.testing.assert_array_equal(tiny_nets.params(second)[k], v, err_msg=k)
    with pytest.raises(ValueError, match="two states"):
        first.save_states(path, aux_states={"a/b": 1, "a": {"b": 2}})
    with pytest.raises(TypeError, match="must be a dict"):
        first.save_states(path, aux_states=[1, 2])


class Wider(tiny_nets.Net):
    """Net with one more layer: fc3 (C -> C)."""

    def __init__(self):
        super().__init__()
        self.fc3 = layer.Linear(tiny_nets.C)

    def forward(self, x):
        return self.fc3(super().forward(x))


def _wider(dev, optimizer):
    m = Wider()
    m.set_optimizer(optimizer)
    m.compile([tensor.Tensor((tiny_nets.B, tiny_nets.D), dev)], is_train=True, use_graph=False)
    return m


def test_strict_load_lists_every_difference_and_changes_nothing(tmp_path):
    dev = device.create_cpu_device(73)
    src = tiny_nets.compiled(opt.Adam(lr=0.01), dev, use_graph=False)
    tiny_nets.step(src, *tiny_nets.batches(1)[0])
    src.fc2.b.copy_from_numpy(np.zeros(tiny_nets.C, np.float32))
    path = str(tmp_path / "src.zip")
    src.save_states(path)
    dst = _wider(dev, opt.SGD(lr=0.1, momentum=0.9))
    before = tiny_nets.params(dst)
    with pytest.raises(model.CheckpointError) as e:
        dst.load_states(path)
    msg = str(e.value)
    assert "the file lacks fc3.W, fc3.b" in msg
    assert "optimizer/m/fc1.W" in msg and "optimizer/v/fc2.b" in msg  # Adam's, not SGD's
    for k, v in tiny_nets.params(dst).items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
    assert float(dst.optimizer.step_counter) == 0.0 and not dst.optimizer.moments


def test_partial_load_reports_what_it_skipped(tmp_path):
    dev = device.create_cpu_device(74)
    src = _wider(dev, opt.SGD(lr=0.1, momentum=0.9))
    for x, y in tiny_nets.batches(2):
        tiny_nets.step(src, x, y)
    path = str(tmp_path / "wide.zip")
    src.save_states(path, aux_states={"epoch": 7})

    class Narrow(tiny_nets.Net):  # fc2 has 4 outputs instead of C: a shape mismatch
        def __init__(self):
            super().__init__()
            self.fc2 = layer.Linear(tiny_nets.C + 1)
            self.fc3 = layer.Linear(tiny_nets.C)

        def forward(self, x):
            return self.fc3(super().forward(x))

    dst = Narrow()
    dst.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    dst.compile([tensor.Tensor((tiny_nets.B, tiny_nets.D), dev)], is_train=True,
                use_graph=False)
    before = tiny_nets.params(dst)
    with pytest.raises(model.CheckpointError, match=r"fc2\.W.*\(7, 3\).*\(7, 4\)"):
        dst.load_states(path)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        aux = dst.load_states(path, strict=False)
    assert any("strict=False" in str(x.message) and "fc2.W" in str(x.message) for x in w)
    assert aux == {"epoch": 7}
    assert aux.missing_keys == [] and aux.unexpected_keys == []
    assert sorted(aux.mismatched_keys) == ["fc2.W", "fc2.b", "fc3.W",
                                           "optimizer/moments/fc2.W",
                                           "optimizer/moments/fc2.b",
                                           "optimizer/moments/fc3.W"]
    got, saved = tiny_nets.params(dst), tiny_nets.params(src)
    for k in ("fc1.W", "fc1.b", "fc3.b"):  # loaded
        np.testing.assert_array_equal(got[k], saved[k], err_msg=k)
    for k in ("fc2.W", "fc2.b", "fc3.W"):  # skipped: unchanged
        np.testing.assert_array_equal(got[k], before[k], err_msg=k)
    o = dst.optimizer
    assert float(o.step_counter) == 2.0
    assert sorted(o.moments) == ["fc1.W", "fc1.b", "fc3.b"]
    np.testing.assert_array_equal(tensor.to_numpy(o.moments["fc1.W"]),
                                  tensor.to_numpy(src.optimizer.moments["fc1.W"]))
    # the model lacks fc3: reported as unexpected
    small = tiny_nets.compiled(opt.SGD(lr=0.1, momentum=0.9), dev, use_graph=False)
    with pytest.warns(RuntimeWarning, match="no state named"):
        rep = small.load_states(path, strict=False)
    assert rep.unexpected_keys == ["fc3.W", "fc3.b", "optimizer/moments/fc3.W",
                                   "optimizer/moments/fc3.b"]
    # and a file without fc3 loaded into the wide model: missing
    spath = str(tmp_path / "small.zip")
    small.save_states(spath, include_optimizer=False)
    wide = _wider(dev, opt.SGD(lr=0.1))
    with pytest.warns(RuntimeWarning, match="lacks fc3.W, fc3.b"):
        rep = wide.load_states(spath, strict=False)
    assert rep.missing_keys == ["fc3.W", "fc3.b"] and rep == {}


def test_a_file_without_an_optimizer_or_a_model_without_one(tmp_path):
    dev = device.create_cpu_device(75)
    trained = tiny_nets.compiled(opt.SGD(lr=0.1, momentum=0.9), dev, use_graph=False)
    tiny_nets.step(trained, *tiny_nets.batches(1)[0])
    path = str(tmp_path / "t.zip")
    trained.save_states(path)
    inference = tiny_nets.Net()
    inference.compile([tensor.Tensor((tiny_nets.B, tiny_nets.D), dev)], is_train=False)
    assert inference.load_states(path) == {}  # the optimizer's entries find no optimizer
    for k, v in tiny_nets.params(trained).items():
        np.testing.assert_array_equal(tiny_nets.params(inference)[k], v)
    inference.save_states(path)  # nothing to include
    with zipfile.ZipFile(path) as zf:
        assert not any(k.startswith("optimizer/") for k in json.loads(
            zf.read("states_attr.json")))
