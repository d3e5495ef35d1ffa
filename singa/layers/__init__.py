"""The layer classes, by theme; ``singa.layer`` re-exports them all (Apache SINGA's module)."""
from .base import Layer, LayerMeta  # noqa: F401
from .dense import Embedding, Gemm, Linear  # noqa: F401
from .conv import (AvgPool1d, AvgPool2d, BatchNorm2d, Conv2d, MaxPool1d, MaxPool2d,  # noqa: F401
                   Pooling2d, SeparableConv2d)
from .rnn import LSTM, RNN, RNN_Base, CudnnRNN  # noqa: F401
from .simple import (Add, BinaryCrossEntropy, Cat, CrossEntropy, Dropout, Flatten,  # noqa: F401
                     MeanSquareError, ReLU, Reshape, ScatterElements, Sigmoid, SoftMax,
                     SoftMaxCrossEntropy, Tanh)

__all__ = ["Layer", "LayerMeta", "Linear", "Gemm", "Embedding", "Conv2d", "SeparableConv2d",
           "BatchNorm2d", "Pooling2d", "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d",
           "RNN_Base", "RNN", "LSTM", "CudnnRNN", "ReLU", "Sigmoid", "Tanh", "Add", "Flatten",
           "Cat", "Reshape", "Dropout", "SoftMax", "ScatterElements", "SoftMaxCrossEntropy",
           "CrossEntropy", "MeanSquareError", "BinaryCrossEntropy"]
from .rnn import GRU  # noqa: F401,E402  (recurrent layers beyond SINGA 3.3)
__all__ += ["GRU"]
from .attention import (GELU, LayerNorm, LearnedPositionalEmbedding,  # noqa: F401,E402
                        MultiHeadAttention, MultiheadAttention, SinusoidalPositionalEmbedding)
from .transformer import (Transformer, TransformerDecoder,  # noqa: F401,E402
                          TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
__all__ += ["LayerNorm", "GELU", "MultiHeadAttention", "MultiheadAttention",
            "SinusoidalPositionalEmbedding", "LearnedPositionalEmbedding",
            "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
            "TransformerDecoder", "Transformer"]
