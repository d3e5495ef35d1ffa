"""Targets of tools/fuzz_numpy.py: shape and index ops (ONNX semantics where singa follows ONNX,
SINGA's where README says it differs) and linear algebra, each with its numpy reference."""
import numpy as np

from singa import autograd, tensor
from fuzz_numpy_gen import In, f64, target
from test_autograd_ops import d2s_np  # tests/python: the op table's reference


def _idx(g, shape, lo, hi):
    """An int32 In of indices in [lo, hi) (or empty when that range is)."""
    a = g.rng.integers(lo, hi, int(np.prod(shape, dtype=np.int64))) if hi > lo else \
        np.zeros(0, np.int64)
    return In(a.astype(np.int32).reshape(shape), "index", grad=False)


# ---- reshape, transpose, flatten, squeeze, unsqueeze


def _reshape_gen(keep_zero):
    def gen(g):
        x = g.x(ints=True, rmax=4)
        dims = list(x.a.shape)
        g.r.shuffle(dims)
        out = []
        for d in dims:  # merge neighbours now and then, insert 1s now and then
            if out and g.r.random() < 0.4:
                out[-1] *= d
            else:
                out.append(d)
            if g.r.random() < 0.15:
                out.append(1)
        if out and g.r.random() < 0.6:
            out[g.r.randrange(len(out))] = -1
        if keep_zero and out and g.r.random() < 0.3:  # ONNX Reshape's 0 = keep that input dim
            k = g.r.randrange(min(len(out), x.a.ndim) or 1)
            if k < x.a.ndim and out[k] == x.a.shape[k] and -1 not in out[k:k + 1]:
                out[k] = 0
        return [x, out], {}
    return gen


def _onnx_reshape(x, shape):
    """ONNX Reshape's 0 copies the input's dimension there; past the input's rank singa reads
    it as numpy does, a 0 (ONNX leaves that invalid)."""
    shape = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def _perm_gen(g):
    x = g.x(ints=True)
    perm = list(range(x.a.ndim))
    g.r.shuffle(perm)
    if g.r.random() < 0.3:
        perm = [p - x.a.ndim for p in perm]
    return [x, None if g.r.random() < 0.2 else perm], {}


def _flatten_gen(g):
    x = g.x(ints=True, rmin=1)
    r = x.a.ndim
    return [x], {"axis": g.r.randint(-r, r)}


def _flatten(x, axis):
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1) if x.size else \
        x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)),
                  int(np.prod(x.shape[axis:], dtype=np.int64)))


def _squeeze_gen(g):
    x = g.x(ints=True, dims=(1, 1, 1, 2, 3, 0))
    ones = [i for i, d in enumerate(x.a.shape) if d == 1]
    if not ones or g.r.random() < 0.25:
        return [x], {"axis": []} if g.r.random() < 0.5 else {}
    k = g.r.sample(ones, g.r.randint(1, len(ones)))
    k = [a - x.a.ndim if g.r.random() < 0.4 else a for a in k]
    return [x], {"axis": k[0] if len(k) == 1 and g.r.random() < 0.5 else k}


def _squeeze(x, axis=()):
    axis = [axis] if isinstance(axis, int) else axis
    return np.squeeze(x, axis=tuple(axis) if axis else None)


def _unsqueeze_gen(g):
    x = g.x(ints=True, rmax=4)
    k = g.r.randint(1, 3)
    r = x.a.ndim + k
    axes = [a - r if g.r.random() < 0.4 else a for a in g.r.sample(range(r), k)]
    return [x], {"axis": axes[0] if k == 1 and g.r.random() < 0.5 else axes}


def _unsqueeze(x, axis):
    axis = [axis] if isinstance(axis, int) else axis
    r = x.ndim + len(axis)
    return np.expand_dims(x, tuple(sorted(a + r if a < 0 else a for a in axis)))


# ---- joining, splitting, repeating


def _cat_gen(g):
    s = g.shape(rmin=1)
    axis = g.axis(len(s))
    dtype = g.choice(["float32", "float32", "int32"])
    xs = []
    for _ in range(g.r.randint(1, 3)):
        t = list(s)
        t[axis] = g.choice([0, 1, 2, 3])
        xs.append(g.x(t, dtype=dtype))
    return [xs, axis], {}


def _split_gen(g):
    x = g.x(rmin=1, ints=True)
    axis = g.axis(x.a.ndim)
    d = x.a.shape[axis]
    if g.r.random() < 0.5 or d == 0:
        cuts = sorted(g.r.randint(0, d) for _ in range(g.r.randint(0, 3)))
        parts = [b - a for a, b in zip([0] + cuts, cuts + [d])]
        return [x, axis, parts], {}
    n = g.choice([k for k in range(1, d + 1) if d % k == 0])
    return [x, axis, None], {"num_output": n}


def _split(x, axis, parts, num_output=None):
    if parts is None:
        return list(np.split(x, num_output, axis))
    return list(np.split(x, np.cumsum(parts)[:-1], axis))


def _tile_gen(g):
    x = g.x(ints=True, rmax=4)
    if g.r.random() < 0.25:
        return [x, g.choice([0, 1, 2, 3])], {}
    return [x, [g.choice([0, 1, 1, 2, 3]) for _ in range(g.r.randint(1, x.a.ndim + 1))]], {}


def _singa_tile(x, repeats):
    """README: fewer repeats than axes apply from the first axis (SINGA's rule)."""
    reps = [repeats] if isinstance(repeats, int) else list(repeats)
    if len(reps) < x.ndim:
        reps += [1] * (x.ndim - len(reps))
    return np.tile(x, reps)


def _expand_gen(g):
    x = g.x(ints=True, rmax=4, dims=(1, 1, 2, 3, 0))
    shape = [g.choice([1, 2, 3]) if d == 1 else g.choice([d, d, 1]) for d in x.a.shape]
    shape = [g.choice([1, 2, 0]) for _ in range(g.r.randint(0, 2))] + shape
    if g.r.random() < 0.3 and shape:  # a shorter shape broadcasts too (ONNX Expand)
        shape = shape[g.r.randint(0, len(shape)):]
    return [x, shape], {}


def _expand(x, shape):
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(shape))).copy()


def _repeat_gen(g):
    x = g.x(ints=True, rmax=4)
    if x.a.ndim == 0 or g.r.random() < 0.25:
        return [x, g.choice([0, 1, 2, 3])], {}
    axis = g.axis(x.a.ndim)
    d = x.a.shape[axis]
    reps = g.choice([g.choice([0, 1, 2]), [g.choice([0, 1, 2, 3]) for _ in range(d)]])
    return [x, reps], {"axis": axis}


# ---- slicing and indexing


def _slice_gen(g):
    x = g.x(rmin=1, ints=True)
    axes = g.axes(x.a.ndim)
    starts, ends, steps = [], [], []
    for a in axes:
        d = x.a.shape[a]
        steps.append(g.choice([1, 1, 2, 3, -1, -1, -2]))
        starts.append(g.choice([0, -1, d, -d - 2, g.r.randint(-d - 1, d + 1), 2 ** 31 - 1,
                                -2 ** 31]))
        ends.append(g.choice([d, -1, 0, -d - 2, g.r.randint(-d - 1, d + 1), 2 ** 31 - 1,
                              -2 ** 31]))
    kw = {}
    if g.r.random() < 0.8:
        kw["axes"] = axes
    elif sorted(axes) != list(range(len(axes))):
        return _slice_gen(g)
    else:
        order = sorted(range(len(axes)), key=lambda i: axes[i] % x.a.ndim)
        starts, ends, steps = ([v[i] for i in order] for v in (starts, ends, steps))
    if any(s != 1 for s in steps) or g.r.random() < 0.5:
        kw["steps"] = steps
    return [x, starts, ends], kw


def _slice(x, starts, ends, axes=None, steps=None):
    """numpy's slicing (which ONNX's reference implementation uses too; ONNX's text clamps a
    start below -dim to 0 for a negative step, numpy and singa give an empty slice)."""
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    sl = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        sl[a] = slice(s, e, st)
    return x[tuple(sl)]


def _gather_gen(g):
    x = g.x(rmin=1, ints=True)
    axis = g.axis(x.a.ndim)
    d = x.a.shape[axis]
    shape = g.shape(rmax=2, dims=(1, 2, 3)) if d else (0,)
    idx = _idx(g, shape, -d, d)
    return [x, axis, idx.a.tolist() if g.r.random() < 0.5 else idx], {}


def _gather_elements_gen(g):
    x = g.x(rmin=1, ints=True)
    axis = g.axis(x.a.ndim)
    d = x.a.shape[axis]
    shape = list(x.a.shape)
    shape[axis] = g.choice([1, 2, 3]) if d else 0
    return [x, _idx(g, shape, -d, d)], {"axis": axis}


def _gather_elements(x, indices, axis=0):
    d = x.shape[axis]
    return np.take_along_axis(x, (indices % d if d else indices).astype(np.int64), axis)


def _gather_nd_gen(g):
    x = g.x(rmin=1, ints=True, dims=(1, 2, 3, 4), zero=False)
    b = g.choice([0, 0, 1]) if x.a.ndim > 1 else 0
    k = g.r.randint(1, x.a.ndim - b)
    lead = list(x.a.shape[:b]) + list(g.shape(rmax=2, dims=(1, 2, 3)))
    cols = [_idx(g, lead + [1], -x.a.shape[b + j], x.a.shape[b + j]).a for j in range(k)]
    return [x, In(np.concatenate(cols, -1), "index", grad=False)], {"batch_dims": b}


def _gather_nd(x, indices, batch_dims=0):
    if batch_dims:
        return np.stack([_gather_nd(x[i], indices[i]) for i in range(x.shape[0])]) if \
            x.shape[0] else np.zeros(indices.shape[:-1] + x.shape[1 + indices.shape[-1]:],
                                     x.dtype)
    k = indices.shape[-1]
    return x[tuple(indices[..., j] for j in range(k))]


def _scatter_gen(g):
    x = g.x(rmin=1, ints=True)
    axis = g.axis(x.a.ndim)
    d = x.a.shape[axis]
    k = g.r.randint(0, d)
    # distinct targets along the axis (ONNX leaves the order of duplicates unspecified)
    order = np.argsort(g.rng.random(x.a.shape), axis=axis).astype(np.int32)
    idx = np.take(order, range(k), axis)
    idx = np.where(g.rng.random(idx.shape) < 0.3, idx - d, idx).astype(np.int32)
    # updates are an attribute of SINGA's ScatterElements operator, not an input: no gradient
    upd = g.x(idx.shape, dtype=str(x.a.dtype), grad=False)
    return [x, In(idx, "index", grad=False), upd], {"axis": axis}


def _scatter_elements(x, indices, updates, axis=0):
    y = x.copy()
    d = x.shape[axis]
    if indices.size:
        np.put_along_axis(y, (indices % d).astype(np.int64), updates, axis)
    return y


def _pad_gen(g):
    x = g.x(ints=True, rmin=1, rmax=4)
    mode = g.choice(["constant", "constant", "reflect", "edge"])
    begins, ends = [], []
    for d in x.a.shape:
        hi = {"reflect": max(d - 1, 0), "edge": 3 if d else 0}.get(mode, 3)
        begins.append(g.r.randint(0, hi))
        ends.append(g.r.randint(0, hi))
    kw = {"constant": g.choice([0.0, 1.5, -2.0])} if mode == "constant" and g.r.random() < 0.6 \
        else {}
    return [x, mode, begins + ends], kw


def _pad(x, mode, pads, constant=0.0):
    n = x.ndim
    width = list(zip(pads[:n], pads[n:]))
    if mode == "constant":
        return np.pad(x, width, "constant", constant_values=np.asarray(constant).astype(x.dtype))
    return np.pad(x, width, mode)


def _d2s_gen(g):
    bs = g.choice([1, 2, 3])
    c = g.choice([1, 2]) * bs * bs
    shape = (g.choice([0, 1, 2]), c, g.choice([1, 2, 3]), g.choice([0, 1, 2]))
    return [g.x(shape, ints=True), bs], {"mode": g.choice(["DCR", "CRD"])}


def _s2d_gen(g):
    bs = g.choice([1, 2, 3])
    shape = (g.choice([0, 1, 2]), g.choice([1, 2]), g.choice([1, 2]) * bs, g.choice([0, 1, 2]) * bs)
    return [g.x(shape, ints=True), bs], {"mode": g.choice(["DCR", "CRD"])}


def _s2d(x, bs, mode="DCR"):
    b, c, h, w = x.shape
    t = x.reshape(b, c, h // bs, bs, w // bs, bs)
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(b, c * bs * bs, h // bs, w // bs)


def _onehot_gen(g):
    depth = g.choice([1, 2, 3, 5])
    idx = _idx(g, g.shape(rmax=3, dims=(1, 2, 3)), -depth - 1, depth + 1)
    if g.r.random() < 0.5:
        idx = In(idx.a.astype(np.float32), "index", grad=False)
    r = idx.a.ndim + 1
    values = g.choice([[0, 1], [0.0, 1.0], [-1.5, 2.0]])
    return [g.r.randint(-r, r - 1), idx, depth, values], {}


def _onehot(axis, indices, depth, values):
    idx = indices.astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    hot = idx[..., None] == np.arange(depth)
    y = np.where(hot, values[1], values[0]).astype(np.float32)
    axis = axis + idx.ndim + 1 if axis < 0 else axis
    return np.moveaxis(y, -1, axis)


def _nonzero_gen(g):
    return [g.x(ints=True, fill=g.choice(["ints", "special", None]))], {}


def _cos_gen(g):
    shape = list(g.shape(rmax=4, dims=(0, 1, 2, 3)))
    return [In(np.array(shape, np.int32), "shape", grad=False)], \
        {"value": g.choice([0, 1.5, -2.0, 3])} if g.r.random() < 0.7 else {}


def _constant_of_shape(x, value=0):
    """float32 whatever the Python number (ONNX's default value is a float32 0; a typed value
    would be a tensor)."""
    return np.full(tuple(int(d) for d in x), value, np.float32)


def _getitem_gen(g):
    x = g.x(rmin=1, ints=True)
    key = []
    for d in x.a.shape[:g.r.randint(1, x.a.ndim)]:
        if d and g.r.random() < 0.25:
            key.append(g.r.randint(-d, d - 1))
        else:
            key.append(slice(g.choice([None, 0, 1, -1, -d - 3, d + 2]),
                             g.choice([None, 0, -1, 2, d + 5, -d - 2]),
                             g.choice([None, 1, 2, -1, -2])))
    return [x, tuple(key) if len(key) > 1 or g.r.random() < 0.5 else key[0]], {}


def _singa_getitem(x, key):
    """SINGA keeps an integer-indexed axis (t[0] of a (2, 3) tensor is (1, 3)); README."""
    key = key if isinstance(key, tuple) else (key,)
    return x[tuple(slice(k, k + 1 or None) if isinstance(k, int) else k for k in key)]


def shape_targets():
    target("autograd.reshape", _reshape_gen(True), autograd.reshape, _onnx_reshape, exact=True,
           grad=True)
    target("tensor.reshape", _reshape_gen(False), tensor.reshape, np.reshape, exact=True)
    target("autograd.transpose", _perm_gen, autograd.transpose, np.transpose, exact=True,
           grad=True)
    target("tensor.transpose", _perm_gen, tensor.transpose, np.transpose, exact=True)
    target("autograd.flatten", _flatten_gen, autograd.flatten, _flatten, exact=True, grad=True)
    target("autograd.squeeze", _squeeze_gen, autograd.squeeze, _squeeze, exact=True, grad=True)
    target("autograd.unsqueeze", _unsqueeze_gen, autograd.unsqueeze, _unsqueeze, exact=True,
           grad=True)
    target("autograd.cat", _cat_gen, autograd.cat, np.concatenate, exact=True, grad=True)
    target("tensor.concatenate", _cat_gen, tensor.concatenate, np.concatenate, exact=True)
    target("autograd.split", _split_gen, autograd.split, _split, exact=True, grad=True)
    target("autograd.tile", _tile_gen, autograd.tile, _singa_tile, exact=True, grad=True)
    target("autograd.expand", _expand_gen, autograd.expand, _expand, exact=True, grad=True)
    target("tensor.repeat", _repeat_gen, tensor.repeat, np.repeat, exact=True)
    target("autograd.slice", _slice_gen, autograd.slice, _slice, exact=True, grad=True)
    target("tensor.Tensor.__getitem__", _getitem_gen, tensor.Tensor.__getitem__,
           _singa_getitem, exact=True)
    target("autograd.gather", _gather_gen, autograd.gather,
           lambda x, axis, idx: np.take(x, np.asarray(idx, np.int64), axis), exact=True,
           grad=True)
    target("autograd.gather_elements", _gather_elements_gen, autograd.gather_elements,
           _gather_elements, exact=True, grad=True)
    target("autograd.gather_nd", _gather_nd_gen, autograd.gather_nd, _gather_nd, exact=True,
           grad=True)
    target("autograd.scatter_elements", _scatter_gen, autograd.scatter_elements,
           _scatter_elements, exact=True, grad=True)
    target("autograd.pad", _pad_gen, autograd.pad, _pad, exact=True, grad=True)
    target("autograd.depth_to_space", _d2s_gen, autograd.depth_to_space, d2s_np, exact=True,
           grad=True)
    target("autograd.space_to_depth", _s2d_gen, autograd.space_to_depth, _s2d, exact=True,
           grad=True)
    target("autograd.onehot", _onehot_gen, autograd.onehot, _onehot, exact=True)
    target("autograd.nonzero", _nonzero_gen, autograd.nonzero,
           lambda x: np.array(np.nonzero(x), np.int32).reshape(x.ndim, -1), exact=True)
    target("autograd.constant_of_shape", _cos_gen, autograd.constant_of_shape,
           _constant_of_shape, exact=True)


# ---- linear algebra


def _matmul_gen(g):
    m, k, n = (g.choice([0, 1, 2, 3, 4]) for _ in range(3))
    batch = g.shape(rmax=2, dims=(1, 2, 3))
    other = tuple(1 if g.r.random() < 0.3 else d for d in batch)[g.r.randint(0, len(batch)):]
    a = (m, k) if g.r.random() < 0.85 else (k,)
    b = (k, n) if g.r.random() < 0.85 else (k,)
    if len(a) == 2:
        a = batch + a
    if len(b) == 2:
        b = other + b
    return [g.x(a), g.x(b)], {}


def _gemm_gen(g):
    m, k, n = (g.choice([0, 1, 2, 3, 5]) for _ in range(3))
    ta, tb = g.choice([0, 1]), g.choice([0, 1])
    A, B = g.x((k, m) if ta else (m, k)), g.x((n, k) if tb else (k, n))
    kw = {"transA": ta, "transB": tb}
    if g.r.random() < 0.5:
        kw["alpha"] = g.choice([1.0, 0.5, -2.0])
    if g.r.random() < 0.5:
        kw["beta"] = g.choice([1.0, 0.0, 3.0])
    args = [A, B]
    if g.r.random() < 0.8:
        args.append(g.x(g.choice([(m, n), (n,), (1, n), (m, 1), (), (1,)])))
    return args, kw


def _gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    y = alpha * np.matmul(A.T if transA else A, B.T if transB else B)
    return y if C is None else y + beta * C


def _tensordot_gen(g):
    shared = [g.choice([0, 1, 2, 3]) for _ in range(g.r.randint(0, 2))]
    a = list(g.shape(rmax=2, dims=(1, 2, 3))) + shared
    b = shared + list(g.shape(rmax=2, dims=(1, 2, 3)))
    if g.r.random() < 0.5:
        return [g.x(a), g.x(b)], {"axes": len(shared)}
    na, nb = len(a), len(b)
    # the shared axes in a random order on both sides, named by negative indices sometimes
    order = list(range(len(shared)))
    g.r.shuffle(order)
    ax_a = [na - len(shared) + i for i in order]
    ax_b = list(order)
    ax_a = [x - na if g.r.random() < 0.3 else x for x in ax_a]
    ax_b = [x - nb if g.r.random() < 0.3 else x for x in ax_b]
    return [g.x(a), g.x(b)], {"axes": (ax_a, ax_b)}


def _tensordot(a, b, axes=2):
    """numpy.tensordot through einsum's own loop: tensordot's BLAS call may skip a 0 times an
    inf or NaN (0 * inf is NaN), as tensordot(a=[0.], b=[nan], axes=0) gave 0."""
    if isinstance(axes, int):
        axes = (list(range(a.ndim - axes, a.ndim)), list(range(axes)))
    ax_a = [x % a.ndim for x in axes[0]]
    ax_b = [x % b.ndim for x in axes[1]]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    sa = [next(letters) for _ in range(a.ndim)]
    sb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    out = [c for i, c in enumerate(sa) if i not in ax_a] + \
        [c for j, c in enumerate(sb) if j not in ax_b]
    return np.einsum("%s,%s->%s" % ("".join(sa), "".join(sb), "".join(out)), a, b)


def _einsum_gen(g):
    letters = "ijklm"[:g.r.randint(1, 5)]
    size = {c: g.choice([0, 1, 2, 3]) if g.r.random() < 0.1 else g.choice([1, 2, 3])
            for c in letters}
    ops = []
    for _ in range(g.r.randint(1, 3)):
        ops.append("".join(g.r.sample(letters, g.r.randint(0, min(3, len(letters))))))
    used = sorted(set("".join(ops)))
    spec = ",".join(ops)
    if g.r.random() < 0.7:
        out = g.r.sample(used, g.r.randint(0, len(used)))
        spec += "->" + "".join(out)
    return [spec] + [g.x(tuple(size[c] for c in op)) for op in ops], {}


def _einsum_bound(spec, *ops):
    """einsum's tolerance scale: einsum on |operands| in float64, and inf everywhere when a
    product of two or more operands' largest magnitudes passes float32's range (whether a
    float32 evaluation overflows then depends on its order of multiplication)."""
    import itertools
    top = [float(np.max(np.abs(o), initial=0)) for o in ops]
    big = any(np.prod(c) > np.finfo(np.float32).max
              for k in range(2, len(top) + 1) for c in itertools.combinations(top, k))
    scale = np.abs(np.einsum(spec, *[np.abs(o.astype(np.float64)) for o in ops]))
    return np.full(scale.shape, np.inf) if big else scale


def linalg_targets():
    target("autograd.matmul", _matmul_gen, autograd.matmul, f64(np.matmul), accum=True,
           grad=True)
    target("tensor.mult", _matmul_gen, tensor.mult, f64(np.matmul), accum=True)
    target("autograd.gemm", _gemm_gen, autograd.gemm, f64(_gemm), accum=True, grad=True)
    target("tensor.tensordot", _tensordot_gen, tensor.tensordot, f64(_tensordot), accum=True)
    target("tensor.einsum", _einsum_gen, tensor.einsum, f64(np.einsum), accum=_einsum_bound)


shape_targets()
linalg_targets()
