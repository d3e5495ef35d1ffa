"""Trains the CNN example (see train.py for the options): python examples/cnn.py --data digits"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402

if __name__ == "__main__":
    train.main(["cnn"] + sys.argv[1:])
