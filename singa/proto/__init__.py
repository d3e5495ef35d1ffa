"""Apache SINGA's generated protobuf modules, as far as user code reads them: ``core_pb2``'s
DataType values (``from singa.proto import core_pb2; core_pb2.kFloat32``)."""
