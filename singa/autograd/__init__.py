"""singa.autograd: operators that record themselves, and backpropagation (Apache SINGA 3.x API).

    from singa import autograd, tensor, opt
    autograd.training = True
    x = autograd.relu(autograd.add_bias(autograd.matmul(inputs, w), b))
    loss = autograd.softmax_cross_entropy(x, target)
    for p, g in autograd.backward(loss):       # parameters: tensors with stores_grad=True
        sgd.update(p, g)

The code is split by theme: base (Operator, backward, the ``training`` flag), math (elementwise),
activation, linalg (matmul, gemm, add_bias), reduce, shape, index (slice, gather, pad...),
nn (conv2d, pooling_2d, batchnorm_2d, dropout) and loss. Everything is re-exported here.

``autograd.training`` lives in base.py; assigning it here sets that one variable, which every
submodule reads. Layer classes (Linear, Conv2d...) are re-exported from singa.layer on first use.
"""
import sys
import types

from .. import singa_wrap as singa  # noqa: F401  (Apache SINGA's autograd had these names)
from .. import tensor  # noqa: F401
from ..tensor import Tensor  # noqa: F401
from . import base
from .errors import ShapeError, AxisError, InputError, NoGradientError  # noqa: F401
from .base import (CTensor, Operator, Operation, Dummy, infer_dependency, backward, gradients,
                   axis_helper, back_broadcast, ctensor2numpy, release_graph)
from .math import (
    ReLU, relu, Sigmoid, sigmoid, Tanh, tanh, Exp, exp, Log, log, Sqrt, sqrt, Abs, abs, Sign, sign,
    Negative, negative, Reciprocal, reciprocal, Square, square, Sin, sin, Cos, cos, Tan, tan, Asin,
    asin, Acos, acos, Atan, atan, Sinh, sinh, Cosh, cosh, Asinh, asinh, Acosh, acosh, Atanh,
    atanh, SoftPlus, softplus, SoftSign, softsign, Erf, erf, Ceil, ceil, Floor, floor, Round,
    round, Rounde, rounde, Identity, identity,
    Add, add, Sub, sub, Mul, mul, Div, div, Pow, pow, add_all,
    Sum, sum, Mean, mean, Max, max, Min, min,
    Less, less, Greater, greater, Equal, equal, LessEqual, less_equal, GreaterEqual,
    greater_equal, And, _and, Or, _or, Xor, _xor, Not, _not,
    Clip, clip, Where, where, Cast, cast)
from .activation import (LeakyRelu, leakyrelu, Elu, elu, SeLU, selu, HardSigmoid, hardsigmoid,
                         PRelu, prelu, SoftMax, softmax, LogSoftMax, log_softmax)
from .linalg import Matmul, matmul, Gemm, gemm, AddBias, add_bias, CosSim, cossim
from .reduce import (ReduceSum, reduce_sum, ReduceMean, reduce_mean, GlobalAveragePool,
                     globalaveragepool)
from .shape import (Reshape, reshape, Flatten, flatten, Transpose, transpose, Squeeze, squeeze,
                    Unsqueeze, unsqueeze, Concat, cat, Split, split, Tile, tile, Expand, expand,
                    UpSample, upsample, DepthToSpace, depth_to_space, SpaceToDepth,
                    space_to_depth)
from .index import (Gather, gather, Slice, slice, Pad, pad, ScatterElements, scatter_elements,
                    OneHot, onehot, Embedding, embedding, Shape, shape, ConstantOfShape,
                    constant_of_shape, NonZero, nonzero)
from .nn import (_Conv2d, conv2d, _Pooling2d, pooling_2d, BatchNormHandle, _BatchNorm2d,
                 batchnorm_2d, Dropout, dropout)
from .loss import (SoftMaxCrossEntropy, softmax_cross_entropy, CrossEntropy, cross_entropy,
                   BinaryCrossEntropy, binary_cross_entropy, MeanSquareError, mse_loss,
                   RankingLoss, ranking_loss, QALSTMLoss, qa_lstm_loss)

# Apache SINGA's autograd re-exported these layer classes (defined in singa.layer).
_LAYER_ALIASES = ("Layer", "Linear", "Conv2d", "SeparableConv2d", "BatchNorm2d", "Pooling2d",
                  "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d", "RNN_Base", "RNN", "LSTM")


class _AutogradModule(types.ModuleType):
    """The package's module type: ``training`` reads and writes base.training."""

    @property
    def training(self):
        return base.training

    @training.setter
    def training(self, value):
        base.training = bool(value)

    def __getattr__(self, name):
        if name in _LAYER_ALIASES:
            from .. import layer
            return getattr(layer, name)
        raise AttributeError("module 'singa.autograd' has no attribute %r" % (name,))


sys.modules[__name__].__class__ = _AutogradModule
from .rnn import _RNN, RNNHandle  # noqa: F401,E402  (cuDNN's fused RNN, on every device)
