"""Per-operation profile of one ResNet-18 b32 training step replayed from the graph, blocked
layouts on or off (run it twice, back to back, and compare the rows):

    .venv/bin/python benchmarks/profile_layouts.py on
    .venv/bin/python benchmarks/profile_layouts.py off
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import models
from singa import device, opt, tensor
dev = device.create_cpu_device(5)
rng = np.random.default_rng(0)
tx = tensor.from_numpy(rng.standard_normal((32, 3, 32, 32)).astype(np.float32), dev)
ty = tensor.from_numpy(rng.integers(0, 10, 32).astype(np.int32), dev)
net = models.resnet18()
net.set_optimizer(opt.SGD(lr=0.01, momentum=0.9))
net.compile([tx], is_train=True, use_graph=True)
dev.SetSkipIteration(1)
on = sys.argv[1:] != ["off"]
dev.SetGraphLayouts(on)
dev.SetVerbosity(1)
for _ in range(4):  # the first replay is skipped by the profile
    net(tx, ty)
print("layouts", on, dev.graph_layout_counts())
print(dev.GetTimeProfiling())
