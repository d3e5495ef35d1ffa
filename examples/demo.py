"""`make demo`: trains the seed's CNN on scikit-learn's handwritten digits and says what it did.

The digits (1,797 8x8 images, bundled with scikit-learn, no download) are upsampled to 28x28 so
that the CNN of Apache SINGA's model documentation runs unchanged. Training uses the Model API
with the computational graph on: the first step is buffered, later steps replay it from C++.
The test accuracy counts every test sample; each epoch prints its own time; the loss and
accuracy curve is written to cnn-digits-curve.png (--curve).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402
from singa import device  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0].replace(
        "`make demo`: trains", "Trains"), epilog="Other models, data sets and options: "
        "examples/train.py --help.")
    ap.add_argument("--epochs", type=int, default=5, help="passes over the training set (5)")
    ap.add_argument("--lr", type=float, default=0.02, help="SGD's learning rate (0.02)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop each epoch early (0: no)")
    ap.add_argument("--curve", default="cnn-digits-curve.png", metavar="PNG",
                    help="where the loss/accuracy curve is written ('' for none)")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    t0 = time.time()
    print(__doc__.strip().splitlines()[0].replace("`make demo`: ", "singa demo: "))
    acc = train.run(["cnn", "--data", "digits", "--epochs", str(args.epochs), "--graph",
                     "--lr", str(args.lr), "--max-steps", str(args.max_steps),
                     "--curve", args.curve])
    dev = device.get_default_device()
    stats = dev.mem_stats()
    print("device memory: peak %.1f MB in use, %.1f MB reserved from the system"
          % (stats["peak_in_use"] / 2**20, stats["peak_reserved"] / 2**20))
    plan = dev.graph_memory_plan()
    if plan["num_recyclable"]:
        print("graph: %d operations; %d recyclable blocks (%.1f MB in total) share a %.1f MB arena"
              % (dev.graph_num_nodes(), plan["num_recyclable"],
                 plan["recyclable_bytes"] / 2**20, plan["arena_bytes"] / 2**20))
    print("done in %.1f s: test accuracy %.2f%%" % (time.time() - t0, 100 * acc))
    return acc


if __name__ == "__main__":
    main()
