"""sonnx/names.py, the one table of the plain ONNX ops: each row names a real autograd function
and the Operator class it records, and both directions come from it."""
import numpy as np
import pytest

from singa import autograd, tensor
from singa.sonnx import frontend, frontend_tensor, names, ops

TABLES = {"UNARY": names.UNARY, "BINARY": names.BINARY, "VARIADIC": names.VARIADIC,
          "COMPARE": names.COMPARE, "LOGICAL": names.LOGICAL}
ROWS = [(t, k) for t, table in TABLES.items() for k in table]


@pytest.mark.parametrize("table,onnx_type", ROWS)
def test_each_row_names_the_function_and_the_operator_it_records(table, onnx_type):
    fn, cls = TABLES[table][onnx_type]
    nin = {"UNARY": 1, "BINARY": 2, "VARIADIC": 3, "COMPARE": 2, "LOGICAL": 2}[table]
    if onnx_type == "Not":
        nin = 1
    x = tensor.from_numpy(np.full((2, 2), 0.5, "float32"))
    x.requires_grad = True
    training, autograd.training = autograd.training, True  # so that y records its creator
    try:
        y = getattr(autograd, fn)(*([x] * nin))
    finally:
        autograd.training = training
    assert type(y.creator).__name__ == cls
    assert onnx_type in ops.HANDLERS


def test_export_maps_are_the_reverse_of_the_import_tables():
    for table in (names.UNARY, names.BINARY, names.VARIADIC):
        for onnx_type, (_, cls) in table.items():
            assert frontend._PLAIN[cls] == onnx_type
    assert {v: k for k, v in frontend_tensor._COMPARE.items()}.keys() == names.COMPARE.keys()
    assert {v: k for k, v in frontend_tensor._LOGICAL.items()}.keys() == names.LOGICAL.keys()
    # one ONNX type per class and one class per ONNX type: the reverse loses nothing
    rows = [r for t in TABLES.values() for r in t.values()]
    assert len({cls for _, cls in rows}) == len(rows)
