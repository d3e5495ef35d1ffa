"""Random small models trained eagerly and in a recorded graph, and exported to ONNX: what
must agree does (tools/fuzz_api.py's `model.train` and `model.onnx` targets; its harness runs
the cases and classifies the outcomes).

    .venv/bin/python tools/fuzz_api.py --only model --calls 200

A case is a layer stack drawn for an image (N, C, H, W) or a vector (N, F) input (convolutions
of any stride and padding, batch norm, ReLU/Tanh/GELU, max/average pooling, dropout, layer
norm, flatten, linear), a loss, an optimizer, a graph order (BFS or serial), a precision (float32
or bfloat16 mixed precision), for the graph twin sometimes a memory budget (a fraction of its
unconstrained plan, met by recomputation), and a few batches whose size may change between
steps (1 included: batch norm of one sample). Twin models start from the
same states on two devices seeded alike, one eager, one with the graph; every loss, output and
final state must match (float32 tolerance: the graph may fuse or reorder). A stack that does not
fit its input must fail in both modes alike (a clean error, the harness checks which).
"""
import random
import re

import numpy as np


class Mismatch(Exception):
    """Two computations that must agree did not; ``outcome`` names the fuzzer's outcome."""
    outcome = "graph"


class GraphMismatch(Mismatch):
    """The graph-mode twin computed something else than the eager one."""


class ExportMismatch(Mismatch):
    """The model's ONNX export, run by onnxruntime or imported back by sonnx, computed
    something else than the model (or onnxruntime refused the file)."""
    outcome = "onnx"


IMAGE_LAYERS = ["conv", "conv", "bn", "relu", "tanh", "maxpool", "avgpool", "dropout"]
VECTOR_LAYERS = ["linear", "linear", "relu", "gelu", "layernorm", "dropout", "tanh", "bn1d"]


def draw(r):
    """A case: a dict of plain values, reproducible from the random.Random r."""
    image = r.random() < 0.6
    spec = {"image": image, "classes": r.choice([1, 2, 5]),
            "batches": [r.choice([1, 2, 3, 4])] * 2 + [r.choice([1, 2, 3, 4])],
            "sequential": r.random() < 0.5, "optimizer": r.choice(["sgd", "momentum", "adam"]),
            "loss": r.choice(["softmax_ce", "mse"]),
            # both twins in one precision; the graph twin alone under a memory budget (met by
            # recomputation, bit-identical by design; one no plan reaches is retried at the least
            # the refusal states), over 7 steps: the measured costs replan at the sixth
            "precision": "bfloat16" if r.random() < 0.2 else "float32",
            "budget": r.choice([None, None, 0.5, 0.8])}
    if spec["budget"] is not None:
        spec["batches"] += [spec["batches"][-1]] * 4
    if image:
        spec["input"] = (r.choice([1, 3]), r.choice([3, 4, 5, 8]))
        pool = IMAGE_LAYERS
    else:
        spec["input"] = (r.choice([1, 3, 8]),)
        pool = VECTOR_LAYERS
    layers = []
    for _ in range(r.choice([1, 2, 3, 4, 5])):
        kind = r.choice(pool)
        if kind == "conv":
            layers.append(("conv", r.choice([1, 2, 4]), r.choice([1, 2, 3]), r.choice([1, 2]),
                           r.choice([0, 1, "SAME_UPPER"])))
        elif kind in ("maxpool", "avgpool"):
            layers.append((kind, r.choice([1, 2, 3]), r.choice([1, 2])))
        elif kind == "linear":
            layers.append(("linear", r.choice([1, 3, 6])))
        elif kind == "dropout":
            layers.append(("dropout", r.choice([0.1, 0.5])))
        else:
            layers.append((kind,))
    spec["layers"] = layers
    return spec


def _net(spec):
    from singa import layer, model

    class Net(model.Model):
        def __init__(self):
            super(Net, self).__init__()
            self.stack = []
            for i, (kind, *p) in enumerate(spec["layers"]):
                if kind == "conv":
                    pad = p[3] if isinstance(p[3], int) else 0
                    mode = p[3] if isinstance(p[3], str) else "NOTSET"
                    lay = layer.Conv2d(p[0], p[1], stride=p[2], padding=pad, pad_mode=mode)
                elif kind == "maxpool":
                    lay = layer.MaxPool2d(p[0], p[1])
                elif kind == "avgpool":
                    lay = layer.AvgPool2d(p[0], p[1])
                elif kind == "linear":
                    lay = layer.Linear(p[0])
                elif kind == "dropout":
                    lay = layer.Dropout(p[0])
                elif kind == "bn":
                    lay = layer.BatchNorm2d()
                elif kind == "bn1d":
                    lay = layer.BatchNorm2d()  # SINGA's batch norm normalises axis 1 of (N, F)
                elif kind == "layernorm":
                    lay = layer.LayerNorm()
                else:
                    lay = {"relu": layer.ReLU, "tanh": layer.Tanh, "gelu": layer.GELU}[kind]()
                setattr(self, "l%d" % i, lay)
                self.stack.append(lay)
            self.flatten = layer.Flatten()
            self.head = layer.Linear(spec["classes"])
            self.ce = layer.SoftMaxCrossEntropy()
            self.mse = layer.MeanSquareError()

        def forward(self, x):
            for lay in self.stack:
                x = lay(x)
            return self.head(self.flatten(x))

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.ce(out, y) if spec["loss"] == "softmax_ce" else self.mse(out, y)
            self.optimizer(loss)
            return out, loss

        def set_optimizer(self, optimizer):
            self.optimizer = optimizer
    return Net()


def _optimizer(name):
    from singa import opt
    return {"sgd": lambda: opt.SGD(lr=0.05), "momentum": lambda: opt.SGD(lr=0.05, momentum=0.9),
            "adam": lambda: opt.Adam(lr=0.01)}[name]()


def _batches(spec, seed):
    from singa import tensor
    rng = np.random.default_rng(seed)
    out = []
    for n in spec["batches"]:
        x = rng.standard_normal((n,) + tuple(spec["input"][:1]) +
                                ((spec["input"][1],) * 2 if spec["image"] else ())
                                ).astype(np.float32)
        if spec["loss"] == "softmax_ce":
            y = rng.integers(0, spec["classes"], n).astype(np.int32)
        else:
            y = rng.standard_normal((n, spec["classes"])).astype(np.float32)
        out.append((x, y, tensor.int32 if y.dtype == np.int32 else tensor.float32))
    return out


def _train(spec, use_graph, batches, init):
    """(losses, outputs, final states, initial states) of one twin."""
    from singa import device, tensor
    dev = device.create_cpu_device(7)
    net = _net(spec)
    net.set_optimizer(_optimizer(spec["optimizer"]))
    x0 = tensor.Tensor(batches[0][0].shape, dev)
    net.compile([x0], is_train=True, use_graph=use_graph, sequential=spec["sequential"],
                precision=spec.get("precision", "float32"),
                memory_budget=spec.get("budget") if use_graph else None)
    if init is not None:
        net.set_states(init)
    start = {k: tensor.to_numpy(v).copy() for k, v in net.get_states().items()}
    losses, outs = [], []
    for x, y, ydt in batches:
        tx = tensor.Tensor(x.shape, dev)
        tx.copy_from_numpy(x)
        ty = tensor.Tensor(y.shape, dev, ydt)
        ty.copy_from_numpy(y)
        out, loss = net(tx, ty)
        losses.append(tensor.to_numpy(loss).copy())
        outs.append(tensor.to_numpy(out).copy())
    states = {k: tensor.to_numpy(v).copy() for k, v in net.get_states().items()}
    return losses, outs, states, start


def _close(a, b):
    return a.shape == b.shape and np.allclose(a, b, rtol=2e-4, atol=2e-5, equal_nan=True)


def _least_budget(spec, batches, init, oom):
    """The graph twin trained at the least budget each refusal states. A budget no plan
    reaches is refused with the least that works for that step's graph (the most
    recomputation); a step of a larger batch, recorded again, may need more, and says so: each
    refusal must then ask for more than the budget it refused."""
    from singa import singa_wrap
    budget = None
    for _ in range(len(batches) + 1):
        least = re.search(r"needs at least (\d+) bytes", str(oom))
        if least is None:
            raise GraphMismatch("the budget was refused without the least that works: %s" % oom)
        if budget is not None and int(least.group(1)) <= budget:
            raise GraphMismatch("a budget of %d bytes, the least a refusal stated, is refused "
                                "stating %s: %s" % (budget, least.group(1), oom))
        budget = int(least.group(1))
        try:
            return _train(dict(spec, budget=budget), True, batches, init)
        except singa_wrap.OutOfMemoryError as again:
            oom = again
    raise GraphMismatch("more budget refusals than steps: %s" % oom)


def run(spec, seed=0):
    """Trains the eager twin, then the graph twin from its initial states; raises
    GraphMismatch where they differ, or the eager twin's error (which the graph twin must raise
    too, as the same class)."""
    from singa import singa_wrap
    batches = _batches(spec, seed)
    budget_refused = singa_wrap.OutOfMemoryError if spec.get("budget") is not None else ()
    try:
        eager = _train(spec, False, batches, None)
    except Exception as e:  # noqa: BLE001  the graph twin must fail alike
        try:
            _train(spec, True, batches, None)
        except type(e):
            raise e
        except budget_refused:  # the budget refused the first step, before the eager error
            raise e
        except Exception as g:  # noqa: BLE001
            raise GraphMismatch("eager raised %s: %s; the graph raised %s: %s"
                                % (type(e).__name__, e, type(g).__name__, g))
        raise GraphMismatch("eager raised %s: %s; the graph computed" % (type(e).__name__, e))
    try:
        graph = _train(spec, True, batches, eager[3])
    except budget_refused as oom:
        graph = _least_budget(spec, batches, eager[3], oom)
    except Exception as g:  # noqa: BLE001
        raise GraphMismatch("eager computed; the graph raised %s: %s" % (type(g).__name__, g))
    for step, (a, b) in enumerate(zip(eager[0], graph[0])):
        if not _close(a, b):
            raise GraphMismatch("step %d: loss %s eager, %s graph" % (step, a, b))
    for step, (a, b) in enumerate(zip(eager[1], graph[1])):
        if not _close(a, b):
            raise GraphMismatch("step %d: outputs differ (max |diff| %g)"
                                % (step, np.nanmax(np.abs(a - b)) if a.shape == b.shape else -1))
    for k in eager[2]:
        if not _close(eager[2][k], graph[2][k]):
            raise GraphMismatch("final state %s differs" % k)
    return eager[0]


def export(spec, seed=0):
    """Exports the model (traced in training mode, as SINGA's examples do) with sonnx.to_onnx,
    then compares its eval-mode outputs with onnxruntime's run of the file and with sonnx's
    import of it. Raises ExportMismatch where they differ, or where onnxruntime rejects the
    file; the model's own errors (a stack that does not fit) propagate."""
    import onnxruntime as ort
    from singa import device, sonnx, tensor
    x = _batches(spec, seed)[0][0]
    dev = device.create_cpu_device(7)
    net = _net(spec)
    tx = tensor.Tensor(x.shape, dev)
    tx.copy_from_numpy(x)
    net.compile([tx], is_train=False, use_graph=False)
    net.train()
    m = sonnx.to_onnx([tx], [net.forward(tx)])
    net.eval()
    ours = tensor.to_numpy(net.forward(tx))
    try:
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    except Exception as e:  # noqa: BLE001  onnxruntime's own exception classes
        raise ExportMismatch("onnxruntime rejected the export: %s: %s"
                             % (type(e).__name__, str(e)[:300]))
    back = sonnx.prepare(m, dev).run([x])[0]
    back = tensor.to_numpy(back) if isinstance(back, tensor.Tensor) else np.asarray(back)
    for what, got in (("singa's eval forward", ours), ("sonnx's import", back)):
        if not _close(np.asarray(got), np.asarray(ref)):
            raise ExportMismatch("%s %s vs onnxruntime %s (max |diff| %s)" % (
                what, np.shape(got), np.shape(ref),
                np.nanmax(np.abs(got - ref)) if np.shape(got) == np.shape(ref) else "-"))
    return ours


def describe(spec):
    return "model(%s)" % ", ".join("%s=%r" % kv for kv in sorted(spec.items()))


if __name__ == "__main__":
    print(describe(draw(random.Random(0))))
