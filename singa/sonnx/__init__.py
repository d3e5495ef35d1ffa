"""singa.sonnx: ONNX import and export with Apache SINGA 3.3's sonnx API.

Example::

    from singa import autograd, sonnx
    autograd.training = True
    y = net.forward(x)                          # trace the forward
    m = sonnx.to_onnx([x], [y])                 # an onnx.ModelProto; sonnx.save(m, "net.onnx")
    rep = sonnx.prepare(sonnx.load("net.onnx"), dev)
    out, = rep.run([x])

Export walks the recorded autograd operators (frontend.py); import runs ONNX nodes with the
autograd operators (ops.py, backend.py), so an imported model trains like a native one.
"""
import onnx

from .errors import SonnxError, UnsupportedOpError  # noqa: F401
from .frontend import SingaFrontend, EXPORT_OPSET  # noqa: F401
from .backend import SingaBackend, SingaRep, SONNXModel, SUPPORTED_OPS, MIN_OPSET  # noqa: F401

to_onnx = SingaFrontend.singa_to_onnx_model
prepare = SingaBackend.prepare
run_node = SingaBackend.run_node
save = onnx.save
load = onnx.load
