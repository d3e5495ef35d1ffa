"""singa.autograd: operators that record themselves, and backpropagation (Apache SINGA 3.x API).

Example::

    from singa import autograd, tensor, opt
    autograd.training = True
    x = autograd.relu(autograd.add_bias(autograd.matmul(inputs, w), b))
    loss = autograd.softmax_cross_entropy(x, target)
    for p, g in autograd.backward(loss):       # parameters: tensors with stores_grad=True
        sgd.update(p, g)

The code is split by theme: base (Operator, Dummy, backward), math (elementwise, from the op table),
activation, schema_ops (the op schema's activations: leakyrelu, elu, selu, hardsigmoid,
hardswish), linalg (matmul, gemm, add_bias), reduce, shape, index (slice, gather, pad...),
nn (conv2d, pooling_2d, batchnorm_2d, dropout), loss and transformer (layer_norm, cumsum,
gather_elements, gather_nd, masked_fill). Everything is re-exported here.

``autograd.training`` is singa._state.training; assigning it here sets that one variable, which
autograd, the layers and Model read. Layer classes (Linear, Conv2d...) are re-exported from
singa.layer on first use.
"""
import sys
import types

from .. import _state
from .. import singa_wrap as singa  # noqa: F401  (Apache SINGA's autograd had these names)
from .. import tensor  # noqa: F401
from ..tensor import Tensor  # noqa: F401
from . import base  # noqa: F401
from .errors import ShapeError, AxisError, InputError, NoGradientError  # noqa: F401
from .base import (CTensor, Operator, Operation, Dummy, infer_dependency, backward, gradients,
                   axis_helper, back_broadcast, ctensor2numpy, release_graph)
from .math import *  # noqa: F401,F403  (the unary rows come from the op table; see __all__)
from .activation import PRelu, prelu, SoftMax, softmax, LogSoftMax, log_softmax
from .schema_ops import *  # noqa: F401,F403  (LeakyRelu, Elu, SeLU, HardSigmoid, HardSwish...)
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
from .nn import (_Conv2d, conv2d, BatchNormHandle, _BatchNorm2d,
                 batchnorm_2d, Dropout, dropout)
from .loss import (SoftMaxCrossEntropy, softmax_cross_entropy, CrossEntropy, cross_entropy,
                   BinaryCrossEntropy, binary_cross_entropy, MeanSquareError, mse_loss,
                   RankingLoss, ranking_loss, QALSTMLoss, qa_lstm_loss)

from .transformer import (LayerNorm, layer_norm, CumSum, cumsum, GatherElements,
                          gather_elements, GatherND, gather_nd, MaskedFill, masked_fill)
from .rnn import _RNN, RNNHandle  # noqa: F401  (cuDNN's fused RNN, on every device)
from .attention import ScaledDotProductAttention, scaled_dot_product_attention  # noqa: F401
from . import amp  # noqa: F401  (mixed precision: Model.compile(precision="bfloat16"))

# Apache SINGA's autograd re-exported these layer classes (defined in singa.layer, which imports
# this package: looked up on first use, PEP 562).
_LAYER_ALIASES = ("Layer", "Linear", "Conv2d", "SeparableConv2d", "BatchNorm2d", "Pooling2d",
                  "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d", "RNN_Base", "RNN", "LSTM")


def __getattr__(name):
    if name in _LAYER_ALIASES:
        from .. import layer  # the one import against the layering (test_imports.py allows it)
        return getattr(layer, name)
    raise AttributeError("module 'singa.autograd' has no attribute %r" % (name,))


class _AutogradModule(types.ModuleType):
    """The package's module type, for one attribute: ``training`` reads and writes
    singa._state.training, which autograd, the layers and Model read.

    SINGA scripts assign ``autograd.training = True``. Python lets a module intercept reads of
    its attributes (PEP 562 ``__getattr__``) but not writes; only a module subclass with a
    property can turn the assignment into a write of the shared flag. The alternative, every
    reader looking the flag up on this package, would point the layers' and _core's arrows up.
    """

    @property
    def training(self):
        return _state.training

    @training.setter
    def training(self, value):
        _state.training = bool(value)


sys.modules[__name__].__class__ = _AutogradModule
