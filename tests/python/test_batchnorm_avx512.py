"""Batch norm's AVX-512 copy (cpp/src/ops/cpu/batchnorm_avx512.cc) computes the bits of the
baseline kernels: the same script, once as it is and once with AVX-512 masked off
(SINGA_CPU_FEATURES_MASK, in a subprocess), gives the same bytes: the training forward, the
inference forward and the backward in float32 and bfloat16, plain (eager) and in the kept
layouts of a recorded bf16 AMP / float32 training step (channels-last, nChw16c).

    SINGA_CPU_FEATURES_MASK=avx512f python -c "..."   # the baseline kernels on this CPU
"""
import hashlib
import os

import pytest

from singa import device

from isa_copies import digest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = r"""
import hashlib, sys
import numpy as np
sys.path.insert(0, %r)
from singa import singa_wrap as sw, tensor
from test_bf16_weight_grads import train
h = hashlib.sha256()
rng = np.random.default_rng(0)
for shape in ((3, 5, 7, 9), (4, 32, 6, 5), (64, 40)):
    for dt in (tensor.float32, tensor.bfloat16):
        x = tensor.from_numpy(rng.normal(1, 2, size=shape).astype(np.float32)).as_type(dt).data
        C = shape[1]
        p = [tensor.from_numpy(v.astype(np.float32)).data
             for v in (rng.normal(size=C), rng.normal(size=C), np.zeros(C), np.ones(C))]
        y, m, v = sw.BatchNormForwardTraining(x, p[0], p[1], p[2], p[3], 0.1, 1e-5, True)
        dy = tensor.from_numpy(rng.normal(size=shape).astype(np.float32)).as_type(dt).data
        outs = [y, m, v, p[2], p[3]] + list(sw.BatchNormBackward(dy, x, p[0], m, v, 1e-5))
        outs.append(sw.BatchNormForwardInference(x, p[0], p[1], p[2], p[3], 1e-5, False))
        for t in outs:
            h.update(sw.to_numpy(t.AsType(sw.kFloat32)).tobytes())
for precision in ("float32", "bfloat16"):
    losses, params = train(precision)[:2]
    h.update(np.array(losses).tobytes())
    for k in sorted(params):
        h.update(params[k].tobytes())
print("DIGEST", h.hexdigest())
""" % HERE


@pytest.mark.skipif(not {"avx512f", "avx512bw", "avx512_bf16"} <= set(device.cpu_features()),
                    reason="needs a CPU with AVX-512 (and avx512_bf16 for the bf16 AMP step)")
def test_the_avx512_copy_gives_the_baseline_bits():
    assert digest(SCRIPT) == digest(SCRIPT, "avx512f")
