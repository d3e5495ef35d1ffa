"""Networks built by others, written out in torch (torchvision's layouts, random weights, no
downloads) for test_sonnx_zoo.py: export them with torch.onnx.export, import them with sonnx.

    net = torch_zoo.MODELS["resnet18"](num_classes=10).eval()
    torch_zoo.randomise_bn(net, torch.Generator().manual_seed(0))

torchvision itself does not import here (its wheel does not match the installed torch), so the
architectures are copied in layout (layer sizes, strides, the order of the ops), not imported.
"""
import math

import torch
from torch import nn


def randomise_bn(net, gen):
    """Non-trivial batch-norm statistics and affine parameters (fresh ones are 0/1, which would
    hide a mistake in how the importer reads them)."""
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(0.1 * torch.randn(m.num_features, generator=gen))
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.weight.copy_(1.0 + 0.1 * torch.randn(m.num_features, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.num_features, generator=gen))


# ---- resnet18: 7x7 stem, max pool, 4 stages of 2 basic blocks, global average pool, fc -------
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---- mobilenet_v2: inverted residuals, depthwise convolutions, ReLU6 (ONNX Clip) -------------
def _conv_bn_relu6(cin, cout, kernel, stride, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups,
                                   bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [_conv_bn_relu6(cin, hidden, 1, 1)]
        layers += [_conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, 1, 0, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)
        self.use_res = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, first stride s), torchvision's table
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes=1000):
        super().__init__()
        features, cin = [_conv_bn_relu6(3, 32, 3, 2)], 32
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                features.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        features.append(_conv_bn_relu6(cin, 1280, 1, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# ---- squeezenet1_1: fire modules (squeeze 1x1, expand 1x1 and 3x3 concatenated) ---------------
class Fire(nn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.relu(self.squeeze(x))
        return torch.cat([self.relu(self.expand1x1(x)), self.relu(self.expand3x3(x))], 1)


class SqueezeNet11(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), pool(),
            Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
            Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(),
            Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(512, num_classes, 1),
                                        nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


# ---- a transformer encoder block, written with plain ops --------------------------------------
class EncoderBlock(nn.Module):
    """Post-norm encoder layer (nn.TransformerEncoderLayer's math): multi-head self-attention
    with MatMul / Softmax / Transpose / Reshape, residual + LayerNorm, GELU MLP, residual +
    LayerNorm. The reshapes read the batch and sequence sizes from the input, so the exported
    graph carries Shape / Gather / Unsqueeze / Concat chains, as torch's own exports do."""

    def __init__(self, dim=32, heads=4, hidden=64):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x):
        b, t, e = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (y.reshape(b, t, self.heads, self.head_dim).transpose(1, 2) for y in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, e)
        x = self.norm1(x + self.proj(y))
        return self.norm2(x + self.fc2(nn.functional.gelu(self.fc1(x))))


class TinyEncoder(nn.Module):
    """Token embedding (Gather) + learned positions + two encoder blocks + a mean-pooled head."""

    def __init__(self, vocab=50, dim=32, heads=4, hidden=64, seq=8, num_classes=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(0.1 * torch.randn(1, seq, dim))
        self.blocks = nn.Sequential(EncoderBlock(dim, heads, hidden),
                                    EncoderBlock(dim, heads, hidden))
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x) + self.pos).mean(dim=1))


MODELS = {"resnet18": ResNet18, "mobilenet_v2": MobileNetV2, "squeezenet1_1": SqueezeNet11,
          "transformer": EncoderBlock, "transformer_lm": TinyEncoder}
