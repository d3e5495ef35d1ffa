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


# A handle type of the NN theme: the C++ struct holding an op's geometry (written by hand with its
# constructor's checks in `header`), its Cython cppclass (cython/cnn.pxd) and Python class
# (cython/singa/_wrap_nn.pyx), which the generated declarations and wrappers name.
Handle = namedtuple("Handle", "name header cython py")

# A typed field of a kernel's Args struct after its tensors, handle `h` and parameters: its
# default, and `value`, the C++ expression of the (contiguous) reads that Run<Name> sets it to
# (None: left at its default, for the kernel or the graph to set, as an epilogue).
Field = namedtuple("Field", "type name default value")
Field.__new__.__defaults__ = (None, None)

# A scalar parameter of an NN op's C++ function (after its tensors and handle), also an Args
# field: its C++ default (None: none) and the Python wrapper's default (None: none).
Param = namedtuple("Param", "type name default py_default")
Param.__new__.__defaults__ = (None, None)

# An op written elsewhere (ops/elementwise.def, a hand-written front) that a graph may absorb
# into its producer's epilogue as `part` (core/fusion.h: kEpiBatchNorm, kEpiAdd, kEpiReLU).
Fusable = namedtuple("Fusable", "name part")


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
    fusable     the epilogue part (core/fusion.h) a graph may absorb it into its producer as,
                or False: these rows have none yet (the producers' kernels apply only the parts
                fusion.h lists)
    recomputable  a graph under a memory budget may rerun it (OpDesc::recomputable: the front
                passes it; pure elementwise: yes)
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


class NnOp(object):
    """One op of the NN theme: an op with a prepared kernel per backend
    (cpp/src/ops/nn_kernels.h). Written by hand: the handle, the front's checks (its file in
    cpp/src/ops/) and the kernel bodies; generated from the row: the OpIds, the public
    declaration, the Args struct, the kernel slot, the launch (OpDesc: reads, writes, id,
    recomputable, flops, rerun form, what it is as an epilogue), Run<Name> (the outputs made by
    the shape rules), the Cython declaration and wrapper, and for a forward op with py_class its
    autograd Operator and function.

    name        C++ function and kernel slot (<name>Kernel())
    doc         one line: the public header's and the wrapper's docstring
    handle      Handle row: the C++ function's parameter after the tensors, the Args' `h`; or
                None (no handle)
    inputs      the C++ function's tensor parameters in order; "y?": may be empty (Python
                None), and when also a read, an optional read (the convolution's bias): in
                the OpDesc and Args only when given; "s*": a Tensor* (Python None: null) the
                op reads and updates in place (the running statistics), listed after reads
                and writes in the OpDesc
    params      Param rows: scalar parameters after the tensors (and handle), Args fields too
    args        the Args struct's name: Args{reads..., writes..., in-place..., h, params...,
                fields...}
    reads, writes  the Args' tensors, in that order: what the OpDesc lists (writes[0] is the
                block an epilogue applies to); the C++ function returns writes[0], or every
                write (a std::vector, a Python tuple) when there are several
    shapes      each write's rule: a C++ expression of the reads, `h`, params and fields, or
                (expression, dtype); the dtype defaults to reads[0]'s, the device is reads[0]'s.
                Run<Name> launches unless every write is empty
    fields      Field rows after the params (typed, with a default and the value Run sets)
    ids         OpIds; two with id_by (a C++ condition on the Args `a`'s members): ids[0] when
                it holds
    backends    backends with a kernel of their own (the kernel bodies register themselves)
    backward    the backward op's row name (forward ops), whose inputs name what it reads:
                "dy", and forward inputs and outputs
    py_class, py_fn  the autograd Operator and function (forward ops; SINGA's spelling); None
                when the Operator is written by hand (it chooses between rows, say)
    odd_padding the Operator takes SINGA's odd_padding (zeros added on axes 2, 3 first)
    onnx        Onnx rows: the ONNX ops it maps to (by hand in singa/sonnx when not plain)
    fusable     the epilogue part (core/fusion.h) a graph may absorb it into its producer as;
                `as_epilogue` then names the hand-written function (nn_kernels.h) that says,
                from the Args, what it is as one (OpDesc's FusionHooks::as_epilogue)
    recomputable  as Op's
    flops       C++ expression of the Args `a`: the arithmetic the graph's cost model counts
                (OpDesc::flops; None: 0, the bytes moved alone)
    rerun       the hand-written function (nn_kernels.h) making its rerun form under a memory
                budget (OpDesc::rerun; None: StatsRerun, running the kernel again)
    """

    def __init__(self, name, doc, handle, inputs, args, reads, writes, ids, shapes, fields=(),
                 params=(), id_by=None, backends=("kCpuRef", "kCuda"), backward=None,
                 py_class=None, py_fn=None, odd_padding=False, onnx=(), fusable=False,
                 recomputable=True, flops=None, rerun=None, as_epilogue=None):
        self.name, self.doc, self.handle, self.args = name, doc, handle, args
        self.inputs, self.reads, self.writes = tuple(inputs), tuple(reads), tuple(writes)
        self.shapes = {w: r if isinstance(r, tuple) else (r, None) for w, r in shapes.items()}
        self.fields, self.params = tuple(fields), tuple(params)
        self.ids, self.id_by = tuple(ids), id_by
        self.backends, self.backward = tuple(backends), backward
        self.py_class, self.py_fn, self.odd_padding = py_class, py_fn, odd_padding
        self.onnx, self.fusable, self.recomputable = tuple(onnx), fusable, recomputable
        self.flops, self.rerun, self.as_epilogue = flops, rerun, as_epilogue
        if handle is not None and not isinstance(handle, Handle):
            raise TypeError("%s: handle must be a Handle row or None" % name)
        if bool(fusable) != bool(as_epilogue):
            raise ValueError("%s: a fusable row names its as_epilogue function" % name)
        for f in self.fields + self.params:
            if not isinstance(f, (Field, Param)):
                raise TypeError("%s: fields are Field rows, params Param rows" % name)
        if len(self.ids) != (2 if id_by else 1):
            raise ValueError("%s: one OpId, or two chosen by id_by" % name)
        if (py_class is None) != (py_fn is None):
            raise ValueError("%s: py_class and py_fn go together" % name)
        for t in self.reads:
            if t not in self.input_names:
                raise ValueError("%s: reads %r, not an input" % (name, t))
        if set(self.shapes) != set(self.writes):
            raise ValueError("%s: one shape rule per write" % name)
        if self.reads[0] in self.optional_reads:
            raise ValueError("%s: the first read (the device's, the batch's) is never optional"
                             % name)
        if set(self.in_place) & set(self.reads + self.writes):
            raise ValueError("%s: an input updated in place is neither a read nor a write"
                             % name)

    @property
    def input_names(self):
        return tuple(i.rstrip("?*") for i in self.inputs)

    @property
    def optional_reads(self):
        """The reads that may be empty (not given): listed in the OpDesc only when given."""
        return tuple(i[:-1] for i in self.inputs if i.endswith("?") and i[:-1] in self.reads)

    @property
    def in_place(self):
        """The inputs it updates in place (Tensor*, may be null), in order."""
        return tuple(i[:-1] for i in self.inputs if i.endswith("*"))

    @property
    def fallback(self):
        return {"kCpuDnnl": "kCpuRef"}

    def as_tuple(self):
        """What the extension carries to autograd (singa_wrap.NN_OPS)."""
        return (self.name, self.py_class, self.py_fn, self.doc, self.inputs, self.backward,
                self.odd_padding, tuple(tuple(o) for o in self.onnx), self.backends,
                self.fusable, self.recomputable)


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


def fusable_table(themes):
    """(OpId name, epilogue part) of every op a graph may absorb into an epilogue: the themes'
    FUSABLE lists (ops written elsewhere) and their rows with a `fusable` part."""
    import runpy
    out = []
    for path in themes:
        scope = runpy.run_path(path)
        out += [(f.name, f.part) for f in scope.get("FUSABLE", ())]
        out += [(op.name, op.fusable) for op in scope["OPS"] if op.fusable]
    return out
