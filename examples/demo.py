"""`make demo`: trains the seed's CNN on scikit-learn's handwritten digits and says what it did.

The digits (1,797 8x8 images, bundled with scikit-learn, no download) are upsampled to 28x28 so
that the CNN of Apache SINGA's model documentation runs unchanged. Training uses the Model API
with the computational graph on: the first step is buffered, later steps replay it from C++.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402
from singa import device  # noqa: E402


def main():
    t0 = time.time()
    print(__doc__.strip().splitlines()[0].replace("`make demo`: ", "singa demo: "))
    acc = train.run(["cnn", "--data", "digits", "--epochs", "5", "--graph", "--lr", "0.02"])
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


if __name__ == "__main__":
    main()
