"""The kernel registry from Python: singa_wrap.kernel_table() lists every op slot and backend;
each op has a CPU reference kernel and a oneDNN kernel or stated fallback, and every line of
elementwise.def has its slot (so an op added to the table without kernels fails here)."""
import os
import re
from collections import defaultdict

from singa import singa_wrap as sw

DEF = os.path.join(os.path.dirname(__file__), "..", "..", "cpp", "include", "singa", "ops",
                   "elementwise.def")


def table():
    rows = defaultdict(dict)
    for op, backend, status in sw.kernel_table():
        assert backend not in rows[op], (op, backend)
        rows[op][backend] = status
    return rows


def resolves(row, backend):
    """Does `backend` reach a kernel through its stated fallbacks?"""
    for _ in range(len(row) + 1):
        status = row[backend]
        if status == "kernel":
            return True
        if not status.startswith("fallback -> "):
            return False
        backend = status[len("fallback -> "):]
    return False


def test_rows_are_sorted_and_cover_every_backend():
    t = sw.kernel_table()
    assert t == sorted(t, key=lambda r: r[0])
    for op, row in table().items():
        assert set(row) == {"cpu", "dnnl", "cuda"}, op
        for status in row.values():
            assert status == "kernel" or status == "missing" or status.startswith("fallback -> ")


def test_every_op_has_a_cpu_kernel_and_a_dnnl_kernel_or_fallback():
    rows = table()
    assert len(rows) > 60
    for op, row in rows.items():
        assert row["cpu"] == "kernel", (op, row)
        assert row["dnnl"] != "missing", (op, row)
        assert resolves(row, "dnnl"), (op, row)
        if sw.USE_CUDA:
            assert resolves(row, "cuda"), (op, row)


def test_every_elementwise_table_line_has_its_slot():
    with open(DEF) as f:
        lines = f.readlines()
    names = [m.group(2) for m in (re.match(r"^SINGA_(UNARY|BINARY)\((\w+),", ln) for ln in lines)
             if m]
    assert len(names) > 40
    rows = table()
    for name in names:
        assert name in rows, name + " (elementwise.def) has no kernel slot"
        assert rows[name]["cpu"] == "kernel", name
    for op in ("ReduceSum", "Gemm", "SoftmaxCrossEntropyForward", "IndexSelect", "SGDUpdate",
               "StridedCopy"):
        assert rows[op]["cpu"] == "kernel", op
