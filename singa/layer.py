"""Layers: the building blocks of models (Apache SINGA 3.x's singa.layer).

Example::

    from singa import layer, tensor
    fc = layer.Linear(10)                  # in_features comes from the first input
    y = fc(tensor.Tensor((4, 784)))        # creates fc.W (784, 10) and fc.b (10,)
    fc.get_params()                        # {'W': ..., 'b': ...}; 'fc1.W'... inside a Model

A layer creates its parameters lazily from its first input, registers the layers set as its
attributes, and names parameters by attribute path (``conv1.W`` inside a Model). See
singa/layers/base.py for the rules; the classes live in singa/layers/ by theme::

  dense   Linear, Gemm, Embedding
  conv    Conv2d, SeparableConv2d, BatchNorm2d, Pooling2d, MaxPool2d, AvgPool2d, MaxPool1d,
          AvgPool1d
  rnn     RNN, LSTM, GRU, CudnnRNN (all devices)
  simple  ReLU, Sigmoid, Tanh, Add, Flatten, Cat, Reshape, Dropout, SoftMax, ScatterElements,
          SoftMaxCrossEntropy, CrossEntropy, MeanSquareError, BinaryCrossEntropy
  attention    LayerNorm, GELU, MultiHeadAttention (alias MultiheadAttention),
               SinusoidalPositionalEmbedding, LearnedPositionalEmbedding
  transformer  TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
               TransformerDecoder, Transformer (torch.nn's arguments and sub-layer names)
"""
from .layers import *  # noqa: F401,F403
from .layers import __all__  # noqa: F401
