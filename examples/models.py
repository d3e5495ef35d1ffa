"""Models of the examples and benchmarks, written against the Apache SINGA 3.x API.

    from models import MLP, CNN, resnet18, resnet50, Xception
    net = resnet18(num_classes=10, cifar=True)   # 3x3 stem, no max pooling: 32x32 inputs
    net = Xception(num_classes=10, num_channels=1, image_size=28)   # separable convolutions

CNN is the seed's model (../shared/seeds/model-graph.md) verbatim in structure.
"""
from singa import layer, model


class Classifier(model.Model):
    """The training step all the examples share: softmax cross-entropy, then the optimizer
    (backward and update), as in the seed's Model example."""

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


class MLP(Classifier):
    """784-100-10 by default (the seed's MLP)."""

    def __init__(self, data_size=784, perceptron_size=100, num_classes=10):
        super(MLP, self).__init__()
        self.num_classes = num_classes
        self.dimension = 2
        self.relu = layer.ReLU()
        self.linear1 = layer.Linear(perceptron_size)
        self.linear2 = layer.Linear(num_classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, inputs):
        y = self.linear1(inputs)
        y = self.relu(y)
        y = self.linear2(y)
        return y


class CNN(Classifier):
    """The seed's CNN: two 5x5 convolutions with ReLU, two 2x2 max poolings, two linear layers."""

    def __init__(self, num_classes=10, num_channels=1):
        super(CNN, self).__init__()
        self.num_classes = num_classes
        self.input_size = 28
        self.dimension = 4
        self.conv1 = layer.Conv2d(num_channels, 20, 5, padding=0, activation="RELU")
        self.conv2 = layer.Conv2d(20, 50, 5, padding=0, activation="RELU")
        self.linear1 = layer.Linear(500)
        self.linear2 = layer.Linear(num_classes)
        self.pooling1 = layer.MaxPool2d(2, 2, padding=0)
        self.pooling2 = layer.MaxPool2d(2, 2, padding=0)
        self.relu = layer.ReLU()
        self.flatten = layer.Flatten()
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.conv1(x)
        y = self.pooling1(y)
        y = self.conv2(y)
        y = self.pooling2(y)
        y = self.flatten(y)
        y = self.linear1(y)
        y = self.relu(y)
        y = self.linear2(y)
        return y


def conv3x3(out_planes, stride=1):
    return layer.Conv2d(out_planes, 3, stride=stride, padding=1, bias=False)


class BasicBlock(layer.Layer):
    expansion = 1

    def __init__(self, planes, stride=1, downsample=None):
        super(BasicBlock, self).__init__()
        self.conv1 = conv3x3(planes, stride)
        self.bn1 = layer.BatchNorm2d()
        self.relu1 = layer.ReLU()
        self.conv2 = conv3x3(planes)
        self.bn2 = layer.BatchNorm2d()
        self.add = layer.Add()
        self.relu2 = layer.ReLU()
        self.downsample = downsample

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        residual = x if self.downsample is None else self.downsample(x)
        return self.relu2(self.add(out, residual))


class Bottleneck(layer.Layer):
    expansion = 4

    def __init__(self, planes, stride=1, downsample=None):
        super(Bottleneck, self).__init__()
        self.conv1 = layer.Conv2d(planes, 1, bias=False)
        self.bn1 = layer.BatchNorm2d()
        self.relu1 = layer.ReLU()
        self.conv2 = layer.Conv2d(planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = layer.BatchNorm2d()
        self.relu2 = layer.ReLU()
        self.conv3 = layer.Conv2d(planes * self.expansion, 1, bias=False)
        self.bn3 = layer.BatchNorm2d()
        self.add = layer.Add()
        self.relu3 = layer.ReLU()
        self.downsample = downsample

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        residual = x if self.downsample is None else self.downsample(x)
        return self.relu3(self.add(out, residual))


class Downsample(layer.Layer):
    def __init__(self, planes, stride):
        super(Downsample, self).__init__()
        self.conv = layer.Conv2d(planes, 1, stride=stride, bias=False)
        self.bn = layer.BatchNorm2d()

    def forward(self, x):
        return self.bn(self.conv(x))


class Stage(layer.Layer):
    """A sequence of residual blocks; each is registered as an attribute so parameter names are
    unique (block0.conv1.W, block1.conv1.W, ...)."""

    def __init__(self, block, inplanes, planes, blocks, stride):
        super(Stage, self).__init__()
        down = None
        if stride != 1 or inplanes != planes * block.expansion:
            down = Downsample(planes * block.expansion, stride)
        self.n = blocks
        setattr(self, "block0", block(planes, stride, down))
        for i in range(1, blocks):
            setattr(self, "block%d" % i, block(planes))

    def forward(self, x):
        for i in range(self.n):
            x = getattr(self, "block%d" % i)(x)
        return x


class ResNet(Classifier):
    def __init__(self, block, layers, num_classes=10, num_channels=3, cifar=True):
        super(ResNet, self).__init__()
        self.num_classes = num_classes
        self.input_size = 32 if cifar else 224
        self.dimension = 4
        self.cifar = cifar
        if cifar:  # 32x32 inputs: a 3x3 stem and no max pooling
            self.conv1 = layer.Conv2d(num_channels, 64, 3, stride=1, padding=1, bias=False)
        else:
            self.conv1 = layer.Conv2d(num_channels, 64, 7, stride=2, padding=3, bias=False)
            self.maxpool = layer.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.bn1 = layer.BatchNorm2d()
        self.relu = layer.ReLU()
        inplanes = 64
        for i, (planes, stride) in enumerate(zip((64, 128, 256, 512), (1, 2, 2, 2))):
            setattr(self, "layer%d" % (i + 1), Stage(block, inplanes, planes, layers[i], stride))
            inplanes = planes * block.expansion
        self.avgpool = layer.AvgPool2d(4 if cifar else 7, stride=1)
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(num_classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        if not self.cifar:
            x = self.maxpool(x)
        for i in range(1, 5):
            x = getattr(self, "layer%d" % i)(x)
        return self.fc(self.flatten(self.avgpool(x)))


def resnet18(num_classes=10, num_channels=3, cifar=True):
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes, num_channels, cifar)


def resnet50(num_classes=1000, num_channels=3, cifar=False):
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes, num_channels, cifar)


class XceptionBlock(layer.Layer):
    """Xception's unit: (ReLU, 3x3 separable convolution, batch norm) ``reps`` times, an optional
    strided max pooling, plus a shortcut (a strided 1x1 convolution when the shape changes).
    The sub-layers live in a list registered with ``register_layers`` (named
    ``<ClassName>_<index>``), the way Apache SINGA's xceptionnet example keeps them."""

    def __init__(self, in_filters, out_filters, reps, stride=1, relu_first=True):
        super(XceptionBlock, self).__init__()
        self.skip = None
        if out_filters != in_filters or stride != 1:
            self.skip = layer.Conv2d(in_filters, out_filters, 1, stride=stride, bias=False)
            self.skipbn = layer.BatchNorm2d(out_filters)
        seq: list[layer.Layer] = []  # the sub-layers, in order
        filters = in_filters
        for i in range(reps):
            if i > 0 or relu_first:
                seq.append(layer.ReLU())
            seq.append(layer.SeparableConv2d(filters, out_filters, 3, stride=1, padding=1,
                                             bias=False))
            seq.append(layer.BatchNorm2d(out_filters))
            filters = out_filters
        if stride != 1:
            seq.append(layer.MaxPool2d(3, stride, 1))
        self.seq = seq
        self.register_layers(*seq)
        self.add = layer.Add()

    def forward(self, x):
        y = x
        for sub in self.seq:
            y = sub(y)
        shortcut = self.skipbn(self.skip(x)) if self.skip is not None else x
        return self.add(y, shortcut)


class Xception(Classifier):
    """A small Xception (Chollet, 2017) for 28x28 or 32x32 images: a 3x3 stem, two strided entry
    blocks, ``middle`` residual blocks of separable convolutions, a separable exit convolution,
    average pooling over the whole map and a linear classifier."""

    def __init__(self, num_classes=10, num_channels=3, image_size=32, middle=2, width=16):
        super(Xception, self).__init__()
        self.num_classes = num_classes
        self.input_size = image_size
        self.dimension = 4
        self.middle = middle
        self.conv1 = layer.Conv2d(num_channels, width, 3, 1, 1, bias=False)
        self.bn1 = layer.BatchNorm2d(width)
        self.relu1 = layer.ReLU()
        self.block1 = XceptionBlock(width, 2 * width, 2, stride=2, relu_first=False)
        self.block2 = XceptionBlock(2 * width, 4 * width, 2, stride=2)
        for i in range(middle):
            setattr(self, "middle%d" % i, XceptionBlock(4 * width, 4 * width, 3))
        self.conv2 = layer.SeparableConv2d(4 * width, 8 * width, 3, 1, 1, bias=False)
        self.bn2 = layer.BatchNorm2d(8 * width)
        self.relu2 = layer.ReLU()
        side = -(-(-(-image_size // 2)) // 2)  # two stride-2 poolings with padding 1 round up
        self.pool = layer.AvgPool2d(side, 1)
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(num_classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.block2(self.block1(x))
        for i in range(self.middle):
            x = getattr(self, "middle%d" % i)(x)
        x = self.relu2(self.bn2(self.conv2(x)))
        return self.fc(self.flatten(self.pool(x)))
