"""The activation theme of the op schema: elementwise activations with float attributes, each
with a fused backward op. One row per op reaches every layer (gen_schema.py, run by CMake):

    OpId k<Name> and k<Name>Backward      -> build/gen/include/singa/ops/activation_ids.def
    singa::<Name>(x, attrs...), <Name>Backward(dy, x, attrs...)  -> .../ops/activation.h
    the functors fn::<Name>Op / <Name>BackwardOp shared by the CPU and CUDA kernels
    the kernel slots, fronts and CPU/CUDA registrations  -> build/gen/src/activation_*.inc
    singa_wrap.<Name>, <Name>Backward and singa_wrap.ACTIVATION_OPS (this table)
                                          -> build/cython/gen/activation_ops.pxi
    autograd.<py_class>, autograd.<py_fn>   (singa/autograd/schema_ops.py, from ACTIVATION_OPS)
    both ONNX directions where the mapping is plain (singa/sonnx/schema_map.py)

Adding an op here is the whole change besides its test (CONTRIBUTING.md, "Adding an operator").
The rows are Python (schema/rows.py says why). Expressions: rows.Op's docstring.
"""
from rows import Attr, Onnx, Op  # noqa: F401  (schema/rows.py)

OPS = [
    Op("LeakyReLU", py_class="LeakyRelu", py_fn="leakyrelu",
       doc="x if x > 0 else a * x",
       attrs=[Attr("slope", "a", 0.01, "alpha", 0.01)],
       forward="x > T(0) ? x : T(slope * x)",
       backward="x > T(0) ? dy : T(slope * dy)",
       onnx=Onnx("LeakyRelu", 6), torch="LeakyReLU"),
    Op("Elu", doc="x if x > 0 else alpha * (exp(x) - 1)",
       attrs=[Attr("alpha", "alpha", 1.0, "alpha", 1.0)],
       forward="x > T(0) ? x : T(alpha * expm1(x))",
       backward="x > T(0) ? dy : T(dy * alpha * exp(x))",
       onnx=Onnx("Elu", 6), torch="ELU"),
    Op("SeLU", doc="gamma * (x if x > 0 else alpha * (exp(x) - 1))",
       attrs=[Attr("alpha", "alpha", 1.67326, "alpha", 1.67326319217681884765625),
              Attr("gamma", "gamma", 1.0507, "gamma", 1.05070102214813232421875)],
       forward="T(gamma * (x > T(0) ? x : T(alpha * expm1(x))))",
       backward="T(dy * gamma * (x > T(0) ? T(1) : T(alpha * exp(x))))",
       onnx=Onnx("Selu", 6), torch="SELU"),
    Op("HardSigmoid", doc="max(0, min(1, alpha * x + gamma))",
       attrs=[Attr("alpha", "alpha", 0.2, "alpha", 0.2), Attr("gamma", "gamma", 0.5, "beta", 0.5)],
       # z's NaN passes (z != z); the clamp's comparisons would turn it into 0 or 1
       forward="const T z = T(alpha * x + gamma); "
               "return z != z ? z : (z <= T(0) ? T(0) : (z >= T(1) ? T(1) : z));",
       backward="const T z = T(alpha * x + gamma); "
                "return z > T(0) && z < T(1) ? T(dy * alpha) : T(0);",
       onnx=Onnx("HardSigmoid", 6), torch=None),  # torch's Hardsigmoid fixes alpha = 1/6
    # x * relu6(x + 3) / 6 (torch.nn.Hardswish; ONNX HardSwish since opset 14). Below -3 the
    # product is x * 0: NaN for -inf as in torch and ONNX's formula (a plain 0 hid it)
    Op("HardSwish", doc="x * min(max(x + 3, 0), 6) / 6",
       forward="x <= T(-3) ? T(x * T(0)) : (x >= T(3) ? x : T(x * (x + T(3)) / T(6)))",
       backward="x < T(-3) ? T(0) : (x <= T(3) ? T(dy * (x / T(3) + T(0.5))) : dy)",
       onnx=Onnx("HardSwish", 14), torch="Hardswish"),
]

# NN ops that stay hand-written, and why their shape does not fit this theme's rows.
NOT_IN_SCHEMA = {
    "ReLU, GELU, Sigmoid, Tanh...": "attribute-free: one line of ops/elementwise.def each "
                                    "(its own generated path, with autograd's UNARY_GRADIENTS)",
    "Clamp": "its bounds may be +-inf and int32 (clip's integer saturation), and ONNX Clip takes "
             "them as inputs, not attributes",
    "PRelu": "the slope is a second tensor input with its own gradient (a reduction)",
    "SoftMax, LogSoftMax": "not elementwise (a kernel over (outer, dim, inner) around an "
                           "axis): rows of schema/nn.py; their Operators keep SINGA's "
                           "flattening axis and mask by hand",
    "MaxPool2d, AvgPool2d, Conv2d, BatchNorm": "prepared kernels with handles, workspaces and "
                                               "epilogue fusion (nn_kernels.h): schema/nn.py's "
                                               "rows",
}
