"""Checks an autograd op against a numpy reference: forward values, and backward by central
finite differences of the reference in float64.

    check_op(lambda ag, x: ag.tanh(x), np.tanh, [x_np])

For ``y = op(x0, x1, ...)`` the check seeds backward with a random dy (fixed seed) and compares
each input's gradient with d/dx_i sum(ref(x) * dy), differenced in float64 on the reference.
check_graph runs the same op buffered into a graph (no values exist while the graph is built)
and compares with eager execution.

Inputs must keep a distance from kinks (ReLU or abs at 0, max ties, rounding boundaries), since
differencing across one gives a meaningless slope.
"""
import numpy as np

from singa import autograd, tensor
from singa import singa_wrap as sw


def _tensors(arrays, grad, dev=None):
    ts = []
    for i, a in enumerate(arrays):
        t = tensor.from_numpy(a, dev)
        t.requires_grad = i in grad
        t.stores_grad = i in grad
        ts.append(t)
    return ts


def _outputs(y):
    return tuple(y) if isinstance(y, (tuple, list)) else (y,)


def _ref_outputs(y):
    return tuple(np.asarray(v) for v in y) if isinstance(y, (tuple, list)) else (np.asarray(y),)


def numeric_grads(ref, arrays, grad, dys, eps=1e-6):
    """d/d arrays[i] of sum_k sum(ref(*arrays)[k] * dys[k]) for i in grad, in float64."""
    base = [np.array(a, dtype=np.float64) if a.dtype.kind == "f" else a for a in arrays]

    def objective(args):
        return sum(float(np.sum(np.asarray(y, np.float64) * d))
                   for y, d in zip(_ref_outputs(ref(*args)), dys))

    out = {}
    for i in grad:
        g = np.zeros_like(base[i])
        flat, gflat = base[i].reshape(-1), g.reshape(-1)
        for j in range(flat.size):
            keep = flat[j]
            flat[j] = keep + eps
            hi = objective(base)
            flat[j] = keep - eps
            lo = objective(base)
            flat[j] = keep
            gflat[j] = (hi - lo) / (2 * eps)
        out[i] = g
    return out


def analytic_grads(op, arrays, grad, dys, graph=False, dev=None):
    """Runs op under training and returns ({input index: gradient}, forward outputs as numpy).
    With ``graph``, forward and backward are buffered on a fresh device (or ``dev``) and run
    afterwards; ``dev`` also chooses the device of an eager run (test_gpu.py)."""
    was = autograd.training
    autograd.training = True
    dev = dev if dev is not None else (sw.create_cpu_device() if graph else None)
    try:
        ts = _tensors(arrays, grad, dev)
        seeds = [tensor.from_numpy(d.astype(np.float32), dev) for d in dys]
        if graph:
            dev.EnableGraph(True)
        try:
            ys = _outputs(op(autograd, *ts))
            if len(ys) == 1:
                root, seed = ys[0], seeds[0]
            else:  # several outputs: backward from sum_k sum(y_k * dy_k)
                parts = [autograd.reduce_sum(autograd.mul(y, d), None, 0)
                         for y, d in zip(ys, seeds)]
                root, seed = autograd.add_all(*parts), None
            grads = autograd.gradients(root, seed)
        finally:
            if graph:
                dev.EnableGraph(False)
        if graph:
            dev.RunGraph()
        found = {i: grads.pop(ts[i]) for i in grad if ts[i] in grads}
        assert not grads, "gradients of tensors without stores_grad were returned"
        return {i: tensor.to_numpy(g) for i, g in found.items()}, [tensor.to_numpy(y) for y in ys]
    finally:
        autograd.training = was


def check_graph(op, arrays, grad=None, seed=0):
    """Asserts that buffering op's forward and backward into a graph and running it gives the
    eager results: forward and backward may only queue core ops, never read values."""
    arrays = [np.asarray(a) for a in arrays]
    if grad is None:
        grad = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    eager_grads, eager_outs = None, None
    rng = np.random.RandomState(seed)
    was = autograd.training
    autograd.training = True
    try:
        shapes = [y.shape for y in _outputs(op(autograd, *_tensors(arrays, [])))]
    finally:
        autograd.training = was
    dys = [rng.uniform(-1, 1, size=s) for s in shapes]
    eager_grads, eager_outs = analytic_grads(op, arrays, grad, dys)
    graph_grads, graph_outs = analytic_grads(op, arrays, grad, dys, graph=True)
    for a, b in zip(graph_outs, eager_outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg="forward in a graph")
    assert set(graph_grads) == set(eager_grads)
    for i in eager_grads:
        np.testing.assert_allclose(graph_grads[i], eager_grads[i], rtol=1e-5, atol=1e-6,
                                   err_msg="gradient of input %d in a graph" % i)


def check_op(op, ref, arrays, grad=None, rtol=1e-4, atol=1e-5, grad_rtol=2e-3, grad_atol=2e-3,
             seed=0):
    """Asserts that op (called as op(autograd, *tensors)) matches ref (called on the numpy
    arrays) forward, and that its gradients w.r.t. the float inputs listed in ``grad`` (all
    float inputs when None) match finite differences of ref."""
    arrays = [np.asarray(a) for a in arrays]
    if grad is None:
        grad = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    expected = _ref_outputs(ref(*arrays))
    rng = np.random.RandomState(seed)
    dys = [rng.uniform(-1, 1, size=e.shape) for e in expected]
    got, outs = analytic_grads(op, arrays, grad, dys)
    assert len(outs) == len(expected), "op returned %d outputs, reference %d" % (
        len(outs), len(expected))
    for y, e in zip(outs, expected):
        assert y.shape == e.shape, "forward shape %s, reference %s" % (y.shape, e.shape)
        np.testing.assert_allclose(y, e, rtol=rtol, atol=atol, err_msg="forward")
    if not grad:
        return
    want = numeric_grads(ref, arrays, grad, dys)
    for i in grad:
        assert i in got, "no gradient for input %d" % i
        assert got[i].shape == arrays[i].shape, "gradient shape %s for input of shape %s" % (
            got[i].shape, arrays[i].shape)
        scale = max(1.0, float(np.max(np.abs(want[i]))) if want[i].size else 1.0)
        np.testing.assert_allclose(got[i], want[i], rtol=grad_rtol, atol=grad_atol * scale,
                                   err_msg="gradient of input %d" % i)


def direct_backward(op, arrays, dys):
    """SINGA's way of testing an operator: inputs are plain tensors (requires_grad, not
    stores_grad), training is on, and the output's creator.backward(dy) is called directly.
    Returns (what backward returned, the forward output as numpy)."""
    was = autograd.training
    autograd.training = True
    try:
        ts = [tensor.from_numpy(np.asarray(a)) for a in arrays]
        y = op(autograd, *ts)
        dy = tensor.from_numpy(np.asarray(dys, dtype=np.float32))
        return y.creator.backward(dy.data), tensor.to_numpy(y)
    finally:
        autograd.training = was
