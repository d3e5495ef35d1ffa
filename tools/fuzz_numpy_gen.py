"""Inputs and the target table of tools/fuzz_numpy.py: tensor arguments with edge-case shapes
and values, and the Target record pairing a singa call with its reference."""
import os
import random
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from singa import tensor  # noqa: E402

SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 1e-30, -1e-40, 0.5, -0.5, 2.5, -1.0]


class In(object):
    """One tensor argument: its logical numpy array, how it was filled, and the view singa gets
    it as: ``perm`` (a permutation of its axes, or None) stores it as a contiguous block in that
    axis order and hands singa the transposed view back, so strides are not the row-major ones
    (the reversed order is a plain transpose)."""

    def __init__(self, a, fill, perm=None, grad=True):
        self.a, self.fill, self.grad = a, fill, grad
        self.perm = list(perm) if perm is not None and a.ndim >= 2 else None

    @property
    def transposed(self):
        return self.perm is not None

    def tensor(self, requires_grad=False):
        if self.perm is not None:
            block = tensor.from_numpy(np.ascontiguousarray(self.a.transpose(self.perm)))
            t = tensor.transpose(block, list(np.argsort(self.perm)))
        else:
            t = tensor.from_numpy(np.array(self.a, order="C"))  # ascontiguousarray makes 0-d 1-d
        if requires_grad:
            t.requires_grad = True
            t.stores_grad = True
        return t

    def __repr__(self):
        view = None
        if self.perm is not None:
            view = "transposed" if self.perm == list(range(self.a.ndim))[::-1] else \
                "permuted %s" % (tuple(self.perm),)
        extra = "".join(", " + s for s in (self.fill if self.fill != "randn" else None, view)
                        if s)
        text = "T(%s, %s%s)" % (self.a.dtype, self.a.shape, extra)
        if 0 < self.a.size <= 8 and self.fill != "randn":
            text += "=" + np.array2string(self.a.reshape(-1), separator=",", precision=3)
        return text


class Gen(object):
    """The random choices of one call, reproducible from (seed, target, call index)."""

    def __init__(self, seed, name, i):
        self.r = random.Random("%d:%s:%d" % (seed, name, i))
        self.rng = np.random.default_rng(self.r.getrandbits(32))
        self.domain = None  # the target's map of plain normal values into its domain

    def choice(self, seq):
        return self.r.choice(seq)

    def shape(self, rmin=0, rmax=5, zero=True, dims=(1, 1, 2, 2, 3, 3, 4, 5)):
        rank = self.r.choice([k for k in (0, 1, 1, 2, 2, 2, 3, 3, 4, 5) if rmin <= k <= rmax])
        return tuple(0 if zero and self.r.random() < 0.07 else self.r.choice(dims)
                     for _ in range(rank))

    def values(self, shape, dtype="float32", fill=None):
        n = int(np.prod(shape, dtype=np.int64))
        if dtype == "int32":
            if fill != "index" and self.r.random() < 0.1:  # past float32's 2^24, to int32's ends
                big = self.rng.integers(-2 ** 31, 2 ** 31, n)
                return big.astype(np.int32).reshape(shape), "big int"
            return self.rng.integers(-5, 6, n).astype(np.int32).reshape(shape), "int"
        fill = fill or self.r.choice(["randn"] * 11 + ["special"] * 4 + ["big", "small", "ints",
                                                                          "ints"])
        a = self.rng.standard_normal(n)
        if fill == "randn" and self.domain is not None:
            a = self.domain(a)
        elif fill == "special":
            pick = self.rng.random(n) < 0.4
            a[pick] = self.rng.choice(SPECIALS, int(pick.sum()))
        elif fill == "big":
            a *= 1e20
        elif fill == "small":
            a *= 1e-20
        elif fill == "ints":
            a = self.rng.integers(-2, 3, n).astype(np.float64)
        return a.astype(dtype).reshape(shape), fill

    def x(self, shape=None, dtype="float32", fill=None, ints=False, grad=True, **kw):
        """A tensor argument; ``ints`` lets it be int32 a third of the time."""
        shape = self.shape(**kw) if shape is None else tuple(shape)
        if ints and self.r.random() < 0.33:
            dtype = "int32"
        a, fill = self.values(shape, dtype, fill)
        return In(a, fill, self.view(a.ndim) if self.r.random() < 0.2 else None, grad=grad)

    def view(self, ndim):
        """The axis order of a non-contiguous view: reversed (a transpose), or any other order
        but the identity."""
        rev = list(range(ndim))[::-1]
        if ndim < 3 or self.r.random() < 0.5:
            return rev
        perm = list(range(ndim))
        while perm == list(range(ndim)):
            self.r.shuffle(perm)
        return perm

    def pair_shapes(self, rmax=4):
        """Two shapes that broadcast together: one drops leading axes and sets some to 1."""
        s = self.shape(rmax=rmax)
        t = list(s[self.r.randint(0, len(s)):]) if s else []
        t = [1 if self.r.random() < 0.3 else d for d in t]
        if s and self.r.random() < 0.15:  # a size-1 axis against a 0-size one
            k = self.r.randrange(len(s))
            s = s[:k] + (0,) + s[k + 1:]
            if len(t) >= len(s) - k:
                t[k - (len(s) - len(t))] = 1
        return (s, tuple(t)) if self.r.random() < 0.5 else (tuple(t), s)

    def axis(self, ndim, neg=True):
        a = self.r.randrange(ndim)
        return a - ndim if neg and self.r.random() < 0.4 else a

    def axes(self, ndim):
        k = self.r.randint(1, ndim)
        return [a - ndim if self.r.random() < 0.4 else a for a in self.r.sample(range(ndim), k)]


# ---------------------------------------------------------------- targets


class Target(object):
    """gen(g) -> (args, kwargs) with In for tensors; call and ref take the same arguments (singa
    Tensors, numpy arrays). exact: compare bit for bit (shape ops, comparisons); accum: the
    result sums products, so its absolute tolerance scales with ref on |inputs| (or with what
    accum returns, when it is a function of the call's arguments); grad: check
    backward too; domain: maps normal values into the op's domain for the gradient check."""

    def __init__(self, name, gen, call, ref, exact=False, accum=False, grad=False, domain=None,
                 rtol=1e-5, atol=1e-6):
        self.name, self.gen, self.call, self.ref = name, gen, call, ref
        self.exact, self.accum, self.grad, self.domain = exact, accum, grad, domain
        self.rtol, self.atol = rtol, atol


TARGETS = []


def target(name, gen, call, ref, **kw):
    TARGETS.append(Target(name, gen, call, ref, **kw))


def f64(fn):
    """fn evaluated in float64 on float inputs and returned in float32 (numpy's float32 ufuncs
    and sums are less accurate than the tolerance this asks of singa)."""
    def ref(*args, **kw):
        up = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype == np.float32 else a
              for a in args]
        y = fn(*up, **kw)
        if isinstance(y, (list, tuple)):
            return [v.astype(np.float32) if v.dtype == np.float64 else v for v in y]
        y = np.asarray(y)
        return y.astype(np.float32) if y.dtype == np.float64 else y
    ref.raw = fn  # the gradient check differences fn itself, in float64
    return ref


