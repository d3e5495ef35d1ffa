"""Backward on special values against torch (tools/fuzz_numpy.py --torch): every unary and
binary autograd op of the list below on NaN, +-inf, +-0, 1e30 and ordinary values (binary ops:
every pair), forward and gradient compared with torch's, NaN positions included. Finite
differences (the main fuzzer) cannot see these points; torch is the reference where numpy has
no gradients. Where singa keeps numpy's value or SINGA's rule on purpose, ACCEPTED says so and
those points are left out."""
import numpy as np

from singa import autograd, tensor

VALUES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 0.5, -0.5, 1.0, -1.0, 2.0,
                   25.0, -25.0], np.float32)


def _unary_ops(torch):
    F = torch.nn.functional
    same = ["exp", "log", "sqrt", "abs", "tanh", "sigmoid", "sin", "cos", "tan", "asin", "acos",
            "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "relu", "reciprocal", "erf",
            "square", "sign", "ceil", "floor"]
    ops = {n: getattr(torch, n) for n in same}
    ops.update({"negative": torch.neg, "softplus": F.softplus, "softsign": F.softsign,
                "rounde": torch.round, "gelu": F.gelu, "elu": F.elu, "selu": F.selu,
                "hardswish": F.hardswish, "leakyrelu": lambda x: F.leaky_relu(x, 0.01),
                "gelutanh": lambda x: F.gelu(x, approximate="tanh"),
                "hardsigmoid": lambda x: torch.clamp(0.2 * x + 0.5, 0, 1)})
    return ops


def _binary_ops(torch):
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
            "pow": torch.pow, "max": torch.maximum, "min": torch.minimum}


# (op, "forward" / "grad", inputs) -> why singa differs from torch there on purpose
def _accepted(name, what, x):
    nan = np.isnan(x)
    rules = {
        ("sign", "forward"): (nan, "sign(NaN) is NaN, as numpy's (torch: 0)"),
        ("abs", "grad"): (nan, "abs' at NaN is sign(NaN) = NaN (torch: 0)"),
        ("elu", "grad"): (nan, "elu' at NaN is NaN (torch: 1)"),
        ("selu", "grad"): (nan, "selu' at NaN is NaN (torch: gamma)"),
        ("gelu", "forward"): (np.isinf(x) & (x > 0), "gelu(inf) = inf * Phi(inf) = inf, the "
                              "formula's value (torch: NaN)"),
    }
    return rules.get((name, what), (np.zeros(x.shape, bool), ""))[0]


def _binary_accepted(name, a, b):
    """max / min: ties split the gradient in torch (0.5 each), singa gives it to the first
    operand (SINGA's rule); a NaN operand: torch passes the gradient to both, singa to
    neither (any subgradient is valid at these points)."""
    if name in ("max", "min"):
        return (a == b) | np.isnan(a) | np.isnan(b)
    return np.zeros(a.shape, bool)


def _singa_grads(fn, arrays):
    was = autograd.training
    autograd.training = True
    try:
        ts = []
        for a in arrays:
            t = tensor.from_numpy(a.copy())
            t.requires_grad = t.stores_grad = True
            ts.append(t)
        y = fn(*ts)
        g = autograd.gradients(y, tensor.from_numpy(np.ones(arrays[0].shape, np.float32)))
        return tensor.to_numpy(y), [tensor.to_numpy(g[t]) for t in ts]
    finally:
        autograd.training = was


def _torch_grads(torch, fn, arrays):
    ts = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
    y = fn(*ts)
    y.backward(torch.ones_like(y))
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


def _differ(got, want, skip):
    bad = ~np.isclose(got, want, rtol=1e-4, atol=1e-6, equal_nan=True) & ~skip
    return [int(i) for i in np.flatnonzero(bad)]


def torch_check(out):
    """Prints one line per op and what differs; returns the number of differing points."""
    try:
        import torch
    except ImportError:
        print("torch is not installed: the backward check against it is skipped", file=out)
        return 0
    failures = 0
    cases = [(n, tf, [VALUES], _accepted) for n, tf in sorted(_unary_ops(torch).items())]
    a, b = np.repeat(VALUES, len(VALUES)), np.tile(VALUES, len(VALUES))
    cases += [(n, tf, [a, b], None) for n, tf in sorted(_binary_ops(torch).items())]
    print("| op | points | forward differs | gradient differs |\n|---|---:|---:|---:|", file=out)
    notes = []
    for name, tf, arrays, accepted in cases:
        with np.errstate(all="ignore"):
            ys, gs = _singa_grads(getattr(autograd, name), arrays)
            yt, gt = _torch_grads(torch, tf, arrays)
        if accepted is None:
            skip_f = np.zeros(ys.shape, bool)
            skip_g = _binary_accepted(name, *arrays)
        else:
            skip_f, skip_g = accepted(name, "forward", arrays[0]), accepted(name, "grad", arrays[0])
        fwd = _differ(ys, yt, skip_f)
        grads = [(k, i) for k, (g1, g2) in enumerate(zip(gs, gt)) for i in _differ(g1, g2, skip_g)]
        failures += len(fwd) + len(grads)
        print("| %s | %d | %d | %d |" % (name, ys.size, len(fwd), len(grads)), file=out)
        for k, i in grads[:2]:
            notes.append("GRAD  autograd.%s d/d input %d at %s: singa %r, torch %r" % (
                name, k, tuple(float(v[i]) for v in arrays), float(gs[k][i]), float(gt[k][i])))
        for i in fwd[:2]:
            notes.append("FORWARD  autograd.%s at %s: singa %r, torch %r" % (
                name, tuple(float(v[i]) for v in arrays), float(ys[i]), float(yt[i])))
    for line in notes:
        print("\n" + line, file=out)
    return failures
