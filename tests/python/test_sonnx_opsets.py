"""Ops whose ONNX signature changed between opsets import in every form (issue 11, point 2):
axes and sizes as attributes or as inputs, checked against onnxruntime at opsets 11, 13, 18 and
the newest both onnx and onnxruntime know; the attribute forms of opsets < 11 go through onnx's
version converter.

    pytest -q tests/python/test_sonnx_opsets.py
"""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from onnx import helper, numpy_helper, TensorProto  # noqa: E402

from singa import device, sonnx  # noqa: E402

from onnx_versions import newest_ort_opset, with_least_ir  # noqa: E402

NEWEST = newest_ort_opset()  # onnx may know newer opsets than onnxruntime runs
OPSETS = sorted({11, 13, 18, NEWEST})


def _i64(*v):
    return np.array(v, np.int64)


def _f32(*v):
    return np.array(v, np.float32)


def _model(op_type, opset, x, n_out=1, inputs=(), **attrs):
    """One node reading x and the constant ``inputs`` (name -> array, or None for an omitted
    optional input), as a model of ``opset``."""
    names = ["x"] + [n if a is not None else "" for n, a in inputs]
    inits = [numpy_helper.from_array(a, n) for n, a in inputs if a is not None]
    outs = ["y%d" % i for i in range(n_out)]
    g = helper.make_graph([helper.make_node(op_type, names, outs, **attrs)], op_type,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                           for o in outs], initializer=inits)
    m = with_least_ir(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]))
    return onnx.shape_inference.infer_shapes(m)  # the outputs' shapes, which the checker wants


def _check(m, x):
    refs = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = sonnx.prepare(m, device.get_default_device()).run([x])
    assert len(got) == len(refs)
    for g, r in zip(got, refs):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def _axes(opset, since, axes, **attrs):
    """The axes as an input from opset ``since``, else as an attribute."""
    if opset >= since:
        return dict(inputs=[("axes", _i64(*axes))], **attrs)
    return dict(axes=list(axes), **attrs)


# name -> (op type, x's shape, number of outputs, the node's inputs and attributes at opset)
CASES = {
    "squeeze": ("Squeeze", (3, 1, 4, 1), 1, lambda o: _axes(o, 13, [1, -1])),
    "unsqueeze": ("Unsqueeze", (3, 4), 1, lambda o: _axes(o, 13, [0, 3])),
    "reduce_sum": ("ReduceSum", (2, 3, 4), 1, lambda o: _axes(o, 13, [0, -1], keepdims=0)),
    "reduce_mean": ("ReduceMean", (2, 3, 4), 1, lambda o: _axes(o, 18, [1], keepdims=1)),
    "split_sizes": ("Split", (2, 5), 2,
                    lambda o: dict(inputs=[("split", _i64(3, 2))], axis=1) if o >= 13
                    else dict(split=[3, 2], axis=1)),
    "split_equal": ("Split", (6, 2), 3,
                    lambda o: dict(num_outputs=3) if o >= 18 else {}),
    "clip": ("Clip", (3, 4), 1, lambda o: dict(inputs=[("lo", _f32(-0.5)), ("hi", _f32(0.4))])),
    "clip_max_only": ("Clip", (3, 4), 1,
                      lambda o: dict(inputs=[("lo", None), ("hi", _f32(0.2))])),
    "slice": ("Slice", (4, 6), 1,
              lambda o: dict(inputs=[("s", _i64(1, -1)), ("e", _i64(2 ** 62, -7)),
                                     ("a", _i64(0, 1)), ("st", _i64(1, -2))])),
    "pad": ("Pad", (3, 4), 1,
            lambda o: dict(inputs=[("p", _i64(1, 2)), ("v", _f32(0.5)), ("a", _i64(1))])
            if o >= 18 else dict(inputs=[("p", _i64(0, 1, 0, 2)), ("v", _f32(0.5))])),
    "resize": ("Resize", (1, 2, 3, 3), 1,
               lambda o: dict(inputs=[("roi", None), ("sc", _f32(2, 3))], axes=[2, 3])
               if o >= 18 else dict(inputs=[("roi", _f32()), ("sc", _f32(1, 1, 2, 3))])),
}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_signature_forms_import(name, opset, rng):
    op_type, shape, n_out, spec = CASES[name]
    x = rng.standard_normal(shape).astype(np.float32)
    _check(_model(op_type, opset, x, n_out, **spec(opset)), x)


@pytest.mark.parametrize("op_type,opset,attrs", [
    ("Clip", 6, dict(min=-0.5, max=0.4)),                       # bounds as attributes
    ("Slice", 9, dict(starts=[1, 0], ends=[3, -1], axes=[0, 1])),  # starts... as attributes
    ("Squeeze", 1, dict(axes=[1])),
    ("ReduceSum", 1, dict(axes=[0], keepdims=0)),
])
def test_old_opset_attribute_forms_convert(op_type, opset, attrs, rng):
    x = rng.standard_normal((4, 1, 5) if op_type == "Squeeze" else (4, 5)).astype(np.float32)
    m = _model(op_type, opset, x, **attrs)
    m.ir_version = 7  # the IR of the opsets onnxruntime still runs with these forms
    _check(m, x)
    # ... and the imported opset is at least sonnx's minimum, through the converter
    assert sonnx.prepare(m, device.get_default_device()).opset >= sonnx.MIN_OPSET
