"""The row types of the op schema (schema/<theme>.py holds the rows; gen_schema.py reads them).

    Op("HardSwish", forward="...", backward="...", onnx=Onnx("HardSwish", 14),
       torch="Hardswish")

A Python table rather than YAML or a .def: CMake runs it with the Python it already finds for
Cython (no pyyaml), the rows can carry defaults and checks (a typo in a field name is a
TypeError at generation time, not a silently ignored key), and the tests import it directly.
"""
from collections import namedtuple

# A float attribute: its C++ name, SINGA's Python keyword and default, the ONNX attribute name and
# ONNX's default (which may differ from SINGA's, e.g. Selu's) where the op has one.
Attr = namedtuple("Attr", "name py default onnx onnx_default")
Attr.__new__.__defaults__ = (None, None, None, None)

# ONNX type name and the opsets the plain mapping covers: first, and last (None: every later one).
Onnx = namedtuple("Onnx", "name first last")
Onnx.__new__.__defaults__ = (None,)


class Op(object):
    """One op of the activation theme: y = forward(x; attrs) elementwise and the backward op
    dx = backward(dy, x; attrs), both C++ expressions over T (float, or the compute type of the
    backend: bfloat16 and float16 are computed in float). NaN must propagate as numpy's: write
    each comparison with the branch a NaN must take.

    name        C++ function, kernel slot and OpId (k<name>); the backward op is <name>Backward
    attrs       Attr rows, the C++ parameters after x (float), in order
    forward     expression of x (and the attrs)
    backward    expression of dy and x (and the attrs): the gradient, as a fused backward op
    py_class    autograd Operator class (SINGA's spelling); py_fn its function
    doc         one line, used by every generated docstring
    backends    backends with a kernel of their own; kCpuDnnl falls back to kCpuRef
    onnx        Onnx(...) for a plain mapping (one node, attributes renamed), or None
    torch       the torch.nn module computing the same (tests), or None
    fusable     a graph may absorb it into the producer's epilogue (none of these yet)
    recomputable  a graph under a memory budget may rerun it (pure elementwise: yes)
    """

    FIELDS = ("name", "attrs", "forward", "backward", "py_class", "py_fn", "doc", "backends",
              "onnx", "torch", "fusable", "recomputable")

    def __init__(self, name, forward, backward, doc, attrs=(), py_class=None, py_fn=None,
                 backends=("kCpuRef", "kCuda"), onnx=None, torch=None, fusable=False,
                 recomputable=True):
        self.name, self.forward, self.backward, self.doc = name, forward, backward, doc
        self.attrs = tuple(attrs)
        self.py_class = py_class or name
        self.py_fn = py_fn or self.py_class.lower()
        self.backends, self.onnx, self.torch = tuple(backends), onnx, torch
        self.fusable, self.recomputable = fusable, recomputable
        for a in self.attrs:
            if not isinstance(a, Attr) or a.py is None:
                raise TypeError("%s: attributes are Attr rows with a Python keyword" % name)

    @property
    def backward_name(self):
        return self.name + "Backward"

    @property
    def fallback(self):
        """backend -> the backend whose kernel it runs (kernel.h's default chain)."""
        return {"kCpuDnnl": "kCpuRef"}

    def as_tuple(self):
        """The row as plain Python values (what the extension carries to autograd and sonnx)."""
        return (self.name, self.py_class, self.py_fn, self.doc,
                tuple(tuple(a) for a in self.attrs),
                tuple(self.onnx) if self.onnx else None, self.torch,
                self.backends, self.fusable, self.recomputable)


def load(path):
    """The OPS list and NOT_IN_SCHEMA dict of a theme file (CMake's generator and the tests
    both load it by path; the theme imports this module as `rows`)."""
    import os
    import runpy
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    scope = runpy.run_path(path)
    return scope["OPS"], scope.get("NOT_IN_SCHEMA", {})
