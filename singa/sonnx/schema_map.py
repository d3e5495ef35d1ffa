"""Both ONNX directions of the op schema's rows whose mapping is plain: one node, the attributes
renamed (schema/activations.py: each row's Onnx(...) and Attr(..., onnx name, ONNX default)).

    IMPORT["HardSwish"]([x], {}, 14, {})        # ONNX node -> [autograd.hardswish(x)]
    export(exporter, op, ins, outs)             # a schema Operator -> its ONNX node; else False

Nothing here names an op: a row added to the schema is imported and exported without an edit.
"""
from .. import autograd
from ..autograd.schema_ops import SCHEMA_ROWS
from .errors import SonnxError


def _opsets(onnx_row):
    name, first, last = onnx_row
    return "opset %d%s" % (first, " to %d" % last if last else " on")


def _importer(cls_name, fn, attrs):
    def handler(ins, attrs_given, opset, cache):
        kw = {key: float(attrs_given.get(onnx_name, onnx_default))
              for _, key, _, onnx_name, onnx_default in attrs}
        return [fn(ins[0], **kw)]
    handler.__name__ = "import_" + cls_name
    return handler


def _import_table():
    table = {}
    for cls, row in SCHEMA_ROWS.items():
        if row[5] is not None:
            table[row[5][0]] = _importer(cls.__name__, getattr(autograd, row[2]), row[4])
    return table


IMPORT = _import_table()


def export(exporter, op, ins, outs):
    """Emits Operator ``op`` as its ONNX node through ``exporter.node`` when it is a schema op
    with an ONNX name (True); False for any other operator."""
    row = SCHEMA_ROWS.get(type(op))
    if row is None or row[5] is None:
        return False
    name, first, last = row[5]
    if exporter.opset < first or (last is not None and exporter.opset > last):
        raise SonnxError("to_onnx: %s exports as ONNX %s, defined for %s; the export is at "
                         "opset %d (pass opset_version=%d)"
                         % (op.name, name, _opsets(row[5]), exporter.opset, first))
    exporter.node(name, ins, outs, **{onnx_name: float(getattr(op, key))
                                      for _, key, _, onnx_name, _ in row[4]})
    return True
