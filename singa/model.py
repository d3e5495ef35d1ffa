"""Model: a Layer that trains, with an optional computational graph (Apache SINGA 3.x's
singa.model).

Example::

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
import inspect
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
from .loss_scale import LossScaler
from .tensor import Tensor

__all__ = ["Model", "ModelMeta", "CheckpointError", "CheckpointNotFound", "ModelCallError",
           "NoOptimizerError", "LoadedStates"]


class ModelCallError(TypeError):
    """A model was called with arguments that do not fit its mode: in training mode
    ``m(...)`` runs train_one_batch, in evaluation mode forward (the message says which, and
    what to call instead)."""


class NoOptimizerError(AttributeError):
    """``self.optimizer`` was used (by train_one_batch) before set_optimizer."""


# device -> the model whose recorded graph the device holds now
_graph_owner = weakref.WeakValueDictionary()


def _invalidate_graph(dev, new_owner=None):
    """The device's graph is about to be reset or replaced: its current owner must record
    again."""
    owner = _graph_owner.get(dev)
    if owner is not None and owner is not new_owner:
        owner._drop_buffer()
        _graph_owner.pop(dev, None)


# class -> {method name: signature of the bound method}, for Model.__call__'s check
_signatures = weakref.WeakKeyDictionary()


def _signature(model, method):
    """The signature of model.<method> without self (cached per class), or None when it has
    none or the instance overrides the method."""
    if method in model.__dict__:
        return None
    cls = type(model)
    per_class = _signatures.setdefault(cls, {})
    if method not in per_class:
        try:
            sig = inspect.signature(getattr(cls, method))
            params = list(sig.parameters.values())
            if params and params[0].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                             inspect.Parameter.POSITIONAL_OR_KEYWORD):
                params = params[1:]  # self
            per_class[method] = sig.replace(parameters=params)
        except (TypeError, ValueError, IndexError):
            per_class[method] = None
    return per_class[method]


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


def _loss_scaler(precision, loss_scale):
    """compile()'s loss_scale argument as a LossScaler or None."""
    if loss_scale is None:
        return LossScaler() if precision == "float16" else None
    if loss_scale is False:
        return None
    if isinstance(loss_scale, LossScaler):
        return loss_scale
    raise CheckTypeError("compile: loss_scale must be None, False or an opt.LossScaler, got %r"
                         % (loss_scale,))


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
    OPTIMIZER_STATE_TYPE = 2  # beyond SINGA: save_states(..., include_optimizer=True)

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
                check_finite=None, memory_budget=None, precision="float32", loss_scale=None):
        """Creates every parameter by a dry forward on ``inputs`` (placeholder Tensors whose
        values are not read: the forward is recorded, not run, and the record dropped), then
        sets the training and graph modes. ``check_finite=True`` turns on the inputs' device's
        NaN/Inf check (``Device.SetCheckFinite``): the first operation producing NaN or Inf, in
        eager or graph mode, raises ``singa.NonFiniteError`` naming it; False turns it off;
        None (default) leaves the device's setting alone. ``memory_budget`` (graph mode):
        bytes (int) or a fraction in (0, 1] (float) of the unconstrained plan that the step's
        memory must fit, met by recomputing activations (``Device.SetMemoryBudget``; the
        results are bit-identical; what to recompute is chosen by times the graph measures on
        its steps 2-5, used from the sixth); a budget too small raises
        ``singa.OutOfMemoryError`` at the first step, stating the least that works; None (default) leaves the device's setting
        alone (no budget unless one was set). ``precision="bfloat16"``: automatic mixed
        precision (autograd/amp.py states the policy): convolutions and matrix products in
        bf16, softmax, losses and reductions in float32, float32 master weights and optimizer
        state; refused (NotImplementedError) on a CPU without avx512_bf16.
        ``precision="float16"`` (CUDA devices; refused on the host): the same in float16, with
        dynamic loss scaling. ``loss_scale``: None (default: an ``opt.LossScaler()`` for
        float16, none otherwise), an ``opt.LossScaler`` (any precision), or False (none); the
        model's optimizer then scales the loss, skips steps with inf/NaN gradients and adapts
        the scale (singa/loss_scale.py), eagerly and in the replayed graph."""
        if not isinstance(inputs, (list, tuple)) or not inputs or not all(
                isinstance(x, Tensor) for x in inputs):
            raise CheckTypeError("compile: expected a non-empty list of Tensors (placeholders), "
                                 "got %r" % (inputs,))
        dev = inputs[0].device
        autograd.amp.check_precision(precision, dev)
        self.__dict__["_precision"] = precision
        scaler, optimizer = self.__dict__.get("_loss_scaler"), self.__dict__.get("optimizer")
        if scaler is not None and getattr(optimizer, "loss_scaler", None) is scaler:
            optimizer.loss_scaler = None  # the previous compile's, attached at a step
        self.__dict__["_loss_scaler"] = _loss_scaler(precision, loss_scale)
        self._attach_loss_scaler()
        if check_finite is not None:
            dev.SetCheckFinite(bool(check_finite))
        if memory_budget is not None:
            dev.SetMemoryBudget(memory_budget)
        _invalidate_graph(dev)
        self._drop_buffer()
        was = dev.graph_enabled()
        _layer_base._active_models.append(self)
        dev.EnableGraph(True)
        try:
            with autograd.amp.autocast(precision, dev):
                self.forward(*inputs)
        finally:
            dev.EnableGraph(was)
            dev.ResetGraph()
            _layer_base._active_models.pop()
        self.train(is_train)
        self.graph(use_graph, sequential)
        self.__dict__["_compiled"] = True

    def set_optimizer(self, optimizer):
        """Sets the optimizer that ``self.optimizer(loss)`` in train_one_batch calls (an
        ``opt.Optimizer``, e.g. ``opt.SGD(lr=0.05)``, or an ``opt.DistOpt``)."""
        self.optimizer = optimizer
        self._attach_loss_scaler()

    def _attach_loss_scaler(self):
        """Hands compile()'s loss scaler to the optimizer (done again at each step: a
        checkpoint's load_states finds it there, a replaced optimizer gets it)."""
        scaler, optimizer = self.__dict__.get("_loss_scaler"), self.__dict__.get("optimizer")
        if scaler is not None and optimizer is not None:
            scaler.attach(optimizer)

    def forward(self, *input):
        """The model's computation from its inputs; subclasses define it (as for a Layer)."""
        raise NotImplementedError("%s must define forward()" % type(self).__name__)

    def train_one_batch(self, *input, **kwargs):
        """One training step: forward, the loss, ``self.optimizer(loss)``; returns what the caller
        wants back (usually ``out, loss``). Subclasses define it; ``model(x, y)`` in training mode
        calls it, and with the graph on records it once and replays it after."""
        raise NotImplementedError("%s must define train_one_batch()" % type(self).__name__)

    def train(self, mode=True):
        """Training mode (mode=True) or evaluation mode; sets autograd.training too."""
        self.training = bool(mode)
        _state.training = bool(mode)

    def eval(self):
        """Switches to evaluation mode (``train(mode=False)``): ``model(x)`` then runs forward."""
        self.train(mode=False)

    def graph(self, mode=True, sequential=False):
        """Turns the computational graph on or off; sequential runs its operations in the order
        they were recorded instead of a BFS order."""
        self.graph_mode = bool(mode)
        self.sequential = bool(sequential)

    def __get_name__(self):
        return type(self).__name__

    def __getattr__(self, name):
        if name == "optimizer":
            raise NoOptimizerError(
                "%s has no optimizer: call set_optimizer(opt.SGD(lr=...)) before training "
                "(train_one_batch uses self.optimizer(loss) for backward and the update)"
                % type(self).__name__)
        return super(Model, self).__getattr__(name)

    def __call__(self, *input, **kwargs):
        """train_one_batch(*input) in training mode (train(), compile(is_train=True), the
        default), forward(*input) in evaluation mode (eval()). Arguments that do not fit the
        method of the current mode raise ModelCallError, saying what to call instead."""
        precision = self.__dict__.get("_precision", "float32")
        if precision != "float32":
            with autograd.amp.autocast(precision, check=False):
                return self._call(input, kwargs)
        return self._call(input, kwargs)

    def _call(self, input, kwargs):
        if self.training:
            self._attach_loss_scaler()
            self._check_call("train_one_batch", input, kwargs)
            return self.train_one_batch(*input, **kwargs)
        self._check_call("forward", input, kwargs)
        return self.forward(*input, **kwargs)

    def _check_call(self, method, args, kwargs):
        sig = _signature(self, method)
        if sig is None:
            return
        # Whether a call binds depends only on how many positional arguments and which keywords
        # it passes: remembered per class, so a training step does not bind on every call.
        fits = _signatures[type(self)]
        shape = (method, len(args), frozenset(kwargs))
        if shape in fits:
            return
        try:
            sig.bind(*args, **kwargs)
            fits[shape] = True
            return
        except TypeError as e:
            why = str(e)
        name = type(self).__name__
        given = "%s(%s)" % (name, ", ".join(
            ["<%s>" % type(a).__name__ for a in args] + ["%s=..." % k for k in kwargs]))
        if method == "train_one_batch":
            compiled = "" if self.__dict__.get("_compiled") else (
                " (it was never compiled: compile([x], is_train=..., use_graph=...) creates the "
                "parameters and sets the mode; a new model starts in training mode)")
            msg = ("%s is in training mode%s, so %s runs train_one_batch%s, which does not "
                   "accept these arguments: %s. To train, pass what train_one_batch takes (e.g. "
                   "the inputs and the labels) after set_optimizer(...); for predictions call "
                   "eval() first (or forward(x) directly)."
                   % (name, compiled, given, sig, why))
        else:
            msg = ("%s is in evaluation mode (eval() or compile(..., is_train=False)), so %s "
                   "runs forward%s, which does not accept these arguments: %s. To train on a "
                   "batch call train() first (then the model runs train_one_batch); for "
                   "predictions pass only forward's inputs." % (name, given, sig, why))
        raise ModelCallError(msg)

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
    def _training_optimizer(self):
        """The optimizer whose state a checkpoint holds (the one DistOpt wraps), or None."""
        o = self.__dict__.get("optimizer")
        o = getattr(o, "opt", o)
        return o if hasattr(o, "get_states") and hasattr(o, "set_states") else None

    def save_states(self, fpath, aux_states={}, include_optimizer=True):
        """Writes the model's states (parameters and e.g. running means), ``aux_states`` (name
        -> Tensor, numpy array, number, or a dict of those, nested: e.g. an optimizer's
        get_states()) and, with include_optimizer, the state of the optimizer set by
        set_optimizer (step counter, momentum buffers, Adam's moments, the hyper-parameters
        that are numbers) to the zip file ``fpath``, atomically: a temporary file in the same
        folder replaces ``fpath`` only once complete. load_states restores all of it, so a run
        resumed from the file continues exactly as the uninterrupted run."""
        entries = [(k, v, self.MODEL_STATE_TYPE, None) for k, v in self.get_states().items()]
        for path, v in _flatten(aux_states, "aux_states"):
            entries.append(("/".join(path), v, self.AUX_STATE_TYPE, path))
        opt = self._training_optimizer() if include_optimizer else None
        if opt is not None:
            for path, v in _flatten(opt.get_states(), "the optimizer's state"):
                entries.append((_OPT_PREFIX + "/".join(path), v, self.OPTIMIZER_STATE_TYPE,
                                path))
        arrays, attrs = {}, {}
        for key, v, kind, path in entries:
            if key in attrs:
                raise ValueError("save_states: aux state %r has the name of a model state"
                                 % (key,) if attrs[key]["state_type"] == self.MODEL_STATE_TYPE
                                 else "save_states: two states are named %r" % (key,))
            arr, pytype = _to_array(key, v)
            arrays[key] = arr
            attrs[key] = {"state_type": kind, "shape": list(arr.shape),
                          "dtype": v.dtype if isinstance(v, Tensor) else str(arr.dtype),
                          "pytype": pytype}
            if path is not None and (len(path) > 1 or kind != self.AUX_STATE_TYPE):
                attrs[key]["path"] = list(path)
        _write_atomically(fpath, arrays, attrs, self)

    def load_states(self, fpath, strict=True):
        """Restores the model's states (and its optimizer's, when the file holds them and an
        optimizer is set) from a file written by save_states, and returns its auxiliary
        states (a dict, nested as saved). A file whose optimizer state finds no optimizer
        here (set_optimizer was not called) loads the model alone.

        strict=True: everything is checked (the file, every name and shape, the optimizer's
        entries) before anything is copied; any difference raises CheckpointError (a
        ValueError) listing them all, and the model is unchanged. strict=False loads what fits
        and skips the rest with a RuntimeWarning; the returned dict then tells what was
        skipped: ``missing_keys`` (states of the model the file lacks), ``unexpected_keys``
        (entries of the file the model or its optimizer has no place for) and
        ``mismatched_keys`` (same name, other shape). Raises FileNotFoundError for no file."""
        if not os.path.isfile(fpath):
            raise CheckpointNotFound("load_states: no checkpoint file at %r" % (fpath,))
        arrays, attrs = _read_checkpoint(fpath, self)
        current = self.get_states()
        model_states, aux, opt_entries = {}, {}, {}
        for k, a in arrays.items():
            kind = attrs[k].get("state_type", self.MODEL_STATE_TYPE)
            if kind == self.MODEL_STATE_TYPE:
                model_states[k] = a
            elif kind == self.OPTIMIZER_STATE_TYPE:
                opt_entries[k] = (attrs[k]["path"], a, attrs[k])
            else:
                _nest(aux, attrs[k].get("path", [k]), _from_array(a, attrs[k]))
        result = LoadedStates(aux)
        result.unexpected_keys = sorted(set(model_states) - set(current))
        result.missing_keys = sorted(set(current) - set(model_states))
        mismatched = [(k, a.shape, tuple(current[k].shape)) for k, a in model_states.items()
                      if k in current and tuple(a.shape) != tuple(current[k].shape)]
        opt = self._training_optimizer()
        opt_states = None
        if opt is not None and opt_entries:
            opt_states = _optimizer_states(opt, opt_entries, self.get_params(), result,
                                           mismatched)
        result.mismatched_keys = [k for k, _, _ in mismatched]
        msg = _describe(fpath, self, result, mismatched)
        if msg:
            if not current:
                msg += " (create the parameters first: compile() the model)"
            if strict:
                raise CheckpointError(msg + " (load_states(..., strict=False) loads what fits "
                                            "and reports the rest)")
            warnings.warn(msg + "; loaded the rest (strict=False)", RuntimeWarning, stacklevel=2)
        skip = set(result.mismatched_keys)
        dev = next(iter(current.values())).device if current else None
        with _layer_base.graph_paused(dev):
            for k, a in model_states.items():
                if k in current and k not in skip:
                    current[k].copy_from_numpy(a)
        if opt_states is not None:
            opt.set_states(opt_states)
        return result


class LoadedStates(dict):
    """What load_states returns: the auxiliary states (a dict), with the lists of what was not
    loaded: missing_keys, unexpected_keys, mismatched_keys (empty after a strict load)."""

    missing_keys = unexpected_keys = mismatched_keys = ()


_OPT_PREFIX = "optimizer/"
_EMPTY_DICT = object()  # an empty dict inside aux_states or the optimizer's state


def _flatten(d, what, prefix=()):
    """(path, leaf) for every leaf of nested dict ``d``; keys become strings."""
    if not isinstance(d, dict):
        raise TypeError("save_states: %s must be a dict, got %s" % (what, type(d).__name__))
    for k, v in d.items():
        path = prefix + (str(k),)
        if isinstance(v, dict):
            if v:
                for item in _flatten(v, what, path):
                    yield item
            else:
                yield path, _EMPTY_DICT
        else:
            yield path, v


def _nest(out, path, value):
    for k in path[:-1]:
        out = out.setdefault(k, {})
    out[path[-1]] = value


def _optimizer_states(opt, entries, params, result, mismatched):
    """The optimizer's states from the file's entries ({key: (path, array, attrs)}) in
    set_states' form, after checking them against ``opt`` and the model's ``params``; what does
    not fit goes to result.unexpected_keys / ``mismatched``. None when nothing can be loaded."""
    states = {}
    dicts = opt.state_names() if hasattr(opt, "state_names") else ()
    hypers = opt.hyper_parameter_names() if hasattr(opt, "hyper_parameter_names") else ()
    for key, (path, a, attr) in sorted(entries.items()):
        top = path[0]
        if path == ["step_counter"] or (top == "hyper_parameters" and len(path) == 2 and
                                        path[1] in hypers):
            _nest(states, path, _from_array(a, attr))
        elif top == "loss_scaler" and len(path) == 2 and \
                getattr(opt, "loss_scaler", None) is not None:
            _nest(states, path, _from_array(a, attr))
        elif top in dicts and len(path) == 1 and attr.get("pytype") == "dict":
            states.setdefault(top, {})
        elif top in dicts and len(path) == 2:
            have = getattr(opt, top).get(path[1])
            like = have if have is not None else params.get(path[1])
            if like is None:
                result.unexpected_keys.append(key)
            elif tuple(a.shape) != tuple(like.shape):
                mismatched.append((key, a.shape, tuple(like.shape)))
            else:
                _nest(states, path, a)
        else:
            result.unexpected_keys.append(key)
    if "step_counter" not in states:
        result.missing_keys.append(_OPT_PREFIX + "step_counter")
        return None
    return states


def _describe(fpath, model, result, mismatched):
    """The message for what does not fit, or "" when everything does."""
    parts = []
    if result.unexpected_keys:
        parts.append("the model (or its optimizer) has no state named %s"
                     % ", ".join(result.unexpected_keys))
    if result.missing_keys:
        parts.append("the file lacks %s" % ", ".join(result.missing_keys))
    shapes = ", ".join("%r of shape %s, the model's has shape %s" % (k, tuple(f), s)
                       for k, f, s in mismatched)
    if not parts:
        return "load_states: %r holds %s" % (fpath, shapes) if shapes else ""
    return "load_states: %r does not fit %s: %s%s" % (
        fpath, type(model).__name__, "; ".join(parts), "; it holds " + shapes if shapes else "")


def _write_atomically(fpath, arrays, attrs, model):
    """The zip of Apache SINGA's layout (tensor_dict.npz, states_attr.json), written to a
    temporary file in the same folder that then replaces ``fpath``."""
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    folder = os.path.dirname(os.path.abspath(fpath))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".zip", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr(os.path.basename(model.TENSOR_DICT_FILENAME), npz.getvalue())
                zf.writestr(os.path.basename(model.STATES_ATTR_FILENAME), json.dumps(attrs))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, fpath)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _to_array(name, v):
    if v is _EMPTY_DICT:
        return np.zeros(0, np.float32), "dict"
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
    raise TypeError("save_states: state %r must be a Tensor, a numpy array, a number or a dict "
                    "of those, got %s" % (name, type(v).__name__))


def _from_array(a, attr):
    pytype = attr.get("pytype", "tensor")
    if pytype == "ndarray":
        return a
    if pytype == "dict":
        return {}
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
        path = attrs[k].get("path")
        if (path is None and attrs[k].get("state_type") == model.OPTIMIZER_STATE_TYPE) or (
                path is not None and (not isinstance(path, list) or not path or
                                      not all(isinstance(p, str) for p in path))):
            raise CheckpointError("load_states: %r is inconsistent: %r has the path %r"
                                  % (fpath, k, path))
    return arrays, attrs
