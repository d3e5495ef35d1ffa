"""IR versions for the ONNX models tests build, so that the installed onnxruntime loads them.

    from onnx_versions import with_least_ir, newest_ort_opset
    m = with_least_ir(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))

helper.make_model stamps onnx's newest IR version whatever the opset, and onnx may be newer than
onnxruntime: the GPU image pairs onnx 1.23 (IR 14, opset 28) with onnxruntime 1.30, which loads
IR 13 at most ("Unsupported model IR version: 14"). A model needs only the least IR of its
opsets (onnx's own table), and a test of "the newest opset" can only compare with onnxruntime at
the newest opset onnxruntime runs.
"""
import functools

import onnx
from onnx import TensorProto, helper


def with_least_ir(m):
    """m with the least IR version its opset imports allow (m itself, changed)."""
    m.ir_version = helper.find_min_ir_version_for(list(m.opset_import), ignore_unknown=True)
    return m


@functools.lru_cache(maxsize=None)
def newest_ort_opset():
    """The newest default-domain opset that both onnx and the installed onnxruntime know."""
    import onnxruntime as ort
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [x], [y])
    for opset in range(onnx.defs.onnx_opset_version(), 11, -1):
        m = with_least_ir(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]))
        try:
            ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:  # onnxruntime's own error types differ between releases
            continue
        return opset
    return 11
