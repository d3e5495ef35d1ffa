"""The NN theme of the op schema: ops with a handle and a prepared kernel per backend
(cpp/src/ops/nn_kernels.h). The handle, the front's checks and the kernel bodies stay written by
hand; gen_schema.py (`nn` and `nnpxi`, run by CMake) writes the rest from the rows:

    OpIds                                 -> build/gen/include/singa/ops/nn_ids.def
    the public declarations               -> .../singa/ops/nn_schema.h (the end of singa/ops/nn.h)
    Args structs, kernel slots, Launch<Name>(args): the OpDesc (reads, writes, id, recomputable),
    Run<Name>(reads..., h): the writes made by the rows' shape rules, then the launch
                                          -> build/gen/src/nn_args.inc, nn_launch.inc, nn_slots.inc
    the graph's epilogue partners (FUSABLE, by OpId) -> build/gen/src/epilogue_ops.inc
    Cython declarations, wrappers and singa_wrap.NN_OPS -> build/cython/gen/nn_ops.pxi
    autograd.<py_class>, autograd.<py_fn>   (singa/autograd/schema_ops.py, from NN_OPS)

The rows' fields: rows.NnOp's docstring. A new NN op is a row, its front's checks (one function
that makes the outputs and calls Launch<Name>), its kernel bodies and its tests.
"""
from rows import Field, Fusable, Handle, NnOp, Onnx, Param  # noqa: F401  (schema/rows.py)

CONV = Handle("ConvHandle", header="singa/ops/nn.h", cython="CConvHandle", py="ConvHandle")
POOLING = Handle("PoolingHandle", header="singa/ops/nn.h", cython="CPoolingHandle",
                 py="PoolingHandle")
_RELU = Param("bool", "relu", "false", "False")


# 2-d convolution, NCHW, W (out_channels, in_channels / groups, kh, kw) = h.WeightShape(). The
# autograd Operator (_Conv2d, autograd/nn.py) is written by hand: its bias is optional, its
# gradients are three ops, and autocast asks it for float32 weight gradients per input.
def _conv_flops(out, w):
    """Each output of a convolution, in any direction, is a dot product of W.Size() / K pairs
    per image (K: the output channels)."""
    return "2.0 * a.%s.Size() * a.%s.Size() / std::max<size_t>(a.h.num_filters, 1)" % (out, w)


# float32_grad: a bfloat16 kernel writes dW (db) straight into float32 (the gradient of a float32
# master weight); the front casts the rest (float16) after the op.
_F32_GRAD = Param("bool", "float32_grad", "false", "False")
_GRAD_DTYPE = "float32_grad && %s.data_type() == kBFloat16 ? kFloat32 : %s.data_type()"

OPS = [
    NnOp("Conv2dForward", doc="y = conv(x, W) + b. x: (N, C, H, W) matching the handle's C, H, W; "
                             "W: h.WeightShape(); b: (out_channels,), or empty (Python None) "
                             "for no bias. relu: y = max(0, conv(x, W) + b)",
         handle=CONV, inputs=["x", "W", "b?"], params=[_RELU], args="ConvFwdArgs",
         reads=["x", "W", "b"], writes=["y"], fields=[Field("Epilogue", "epi")],
         shapes={"y": "h.OutputShape(x.shape(0))"},
         ids=["Conv2dForwardReLU", "Conv2dForward"], id_by="relu",
         backends=["kCpuRef", "kCpuDnnl", "kCuda"], onnx=[Onnx("Conv", 1)],
         flops=_conv_flops("y", "W")),
    NnOp("Conv2dBackwardX", doc="dL/dx given dy (N, out_channels, conv_height, conv_width)",
         handle=CONV, inputs=["dy", "W"], args="ConvBwdXArgs", reads=["dy", "W"],
         writes=["dx"], shapes={"dx": "Shape{dy.shape(0), h.channels, h.height, h.width}"},
         ids=["Conv2dBackwardX"], backends=["kCpuRef", "kCpuDnnl", "kCuda"],
         flops=_conv_flops("dy", "W")),
    NnOp("Conv2dBackwardW", doc="dL/dW (summed over the batch, which may be empty: zeros), shape "
                               "h.WeightShape(), in x's dtype; float32_grad: in float32 "
                               "whatever x's dtype (the gradient of the float32 master weight "
                               "that mixed precision cast to bfloat16 / float16: a bfloat16 "
                               "oneDNN convolution writes it directly, unrounded)",
         handle=CONV, inputs=["dy", "x"], params=[_F32_GRAD], args="ConvBwdWArgs",
         reads=["dy", "x"], writes=["dW"],
         shapes={"dW": ("h.WeightShape()", _GRAD_DTYPE % ("x", "x"))},
         ids=["Conv2dBackwardW"], backends=["kCpuRef", "kCpuDnnl", "kCuda"],
         flops=_conv_flops("dy", "dW")),
    NnOp("Conv2dBackwardB", doc="dL/db = dy summed over N, H, W: shape (out_channels,); "
                               "float32_grad as for dW",
         handle=CONV, inputs=["dy"], params=[_F32_GRAD], args="ConvBwdBArgs", reads=["dy"],
         writes=["db"], shapes={"db": ("Shape{h.num_filters}", _GRAD_DTYPE % ("dy", "dy"))},
         ids=["Conv2dBackwardB"], backends=["kCpuRef", "kCuda"]),
]

OPS += [
    NnOp("Pool2dForward", doc="2-d max or average pooling of x (N, C, H, W) with h's C, H, W and "
                             "geometry; padding never wins a max",
         handle=POOLING, inputs=["x"], args="PoolFwdArgs", reads=["x"], writes=["y"],
         shapes={"y": "h.OutputShape(x.shape(0))"},
         ids=["MaxPool2dForward", "AvgPool2dForward"], id_by="h.is_max_pooling",
         backends=["kCpuRef", "kCpuDnnl", "kCuda"], backward="Pool2dBackward",
         py_class="_Pooling2d", py_fn="pooling_2d", odd_padding=True,
         onnx=[Onnx("MaxPool", 1), Onnx("AveragePool", 1)]),
    NnOp("Pool2dBackward", doc="dx of 2-d pooling given dy and the forward's x (max: each window's "
                               "gradient to the first row-major position of its maximum; avg: "
                               "spread over the divisor); y, the forward's output, may be "
                               "empty (checked when given)",
         handle=POOLING, inputs=["dy", "x", "y?"], args="PoolBwdArgs", reads=["dy", "x"],
         writes=["dx"], shapes={"dx": "x.shape()"}, ids=["MaxPool2dBackward", "AvgPool2dBackward"], id_by="h.is_max_pooling",
         backends=["kCpuRef", "kCpuDnnl", "kCuda"]),
]

# Batch normalisation over axis 1 of x (N, C, ...): the per-channel tensors (scale, bias, the
# statistics) hold C float32 values; x views as (N, C, S) (the Args' N, C, S). The autograd
# Operator (_BatchNorm2d, autograd/nn.py) is written by hand: it picks training or inference.
_BN_NCS = [Field("size_t", "N", "0", "x.shape(0)"), Field("size_t", "C", "0", "x.shape(1)"),
           Field("size_t", "S", "1", "Product(x.shape(), 2)")]
_BN_STAT = ("Shape{C}", "kFloat32")


def _bn_flops(per_element):
    """The arithmetic of a batch norm: per element of x, the count its row gives (the
    per-channel work, C values, is left out). Below the roofline's bytes at any dtype
    (graph.h: "Cost model"): a plan's estimate stays the bytes moved."""
    return "%.1f * a.N * a.C * a.S" % per_element


_EPS = Param("float", "eps", None, "1e-5")

OPS += [
    NnOp("BatchNormForwardTraining",
         doc="Batch normalisation with the batch's statistics: returns y, batch_mean and "
             "batch_var, batch_var biased (pass both to BatchNormBackward with the same "
             "eps); updates running_mean and running_var in place (either may be null): "
             "running = (1 - momentum) * running + momentum * batch, the variance unbiased "
             "(PyTorch's convention); relu: y = max(0, y) in the same pass",
         handle=None, inputs=["x", "scale", "bias", "running_mean*", "running_var*"],
         params=[Param("float", "momentum", None, "0.1"), _EPS, _RELU],
         args="BnTrainArgs", reads=["x", "scale", "bias"], writes=["y", "mean", "var"],
         fields=_BN_NCS + [Field("Epilogue", "epi")],
         shapes={"y": "x.shape()", "mean": _BN_STAT, "var": _BN_STAT},
         ids=["BatchNormForwardTrainingReLU", "BatchNormForwardTraining"], id_by="relu",
         backends=["kCpuRef", "kCpuDnnl", "kCuda"], backward="BatchNormBackward",
         rerun="RerunOf", flops=_bn_flops(6)),  # sum; squared deviation sum (3); x * k + b (2)
    NnOp("BatchNormForwardInference",
         doc="y = (x - running_mean) / sqrt(running_var + eps) * scale + bias (then "
             "max(0, y) when relu)",
         handle=None, inputs=["x", "scale", "bias", "running_mean", "running_var"],
         params=[_EPS, _RELU], args="BnInferArgs",
         reads=["x", "scale", "bias", "running_mean", "running_var"], writes=["y"],
         fields=_BN_NCS + [Field("Epilogue", "epi")], shapes={"y": "x.shape()"},
         ids=["BatchNormForwardInferenceReLU", "BatchNormForwardInference"], id_by="relu",
         backends=["kCpuRef", "kCpuDnnl", "kCuda"], onnx=[Onnx("BatchNormalization", 1)],
         fusable="kEpiBatchNorm", as_epilogue="BnAsEpilogue",
         flops=_bn_flops(2)),  # x * k + b, scale and statistics folded per channel
    NnOp("BatchNormBackward",
         doc="dx, dscale and dbias of the training forward; mean and var are the batch "
             "statistics BatchNormForwardTraining returned",
         handle=None, inputs=["dy", "x", "scale", "mean", "var"], params=[_EPS],
         args="BnBwdArgs", reads=["dy", "x", "scale", "mean", "var"],
         writes=["dx", "dscale", "dbias"], fields=_BN_NCS + [Field("Epilogue", "epi")],
         shapes={"dx": "x.shape()", "dscale": _BN_STAT, "dbias": _BN_STAT},
         ids=["BatchNormBackward"], backends=["kCpuRef", "kCpuDnnl", "kCuda"],
         flops=_bn_flops(9)),  # sum dy; sum dy (x - mean) (3); dx (5)
]


# Softmax along one axis of any tensor, viewed as (outer, dim, inner) around it (float32, or
# float16 on a CUDA device; bfloat16 through float32 in the front). The autograd Operators
# (SoftMax, LogSoftMax: autograd/activation.py) and the losses stay hand-written.
def _around(t, op):
    return [Field("size_t", "ax", "0", 'NormalizeAxis(axis, %s.nDim(), "%s")' % (t, op)),
            Field("size_t", "outer", "1", "Product(%s.shape(), 0, ax)" % t),
            Field("size_t", "dim", "1", "%s.shape(ax)" % t),
            Field("size_t", "inner", "1", "Product(%s.shape(), ax + 1)" % t)]


_AXIS = Param("int", "axis", "-1", "-1")
OPS += [
    NnOp("SoftMax", doc="exp(x - max) / sum(exp(x - max)) along `axis`", handle=None,
         inputs=["x"], params=[_AXIS], args="SoftMaxArgs", reads=["x"], writes=["y"],
         fields=_around("x", "SoftMax"), shapes={"y": "x.shape()"}, ids=["SoftMax"],
         backward="SoftMaxBackward", onnx=[Onnx("Softmax", 1)]),
    NnOp("LogSoftMax", doc="x - log(sum(exp(x))) along `axis`, computed stably", handle=None,
         inputs=["x"], params=[_AXIS], args="SoftMaxArgs", reads=["x"], writes=["y"],
         fields=_around("x", "LogSoftMax"), shapes={"y": "x.shape()"}, ids=["LogSoftMax"],
         onnx=[Onnx("LogSoftmax", 1)]),
    NnOp("SoftMaxBackward", doc="The gradient of SoftMax: given y = SoftMax(x) and dy, "
                                "dx = y * (dy - sum(dy * y)) along `axis`", handle=None,
         inputs=["dy", "y"], params=[_AXIS], args="SoftMaxBwdArgs", reads=["dy", "y"],
         writes=["dx"], fields=_around("y", "SoftMaxBackward"), shapes={"dx": "y.shape()"},
         ids=["SoftMaxBackward"]),
]

# Ops written elsewhere that a graph absorbs into a producer's epilogue (Graph::FuseEpilogues
# matches these OpIds; a producer's kernel says which parts it applies: FusionHooks::accepts).
FUSABLE = [
    Fusable("Add", "kEpiAdd"),
    Fusable("ReLU", "kEpiReLU"),
]

NOT_IN_SCHEMA = {
    "MaxPool1d, AvgPool1d, GlobalAveragePool": "layers over Pool2dForward (1 x L windows) and "
                                               "ReduceMean: no op of their own",
}
