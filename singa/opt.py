"""Optimizers: SGD, RMSProp, AdaGrad, Adam, learning-rate schedules, and DistOpt (data-parallel
training over MPI; see its section below) (Apache SINGA 3.x's singa.opt).

Example::

    sgd = opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-5)
    sgd(loss)                        # backward from loss, update every parameter, then step()
    # or, one parameter at a time (no step()):
    for p, g in autograd.backward(loss):
        sgd.update(p, g)
    adam = opt.Adam(lr=opt.ExponentialDecay(0.1, decay_steps=100, decay_rate=0.5))
    sgd.lr = 0.01                    # between steps: a number or a schedule (singa/_schedules.py)

Note: why hyper-parameters are device tensors
  With the computational graph on, a training step is recorded once and replayed from C++; Python
  code never runs again. So everything that changes from step to step lives on the device and is
  changed by core operations recorded in the graph: the step counter (step_counter), every
  hyper-parameter value (lr_value, mom_value, ... recomputed from step_counter by the schedules in
  step()), and the updates themselves (EltwiseMult, Add, Sub with a (1,)-shaped tensor broadcast).
  State tensors (momentum buffers, Adam's m and v) are created the first time a parameter is
  seen, with the device taken out of buffering, so they hold their zeros before the graph runs.
  Gradients are never modified in place: backward may still read them after yielding.
  A hyper-parameter set between steps (``sgd.lr = 0.01``) is written into its value tensor, which
  the next step (eager or replayed) reads; a change that needs other operations (a schedule, or
  a momentum or weight decay turning zero or non-zero) resets the device's graph, so the model
  records its step again.

Note: float16 (Apache SINGA 3.3's ``-p float16``)
  ``SGD(..., dtype=tensor.float16)`` updates float16 parameters (layers make them float16 for a
  float16 input) in place, as SINGA 3.3 does: no float32 master copy and no loss scaling. The
  hyper-parameter values are cast to the dtype (SINGA casts all but lr), except SGD's: its fused
  update (singa/ops/optim.h) computes in float32 and reads them as float32, so they stay float32
  (the first GPU run found float16 ones refused). Momentum buffers are zeros_like(param),
  float16. The step counter stays float32. The update runs on a GPU; on the CPU it raises
  DTypeError.

Note: state keys
  State is kept by parameter name, as in SINGA (get_states()/set_states() exchange those
  dicts). A standalone layer names its parameters "W" and "b" (SINGA's convention), so several
  standalone layers trained by one optimizer (SINGA's autograd tutorial does that) bring
  different tensors under one name; SINGA then shares one momentum buffer between them (wrong
  numbers, or a write past a buffer). __call__ and update() give the second owner of a name the
  key "<name>#1" (then "#2"...), so each tensor keeps its own state. apply() called directly
  uses the name it is given.
"""
import numbers
import sys
import weakref

import numpy as np

from . import _mpi_libs, autograd
from . import singa_wrap as singa
from ._schedules import (Constant, CosineDecay, DecayScheduler, ExponentialDecay,  # noqa: F401
                         LinearWarmup, MultiStepDecay, ReduceLROnPlateau, ScheduleError,
                         StepDecay)
from . import tensor
from .errors import CheckError, CheckShapeError, CheckTypeError
from .layers.base import graph_paused
from .loss_scale import LossScaler  # noqa: F401  (dynamic loss scaling, float16 AMP)
from .tensor import Tensor

__all__ = ["DecayScheduler", "Constant", "ExponentialDecay", "StepDecay", "MultiStepDecay",
           "CosineDecay", "LinearWarmup", "ReduceLROnPlateau", "ScheduleError", "Optimizer",
           "SGD", "RMSProp", "AdaGrad", "Adam", "DistOpt", "LossScaler"]


# ---- schedules (singa/_schedules.py) -----------------------------------------------------
def _schedule(value, what):
    if isinstance(value, DecayScheduler):
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not value >= 0:
            raise ValueError("invalid %s value: %r (must be >= 0)" % (what, value))
        return Constant(float(value))
    raise TypeError("%s must be a number or a schedule (opt.Constant, ExponentialDecay, "
                    "StepDecay...), got %s" % (what, type(value).__name__))


def _zero(sched):
    return type(sched) is Constant and sched.init_value == 0


_DTYPE_NAMES = {tensor.float32: "float32", tensor.float16: "float16", tensor.int32: "int32"}


class ParamDTypeError(singa.DTypeError, CheckError):
    """A parameter whose dtype is not the optimizer's (SINGA 3.3 asserts it, so this is also an
    AssertionError): float16 training needs SGD(..., dtype=tensor.float16)."""


# ---- the base class --------------------------------------------------------------------------
class Optimizer(object):
    """Base optimizer. ``lr`` is a number or a schedule (opt.Constant, ExponentialDecay, ...).

    Every hyper-parameter (lr, momentum, weight_decay, beta_1...) may be set between steps, to a
    number or a schedule: ``sgd.lr = 0.001``; it takes effect at the next step, eagerly and in a
    replayed graph (see the module note). Reading it gives the schedule (``Constant(0.001)``);
    its current value is the device tensor ``lr_value`` (``float(sgd.lr_value)``).

    Subclasses declare their hyper-parameters with ``_hyper`` and implement ``apply``.
    """

    # the state dicts of get_states()/set_states(), by subclass: attribute names
    _state_dicts = ()

    def __init__(self, lr, dtype=tensor.float32):
        self.dtype = dtype
        self._hypers = []  # (schedule attribute, value attribute)
        self._hyper_names = {}  # schedule attribute -> (value attribute, what it is)
        dev = tensor.get_default_device()
        with graph_paused(dev):
            self.step_counter = Tensor((1,), dev, tensor.float32)
            self.step_counter.set_value(0)
        self._cache = {}
        self._key_owner = {}  # state key -> weakref to the parameter that holds it
        self.lr = self._hyper("lr", "lr_value", lr, "learning rate")

    def _hyper(self, attr, value_attr, value, what):
        """Declares hyper-parameter ``attr``: sets its schedule and its current value tensor
        ``value_attr``; returns the schedule."""
        sched = _schedule(value, what)
        with graph_paused(self.step_counter.device):
            object.__setattr__(self, value_attr, self._evaluate(sched))
        object.__setattr__(self, attr, sched)
        self._hypers.append((attr, value_attr))
        self._hyper_names[attr] = (value_attr, what)
        return sched

    def __setattr__(self, name, value):
        hypers = self.__dict__.get("_hyper_names")
        if hypers and name in hypers and self.__dict__.get(name) is not value:
            self._set_hyper(name, value)
        else:
            object.__setattr__(self, name, value)

    def _set_hyper(self, attr, value):
        """``optimizer.<attr> = value`` between steps. A number into a number only rewrites the
        value tensor that the next step (or the replayed graph) reads. Anything else changes
        the operations a step runs (a schedule evaluates itself in step(); a zero momentum or
        weight decay skips its arithmetic), so the device's graph is reset: a model records
        its step again at its next call."""
        value_attr, what = self.__dict__["_hyper_names"][attr]
        sched = _schedule(value, what)
        old = self.__dict__[attr]
        self._validate(attr, sched)
        dev = self.step_counter.device
        same_ops = type(old) is Constant and type(sched) is Constant and (
            attr not in ("momentum", "weight_decay") or _zero(old) == _zero(sched))
        if not same_ops and dev.graph_enabled():
            raise RuntimeError(
                "%s.%s = %r changes the operations of a training step, so it cannot be set "
                "while a step is being recorded into the graph (inside train_one_batch): set it "
                "between two steps" % (type(self).__name__, attr, value))
        with graph_paused(dev):
            getattr(self, value_attr).copy_data(self._evaluate(sched))
        object.__setattr__(self, attr, sched)
        self._cache = {}
        if not same_ops:
            dev.ResetGraph()

    def _validate(self, attr, sched):
        """Checks a new value of hyper-parameter ``attr`` against the others (SGD: Nesterov)."""

    def _value(self, value_attr):
        return getattr(self, value_attr).data

    @property
    def _hyper_dtype(self):
        """The dtype of the hyper-parameter value tensors (the optimizer's dtype by default)."""
        return self.dtype

    def _evaluate(self, sched):
        """Schedule ``sched`` at the current step, as a value tensor of ``_hyper_dtype``."""
        return sched(self.step_counter).as_type(self._hyper_dtype)

    def _constant(self, attr, value=None):
        """True if schedule ``attr`` is a Constant (equal to ``value`` when given)."""
        s = getattr(self, attr)
        return type(s) is Constant and (value is None or s.init_value == value)

    # ---- the training step -------------------------------------------------------------------
    def __call__(self, loss):
        """Backward from ``loss``, update every parameter, then advance the step (through
        ``self.loss_scaler`` when one is attached: opt.LossScaler, singa/loss_scale.py)."""
        scaler = self.__dict__.get("loss_scaler")
        if scaler is not None:
            scaler.minimize(self, loss)
            return
        self.call(loss)
        self.step()

    def call(self, loss):
        """Backward from ``loss`` and update every parameter (without step())."""
        # Values cached per step (1 - beta, bias corrections) are computed afresh by each call:
        # a recording that failed midway must not leave never-computed tensors behind.
        self._cache = {}
        try:
            for p, g in autograd.backward(loss):
                self.apply(self._state_key(p), p, g)
        finally:
            self._cache = {}

    def _state_key(self, p):
        """The key of p's state: its name, or "<name>#<n>" when another live tensor already
        holds that name here (see the module note)."""
        name = p.name if p.name is not None else id(p)
        key, n = name, 0
        while True:
            ref = self._key_owner.get(key)
            owner = ref() if ref is not None else None
            if owner is None or owner is p:
                self._key_owner[key] = weakref.ref(p)
                return key
            n += 1
            key = "%s#%d" % (name, n)

    def step(self):
        """Advances step_counter by one and recomputes the scheduled hyper-parameters (as core
        operations: recorded when the device is buffering)."""
        singa.Add(self.step_counter.data, 1.0, out=self.step_counter.data)
        self._refresh()

    def _refresh(self):
        self._cache = {}
        for attr, value_attr in self._hypers:
            if not self._constant(attr):
                getattr(self, value_attr).copy_data(self._evaluate(getattr(self, attr)))

    def apply(self, param_name, param_value, param_grad):
        """Updates ``param_value`` in place from its gradient ``param_grad``."""
        raise NotImplementedError("%s.apply" % type(self).__name__)

    def update(self, param, grad):
        """Updates one parameter from its gradient (Apache SINGA's older API); no step()."""
        try:
            self.apply(self._state_key(param), param, grad)
        except BaseException:
            self._cache = {}  # as in call(): nothing half-recorded outlives a failed update
            raise

    def param_state(self, param):
        """The optimizer state of ``param``: {state name: Tensor}, named as in get_states()
        (SGD with momentum: {"moments": buffer}; Adam: {"m": ..., "v": ...}; RMSProp:
        {"running_average": ...}; SGD without momentum: {}), like PyTorch's
        ``optimizer.state[param]``. What an update of ``param`` (update(), or a step) writes is
        ``param`` and exactly these tensors. State not made yet is made now, as zeros, as the
        first update would make it, so a caller can read or save it before that update
        (opt.LossScaler saves it to undo a skipped step)."""
        key = self._state_key(param)
        return {name: self._state(getattr(self, name), key, param)
                for name in self._state_dicts if self._uses_state(name)}

    def _uses_state(self, name):
        """Whether apply() reads and writes state dict ``name`` (SGD: only with momentum)."""
        return True

    def state_names(self):
        """The names of the per-parameter state dicts, each an attribute {parameter key:
        Tensor} and a key of get_states() (SGD: ("moments",); Adam: ("m", "v")), whether or
        not this optimizer's settings use them (param_state says which do)."""
        return tuple(self._state_dicts)

    def hyper_parameter_names(self):
        """The hyper-parameters that may be set between steps ("lr", "momentum", ...), as
        declared (get_states() saves those that are numbers under "hyper_parameters")."""
        return tuple(self._hyper_names)

    def backward_and_update(self, loss):
        """Apache SINGA's name for ``optimizer(loss)``: backward from loss, then update every
        parameter."""
        self.__call__(loss)

    # ---- helpers for apply() -----------------------------------------------------------------
    def _check(self, name, p, g):
        if not isinstance(p, Tensor) or not isinstance(g, Tensor):
            raise TypeError("%s: the parameter and its gradient must be Tensors, got %s and %s"
                            % (type(self).__name__, type(p).__name__, type(g).__name__))
        if tuple(p.shape) != tuple(g.shape):
            raise CheckShapeError("%s: parameter %r has shape %s but its gradient has shape %s"
                                  % (type(self).__name__, name, tuple(p.shape),
                                     tuple(g.shape)))
        if p.dtype != self.dtype:
            raise ParamDTypeError("%s: parameter %r has dtype %s; this optimizer updates %s "
                                  "(its dtype argument, e.g. dtype=tensor.float16 for float16 "
                                  "parameters)" % (type(self).__name__, name,
                                                   _DTYPE_NAMES.get(p.dtype, p.dtype),
                                                   _DTYPE_NAMES.get(self.dtype, self.dtype)))
        if not p.device == self.step_counter.device:
            self.device_check(p, self.step_counter,
                              *[getattr(self, v) for _, v in self._hypers])

    def _state(self, store, name, p):
        """The state tensor of ``name`` in dict ``store`` (zeros the first time, created outside
        buffering); raises if it was made for a parameter of another shape."""
        buf = store.get(name)
        if buf is None:
            with graph_paused(p.device):
                buf = tensor.zeros_like(p)
            store[name] = buf
        elif tuple(buf.shape) != tuple(p.shape):
            raise singa.ShapeError(
                "%s: parameter %r has shape %s but its optimizer state has shape %s: two "
                "parameters share this name; parameter names must be unique"
                % (type(self).__name__, name, tuple(p.shape), tuple(buf.shape)))
        return buf

    def _decayed_grad(self, p, g):
        """g + weight_decay * p (a new tensor), or g itself without weight decay."""
        if self._constant("weight_decay", 0):
            return g.data
        return singa.Add(g.data, singa.EltwiseMult(p.data, self._value("decay_value")))

    def _descend(self, p, direction):
        """p -= lr * direction, in place."""
        singa.Sub(p.data, singa.EltwiseMult(direction, self._value("lr_value")), out=p.data)

    def _one_minus(self, value_attr):
        """1 - value, a (1,) tensor computed once per step."""
        key = "1-" + value_attr
        if key not in self._cache:
            self._cache[key] = singa.Sub(1.0, self._value(value_attr))
        return self._cache[key]

    def device_check(self, *inputs):
        """Moves every tensor in ``inputs`` onto the device of the first one."""
        dev = inputs[0].device
        with graph_paused(dev):
            for t in inputs[1:]:
                if not t.device == dev:
                    t.to_device(dev)
        self._cache = {}

    # ---- states ------------------------------------------------------------------------------
    def get_states(self):
        """{'step_counter': float, <state dict name>: {param name: Tensor}, ...,
        'hyper_parameters': {name: number}} (the hyper-parameters that are numbers now, e.g.
        an lr set by hand or by ReduceLROnPlateau; schedules follow from the step), and
        'loss_scaler': its state_dict() when an opt.LossScaler is attached."""
        states = {"step_counter": float(tensor.to_numpy(self.step_counter)[0])}
        for key in self._state_dicts:
            states[key] = getattr(self, key)
        states["hyper_parameters"] = {attr: float(getattr(self, attr).init_value)
                                      for attr, _ in self._hypers if self._constant(attr)}
        scaler = self.__dict__.get("loss_scaler")
        if scaler is not None:  # opt.LossScaler's state_dict(), restored by set_states
            states["loss_scaler"] = scaler.state_dict()
        return states

    def set_states(self, states):
        """Restores what get_states() returned (values are copied into the existing tensors, so
        a recorded graph keeps working). A hyper-parameter that is a number here takes the
        saved number (set another one after loading to change it); a schedule stays."""
        if "step_counter" not in states:
            raise KeyError("%s.set_states: missing 'step_counter'" % type(self).__name__)
        for key in self._state_dicts:
            current = getattr(self, key)
            for name, v in states.get(key, {}).items():
                shape = tuple(v.shape) if isinstance(v, Tensor) else np.shape(v)
                if name in current and shape != tuple(current[name].shape):
                    raise singa.ShapeError("%s.set_states: %s[%r] has shape %s, got %s"
                                           % (type(self).__name__, key, name,
                                              tuple(current[name].shape), shape))
        hypers = {k: v for k, v in states.get("hyper_parameters", {}).items()
                  if k in self._hyper_names and self._constant(k)}
        for k, v in hypers.items():
            _schedule(v, self._hyper_names[k][1])  # checks the number before anything changes
        dev = self.step_counter.device
        with graph_paused(dev):
            self.step_counter.copy_from_numpy(np.array([states["step_counter"]], np.float32))
            for key in self._state_dicts:
                current = getattr(self, key)
                for name, v in states.get(key, {}).items():
                    if name in current:
                        current[name].copy_from(v)
                    elif isinstance(v, Tensor):
                        current[name] = v.clone()
                    else:
                        current[name] = Tensor(data=np.asarray(v), device=dev, dtype=self.dtype)
            self._refresh()
        for k, v in hypers.items():
            if getattr(self, k).init_value != v:
                setattr(self, k, v)
        scaler = self.__dict__.get("loss_scaler")
        if scaler is not None and "loss_scaler" in states:
            scaler.load_state_dict(states["loss_scaler"])


# ---- the optimizers --------------------------------------------------------------------------
class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov momentum and
    weight decay (L2 penalty), as in Apache SINGA (and PyTorch, except that the momentum buffer
    starts from zero):

        g = grad + weight_decay * p
        buf = momentum * buf + (1 - dampening) * g
        g = g + momentum * buf   (nesterov)   or   g = buf
        p = p - lr * g

    Every hyper-parameter may be a number or a DecayScheduler.
    """

    _state_dicts = ("moments",)
    # the fused SGDUpdate reads lr, momentum, dampening and weight decay as float32 (also when
    # it updates float16 parameters on a GPU)
    _hyper_dtype = tensor.float32

    def __init__(self, lr=0.1, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 dtype=tensor.float32):
        super(SGD, self).__init__(lr, dtype)
        self.momentum = self._hyper("momentum", "mom_value", momentum, "momentum")
        self.dampening = self._hyper("dampening", "dam_value", dampening, "dampening")
        self.weight_decay = self._hyper("weight_decay", "decay_value", weight_decay,
                                        "weight_decay")
        self.nesterov = nesterov
        self.moments = dict()
        self._validate(None, None)

    def _validate(self, attr, sched):
        if not self.__dict__.get("nesterov"):
            return
        mom = sched if attr == "momentum" else self.momentum
        dam = sched if attr == "dampening" else self.dampening
        if mom.init_value <= 0 or dam.init_value != 0:
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def apply(self, param_name, param_value, param_grad):
        self._check(param_name, param_value, param_grad)
        buf = None
        if not self._constant("momentum", 0):
            buf = self._state(self.moments, param_name, param_value).data
        # One fused pass (singa/ops/optim.h) with the arithmetic of the formulas above.
        singa.SGDUpdate(param_value.data, param_grad.data, buf, self._value("lr_value"),
                        self._value("mom_value"), self._value("dam_value"),
                        self._value("decay_value"), self.nesterov)

    def _uses_state(self, name):
        """Whether apply() reads and writes state dict ``name`` (no momentum: no buffer)."""
        return not self._constant("momentum", 0)

    def get_states(self):
        states = super(SGD, self).get_states()
        if self._constant("momentum", 0):
            del states["moments"]
        return states


class RMSProp(Optimizer):
    """RMSProp: avg = rho * avg + (1 - rho) * g^2; p = p - lr * g / sqrt(avg + epsilon)."""

    _state_dicts = ("running_average",)

    def __init__(self, lr=0.1, rho=0.9, epsilon=1e-8, weight_decay=0, dtype=tensor.float32):
        super(RMSProp, self).__init__(lr, dtype)
        self.weight_decay = self._hyper("weight_decay", "decay_value", weight_decay,
                                        "weight_decay")
        self.rho = self._hyper("rho", "rho_value", rho, "rho")
        self.epsilon = self._hyper("epsilon", "epsilon_value", epsilon, "epsilon")
        self.running_average = dict()

    def apply(self, param_name, param_value, param_grad):
        self._check(param_name, param_value, param_grad)
        g = self._decayed_grad(param_value, param_grad)
        avg = self._state(self.running_average, param_name, param_value).data
        singa.EltwiseMult(avg, self._value("rho_value"), out=avg)
        singa.Add(avg, singa.EltwiseMult(singa.Square(g), self._one_minus("rho_value")), out=avg)
        denom = singa.Sqrt(singa.Add(avg, self._value("epsilon_value")))
        self._descend(param_value, singa.Div(g, denom))


class AdaGrad(Optimizer):
    """AdaGrad: history += g^2; p = p - lr * g / sqrt(history + epsilon)."""

    _state_dicts = ("history",)

    def __init__(self, lr=0.1, epsilon=1e-8, weight_decay=0, dtype=tensor.float32):
        super(AdaGrad, self).__init__(lr, dtype)
        self.weight_decay = self._hyper("weight_decay", "decay_value", weight_decay,
                                        "weight_decay")
        self.epsilon = self._hyper("epsilon", "epsilon_value", epsilon, "epsilon")
        self.history = dict()

    def apply(self, param_name, param_value, param_grad):
        self._check(param_name, param_value, param_grad)
        g = self._decayed_grad(param_value, param_grad)
        hist = self._state(self.history, param_name, param_value).data
        singa.Add(hist, singa.Square(g), out=hist)
        denom = singa.Sqrt(singa.Add(hist, self._value("epsilon_value")))
        self._descend(param_value, singa.Div(g, denom))


class Adam(Optimizer):
    """Adam with bias correction (t = number of steps taken + 1):

        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g^2
        p = p - lr * (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon)
    """

    _state_dicts = ("m", "v")

    def __init__(self, lr=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0,
                 dtype=tensor.float32):
        super(Adam, self).__init__(lr, dtype)
        self.weight_decay = self._hyper("weight_decay", "decay_value", weight_decay,
                                        "weight_decay")
        self.beta_1 = self._hyper("beta_1", "beta_1_value", beta_1, "beta_1")
        self.beta_2 = self._hyper("beta_2", "beta_2_value", beta_2, "beta_2")
        self.epsilon = self._hyper("epsilon", "epsilon_value", epsilon, "epsilon")
        self.m = dict()
        self.v = dict()

    def _corrections(self):
        """(1 - beta_1^t, 1 - beta_2^t), computed once per step."""
        if "bias" not in self._cache:
            t = singa.Add(self.step_counter.data, 1.0)
            self._cache["bias"] = (
                singa.Sub(1.0, singa.Pow(self._value("beta_1_value"), t)),
                singa.Sub(1.0, singa.Pow(self._value("beta_2_value"), t)))
        return self._cache["bias"]

    # float32 parameters take one fused pass (singa/ops/optim.h: AdamUpdate, the same float32
    # arithmetic op by op as the unfused lines below, which float16 parameters run); False
    # forces the unfused ops (the tests compare the two).
    fused = True

    def apply(self, param_name, param_value, param_grad):
        self._check(param_name, param_value, param_grad)
        m = self._state(self.m, param_name, param_value).data
        v = self._state(self.v, param_name, param_value).data
        if self.fused and self.dtype == tensor.float32:
            singa.AdamUpdate(param_value.data, param_grad.data, m, v, self._value("lr_value"),
                             self._value("beta_1_value"), self._value("beta_2_value"),
                             self._value("epsilon_value"), self._value("decay_value"),
                             self.step_counter.data, not self._constant("weight_decay", 0))
            return
        g = self._decayed_grad(param_value, param_grad)
        singa.EltwiseMult(m, self._value("beta_1_value"), out=m)
        singa.Add(m, singa.EltwiseMult(g, self._one_minus("beta_1_value")), out=m)
        singa.EltwiseMult(v, self._value("beta_2_value"), out=v)
        singa.Add(v, singa.EltwiseMult(singa.Square(g), self._one_minus("beta_2_value")), out=v)
        c1, c2 = self._corrections()
        m_hat = singa.Div(m, c1)
        v_hat = singa.Div(v, c2)
        denom = singa.Add(singa.Sqrt(v_hat), self._value("epsilon_value"))
        self._descend(param_value, singa.Div(m_hat, denom))


# ---- distributed training (MPI) -------------------------------------------------------------
# DistOpt: data-parallel training over MPI (Apache SINGA 3.3's opt.DistOpt).
#
#     # started with: mpirun -np 2 python train.py
#     from singa import opt
#     sgd = opt.DistOpt(opt.SGD(lr=0.05, momentum=0.9))
#     print(sgd.global_rank, sgd.world_size)   # outside mpirun: 0 and 1
#     x_shard = x[sgd.global_rank::sgd.world_size]
#     ...
#     sgd(loss)                                # backward, all-reduce the gradients, update
#
# Each rank computes the gradients of its own batch; DistOpt sums them over the ranks
# (singa_wrap.Communicator, MPI) and updates with sum / world_size, so with a loss averaged over the
# batch N ranks on batch B take the step one process takes on the N*B concatenated batch. Every
# collective is an operation of the device: with the graph on it is recorded and replayed.
#
# Overlap (beyond SINGA; DistOpt(..., overlap=True), the default): backward_and_update and
# backward_and_update_half fuse the gradients, in the order backward completes them, into
# buckets of about `threshold` elements (default 2097152 = 8 MB of float32), and start each
# bucket's all-reduce as soon as it is full (Communicator.startBucket: the gradients are copied,
# then reduced on the communicator's thread) while backward goes on; the waits
# (Communicator.waitBucket) come after backward, before the update. Both are operations of the
# device, so a graph records and replays them. The numbers are those of overlap=False, which
# reduces after backward as SINGA's code does (SINGA's fused_all_reduce path).
#
# Differences from SINGA 3.3, on purpose:
#   * No collective writes a gradient while backward runs. SINGA reduces the gradient tensors in
#     place as they come, and backward may still read a tensor it has yielded (a gradient shared
#     with the flow to the inputs: SINGA would then propagate already-reduced values). Here the
#     overlapped start only reads (copies) the gradients, and the waits that write them, like
#     the blocking collectives of overlap=False, come after backward, so every rank's backward is
#     exact.
#   * backward_and_partial_update updates from the parameters' local gradients after backward, for
#     the same reason (SINGA updates a weight that backward still reads).
#   * fused_all_reduce(..., send=False) stages nothing: the tensors are packed when the send=True
#     call runs (same result; SINGA stages early to overlap copies on CUDA streams).
# A rank that raises an uncaught exception stops the whole job (MPI_Abort from sys.excepthook,
# installed by the first DistOpt of a world larger than 1), so the other ranks do not wait forever
# in a collective.

_hook_installed = False


def _install_abort_hook():
    """Prints the traceback, then MPI_Abort: mpirun stops every other rank at once."""
    global _hook_installed
    if _hook_installed:
        return
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            previous(kind, value, tb)
            sys.stderr.write("singa DistOpt: uncaught %s on this rank; aborting the MPI job\n"
                             % kind.__name__)
            sys.stderr.flush()
        finally:
            singa.mpi_abort(1)

    sys.excepthook = hook
    _hook_installed = True


class DistOpt(object):
    """Wraps an optimizer for data-parallel training (SINGA 3.3's API; see the module doc).

    Args:
        opt: the wrapped optimizer (default: opt.SGD()).
        nccl_id: an NcclIdHolder (NCCL, CUDA builds only); None: the MPI world of mpirun.
        local_rank, world_size: with nccl_id only.
        buffSize: elements of the fusion buffer (a larger fused list is reduced in rounds).
        overlap: (beyond SINGA) reduce gradient buckets while backward runs in
            backward_and_update(_half); False: after backward, as SINGA. Same numbers.

    Attributes: world_size, local_rank, global_rank, overlap; last_step_buckets and
    last_step_elements: the buckets and gradient elements all-reduced by the last training step
    (recorded when the step was run in Python, i.e. eagerly or while a graph was recorded).
    """

    def __init__(self, opt=None, nccl_id=None, local_rank=None, world_size=None,
                 buffSize=4194304, overlap=True):
        if not singa.USE_DIST and nccl_id is None:
            raise NotImplementedError(
                "DistOpt: this singa was built without MPI (singa_wrap.USE_DIST is False); "
                "install openmpi-bin libopenmpi-dev and rebuild")
        self.opt = SGD() if opt is None else opt
        if nccl_id is None:
            _mpi_libs.load()  # the [dist] extra's libmpi where the loader cannot find one
            self.communicator = singa.Communicator(buffSize)
        else:
            self.communicator = singa.Communicator(local_rank, world_size, nccl_id, buffSize)
        self.world_size = self.communicator.world_size
        self.local_rank = self.communicator.local_rank
        self.global_rank = self.communicator.global_rank
        self.overlap = bool(overlap)
        self.last_step_buckets = self.last_step_elements = 0
        if self.world_size > 1:
            _install_abort_hook()

    def __call__(self, loss):
        self.backward_and_update(loss)

    # The wrapped optimizer's hyper-parameters read and set through the wrapper
    # (``dist.lr = 0.01``), instead of a new attribute of the wrapper that nothing reads.
    def __getattr__(self, name):
        opt = self.__dict__.get("opt")
        if opt is not None and name in opt.__dict__.get("_hyper_names", {}):
            return getattr(opt, name)
        raise AttributeError("'DistOpt' object has no attribute %r" % (name,))

    def __setattr__(self, name, value):
        opt = self.__dict__.get("opt")
        if opt is not None and name in opt.__dict__.get("_hyper_names", {}):
            setattr(opt, name, value)
        else:
            object.__setattr__(self, name, value)

    def update(self, param, grad):
        """Updates ``param`` from the all-reduced (summed) ``grad``: grad / world_size."""
        grad /= self.world_size
        self.opt.update(param, grad)

    # ---- collectives (in place, sums over the ranks) -------------------------------------------
    def all_reduce(self, tensor):
        """Sums the core tensor ``tensor`` over the ranks, in place."""
        self.communicator.synch(tensor)

    def fused_all_reduce(self, tensor, send=True):
        """Sums a list of core tensors over the ranks in place, as one buffer; with
        ``send=False`` the call does nothing (SINGA's flag for a bucket not yet full)."""
        self.communicator.fusedSynch(singa.VecTensor(tensor), send)

    def all_reduce_half(self, tensor):
        """As all_reduce, the data travelling as float16."""
        self.communicator.synchHalf(tensor)

    def fused_all_reduce_half(self, tensor, send=True):
        """As fused_all_reduce, the data travelling as float16."""
        self.communicator.fusedSynchHalf(singa.VecTensor(tensor), send)

    def sparsification(self, tensor, accumulation, spars, topK):
        """Sparse all-reduce: ``|g| >= spars`` (topK False) or the spars fraction of largest ``|g|``;
        ``accumulation`` (or None) keeps what was not sent, for the next step."""
        if accumulation is None:
            self.communicator.sparsification(tensor, spars, topK)
        else:
            self.communicator.sparsification(tensor, accumulation, spars, topK)

    def fused_sparsification(self, tensor, accumulation, spars, topK):
        """As sparsification, for a list of core tensors sent as one buffer."""
        tensor = singa.VecTensor(tensor)
        if accumulation is None:
            self.communicator.fusedSparsification(tensor, spars, topK)
        else:
            self.communicator.fusedSparsification(tensor, accumulation, spars, topK)

    def wait(self):
        """Apache SINGA's wait for the collectives issued so far. Here they are operations of
        the device, ordered with the others (a read of their results waits for them), so it
        returns at once."""
        self.communicator.wait()

    # ---- training steps ------------------------------------------------------------------------
    @staticmethod
    def _buckets(items, size, threshold):
        """SINGA's fusion: an item larger than threshold alone (as ("one", [item])); smaller ones
        together until their sum exceeds threshold (as ("fused", [items]))."""
        out, group, acc = [], [], 0
        for it in items:
            n = size(it)
            if n > threshold:
                out.append(("one", [it]))
                continue
            group.append(it)
            acc += n
            if acc > threshold:
                out.append(("fused", group))
                group, acc = [], 0
        if group:
            out.append(("fused", group))
        return out

    def _count(self, buckets, elements):
        self.last_step_buckets, self.last_step_elements = buckets, elements

    def _update_all(self, plist):
        for p, g in plist:
            self.update(p, g)
        self.opt.step()

    def _reduce_and_update(self, plist, threshold, one, fused):
        buckets = self._buckets(plist, lambda pg: pg[1].size(), threshold)
        for kind, group in buckets:
            if kind == "one":
                one(group[0][1].data)
            else:
                fused([g.data for _, g in group])
        self.wait()
        self._count(len(buckets), sum(g.size() for _, g in plist))
        self._update_all(plist)

    def _overlapped_update(self, pairs, threshold, half):
        """Starts a bucket's all-reduce each time the gradients yielded so far reach threshold
        elements (while backward, which produces ``pairs``, goes on), then waits for them all
        and updates."""
        comm = self.communicator
        plist, group, size, handles = [], [], 0, []
        for p, g in pairs:
            plist.append((p, g))
            group.append(g.data)
            size += g.size()
            if size >= threshold:
                handles.append(comm.startBucket(group, half))
                group, size = [], 0
        if group:
            handles.append(comm.startBucket(group, half))
        for h in handles:
            comm.waitBucket(h, 1.0)
        self._count(len(handles), sum(g.size() for _, g in plist))
        self._update_all(plist)

    def backward_and_update(self, loss, threshold=2097152):
        """Backward, all-reduce the gradients (fused up to threshold elements), update."""
        if self.overlap:
            self._overlapped_update(autograd.backward(loss), threshold, False)
            return
        self._reduce_and_update(list(autograd.backward(loss)), threshold, self.all_reduce,
                                self.fused_all_reduce)

    def backward_and_update_half(self, loss, threshold=2097152, clipping=False, clip_Value=100):
        """As backward_and_update, the gradients travelling as float16; optionally clipped to
        [-clip_Value, clip_Value] first."""
        pairs = autograd.backward(loss)
        if clipping:
            pairs = ((p, autograd.clip(g, -clip_Value, clip_Value)) for p, g in pairs)
        if self.overlap:
            self._overlapped_update(pairs, threshold, True)
            return
        self._reduce_and_update(list(pairs), threshold, self.all_reduce_half,
                                self.fused_all_reduce_half)

    def backward_and_partial_update(self, loss, threshold=2097152):
        """Local update of every parameter, then one partition of the parameters (a bucket, in
        turn from step to step) is averaged over the ranks."""
        if not hasattr(self, "partial"):
            self.partial = 0
        self.partial += 1
        plist = list(autograd.backward(loss))
        for p, g in plist:
            self.opt.update(p, g)
        buckets = self._buckets([p for p, _ in plist], lambda p: p.size(), threshold)
        reduced = []
        if self.partial <= len(buckets):
            kind, group = buckets[self.partial - 1]
            if kind == "one":
                self.all_reduce(group[0].data)
            else:
                self.fused_all_reduce([p.data for p in group])
            reduced = group
        self.wait()
        for r in reduced:
            r /= self.world_size
        if self.partial >= len(buckets):
            self.partial = 0
        self.opt.step()

    def backward_and_sparse_update(self, loss, threshold=2097152, spars=0.05, topK=False,
                                   corr=True):
        """Backward, sparse all-reduce of the gradients (see sparsification), update. With
        ``corr`` each bucket keeps a local accumulation of what it did not send."""
        if corr and not hasattr(self, "sparsInit"):
            self.gradAccumulation = []
            self.sparsInit = False
        plist = list(autograd.backward(loss))
        for k, (kind, group) in enumerate(
                self._buckets(plist, lambda pg: pg[1].size(), threshold)):
            grads = [g.data for _, g in group]
            acc = None
            if corr:
                if not self.sparsInit:
                    p = group[0][0]
                    flag = p.device.graph_enabled()
                    p.device.EnableGraph(False)
                    t = tensor.Tensor((sum(g.size() for _, g in group),), p.device, p.dtype)
                    t.set_value(0.0)
                    self.gradAccumulation.append(t)
                    p.device.EnableGraph(flag)
                acc = self.gradAccumulation[k].data
            if kind == "one":
                self.sparsification(grads[0], acc, spars, topK)
            else:
                self.fused_sparsification(grads, acc, spars, topK)
        self.wait()
        for p, g in plist:
            self.update(p, g)
        if corr:
            self.sparsInit = True
        self.opt.step()
