"""The benchmark models in PyTorch, layer for layer the same as examples/models.py."""
import contextlib

import torch
from torch import nn


def mlp(num_classes=10):
    return nn.Sequential(nn.Linear(784, 100), nn.ReLU(), nn.Linear(100, num_classes))


def cnn(num_classes=10, channels=1):
    return nn.Sequential(
        nn.Conv2d(channels, 20, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, num_classes))


class Basic(nn.Module):
    expansion = 1

    def __init__(self, inp, planes, stride):
        super().__init__()
        self.c1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(planes)
        self.c2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(planes)
        self.down = None
        if stride != 1 or inp != planes:
            self.down = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False),
                                      nn.BatchNorm2d(planes))

    def forward(self, x):
        out = torch.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


class Bottle(nn.Module):
    expansion = 4

    def __init__(self, inp, planes, stride):
        super().__init__()
        self.c1 = nn.Conv2d(inp, planes, 1, bias=False)
        self.b1 = nn.BatchNorm2d(planes)
        self.c2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.b2 = nn.BatchNorm2d(planes)
        self.c3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.b3 = nn.BatchNorm2d(planes * 4)
        self.down = None
        if stride != 1 or inp != planes * 4:
            self.down = nn.Sequential(nn.Conv2d(inp, planes * 4, 1, stride, bias=False),
                                      nn.BatchNorm2d(planes * 4))

    def forward(self, x):
        out = torch.relu(self.b1(self.c1(x)))
        out = torch.relu(self.b2(self.c2(out)))
        out = self.b3(self.c3(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


def resnet(block, layers, num_classes, cifar):
    mods = ([nn.Conv2d(3, 64, 3, 1, 1, bias=False)] if cifar else
            [nn.Conv2d(3, 64, 7, 2, 3, bias=False)])
    mods += [nn.BatchNorm2d(64), nn.ReLU()]
    if not cifar:
        mods.append(nn.MaxPool2d(3, 2, 1))
    inp = 64
    for planes, n, stride in zip((64, 128, 256, 512), layers, (1, 2, 2, 2)):
        for i in range(n):
            mods.append(block(inp, planes, stride if i == 0 else 1))
            inp = planes * block.expansion
    mods += [nn.AvgPool2d(4 if cifar else 7, 1), nn.Flatten(), nn.Linear(inp, num_classes)]
    return nn.Sequential(*mods)


def build(name):
    if name == "mlp":
        return mlp()
    if name == "cnn":
        return cnn()
    if name == "resnet18":
        return resnet(Basic, [2, 2, 2, 2], 10, True)
    if name == "resnet50":
        return resnet(Bottle, [3, 4, 6, 3], 1000, False)
    raise ValueError(name)


def train_step(net, tx, ty, autocast=None):
    """One SGD step of ``net`` on (tx, ty), the optimizer settings singa's side uses in every
    benchmark (lr 0.01, momentum 0.9, weight decay 1e-5); returns ``step() -> loss``. With
    ``autocast`` (a dtype), forward and loss run under ``torch.autocast`` and backward outside
    it, as PyTorch's AMP recipe says."""
    sgd = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-5)
    lossf = nn.CrossEntropyLoss()
    ctx = ((lambda: torch.autocast(tx.device.type, dtype=autocast)) if autocast is not None
           else contextlib.nullcontext)

    def step():
        sgd.zero_grad()
        with ctx():
            loss = lossf(net(tx), ty)
        loss.backward()
        sgd.step()
        return loss

    return step
