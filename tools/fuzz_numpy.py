#!/usr/bin/env python3
"""Differential fuzzer: singa's results on valid edge-case inputs against numpy's (or a float64
formula where numpy has no such op).

    .venv/bin/python tools/fuzz_numpy.py                      # every target, 30 calls each
    .venv/bin/python tools/fuzz_numpy.py --calls 200 --only autograd.slice tensor.sum
    .venv/bin/python tools/fuzz_numpy.py --list                # the targets
    .venv/bin/python tools/fuzz_numpy.py --case autograd.pad:17   # replay one call, values shown

tools/fuzz_api.py checks that hostile arguments give clean errors; this checks the other half of
"never lie": valid arguments give the right numbers. Each target (tools/fuzz_numpy_math.py:
elementwise, comparisons, reductions; _shapes.py: shape, index and linear-algebra ops; _nn.py:
losses, normalisation, attention, Conv2d and pooling against torch; _methods.py: Tensor
operators and methods) pairs a singa call
with a reference and a generator of valid arguments (tools/fuzz_numpy_gen.py): shapes with 0-size dims, 0-d tensors, size-1 broadcast dims,
rank 1-5, transposed (non-contiguous) views, NaN/Inf/-0.0, huge and tiny values, negative axes.
Where singa differs from numpy on purpose (README "Where singa differs"), the reference encodes
singa's rule (tile's repeats, softmax flattening from ``axis`` on, tensor.sum of everything as a
(1, 1) tensor, ONNX Reshape's 0 = keep, t[0] keeping its axis, int32 Pow and Div computing in
float32, torch's attention and floor division where numpy has none or disagrees).

Outcomes of a call:
  match      same shape, same dtype class (float/int/bool), values equal within the target's
             tolerance (rtol 1e-5 in float32; exact for shape ops, comparisons and integers),
             NaN exactly where the reference has NaN
  mismatch   computed, but a different shape, dtype class or value: a silent lie
  raised     singa raised where the reference computes
  computed   singa computed where the reference raises
  both       both raised (agreement)
Targets marked with a gradient also check backward on calls whose float inputs are finite normal
draws and small: singa's gradient against central differences of the reference in float64
(tests/python/gradcheck.py); --torch adds backward on NaN/inf/0/1e30 against torch
(tools/fuzz_numpy_torch.py). Exit status 1 on any mismatch, forward or gradient (with --strict
also on raised / computed).
"""
import argparse
import os
import re
import sys
import time
import traceback
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "python"))

from fuzz_numpy_gen import TARGETS, Gen, In  # noqa: E402
import fuzz_numpy_math  # noqa: E402,F401  (registers its targets)
import fuzz_numpy_shapes  # noqa: E402,F401
import fuzz_numpy_nn  # noqa: E402,F401
import fuzz_numpy_methods  # noqa: E402,F401
from gradcheck import numeric_grads  # noqa: E402
from singa import autograd, tensor  # noqa: E402

KINDS = ("match", "mismatch", "raised", "computed", "both")
GRAD_MAX = 64  # elements per input in a gradient check: differencing costs two refs each
SMOOTH = ("randn", "probabilities")  # fills a gradient check differences (no kinks, finite)


def _build(v, side, leaves=None, grad=False):
    """v with each In made a singa Tensor (side 'singa') or a numpy copy (side 'np'); a list is
    built item by item (cat's list of tensors). leaves collects the tensors in order."""
    if isinstance(v, In):
        out = v.tensor(grad and v.grad and v.a.dtype == np.float32) if side == "singa" \
            else v.a.copy()
        if leaves is not None:
            leaves.append((v, out))
        return out
    if isinstance(v, list):
        return [_build(x, side, leaves, grad) for x in v]
    return v


def _invoke(fn, args, kw, side, leaves=None, grad=False):
    """fn on args and kwargs with their In built for ``side`` (kwargs in sorted order, which
    _inputs and _subst follow too)."""
    built = [_build(a, side, leaves, grad) for a in args]
    kwb = {k: _build(kw[k], side, leaves, grad) for k in sorted(kw)}
    return fn(*built, **kwb)


def _inputs(args, kw):
    """Every In of a call, in the order _invoke builds them."""
    return [v for a in list(args) + [kw[k] for k in sorted(kw)] for v in _ins(a)]


def _ins(v):
    if isinstance(v, In):
        return [v]
    if isinstance(v, list):
        return [x for item in v for x in _ins(item)]
    return []


def _to_numpy(y):
    if isinstance(y, tensor.Tensor):
        return tensor.to_numpy(y)
    if isinstance(y, (list, tuple)):
        return [_to_numpy(v) for v in y]
    return np.asarray(y)


def _kind(dtype):
    return {"f": "float", "i": "int", "u": "int", "b": "bool"}.get(np.dtype(dtype).kind, "?")


def compare(got, want, tg, scale=None):
    """None when got matches want, else what differs (a short sentence)."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return "returned %s, reference a list of %d" % (
                "a list of %d" % len(got) if isinstance(got, list) else type(got).__name__,
                len(want))
        for k, (a, b) in enumerate(zip(got, want)):
            d = compare(a, b, tg, None if scale is None else scale[k])
            if d:
                return "output %d: %s" % (k, d)
        return None
    if isinstance(got, list):
        return "returned a list of %d, reference one array" % len(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return "shape %s, reference %s" % (got.shape, want.shape)
    if _kind(got.dtype) != _kind(want.dtype):
        return "dtype %s, reference %s" % (got.dtype, want.dtype)
    if got.size == 0:
        return None
    g, w = got.astype(np.float64), want.astype(np.float64)
    gn, wn = np.isnan(g), np.isnan(w)
    # where the terms of a float32 sum pass float32's range, the order of the additions decides
    # between inf, -inf and NaN: any of them is numpy's answer in some order
    free = np.zeros(g.shape, bool) if scale is None else \
        np.broadcast_to(np.abs(scale) > np.finfo(np.float32).max, g.shape)
    gn, wn = gn & ~free, wn & ~free
    if (gn != wn).any():
        k = np.argwhere(gn != wn)[0]
        return "NaN at %s where the reference has %r (singa %r)" % (
            tuple(int(i) for i in k), w[tuple(k)], g[tuple(k)])
    ok = free | gn | (g == w)
    if not (tg.exact or _kind(want.dtype) == "int"):
        atol = tg.atol + (0 if scale is None else tg.rtol * np.nan_to_num(np.abs(scale)))
        with np.errstate(invalid="ignore"):
            ok |= np.isfinite(w) & (np.abs(g - w) <= atol + tg.rtol * np.abs(w))
    if not ok.all():
        k = tuple(int(i) for i in np.argwhere(~ok)[0])
        return "%d of %d values differ, first at %s: singa %r, reference %r" % (
            int((~ok).sum()), ok.size, k, g[k], w[k])
    return None


def _quiet(fn, *args, **kw):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def _scale(tg, args, kw):
    """For a target that sums products: the reference on |inputs| (cancellation in a sum of
    float32 terms is bounded by rtol times this), in float64."""
    if callable(tg.accum):  # the target's own bound
        return np.abs(np.asarray(_quiet(_invoke, tg.accum, args, kw, "np"), np.float64))
    ref = getattr(tg.ref, "raw", tg.ref)
    absd = [_abs(v) for v in args]
    try:
        s = _quiet(ref, *absd, **{k: abs(v) if isinstance(v, float) else _abs(v)
                                  for k, v in kw.items()})
    except Exception:  # noqa: BLE001 - no scale, plain tolerance
        return None
    return [np.abs(np.asarray(v, np.float64)) for v in s] if isinstance(s, list) else \
        np.abs(np.asarray(s, np.float64))


def _abs(v):
    if isinstance(v, In):
        return np.abs(v.a.astype(np.float64)) if v.a.dtype == np.float32 else np.abs(v.a)
    if isinstance(v, list):
        return [_abs(x) for x in v]
    return v


def run_case(tg, seed, i):
    """(outcome, detail, grad) of call i of tg; grad is None (not checked), '' (agrees) or what
    differs."""
    g = Gen(seed, tg.name, i)
    g.domain = tg.domain
    args, kw = tg.gen(g)
    try:
        want = _quiet(_invoke, tg.ref, args, kw, "np")
        want = [np.asarray(v) for v in want] if isinstance(want, (list, tuple)) else want
        want_err = None
    except Exception as e:  # noqa: BLE001 - the reference's refusal is an outcome
        want, want_err = None, e
    try:
        got = _to_numpy(_quiet(_invoke, tg.call, args, kw, "singa"))
        got_err = None
    except Exception as e:  # noqa: BLE001 - singa's refusal is an outcome
        got, got_err = None, e
    if want_err is not None:
        return ("both" if got_err is not None else "computed"), \
            "reference raised %s: %s" % (type(want_err).__name__, str(want_err)[:120]), None
    if got_err is not None:
        return "raised", "%s: %s" % (type(got_err).__name__,
                                     str(got_err).splitlines()[0][:160] if str(got_err) else ""), \
            None
    diff = compare(got, want, tg, _scale(tg, args, kw) if tg.accum else None)
    grad = grad_check(tg, args, kw, want, i) if tg.grad and diff is None else None
    return ("mismatch", diff, grad) if diff else ("match", "", grad)


def _grad_inputs(args, kw):
    return [v for v in _inputs(args, kw) if v.grad and v.a.dtype == np.float32]


def grad_check(tg, args, kw, want, i):
    """singa's gradient of sum(y * dy) against central differences of the reference (float64)
    for the call's float inputs; None when the call does not qualify (non-finite or kinked
    fills, too many elements)."""
    ins = _grad_inputs(args, kw)
    # constants of magnitude 1e30 would drown the differences too
    if not ins or any(v.fill not in SMOOTH or v.a.size > GRAD_MAX for v in ins) or \
            any(v.fill in ("special", "big", "small") for v in _inputs(args, kw)) or \
            not all(np.isfinite(v).all() and np.abs(v).max(initial=0) < 1e4
                    for v in (want if isinstance(want, list) else [want])):
        return None  # differencing needs finite values away from kinks
    was = autograd.training
    autograd.training = True
    try:
        leaves = []
        y = _invoke(tg.call, args, kw, "singa", leaves, grad=True)
        ys = [v for v in (y if isinstance(y, (list, tuple)) else [y])
              if isinstance(v, tensor.Tensor)]
        if not ys or ys[0].creator is None or any(v.dtype != tensor.float32 for v in ys):
            return None
        rng = np.random.default_rng(i)
        dys = [rng.uniform(-1, 1, v.shape) for v in ys]
        seeds = [tensor.from_numpy(d.astype(np.float32)) for d in dys]
        if len(ys) == 1:
            root, seed_t = ys[0], seeds[0]
        else:
            root = autograd.add_all(*[autograd.reduce_sum(autograd.mul(v, d), None, 0)
                                      for v, d in zip(ys, seeds)])
            seed_t = None
        grads = autograd.gradients(root, seed_t)
        got = {}
        for v, t in leaves:
            if v in ins:
                got[id(v)] = tensor.to_numpy(grads[t]) if t in grads else None
    except Exception as e:  # noqa: BLE001 - a backward that raises is a failed check
        return "backward raised %s: %s" % (type(e).__name__, str(e).splitlines()[0][:160]
                                           if str(e) else "")
    finally:
        autograd.training = was
    flat = _inputs(args, kw)
    ref = getattr(tg.ref, "raw", tg.ref)

    def positional(*arrays):
        it = iter(arrays)
        built = [_subst(a, it) for a in args]
        return ref(*built, **{k: _subst(kw[k], it) for k in sorted(kw)})
    which = [k for k, v in enumerate(flat) if v in ins]
    want = _quiet(numeric_grads, positional, [v.a for v in flat], which, dys)
    for k in which:
        v = flat[k]
        gk = got.get(id(v))
        if gk is None:
            if not v.a.size:
                continue
            return "no gradient for input %d" % k
        if gk.shape != v.a.shape:
            return "gradient of input %d has shape %s, the input %s" % (k, gk.shape, v.a.shape)
        w = want[k]
        scale = max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
        bad = ~np.isclose(gk, w, rtol=2e-3, atol=2e-3 * scale)
        if bad.any():
            j = tuple(int(x) for x in np.argwhere(bad)[0])
            return "gradient of input %d: %d of %d differ, first at %s: singa %r, reference %r" \
                % (k, int(bad.sum()), bad.size, j, gk[j], w[j])
    return ""


def _subst(v, it):
    if isinstance(v, In):
        return next(it)
    if isinstance(v, list):
        return [_subst(x, it) for x in v]
    return v


def describe(tg, seed, i):
    g = Gen(seed, tg.name, i)
    g.domain = tg.domain
    args, kw = tg.gen(g)
    parts = [repr(a) for a in args] + ["%s=%r" % kv for kv in kw.items()]
    return "%s(%s)" % (tg.name, ", ".join(parts))


def select(only):
    if not only:
        return list(TARGETS)
    return [t for t in TARGETS if any(t.name == o or t.name.startswith(o + ".") or
                                      (o.endswith(".") and t.name.startswith(o)) for o in only)]


def _key(detail):
    """What kind of failure detail describes, without its numbers: one reproducer per kind."""
    words = [w for w in re.sub(r"[^A-Za-z_ ]", " ", detail).split() if len(w) > 2]
    return " ".join(words[:4])


def fuzz(targets, calls, seed, strict=False, out=None):
    """Runs calls per target and prints the table and one reproducer per distinct failure;
    returns the exit status."""
    out = out or sys.stdout
    t0 = time.time()
    rows, failures = [], {}
    for tg in targets:
        c = dict.fromkeys(KINDS + ("grad", "grad bad"), 0)
        for i in range(calls):
            outcome, detail, grad = run_case(tg, seed, i)
            c[outcome] += 1
            if grad is not None:
                c["grad"] += 1
                if grad:
                    c["grad bad"] += 1
                    failures.setdefault((tg.name, "grad", _key(grad)), (tg, i, grad))
            if outcome in ("mismatch", "raised", "computed"):
                failures.setdefault((tg.name, outcome, _key(detail)), (tg, i, detail))
        rows.append((tg.name, c))
    cols = KINDS + ("grad", "grad bad")
    print("| target | calls | match | mismatch | raised | computed | both raised | grad checked "
          "| grad mismatch |", file=out)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|", file=out)
    tot = dict.fromkeys(cols, 0)
    for name, c in rows:
        for k in cols:
            tot[k] += c[k]
        print("| %s | %d | %s |" % (name, calls, " | ".join(str(c[k]) for k in cols)), file=out)
    print("| **all %d targets** | %d | %s |" % (len(rows), calls * len(rows),
                                               " | ".join(str(tot[k]) for k in cols)), file=out)
    print("\n%d calls in %.0f s (seed %d)" % (calls * len(rows), time.time() - t0, seed), file=out)
    for (name, outcome, _), (tg, i, detail) in sorted(failures.items(), key=lambda kv: kv[0]):
        print("\n%s  %s:%d  %s\n    %s" % (outcome.upper(), name, i, detail,
                                         describe(tg, seed, i)), file=out)
    fail = tot["mismatch"] + tot["grad bad"] + (tot["raised"] + tot["computed"] if strict else 0)
    return 1 if fail else 0


def replay(name, seed):
    name, i = name.rsplit(":", 1)
    tg = {t.name: t for t in TARGETS}[name]
    i = int(i)
    print(describe(tg, seed, i))
    g = Gen(seed, tg.name, i)
    g.domain = tg.domain
    args, kw = tg.gen(g)
    for k, v in enumerate(_inputs(args, kw)):
        print("input %d %r:\n%s" % (k, v, v.a))
    try:
        print("reference:\n%r" % (_quiet(_invoke, tg.ref, args, kw, "np"),))
    except Exception:  # noqa: BLE001 - shown, not hidden
        traceback.print_exc()
    got = _quiet(_invoke, tg.call, args, kw, "singa")
    print("singa:\n%r" % (_to_numpy(got),))
    print("outcome:", run_case(tg, seed, i))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=30, help="calls per target")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", help="targets (or prefixes: autograd, tensor.Tensor)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--case", help="replay NAME:I, with the inputs, both results and a traceback")
    ap.add_argument("--strict", action="store_true", help="fail on raised / computed too")
    ap.add_argument("--torch", action="store_true",
                    help="also backward on NaN/inf/0/1e30 against torch (fuzz_numpy_torch.py)")
    opts = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if opts.case:
        return replay(opts.case, opts.seed)
    targets = select(opts.only)
    if opts.list:
        for t in targets:
            print(t.name, "(gradient)" if t.grad else "")
        return 0
    if not targets:
        print("no target matches %s" % opts.only)
        return 2
    status = fuzz(targets, opts.calls, opts.seed, opts.strict)
    if opts.torch:
        from fuzz_numpy_torch import torch_check
        print()
        status = 1 if torch_check(sys.stdout) else status
    return status


if __name__ == "__main__":
    sys.exit(main())
