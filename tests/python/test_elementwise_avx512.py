"""The elementwise table's AVX-512 copy (cpp/src/ops/cpu/elementwise_avx512.cc) computes the bits
of the baseline loops: every row of the table, in float32, bfloat16 and (FI rows) int32, on
special values (NaN, +-inf, +-0, 1e30, denormals, int32's limits), contiguous, broadcast and
strided, gives the same bytes (NaN's sign and payload aside) in a subprocess as it is and in
one with AVX-512 masked off (SINGA_CPU_FEATURES_MASK).

    SINGA_CPU_FEATURES_MASK=avx512f python -c "..."   # the baseline loops on this CPU
"""

import pytest

from singa import device

from isa_copies import digest

SCRIPT = r"""
import hashlib
import numpy as np
from singa import singa_wrap as sw, tensor
h = hashlib.sha256()
rng = np.random.default_rng(0)
n = 4099  # not a multiple of any vector width: every loop's tail runs
x = (rng.standard_normal(n) * 8).astype(np.float32)
x[:12] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40, -1e-40, 88.7, -104.0, 0.5]
y = (rng.standard_normal(n) * 3).astype(np.float32)
y[:12] = [2.0, np.nan, 0.0, -0.0, np.inf, 3.0, -7.0, 1e-38, 0.25, -1.5, 1e30, np.inf]
i = rng.integers(-2 ** 31, 2 ** 31, n).astype(np.int32)
i[:4] = [-2 ** 31, 2 ** 31 - 1, 0, -1]
j = rng.integers(-40, 40, n).astype(np.int32)
j[:4] = [-1, 0, -2 ** 31, 2]
def core(a):
    return tensor.from_numpy(a).data
operands = {"float32": (core(x), core(y)),
            "bfloat16": (core(x).AsType(sw.kBFloat16), core(y).AsType(sw.kBFloat16)),
            "int32": (core(i), core(j))}
count = 0
for name, arity, kinds in sw.ELEMENTWISE_OPS:
    f = getattr(sw, name)
    for dt, (a, b) in operands.items():
        if dt == "int32" and "I" not in kinds:
            continue
        m = sw.Reshape(sw.SliceOn(a, 0, 4089, 0), [29, 141])  # 29 * 141 of the 4099
        mt = sw.Transpose(m, [1, 0])             # strided
        if arity == 1:
            outs = [f(a), f(mt)]
        else:
            bm = sw.Reshape(sw.SliceOn(b, 0, 4089, 0), [29, 141])
            col = sw.Reshape(sw.SliceOn(b, 0, 29, 0), [29, 1])
            outs = [f(a, b), f(mt, sw.Transpose(bm, [1, 0])), f(m, col), f(col, m),
                    f(a, 3.0), f(-2.0, a)]
        for t in outs:
            v = sw.to_numpy(t.AsType(sw.kFloat32) if dt == "bfloat16" else t)
            if v.dtype.kind == "f":  # a NaN's sign and payload are not numbers (GELU's differ)
                v[np.isnan(v)] = np.nan
            h.update(v.tobytes())
            count += 1
print("DIGEST", count, h.hexdigest())
"""


@pytest.mark.skipif(not {"avx512f", "avx512bw", "avx512dq", "avx512vl"}
                    <= set(device.cpu_features()), reason="needs a CPU with AVX-512")
def test_the_avx512_copy_gives_the_baseline_bits():
    wide = digest(SCRIPT)
    assert int(wide.split()[1]) > 300  # every row ran, in each dtype and layout
    assert wide == digest(SCRIPT, "avx512f")
