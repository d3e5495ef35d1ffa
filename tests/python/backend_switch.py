"""Switches a device's kernel family for a block (test_dnnl.py, test_nan_propagation.py).

    with backend(dev, "cpu"):      # the reference kernels; "dnnl" for oneDNN
        ...
"""


class backend(object):
    """with backend(dev, "cpu"): ... runs the block with dev's kernels switched; yields dev."""

    def __init__(self, dev, name):
        self.dev, self.name = dev, name

    def __enter__(self):
        self.old = self.dev.backend()
        self.dev.set_backend(self.name)
        return self.dev

    def __exit__(self, *exc):
        self.dev.set_backend(self.old)
