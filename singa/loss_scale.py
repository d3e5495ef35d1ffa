"""Dynamic loss scaling (PyTorch GradScaler's rules), decided on the device so a graph replays it.

    scaler = opt.LossScaler()               # 2**16; x0.5 on inf/nan; x2 after 2000 clean steps
    sgd = opt.SGD(lr=0.05, momentum=0.9)
    # inside train_one_batch, in place of sgd(loss):
    scaler.step(sgd, scaler.scale(loss))    # backward, unscale, update unless a gradient is inf/nan
    scaler.update()                         # the next step's scale
    # or attach it, and sgd(loss) does the three lines above:
    sgd.loss_scaler = scaler                # what Model.compile(..., precision="float16") does

float16's smallest normal number is 6e-5, so the gradients of a float16 network underflow to
zero unless the loss is multiplied by a large scale before backward. Each step: backward from
``loss * scale``; the gradients are unscaled (times 1/scale) before the optimizer sees them; if
any unscaled gradient holds inf or NaN (the scale overflowed float16 somewhere) the step is
skipped: parameters, optimizer state (momentum, Adam's m and v) and the step counter keep their
values, and update() multiplies the scale by backoff_factor (0.5). After growth_interval (2000)
clean steps in a row, update() multiplies it by growth_factor (2), unless that overflows float32.
The scaler is dtype-agnostic: it works the same around a float32 or bfloat16 model (where
nothing underflows, but the tests inject infs there).

Why on the device (and not by running an AMP step eagerly): with the graph on, a step is
recorded once and replayed from C++, so Python never sees the per-step decision. Every piece of
state (scale, growth tracker, last step's found-inf flag) is a (1,) device tensor and every
decision is arithmetic on 0/1 flags: found-inf is max/min reductions of each gradient times 0
(0 when finite, NaN otherwise; no full-size temporary), and "skip" is a select: each tensor the
optimizer writes is saved before its update (a Clone) and blended after it with MaskedFill on
the flag (exact in both branches, whatever the skipped update computed). So one recorded graph
replays skips and growth, eagerly and replayed give the same numbers, and it works with every
optimizer's update (fused or not) unchanged. The cost is one copy and three small elementwise
passes per written tensor, plus two reductions per gradient: small beside a network's
convolutions; a fused kernel reading the flag would remove it (not done).
"""
from . import autograd
from . import singa_wrap as singa
from . import tensor
from .layers.base import graph_paused
from .tensor import Tensor

__all__ = ["LossScaler"]


def _number(value, what, low, strict=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            value > low if strict else value >= low) or value != value or value == float("inf"):
        raise ValueError("LossScaler: %s must be a finite number %s %s, got %r"
                         % (what, ">" if strict else ">=", low, value))
    return float(value)


class LossScaler(object):
    """Dynamic loss scaling with PyTorch GradScaler's defaults and rules (see the module note).

    Args:
        init_scale: the first scale (2**16).
        growth_factor: the scale's factor after growth_interval clean steps (2.0, > 1).
        backoff_factor: the scale's factor after a step with inf/NaN gradients (0.5, in (0, 1)).
        growth_interval: clean steps in a row before the scale grows (2000).
        enabled: False makes scale() return the loss and step() the plain optimizer step.
    """

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self.init_scale = _number(init_scale, "init_scale", 0)
        self.growth_factor = _number(growth_factor, "growth_factor", 1)
        self.backoff_factor = _number(backoff_factor, "backoff_factor", 0)
        if self.backoff_factor >= 1:
            raise ValueError("LossScaler: backoff_factor must be < 1, got %r" % backoff_factor)
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or \
                growth_interval < 1 or growth_interval >= 2 ** 24:
            # the tracker counts in float32: exact up to 2**24
            raise ValueError("LossScaler: growth_interval must be an int in [1, 2**24), got %r"
                             % (growth_interval,))
        self.growth_interval = growth_interval
        self.enabled = bool(enabled)
        self._scale = self._tracker = self._found = None  # (1,) device tensors, made at first use

    # ---- state on the device -------------------------------------------------------------------
    def _ensure(self, dev):
        """Creates the state tensors on ``dev`` (outside any recording), or moves them there."""
        with graph_paused(dev):
            if self._scale is None:
                self._scale = Tensor((1,), dev, tensor.float32, requires_grad=False,
                                     stores_grad=False, name="loss_scale")
                self._scale.set_value(self.init_scale)
                self._tracker = Tensor((1,), dev, tensor.float32, requires_grad=False,
                                       stores_grad=False, name="loss_scale_growth_tracker")
                self._tracker.set_value(0.0)
                self._found = Tensor((1,), dev, tensor.float32, requires_grad=False,
                                     stores_grad=False, name="loss_scale_found_inf")
                self._found.set_value(0.0)
            for t in (self._scale, self._tracker, self._found):
                if not t.device == dev:
                    t.to_device(dev)

    def _read(self, t, default):
        return default if t is None else float(tensor.to_numpy(t).ravel()[0])

    def get_scale(self):
        """The current scale (a float; reading it waits for the device)."""
        return self._read(self._scale, self.init_scale) if self.enabled else 1.0

    def get_growth_tracker(self):
        """Clean steps in a row since the scale last changed."""
        return int(self._read(self._tracker, 0.0))

    def found_inf(self):
        """True if the last step met an inf/NaN gradient (and was skipped)."""
        return self._read(self._found, 0.0) != 0.0

    def state_dict(self):
        """PyTorch GradScaler's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker."""
        return {"scale": self.get_scale(), "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self.get_growth_tracker()}

    def load_state_dict(self, state):
        """Restores state_dict()'s values into the existing tensors, which a recorded graph
        goes on reading; new factors or interval (constants of the recorded operations) reset
        the device's graph, so a model records its step again."""
        rules = (_number(state["growth_factor"], "growth_factor", 1),
                 _number(state["backoff_factor"], "backoff_factor", 0),
                 int(state["growth_interval"]))
        scale = _number(state["scale"], "scale", 0)
        if self._scale is None:
            self._ensure(tensor.get_default_device())
        dev = self._scale.device
        if rules != (self.growth_factor, self.backoff_factor, self.growth_interval):
            self.growth_factor, self.backoff_factor, self.growth_interval = rules
            dev.ResetGraph()
        with graph_paused(dev):
            self._scale.set_value(scale)
            self._tracker.set_value(float(state["_growth_tracker"]))
            self._found.set_value(0.0)

    # ---- the step ------------------------------------------------------------------------------
    def scale(self, loss):
        """``loss * scale`` (an autograd multiplication: backward from it scales every
        gradient)."""
        if not self.enabled:
            return loss
        if not isinstance(loss, Tensor):
            raise TypeError("LossScaler.scale: expected a singa Tensor (the loss), got %s"
                            % type(loss).__name__)
        self._ensure(loss.device)
        return autograd.mul(loss, self._scale)

    def step(self, optimizer, scaled_loss):
        """Backward from ``scaled_loss`` (what scale() returned), unscale the gradients and let
        ``optimizer`` update every parameter and advance its step, unless a gradient is inf or
        NaN: then nothing the optimizer holds changes (decided on the device)."""
        if hasattr(optimizer, "communicator"):
            raise NotImplementedError(
                "LossScaler: loss scaling with DistOpt is not implemented; scale the loss and "
                "check the gradients by hand, or train with precision='bfloat16'")
        if not self.enabled:
            optimizer(scaled_loss)
            return
        self._ensure(scaled_loss.device)
        pairs = list(autograd.backward(scaled_loss))  # every gradient, before any update
        inv = singa.Reciprocal(self._scale.data)
        grads = [_unscaled(g.data, inv) for _, g in pairs]
        bad = None  # 0 if every unscaled gradient is finite, NaN otherwise
        for g in grads:
            if g.Size() == 0:
                continue
            z = singa.Add(singa.EltwiseMult(singa.ReduceMax(g), 0.0),
                          singa.EltwiseMult(singa.ReduceMin(g), 0.0))
            if z.data_type() != singa.kFloat32:
                z = z.AsType(singa.kFloat32)
            bad = z if bad is None else singa.Add(bad, z)
        ok = singa.Reshape(singa.EQ(bad, 0.0), (1,)) if bad is not None else \
            singa.Add(singa.EltwiseMult(self._found.data, 0.0), 1.0)
        skip = singa.Sub(1.0, ok)
        for (p, _), g in zip(pairs, grads):
            _masked_update(optimizer, p, Tensor(data=g, requires_grad=False), ok, skip)
        # the step counter advances by ok: minus skip here, plus one (and the schedules'
        # values at the new step) in step()
        singa.Sub(optimizer.step_counter.data, skip, out=optimizer.step_counter.data)
        optimizer.step()
        self._found.data.CopyData(skip)

    def update(self):
        """The next scale from the last step (PyTorch's GradScaler.update): times
        backoff_factor after a skipped step (growth tracker reset); after growth_interval clean
        steps in a row, times growth_factor unless that overflows float32 (tracker reset)."""
        if not self.enabled or self._scale is None:
            return
        found = self._found.data
        ok = singa.Sub(1.0, found)
        tracker = singa.EltwiseMult(singa.Add(self._tracker.data, 1.0), ok)
        grow = singa.EQ(tracker, float(self.growth_interval))
        grown = singa.EltwiseMult(self._scale.data, self.growth_factor)
        grows = singa.EltwiseMult(grow, singa.EQ(singa.EltwiseMult(grown, 0.0), 0.0))
        # exactly one term is nonzero, so the factor is exactly backoff, 1 or growth
        factor = singa.Add(singa.Add(singa.EltwiseMult(found, self.backoff_factor),
                                     singa.Sub(ok, grows)),
                           singa.EltwiseMult(grows, self.growth_factor))
        singa.EltwiseMult(self._scale.data, factor, out=self._scale.data)
        singa.EltwiseMult(tracker, singa.Sub(1.0, grow), out=self._tracker.data)

    def minimize(self, optimizer, loss):
        """step(optimizer, scale(loss)), then update(): what ``optimizer(loss)`` does with
        ``optimizer.loss_scaler = self``."""
        self.step(optimizer, self.scale(loss))
        self.update()

    def attach(self, optimizer):
        """Makes ``optimizer(loss)`` scale the loss with this scaler (Model.compile's
        precision="float16" does this at the first step)."""
        if hasattr(optimizer, "communicator"):
            raise NotImplementedError(
                "LossScaler: loss scaling with DistOpt is not implemented (precision='float16' "
                "with a DistOpt optimizer); pass loss_scale=False to compile() to train "
                "without it, or use precision='bfloat16'")
        optimizer.loss_scaler = self


def _unscaled(g, inv):
    """g / scale in g's own dtype (float16 parameters of SINGA's float16 training keep float16
    gradients), checked for inf/NaN after that rounding."""
    u = singa.EltwiseMult(g, inv)
    return u if u.data_type() == g.data_type() else u.AsType(g.data_type())


def _masked_update(optimizer, p, g, ok, skip):
    """optimizer.update of p, then every tensor it writes (p and p's state) is put back to its
    saved value where ``skip`` is 1 (ok and skip: (1,) 0/1 flags, ok = 1 - skip). The state is
    created before the update (param_state: zeros, as the update would make it), so that a
    recorded graph saves and restores it at every replay, not only at the step that made it."""
    written = [p] + list(optimizer.param_state(p).values())
    saved = [t.data.Clone() for t in written]
    optimizer.update(p, g)
    for t, before in zip(written, saved):
        # MaskedFill keeps NaN out of the unchosen branch, so both branches are exact
        singa.Add(singa.MaskedFill(t.data, skip, 0.0), singa.MaskedFill(before, ok, 0.0),
                  out=t.data)
