"""Indexing helpers of the Tensor class (singa._core): slices, region copies, and numpy's
advanced indexing along the first axis (integer lists, boolean masks). They work on core tensors
(singa_wrap.Tensor) and return new ones.

    ct = slice_axis(ct, 0, 10, 2, axis=1)        # ct[:, 0:10:2]
    ct = take(ct, [2, 0], "Tensor.__getitem__")  # ct[[2, 0]], a copy
"""
import builtins
import itertools
import math

import numpy as np

from . import singa_wrap as singa


def slice_axis(ct, start, stop, step, axis):
    """Elements start, start+step, ... (< stop) along ``axis``, through SliceOn/Reshape/ConcatOn
    (a copy), or ct itself when everything is selected."""
    dim = ct.shape()[axis]
    n = len(range(start, stop, step))
    if step == 1 or n <= 1:
        if start == 0 and n == dim:
            return ct
        return singa.SliceOn(ct, start, start + n, axis)
    # The first n-1 picks: a block of (n-1)*step elements seen as (n-1, step), keep column 0.
    shape = list(ct.shape())
    head = singa.SliceOn(ct, start, start + (n - 1) * step, axis)
    head = singa.Reshape(head, shape[:axis] + [n - 1, step] + shape[axis + 1:])
    head = singa.SliceOn(head, 0, 1, axis + 1)
    head = singa.Reshape(head, shape[:axis] + [n - 1] + shape[axis + 1:])
    last = start + (n - 1) * step
    return singa.ConcatOn([head, singa.SliceOn(ct, last, last + 1, axis)], axis)


def drop_leading_ones(ct, nd):
    """Removes leading size-1 axes beyond rank nd (numpy allows them when assigning)."""
    shape = list(ct.shape())
    while len(shape) > nd and shape[0] == 1:
        shape.pop(0)
    return ct if len(shape) == ct.nDim() else singa.Reshape(ct, shape)


def copy_region(target, shape, region, src):
    """Copies contiguous ``src`` (the region's shape) into the box ``region`` of the contiguous
    ``target`` of ``shape``, one run of consecutive elements at a time."""
    nd = len(shape)
    if builtins.any(b <= a for a, b in region):
        return
    j = nd - 1  # the last axis where the region is not the whole axis
    while j >= 0 and region[j] == (0, shape[j]):
        j -= 1
    if j < 0:
        singa.CopyDataToFrom(target, src, src.Size(), 0, 0)
        return
    strides = [math.prod(shape[i + 1:]) for i in range(nd)]
    run = (region[j][1] - region[j][0]) * strides[j]
    base = region[j][0] * strides[j]
    for n, idx in enumerate(itertools.product(*[range(a, b) for a, b in region[:j]])):
        off = base + builtins.sum(i * s for i, s in zip(idx, strides))
        singa.CopyDataToFrom(target, src, run, off, n * run)


def take(ct, key, op):
    """numpy's advanced indexing on the first axes, as a new core tensor: ``key`` a list or
    array of integers (rows of axis 0; the result has shape key.shape + ct.shape[1:]) or a
    boolean mask over the leading axes (the selected entries in row-major order: shape
    (count,) + the remaining axes). Returns None for any other key (basic indexing)."""
    if not isinstance(key, (list, np.ndarray)):
        return None
    arr = np.asarray(key)
    shape = tuple(ct.shape())
    if arr.dtype == np.bool_:
        k = arr.ndim
        if k == 0 or arr.shape != shape[:k]:
            raise IndexError("%s: a boolean mask of shape %s does not fit a tensor of shape %s "
                             "(it must have the shape of the leading axes)"
                             % (op, arr.shape, shape))
        idx = np.flatnonzero(arr)
        rest = list(shape[k:])
        src = singa.Reshape(ct if ct.IsContiguous() else ct.Contiguous(),
                            [math.prod(shape[:k])] + rest)
        out_shape = [idx.size] + rest
    elif arr.size == 0 or arr.dtype.kind in "iu":
        if not shape:
            raise IndexError("%s: a tensor of shape () cannot be indexed by a list" % op)
        arr = arr.astype(np.int64)
        bad = (arr < -shape[0]) | (arr >= shape[0])
        if bad.any():
            raise singa.AxisError("%s: index %d is out of range for axis 0 of shape %s"
                                  % (op, int(arr[bad][0]), shape))
        idx = np.where(arr < 0, arr + shape[0], arr).ravel()
        src = ct
        out_shape = list(arr.shape) + list(shape[1:])
    else:
        raise IndexError("%s: index arrays must hold integers or booleans, got dtype %s"
                         % (op, arr.dtype))
    if idx.size == 0:
        return singa.Tensor(out_shape, ct.device(), ct.data_type())
    out = singa.IndexSelect(src, 0, singa.from_numpy(idx.astype(np.int32), ct.device()))
    return out if list(out.shape()) == out_shape else singa.Reshape(out, out_shape)
