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
from rows import Fusable, Handle, NnOp, Onnx  # noqa: F401  (schema/rows.py)

POOLING = Handle("PoolingHandle", header="singa/ops/nn.h", cython="CPoolingHandle",
                 py="PoolingHandle")

OPS = [
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

# Ops written elsewhere that a graph absorbs into a producer's epilogue (Graph::FuseEpilogues
# matches these OpIds; a producer's kernel says which parts it applies: FusionHooks::accepts).
FUSABLE = [
    Fusable("BatchNormForwardInference", "kEpiBatchNorm"),
    Fusable("Add", "kEpiAdd"),
    Fusable("ReLU", "kEpiReLU"),
]

NOT_IN_SCHEMA = {
    "Conv2d": "its kernels' ReLU/epilogue variants (HasReluPostOp), the flops it declares and "
              "its bias-less form need Args fields the generated launch does not pass yet",
    "BatchNorm": "its training forward's rerun form (RerunOf) and the running statistics it "
                 "updates in place: a launch the generator does not write yet",
    "MaxPool1d, AvgPool1d, GlobalAveragePool": "layers over Pool2dForward (1 x L windows) and "
                                               "ReduceMean: no op of their own",
}
