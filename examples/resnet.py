"""Trains ResNet-18 (or --depth 50) in the CIFAR layout (see train.py for the options):
python examples/resnet.py --data cifar10 --data-dir ~/cifar-10-batches-py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    depth = "18"
    if "--depth" in argv:
        i = argv.index("--depth")
        depth = argv[i + 1]
        del argv[i:i + 2]
    train.main(["resnet" + depth] + argv)
