"""The DataType and LangType enum values of SINGA's core.proto, the names SINGA code imports
(``tensor.Tensor(shape, dev, core_pb2.kFloat16)``, ``tensor.sizeof(core_pb2.kInt)``). They are
singa_wrap's own constants, so both spellings mean the same dtype; no protobuf is involved."""
from .. import singa_wrap as _sw

kFloat32 = _sw.kFloat32
kFloat16 = _sw.kFloat16
kInt = _sw.kInt
kChar = _sw.kChar
kDouble = _sw.kDouble
kUChar = _sw.kUChar

# LangType (the device kinds of SINGA's core.proto)
kCpp = 0
kCuda = 1
kOpencl = 2
kNumDeviceType = 4
