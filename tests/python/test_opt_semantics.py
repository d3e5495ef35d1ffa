"""Optimizer behaviours that mutation testing (tools/mutate.py, TESTING.md) found unpinned: each
test fails on a one-line change of singa.opt that the rest of the suite let through.
References: numpy computations of the update formulas of SINGA 3.3's opt.py."""
import numpy as np
import pytest

from singa import device, opt, tensor

F32 = np.float32


def N(t):
    return tensor.to_numpy(t)


def adam_np(p, grads, lr, b1=0.9, b2=0.999, eps=1e-8):
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p


def rmsprop_np(p, grads, lr, rho=0.9, eps=1e-8):
    avg = np.zeros_like(p)
    for g in grads:
        avg = rho * avg + (1 - rho) * g * g
        p = p - lr * g / np.sqrt(avg + eps)
    return p


@pytest.mark.parametrize("make,ref", [(lambda: opt.Adam(lr=0.05), adam_np),
                                      (lambda: opt.RMSProp(lr=0.05), rmsprop_np)])
def test_parameter_on_another_device_than_the_optimizer(make, ref):
    # the optimizer's hyper-parameters move to the parameter's device on first use; the
    # per-step values (1 - beta, bias corrections) must still be computed there
    optimizer = make()  # created on the default device
    dev = device.create_cpu_device(2)
    rng = np.random.default_rng(5)
    p0 = rng.standard_normal(4).astype(F32)
    grads = [rng.standard_normal(4).astype(F32) for _ in range(3)]
    p = tensor.from_numpy(p0, dev)
    p.requires_grad, p.stores_grad = True, True
    for g in grads:
        optimizer.update(p, tensor.from_numpy(g, dev))
        optimizer.step()
    assert p.device == dev
    np.testing.assert_allclose(N(p), ref(p0.astype(np.float64), grads, 0.05), rtol=1e-4,
                               atol=1e-5)

