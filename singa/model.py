"""Model: a Layer that trains, with an optional computational graph (Apache SINGA 3.x's
singa.model).

    class MLP(model.Model):
        def __init__(self):
            super().__init__()
            self.fc1 = layer.Linear(100)
            self.relu = layer.ReLU()
            self.fc2 = layer.Linear(10)
            self.loss = layer.SoftMaxCrossEntropy()

        def forward(self, x):
            return self.fc2(self.relu(self.fc1(x)))

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.loss(out, y)
            self.optimizer(loss)
            return out, loss

    m = MLP()
    m.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    m.compile([tx], is_train=True, use_graph=True, sequential=False)
    for x, y in batches:
        tx.copy_from_numpy(x); ty.copy_from_numpy(y)
        out, loss = m(tx, ty)                    # train_one_batch, replayed from the graph
    m.save_states("ckpt.zip", aux_states={"epoch": 3})
    aux = m.load_states("ckpt.zip")

Note: graph mode
  The first training call with the graph on records train_one_batch (dev.EnableGraph(True), run
  it, dev.EnableGraph(False)), drops the autograd records of its results, collects garbage (so the
  memory of dropped temporaries is recyclable), then runs the graph (dev.RunGraph). Later calls
  only replay it and return the same output tensors, updated in place. Inputs: data copied into
  the recorded input tensors (tx.copy_from_numpy) is what the replay reads; other tensors of the
  same shapes and dtypes are copied into the recorded ones first; a different shape or dtype
  records the graph again (with a warning, once). A device holds one graph: a model that records
  on a device invalidates the graph another model recorded there (that model records again on
  its next call). If recording fails (bad input shapes), the device leaves buffering and the
  graph is reset: nothing ran, so the model and its optimizer are unchanged. If a replay fails
  (a value error found while running, e.g. a label out of range), the graph is reset and the next
  call records it again; operations that ran before the failure keep their effect.
"""
import gc
import io
import json
import os
import tempfile
import warnings
import weakref
import zipfile
from functools import wraps

import numpy as np

from . import _state
from . import autograd
from . import graph as _graph
from . import layer
from . import singa_wrap as singa
from . import tensor
from .errors import CheckTypeError, CheckpointError, CheckpointNotFound
from .layers import base as _layer_base
from .tensor import Tensor

__all__ = ["Model", "ModelMeta", "CheckpointError", "CheckpointNotFound"]


# device -> the model whose recorded graph the device holds now
_graph_owner = weakref.WeakValueDictionary()


def _invalidate_graph(dev, new_owner=None):
    """The device's graph is about to be reset or replaced: its current owner must record
    again."""
    owner = _graph_owner.get(dev)
    if owner is not None and owner is not new_owner:
        owner._drop_buffer()
        _graph_owner.pop(dev, None)


def _tensors_in(values, out):
    for v in values:
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            _tensors_in(v, out)
        elif isinstance(v, dict):
            _tensors_in(v.values(), out)
    return out


def _remove_creators(results):
    for t in _tensors_in([results], []):
        t.creator = None


def _buffer_operation(func):
    """Wraps train_one_batch: eager, or record once and replay (see the module note)."""

    @wraps(func)
    def train_one_batch(self, *args, **kwargs):
        if self.__dict__.get("_in_step"):  # super().train_one_batch() from an override
            return func(self, *args, **kwargs)
        self.__dict__["_in_step"] = True
        _layer_base._active_models.append(self)
        try:
            if self.graph_mode and self.training:
                return self._run_graph(func, args, kwargs)
            # Operators keep what they saved after backward (SINGA code may run backward twice
            # on one loss), so the previous eager step's activations would stay alive while
            # this step runs: release them now that a new step starts.
            # Weak references: results the caller dropped free their graph at once.
            prev = [r() for r in self.__dict__.pop("_eager_results", ())]
            if any(t is not None for t in prev):
                autograd.release_graph(*(t for t in prev if t is not None))
            out = func(self, *args, **kwargs)
            if self.training:
                self.__dict__["_eager_results"] = [weakref.ref(t) for t in _tensors_in([out], [])]
            return out
        finally:
            _layer_base._active_models.pop()
            self.__dict__["_in_step"] = False

    return train_one_batch


class ModelMeta(layer.LayerMeta):
    """Wraps ``train_one_batch`` of every Model class with the graph logic (the hook is Apache
    SINGA's ``ModelMeta.buffer_operation(func)``)."""

    buffer_operation = staticmethod(_buffer_operation)

    def __new__(cls, name, bases, attr):
        if "train_one_batch" in attr:
            attr["train_one_batch"] = ModelMeta.buffer_operation(attr["train_one_batch"])
        return super(ModelMeta, cls).__new__(cls, name, bases, attr)


class Model(layer.Layer, metaclass=ModelMeta):
    """Base class of trainable models: define ``forward`` and ``train_one_batch``."""

    # checkpoint layout (Apache SINGA's): a zip holding these two members
    TENSOR_DICT_FILENAME = "/tensor_dict.npz"
    STATES_ATTR_FILENAME = "/states_attr.json"
    MODEL_STATE_TYPE = 0
    AUX_STATE_TYPE = 1

    def __init__(self):
        super(Model, self).__init__()
        self.training = True
        self.graph_mode = True
        self.sequential = False
        self._drop_buffer()

    def _is_model(self):
        return True

    def _drop_buffer(self):
        d = self.__dict__
        d["_buffered"] = False
        d["_results"] = None
        d["_buffer_inputs"] = None
        d["_buffer_device"] = None
        d["_buffer_version"] = None

    # ---- setup -------------------------------------------------------------------------------
    def compile(self, inputs, is_train=True, use_graph=False, sequential=False,
                check_finite=None):
        """Creates every parameter by a dry forward on ``inputs`` (placeholder Tensors whose
        values are not read: the forward is recorded, not run, and the record dropped), then
        sets the training and graph modes. ``check_finite=True`` turns on the inputs' device's
        NaN/Inf check (``Device.SetCheckFinite``): the first operation producing NaN or Inf, in
        eager or graph mode, raises ``singa.NonFiniteError`` naming it; False turns it off;
        None (default) leaves the device's setting alone."""
        if not isinstance(inputs, (list, tuple)) or not inputs or not all(
                isinstance(x, Tensor) for x in inputs):
            raise CheckTypeError("compile: expected a non-empty list of Tensors (placeholders), "
                                 "got %r" % (inputs,))
        dev = inputs[0].device
        if check_finite is not None:
            dev.SetCheckFinite(bool(check_finite))
        _invalidate_graph(dev)
        self._drop_buffer()
        was = dev.graph_enabled()
        _layer_base._active_models.append(self)
        dev.EnableGraph(True)
        try:
            self.forward(*inputs)
        finally:
            dev.EnableGraph(was)
            dev.ResetGraph()
            _layer_base._active_models.pop()
        self.train(is_train)
        self.graph(use_graph, sequential)

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer

    def forward(self, *input):
        raise NotImplementedError("%s must define forward()" % type(self).__name__)

    def train_one_batch(self, *input, **kwargs):
        raise NotImplementedError("%s must define train_one_batch()" % type(self).__name__)

    def train(self, mode=True):
        """Training mode (mode=True) or evaluation mode; sets autograd.training too."""
        self.training = bool(mode)
        _state.training = bool(mode)

    def eval(self):
        self.train(mode=False)

    def graph(self, mode=True, sequential=False):
        """Turns the computational graph on or off; sequential runs its operations in the order
        they were recorded instead of a BFS order."""
        self.graph_mode = bool(mode)
        self.sequential = bool(sequential)

    def __get_name__(self):
        return type(self).__name__

    def __call__(self, *input, **kwargs):
        if self.training:
            return self.train_one_batch(*input, **kwargs)
        return self.forward(*input, **kwargs)

    # ---- the graph ---------------------------------------------------------------------------
    def _run_graph(self, func, args, kwargs):
        # keyword tensors by name, so that a later call may pass them in another order
        inputs = _tensors_in(list(args) + [kwargs[k] for k in sorted(kwargs)], [])
        if not inputs:
            raise ValueError("%s.train_one_batch: graph mode needs at least one input Tensor"
                             % type(self).__name__)
        dev = inputs[0].device
        d = self.__dict__
        if d["_buffered"] and not self._reuse_buffer(dev, inputs):
            if _graph_owner.get(dev) is self:
                dev.ResetGraph()
                _graph_owner.pop(dev, None)
            self._drop_buffer()
        if not d["_buffered"]:
            self._record(dev, func, args, kwargs, inputs)
        try:
            dev.RunGraph(self.sequential)
        except BaseException:
            # e.g. a label out of range, found when the loss runs: start from a clean graph
            dev.ResetGraph()
            _graph_owner.pop(dev, None)
            self._drop_buffer()
            raise
        return d["_results"]

    def _reuse_buffer(self, dev, inputs):
        """True if the recorded graph fits ``inputs``; copies their data into the recorded input
        tensors when they are other tensors."""
        d = self.__dict__
        recorded = d["_buffer_inputs"]
        # The device's graph must still be the one recorded here: another model, compile() or a
        # user's dev.ResetGraph() / EnableGraph(True) in between changes its version.
        if not d["_buffer_device"] == dev or dev.graph_version() != d["_buffer_version"] or \
                len(recorded) != len(inputs):
            return False
        sig = [(tuple(t.shape), t.dtype) for t in inputs]
        if sig != [(tuple(c.shape()), c.data_type()) for c in recorded]:
            if not d.get("_warned_reshape"):
                d["_warned_reshape"] = True
                warnings.warn("%s: the inputs changed shape or dtype (now %s); recording the "
                              "computational graph again" % (type(self).__name__, sig),
                              RuntimeWarning, stacklevel=4)
            return False
        for t, c in zip(inputs, recorded):
            if t.data is not c:
                c.CopyData(t.data)
        return True

    def _record(self, dev, func, args, kwargs, inputs):
        _invalidate_graph(dev, self)
        dev.ResetGraph()
        dev.EnableGraph(True)
        try:
            results = func(self, *args, **kwargs)
        except BaseException:
            dev.EnableGraph(False)
            dev.ResetGraph()
            raise
        dev.EnableGraph(False)
        _remove_creators(results)
        d = self.__dict__
        d["_results"] = results
        d["_buffer_inputs"] = [t.data for t in inputs]
        d["_buffer_device"] = dev
        d["_buffer_version"] = dev.graph_version()
        d["_buffered"] = True
        _graph_owner[dev] = self
        # Drawings of the graph show "conv1.W", "input[0]", "result[1]" instead of block ids.
        _graph.name_blocks(self, inputs, results)
        del results
        gc.collect()

    # ---- checkpoints -------------------------------------------------------------------------
    def save_states(self, fpath, aux_states={}):
        """Writes the model's states (parameters and e.g. running means) and ``aux_states``
        (name -> Tensor, numpy array or number) to the zip file ``fpath``, atomically: a
        temporary file in the same folder replaces ``fpath`` only once complete."""
        states = self.get_states()
        arrays, attrs = {}, {}
        for kind, items in ((self.MODEL_STATE_TYPE, states), (self.AUX_STATE_TYPE, aux_states)):
            for k, v in items.items():
                if k in attrs:
                    raise ValueError("save_states: aux state %r has the name of a model state"
                                     % (k,))
                arr, pytype = _to_array(k, v)
                arrays[k] = arr
                attrs[k] = {"state_type": kind, "shape": list(arr.shape),
                            "dtype": v.dtype if isinstance(v, Tensor) else str(arr.dtype),
                            "pytype": pytype}
        npz = io.BytesIO()
        np.savez(npz, **arrays)
        folder = os.path.dirname(os.path.abspath(fpath))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".zip", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
                    zf.writestr(os.path.basename(self.TENSOR_DICT_FILENAME), npz.getvalue())
                    zf.writestr(os.path.basename(self.STATES_ATTR_FILENAME), json.dumps(attrs))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, fpath)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    def load_states(self, fpath):
        """Restores the model's states from a file written by save_states and returns its
        auxiliary states. Everything is checked (the file, every name and shape) before anything
        is copied: on any error the model is unchanged. Raises FileNotFoundError, or
        CheckpointError (a ValueError) for a damaged or mismatched file."""
        if not os.path.isfile(fpath):
            raise CheckpointNotFound("load_states: no checkpoint file at %r" % (fpath,))
        arrays, attrs = _read_checkpoint(fpath, self)
        current = self.get_states()
        model_states, aux = {}, {}
        for k, a in arrays.items():
            if attrs[k].get("state_type", self.MODEL_STATE_TYPE) == self.MODEL_STATE_TYPE:
                model_states[k] = a
            else:
                aux[k] = _from_array(a, attrs[k])
        unknown = sorted(set(model_states) - set(current))
        missing = sorted(set(current) - set(model_states))
        if unknown or missing:
            raise CheckpointError(
                "load_states: %r does not fit %s:%s%s" % (
                    fpath, type(self).__name__,
                    " the model has no state named %s;" % ", ".join(unknown) if unknown else "",
                    " the file lacks %s" % ", ".join(missing) if missing else "")
                + ("" if current else " (create the parameters first: compile() the model)"))
        for k, a in model_states.items():
            if tuple(a.shape) != tuple(current[k].shape):
                raise CheckpointError("load_states: %r holds %r of shape %s, the model's has "
                                      "shape %s" % (fpath, k, tuple(a.shape),
                                                    tuple(current[k].shape)))
        dev = next(iter(current.values())).device if current else None
        with _layer_base.graph_paused(dev):
            for k, a in model_states.items():
                current[k].copy_from_numpy(a)
        return aux


def _to_array(name, v):
    if isinstance(v, Tensor):
        return tensor.to_numpy(v), "tensor"
    if isinstance(v, np.ndarray):
        return v, "ndarray"
    if isinstance(v, (bool, np.bool_)):
        return np.asarray(v), "bool"
    if isinstance(v, (int, np.integer)):
        return np.asarray(v), "int"
    if isinstance(v, (float, np.floating)):
        return np.asarray(v), "float"
    raise TypeError("save_states: state %r must be a Tensor, a numpy array or a number, got %s"
                    % (name, type(v).__name__))


def _from_array(a, attr):
    pytype = attr.get("pytype", "tensor")
    if pytype == "ndarray":
        return a
    if pytype in ("int", "float", "bool"):
        return {"int": int, "float": float, "bool": bool}[pytype](a)
    return tensor.from_numpy(a)


def _read_checkpoint(fpath, model):
    """(arrays, attributes) of a checkpoint; CheckpointError for anything unreadable."""
    npz_name = os.path.basename(model.TENSOR_DICT_FILENAME)
    json_name = os.path.basename(model.STATES_ATTR_FILENAME)
    try:
        with zipfile.ZipFile(fpath, "r") as zf:
            names = zf.namelist()
            for member in (npz_name, json_name):
                if member not in names:
                    raise CheckpointError("load_states: %r is not a singa checkpoint (no %s "
                                          "inside)" % (fpath, member))
            attrs = json.loads(zf.read(json_name).decode("utf-8"))
            with np.load(io.BytesIO(zf.read(npz_name)), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
    except CheckpointError:
        raise
    except Exception as e:  # zipfile.BadZipFile, zlib.error, EOFError, ValueError, ...
        raise CheckpointError("load_states: %r is damaged or not a checkpoint (%s: %s)"
                              % (fpath, type(e).__name__, e)) from e
    if not isinstance(attrs, dict) or set(attrs) != set(arrays):
        raise CheckpointError("load_states: %r is inconsistent: its attributes and tensors "
                              "name different states" % (fpath,))
    for k, a in arrays.items():
        if not isinstance(attrs[k], dict) or list(a.shape) != list(attrs[k].get("shape", [])):
            raise CheckpointError("load_states: %r is inconsistent: %r has shape %s but its "
                                  "attributes say %s" % (fpath, k, a.shape, attrs[k]))
    return arrays, attrs
