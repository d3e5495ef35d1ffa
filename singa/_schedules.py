"""Hyper-parameter schedules (singa.opt re-exports them all; import them from there).

    from singa import opt
    sgd = opt.SGD(lr=opt.LinearWarmup(opt.CosineDecay(0.1, decay_steps=1000), warmup_steps=100))
    sgd.lr = 0.01                               # or a number, set between two steps
    plateau = opt.ReduceLROnPlateau(sgd, factor=0.5, patience=3)
    plateau.step(val_loss)                      # after each epoch, from Python

Note: a schedule is recorded, not called
  ``sched(step)`` maps the optimizer's step counter, a (1,)-shaped float32 Tensor on the device,
  to a (1,)-shaped value Tensor with core operations only. With the computational graph on, the
  optimizer's step() (which evaluates the schedules) is recorded once and replayed from C++:
  Python code in ``call`` never runs again, so a value read from the step in Python (float(step),
  int(step), step.item(), tensor.to_numpy(step), ``if step > 10:``) would stay frozen at the
  value it had while recording. The step handed to ``call`` therefore refuses to be read:
  ScheduleError (a TypeError) says how to write the schedule with tensor operations. Values
  decided in Python between steps (ReduceLROnPlateau, a hand-set ``optimizer.lr = 0.01``) are
  numbers the optimizer writes into its device tensor, which the replay reads.

The step counts the optimizer steps taken: the update of the n-th step (0-based) uses the
value at step n. Schedules written as Apache SINGA's (Constant, ExponentialDecay) keep its API.
"""
import math
import numbers

from . import singa_wrap as singa
from . import tensor
from ._args import as_float, type_error
from .errors import CheckTypeError
from .tensor import Tensor

__all__ = ["ScheduleError", "DecayScheduler", "Constant", "ExponentialDecay", "StepDecay",
           "MultiStepDecay", "CosineDecay", "LinearWarmup", "ReduceLROnPlateau"]


class ScheduleError(TypeError):
    """A schedule read the step counter as a Python number (see the module note)."""


_HOW = ("a schedule must compute its value from the step Tensor with tensor operations (the "
        "optimizer's step is recorded into the computational graph and replayed from C++, where "
        "Python code does not run, so a value read in Python would stay frozen). Write e.g. "
        "`self.init_value * tensor.pow(gamma, step // 10)` with gamma a (1,) Tensor, or use "
        "opt.StepDecay, MultiStepDecay, CosineDecay or LinearWarmup; for a value decided in "
        "Python between steps set `optimizer.lr = value` (or use opt.ReduceLROnPlateau)")


class _Step(Tensor):
    """The step Tensor a schedule's ``call`` receives: the optimizer's step counter (same core
    tensor) whose value cannot be read in Python; results of operators on it inherit that."""

    def _refuse(self, how):
        raise ScheduleError("%s: %s read the step counter as a Python number; %s"
                            % (self.__dict__.get("_schedule", "schedule"), how, _HOW))

    def __float__(self):
        self._refuse("float(step)")

    def __int__(self):
        self._refuse("int(step)")

    def __index__(self):
        self._refuse("using the step as an index")

    def __bool__(self):
        self._refuse("a Python condition on the step (if/and/or)")

    def __array__(self, dtype=None, copy=None):
        self._refuse("numpy conversion of the step")

    # Python 3.12 honours a class's __buffer__ (PEP 688), and numpy asks for the buffer before
    # __array__: a Tensor's would hand np.asarray(step) the counter's memory
    def __buffer__(self, flags):
        self._refuse("the buffer protocol (memoryview, np.asarray) on the step")

    def __dlpack__(self, *args, **kwargs):
        self._refuse("DLPack export of the step")

    def to_numpy(self):
        self._refuse("to_numpy(step)")

    def numpy(self):
        self._refuse("step.numpy()")

    def item(self):
        self._refuse("step.item()")

    def _binary(self, fn, x, op, reflected=False):
        out = super(_Step, self)._binary(fn, x, op, reflected)
        return out if out is NotImplemented else _guard(out, self.__dict__.get("_schedule"))

    def __neg__(self):
        return _guard(super(_Step, self).__neg__(), self.__dict__.get("_schedule"))

    def __abs__(self):
        return _guard(super(_Step, self).__abs__(), self.__dict__.get("_schedule"))


def _guard(t, who):
    g = _Step.__new__(_Step)
    g.__dict__.update(t.__dict__)
    g.__dict__["_schedule"] = who
    return g


def _positive(owner, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError("%s: %s must be a positive number, got %r" % (owner, name, value))
    return value


class DecayScheduler(object):
    """A value that depends on the step: ``sched(step)`` maps a (1,)-shaped step Tensor to a
    (1,)-shaped value Tensor with core operations only (Apache SINGA's base class; subclasses
    define ``call``; see the module note for what ``call`` may do with the step)."""

    def __init__(self, init_value):
        # checked, kept as given (SINGA code may read the attribute back)
        as_float(init_value, "init_value", type(self).__name__)
        self.init_value = init_value

    def __call__(self, step):
        if not isinstance(step, Tensor):
            raise CheckTypeError("%s: the step must be a Tensor, got %s"
                                 % (type(self).__name__, type(step).__name__))
        if not isinstance(step, _Step):
            step = _guard(step, type(self).__name__)
        out = self.call(step)
        if not isinstance(out, Tensor) or out.size() != 1:
            raise ScheduleError("%s.call must return a one-element Tensor, got %s"
                                % (type(self).__name__, type(out).__name__ if not isinstance(
                                    out, Tensor) else "shape %s" % (tuple(out.shape),)))
        if isinstance(out, _Step):  # a plain Tensor for the optimizer (same core tensor)
            out = Tensor(data=out.data)
        return out

    def call(self, step):
        """The value at ``step``, a (1,) float32 Tensor on the device, computed with tensor
        operations only (so that a graph records it); subclasses implement it. ``scheduler(step)``
        calls it."""
        raise NotImplementedError("%s.call" % type(self).__name__)

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join(
            "%s=%r" % (k, v) for k, v in self.__dict__.items() if not k.startswith("_")))


class Constant(DecayScheduler):
    """The same value at every step."""

    def call(self, step):
        ret = Tensor((1,), step.device)
        ret.set_value(self.init_value)
        return ret

    def __repr__(self):
        return "Constant(%r)" % (self.init_value,)


class ExponentialDecay(DecayScheduler):
    """init_value * decay_rate ** (step / decay_steps); with staircase the exponent is
    floored, so the value drops every decay_steps steps."""

    def __init__(self, init_value, decay_steps, decay_rate, staircase=False):
        super(ExponentialDecay, self).__init__(init_value)
        _positive("ExponentialDecay", "decay_steps", decay_steps)
        as_float(decay_rate, "decay_rate", type(self).__name__)
        self.decay_steps = decay_steps
        self.decay_rate = decay_rate
        self.staircase = staircase

    def call(self, step):
        s = singa.Div(step.data, float(self.decay_steps))
        if self.staircase:
            s = singa.Floor(s)
        return Tensor(data=singa.EltwiseMult(singa.Pow(float(self.decay_rate), s),
                                             float(self.init_value)))


class StepDecay(ExponentialDecay):
    """init_value * gamma ** floor(step / step_size): multiplied by gamma every step_size steps
    (PyTorch's StepLR)."""

    def __init__(self, init_value, step_size, gamma=0.1):
        _positive("StepDecay", "step_size", step_size)
        as_float(gamma, "gamma", "StepDecay")
        super(StepDecay, self).__init__(init_value, step_size, gamma, staircase=True)
        self.step_size = step_size
        self.gamma = gamma

    def __repr__(self):
        return "StepDecay(%r, step_size=%r, gamma=%r)" % (self.init_value, self.step_size,
                                                          self.gamma)


class MultiStepDecay(DecayScheduler):
    """init_value * gamma ** (number of milestones <= step): multiplied by gamma at each
    milestone (PyTorch's MultiStepLR)."""

    def __init__(self, init_value, milestones, gamma=0.1):
        super(MultiStepDecay, self).__init__(init_value)
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise type_error("MultiStepDecay", "milestones", "sequence of ints", milestones)
        milestones = list(milestones)
        if not milestones or any(isinstance(m, bool) or not isinstance(m, numbers.Integral)
                                 or m <= 0 for m in milestones) or \
                milestones != sorted(set(milestones)):
            raise ValueError("MultiStepDecay: milestones must be increasing positive ints, got "
                             "%r" % (milestones,))
        self.milestones = milestones
        self.gamma = gamma

    def call(self, step):
        passed = singa.GE(step.data, float(self.milestones[0]))
        for m in self.milestones[1:]:
            passed = singa.Add(passed, singa.GE(step.data, float(m)))
        return Tensor(data=singa.EltwiseMult(singa.Pow(float(self.gamma), passed),
                                             float(self.init_value)))


class CosineDecay(DecayScheduler):
    """From init_value down to min_value along half a cosine over decay_steps steps, then
    min_value (PyTorch's CosineAnnealingLR without restarts):
    min_value + (init_value - min_value) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2.
    """

    def __init__(self, init_value, decay_steps, min_value=0.0):
        super(CosineDecay, self).__init__(init_value)
        _positive("CosineDecay", "decay_steps", decay_steps)
        as_float(min_value, "min_value", "CosineDecay")
        self.decay_steps = decay_steps
        self.min_value = min_value

    def call(self, step):
        frac = singa.Minimum(singa.Div(step.data, float(self.decay_steps)), 1.0)
        half = singa.EltwiseMult(singa.Add(singa.Cos(singa.EltwiseMult(frac, math.pi)), 1.0),
                                 0.5)
        span = float(self.init_value) - float(self.min_value)
        return Tensor(data=singa.Add(singa.EltwiseMult(half, span), float(self.min_value)))


class LinearWarmup(DecayScheduler):
    """A linear ramp from start_value to ``after``'s first value over warmup_steps steps, then
    ``after`` (a number or a schedule) counted from the end of the warm-up:
    value(step) = after(step - warmup_steps) once step >= warmup_steps."""

    def __init__(self, after, warmup_steps, start_value=0.0):
        super(LinearWarmup, self).__init__(start_value)
        _positive("LinearWarmup", "warmup_steps", warmup_steps)
        if isinstance(after, numbers.Real) and not isinstance(after, bool):
            after = Constant(float(after))
        if not isinstance(after, DecayScheduler):
            raise TypeError("LinearWarmup: after must be a number or a schedule, got %s"
                            % type(after).__name__)
        self.after = after
        self.warmup_steps = warmup_steps
        self.start_value = start_value

    def call(self, step):
        w = float(self.warmup_steps)
        ramp = singa.Minimum(singa.Div(step.data, w), 1.0)
        later = _guard(Tensor(data=singa.Maximum(singa.Sub(step.data, w), 0.0)),
                       type(self.after).__name__)
        target = self.after(later).data
        start = float(self.start_value)
        return Tensor(data=singa.Add(singa.EltwiseMult(singa.Sub(target, start), ramp), start))

    def __repr__(self):
        return "LinearWarmup(%r, warmup_steps=%r, start_value=%r)" % (
            self.after, self.warmup_steps, self.start_value)


class ReduceLROnPlateau(object):
    """Multiplies the optimizer's (number) learning rate by ``factor`` when ``metric`` stopped
    improving for ``patience`` calls of step(metric) (PyTorch's ReduceLROnPlateau, driven from
    Python between steps: the new rate is written into the optimizer's device tensor, which the
    replayed graph reads).

    mode "min" (a loss) or "max" (an accuracy); an improvement beats the best value by more than
    ``threshold`` (relative with threshold_mode "rel", absolute with "abs"); after a reduction
    ``cooldown`` calls pass before counting again; the rate never goes below ``min_lr``, and a
    change smaller than ``eps`` is not made. ``num_reductions`` counts the reductions made.
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0.0, eps=1e-8):
        opt = getattr(optimizer, "opt", optimizer)  # a DistOpt wraps the optimizer
        if not hasattr(opt, "lr_value"):
            raise TypeError("ReduceLROnPlateau: expected an optimizer (opt.SGD, Adam, ...), "
                            "got %s" % type(optimizer).__name__)
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError("ReduceLROnPlateau: mode must be 'min' or 'max' and "
                             "threshold_mode 'rel' or 'abs', got %r and %r"
                             % (mode, threshold_mode))
        if not 0.0 < factor < 1.0:
            raise ValueError("ReduceLROnPlateau: factor must be within (0, 1), got %r"
                             % (factor,))
        self.optimizer = opt
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.min_lr, self.eps = cooldown, min_lr, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.num_reductions = 0
        self._current_lr()  # fail now, not at the first reduction

    def _current_lr(self):
        lr = self.optimizer.lr
        if type(lr) is not Constant:
            raise TypeError("ReduceLROnPlateau sets the learning rate as a number, but the "
                            "optimizer's lr is the schedule %r: give the optimizer a number "
                            "lr (or reduce the schedule's values yourself)" % (lr,))
        return float(lr.init_value)

    def _improved(self, value):
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            bound = self.best * (1.0 - self.threshold) if rel else self.best - self.threshold
            return value < bound
        bound = self.best * (1.0 + self.threshold) if rel else self.best + self.threshold
        return value > bound

    def step(self, metric):
        """Takes one measurement (a number or a one-element Tensor); returns True when it
        reduced the learning rate."""
        value = float(metric)
        if math.isnan(value):
            raise ValueError("ReduceLROnPlateau.step: the metric is NaN")
        if self._improved(value):
            self.best = value
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs <= self.patience:
            return False
        self.cooldown_counter = self.cooldown
        self.num_bad_epochs = 0
        old = self._current_lr()
        new = max(old * self.factor, self.min_lr)
        if old - new <= self.eps:
            return False
        self.optimizer.lr = new
        self.num_reductions += 1
        return True

    def get_states(self):
        """The counters, for a checkpoint's aux_states (numbers only)."""
        return {"best": float(self.best), "num_bad_epochs": self.num_bad_epochs,
                "cooldown_counter": self.cooldown_counter,
                "num_reductions": self.num_reductions}

    def set_states(self, states):
        """Restores what get_states() returned (best value, bad epochs, cooldown)."""
        self.best = float(states["best"])
        self.num_bad_epochs = int(states["num_bad_epochs"])
        self.cooldown_counter = int(states["cooldown_counter"])
        self.num_reductions = int(states.get("num_reductions", 0))


for _cls in (ScheduleError, DecayScheduler, Constant, ExponentialDecay, StepDecay,
             MultiStepDecay, CosineDecay, LinearWarmup, ReduceLROnPlateau):
    _cls.__module__ = "singa.opt"  # where users find them
del _cls
