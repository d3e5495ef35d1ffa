#!/usr/bin/env python3
"""Call singa's public API with hostile arguments and report anything that is not a clean error.

    .venv/bin/python tools/fuzz_api.py                     # every target, 40 calls each
    .venv/bin/python tools/fuzz_api.py --calls 200 --only autograd.softmax tensor.sum
    .venv/bin/python tools/fuzz_api.py --graph             # also: graph replay == eager
    .venv/bin/python tools/fuzz_api.py --list               # the targets
    .venv/bin/python tools/fuzz_api.py --case autograd.pad:17   # replay one call, traceback shown

The targets are read off the modules themselves, so new API is fuzzed without a table to
update: every public function of singa.autograd and singa.tensor, every Tensor method, every
layer class (constructed, then called), and the raw binding SINGA code also calls (every
singa_wrap function on core tensors, the core Tensor's and Device's methods, the conv / pooling
/ batch-norm handles). Each call draws its arguments, one per parameter, from pools chosen by
the parameter's name (tensors for x/a/t..., axes, shapes, numbers, handles), with hostile
members in every pool: empty and 0-d tensors, int32/float16/NaN/Inf tensors, transposed views,
out-of-range axes, negative sizes, sizes past int32 and int64, None, strings, handles built for
another input. After a forward that returns a tensor needing a gradient, backward runs too.

Outcomes, by what README's Errors section promises ("bad input never aborts the process"):
  ok       the call returned
  error    it raised one of the documented classes (ValueError, TypeError, IndexError,
           NotImplementedError, MemoryError, FloatingPointError, AssertionError, OverflowError)
           from a `raise` in singa, or one of the core's exceptions (singa_wrap.SingaError's
           family, DeviceError included)
  leak     a documented class, but raised inside numpy or by Python itself (a list index, an
           unsupported operand): the input reached code that never checked it; the message
           does not name the op
  bug      any other exception (AttributeError, KeyError, ZeroDivisionError, RuntimeError, ...)
  crash    the process died (signal, abort) during the call
  hang     no progress for --timeout seconds
  graph    (--graph) the call recorded in the default device's graph and replayed gave other
           shapes, dtypes or bits than eager mode (random and value-reading targets: shapes)
  refused  (--graph) eager computed, recording raised a clean error (reading values while
           recording does so by design); reported, not failed on
Calls run in a child process (address space limited to what its imports mapped plus
--mem-gib, so that huge sizes meet a failing allocation) that logs each case before it starts; the parent restarts it after a crash
or hang, so one run reports every such case. Exit status 1 when any crash, hang, bug or graph
difference was seen (leaks are reported, not failed on, unless --strict).
"""
import argparse
import inspect
import io
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

# OverflowError: numpy raises it too for a size past the C integer types
# (np.ones(3).reshape(2**63)).
DOCUMENTED = (ValueError, TypeError, IndexError, NotImplementedError, MemoryError,
              FloatingPointError, AssertionError, OverflowError)

# ---------------------------------------------------------------- targets


def _public_functions(module, prefix):
    out = []
    for name in sorted(dir(module)):
        if name.startswith("__"):
            continue
        obj = getattr(module, name)
        if inspect.isfunction(obj) and name[:1].islower() and \
                (getattr(obj, "__module__", "") or "").startswith("singa"):
            out.append((prefix + name, obj, None))
    return out


# Functions that are machinery rather than operations on data, or that would do something other
# than compute (read files, spawn processes, change global state the later calls depend on).
SKIP = {
    "tensor.random", "tensor.from_raw_tensor", "tensor.from_raw_tensors",
    "autograd.infer_dependency", "autograd.ctensor2numpy",
}
SKIP_PREFIX = ("autograd.set_", "tensor.set_", "tensor.Tensor.to_device", "tensor.Tensor.T")


# The raw binding (singa.singa_wrap, what SINGA code calls as `singa_wrap.X` / `CTensor`): the
# functions that would end the process or change what every later call means stay out.
RAW_SKIP = {"mpi_abort", "set_num_threads", "set_gemm_backend", "create_cuda_gpu_on",
            "from_dlpack", "kernel_table", "cpu_features", "get_default_device"}
RAW_METHOD_SKIP = {"ToDevice", "PrintTimeProfiling", "SetVerbosity", "graph_dot"}
HANDLES = ("ConvHandle", "PoolingHandle", "BatchNormHandle")


def _raw_targets(singa_wrap):
    out = []
    for name in sorted(dir(singa_wrap)):
        obj = getattr(singa_wrap, name)
        if name.startswith("_") or name in RAW_SKIP or not callable(obj):
            continue
        if isinstance(obj, type):
            if name in HANDLES:
                out.append(("raw." + name, obj, "rawclass"))
            continue
        out.append(("raw." + name, obj, "raw"))
    for cls, kind in ((singa_wrap.Tensor, "rawmethod"), (singa_wrap.Device, "devmethod")):
        for name in sorted(dir(cls)):
            if name.startswith("_") or name in RAW_METHOD_SKIP or not callable(getattr(cls, name)):
                continue
            out.append(("raw.%s.%s" % (cls.__name__, name), getattr(cls, name), kind))
    return out


def _extra_targets(specs):
    """FILE:FUNC pairs: functions of a Python file fuzzed beside the API (the tests of this
    tool give it functions that crash, hang or raise on purpose)."""
    import importlib.util
    out = []
    for spec in specs or ():
        path, func = spec.rsplit(":", 1)
        mod_spec = importlib.util.spec_from_file_location("fuzz_extra_%d" % len(out), path)
        mod = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(mod)
        out.append(("extra." + func, getattr(mod, func), None))
    return out


def _opt_targets(opt):
    """Optimizers (constructed, then given a (param, grad) pair and a step) and learning-rate
    schedules (constructed, then called with a step)."""
    out = []
    for name in sorted(dir(opt)):
        obj = getattr(opt, name)
        if not inspect.isclass(obj) or obj.__module__ is None or \
                not obj.__module__.startswith("singa") or name in ("Optimizer", "DistOpt"):
            continue
        if issubclass(obj, opt.Optimizer):
            out.append(("opt." + name, obj, "opt"))
        elif issubclass(obj, opt.DecayScheduler) and obj is not opt.DecayScheduler:
            out.append(("opt." + name, obj, "schedule"))
    return out


def _onnx_targets():
    """Every ONNX op type sonnx imports, run as one node (SingaBackend.run_node) with hostile
    attributes and inputs: what a malformed or unusual model file gives the importer."""
    try:
        from singa.sonnx.backend import SingaBackend
    except ImportError:  # onnx is a test dependency, not the demo's
        return []
    return [("sonnx." + op, op, "onnx") for op in sorted(SingaBackend._rename_operators)]


def _model_targets():
    """Random small models trained eagerly and in a graph (tools/fuzz_model.py)."""
    import fuzz_model
    out = [("model.train", fuzz_model.run, "model")]
    try:
        import onnxruntime  # noqa: F401  (a test dependency, not the demo's)
        out.append(("model.onnx", fuzz_model.export, "model"))
    except ImportError:
        pass
    return out


def targets(extra=None):
    from singa import autograd, initializer, layer, opt, singa_wrap, tensor, utils
    out = _public_functions(autograd, "autograd.") + _public_functions(tensor, "tensor.")
    out += _public_functions(initializer, "initializer.") + _public_functions(utils, "utils.")
    out += _opt_targets(opt)
    for name in sorted(dir(tensor.Tensor)):
        if name.startswith("_") and name not in ("__add__", "__sub__", "__mul__", "__truediv__",
                                                  "__getitem__", "__setitem__", "__matmul__",
                                                  "__pow__", "__iadd__", "__lt__", "__eq__"):
            continue
        obj = getattr(tensor.Tensor, name)
        if inspect.isfunction(obj):
            out.append(("tensor.Tensor." + name, obj, "method"))
    for name in sorted(dir(layer)):
        obj = getattr(layer, name)
        if inspect.isclass(obj) and issubclass(obj, layer.Layer) and obj is not layer.Layer \
                and not inspect.isabstract(obj) and name[0].isupper():
            out.append(("layer." + name, obj, "layer"))
    out += _raw_targets(singa_wrap) + _onnx_targets() + _model_targets() + \
        _extra_targets(extra)
    return [t for t in out if t[0] not in SKIP and not t[0].startswith(SKIP_PREFIX)]


# ---------------------------------------------------------------- argument pools

TENSOR_SHAPES = [(), (1,), (3,), (2, 3), (1, 3), (3, 1), (0,), (0, 3), (3, 0), (2, 3, 4),
                 (1, 3, 4, 4), (2, 3, 5, 5), (2, 4, 6, 6), (2, 0, 4, 4), (2, 3, 4, 5, 1)]


class TSpec(object):
    """A tensor described so the report can print it and the child can rebuild it."""

    def __init__(self, shape, dtype="float32", fill="randn", view=None, grad=False):
        self.shape, self.dtype, self.fill = tuple(shape), dtype, fill
        self.view, self.grad = view, grad

    def __repr__(self):
        extra = "".join(", " + s for s in (self.fill if self.fill != "randn" else None,
                                           self.view, "requires_grad" if self.grad else None) if s)
        return "T(%s, %s%s)" % (self.dtype, self.shape, extra)

    def array(self, rng):
        """The numpy array (in its stored, untransposed shape)."""
        import numpy as np
        shape = self.shape
        if self.view == "transposed" and len(shape) >= 2:
            shape = shape[::-1]
        n = int(np.prod(shape)) if shape else 1
        if self.fill == "nan":
            a = np.full(n, np.nan)
            a[::2] = 1.5
        elif self.fill == "inf":
            a = np.full(n, np.inf)
            a[1::2] = -np.inf
        elif self.fill == "index":
            a = rng.integers(-4, 6, n)
        elif self.fill == "zeros":
            a = np.zeros(n)
        else:
            a = rng.standard_normal(n)
        return a.astype(self.dtype).reshape(shape)

    def build(self, rng):
        from singa import tensor
        t = tensor.from_numpy(self.array(rng))
        if self.view == "transposed" and len(self.shape) >= 2:
            t = t.transpose()
        if self.grad:
            t.requires_grad = True
            t.stores_grad = True
        return t


def _tensor(r):
    shape = r.choice(TENSOR_SHAPES)
    u = r.random()
    if u < 0.62:
        return TSpec(shape, grad=r.random() < 0.5)
    if u < 0.72:
        return TSpec(shape, "int32", "index")
    if u < 0.77:
        return TSpec(shape, "float16")
    if u < 0.84:
        return TSpec(shape, fill=r.choice(["nan", "inf", "zeros"]), grad=r.random() < 0.5)
    return TSpec(shape, view="transposed", grad=r.random() < 0.5)


AXES = [0, 1, -1, 2, 3, -2, 4, 7, -9, None, [0], [1, 0], [0, 0], [-1], [5], [], (0, 1), 1.5, "x"]
SHAPES = [[2, 3], [3, 2], [6], [-1], [-1, 3], [0], [], [1, 1, 6], [-2, 3], [2, -1, -1], [4, 5],
          [2 ** 31], [2 ** 62, 2 ** 62], [0, 0], (2, 3), None, 3, "ab", [1.5, 2]]
INTS = [0, 1, 2, 3, -1, -5, 7, 2 ** 31, 2 ** 63, None, 1.5, True, "3", [1, 2]]
FLOATS = [0.0, 1.0, 0.5, -1.0, 2.0, 1e30, -1e-30, float("nan"), float("inf"), None, "1", 3]
ODD = [None, "x", [], [None], 0, 1, -1, (), 2 ** 40, object()]

TENSORISH = {"x", "y", "a", "b", "t", "x1", "x2", "lhs", "rhs", "w", "tensor", "input", "condition",
             "indices", "mask", "dy", "grad", "target", "c", "h", "hx", "cx", "scale", "bias",
             "running_mean", "running_var", "updates", "slope", "pos", "neg", "m", "v", "q", "k",
             "value", "key", "query", "src", "dst", "M", "A", "B", "C", "W", "other", "data",
             "np_array", "attn_mask", "weight", "gamma", "beta", "states"}


def _value(r, pname, default_known):
    """A value for the parameter named pname (lower-cased name chooses the pool)."""
    p = pname.lower()
    u = r.random()
    if u < 0.06:
        return r.choice(ODD)
    if p in ("h", "handle"):
        return ("handle", r.choice(HANDLES), _tensor(r), [r.choice([1, 2, 3, 0, -1, 9])
                                                           for _ in range(4)])
    if p in ("tensors", "xs", "l"):
        return [_tensor(r) for _ in range(r.choice([0, 1, 2, 3]))]
    if pname in TENSORISH or p in TENSORISH or p.startswith(("x", "t_", "tensor")):
        if p in ("np_array", "data") and r.random() < 0.5:
            return ("numpy", _tensor(r))
        return _tensor(r)
    if "axis" in p or "axes" in p or p in ("dim", "dims", "perm", "keepdims"):
        return r.choice(AXES)
    if any(s in p for s in ("shape", "size", "repeats", "pads", "padding", "kernel", "stride",
                            "starts", "ends", "steps", "scales", "split", "parts", "dilation")):
        return r.choice(SHAPES + INTS)
    if "layers" in p:  # a count of layers built in a Python loop: 2^31 of them only takes time
        return r.choice([0, 1, 2, 3, -1, None, 1.5, "2"])
    if any(s in p for s in ("num", "depth", "group", "block", "channels", "features", "heads",
                            "layers", "offset", "idx", "index", "seed", "count", "n", "k", "to")):
        return r.choice(INTS + ["float32", "int32", "float16"])
    if any(s in p for s in ("dtype", "mode", "format", "nonlinearity", "ops", "name", "reduction")):
        return r.choice(["float32", "int32", "float16", "channels_first", "channels_last", "DCR",
                         "CRD", "constant", "reflect", "edge", "linear", "nearest", "tanh", "relu",
                         "ij,jk->ik", "i->", "mean", "sum", "", None, 3])
    if r.random() < 0.5:
        return r.choice(FLOATS)
    return _tensor(r) if r.random() < 0.5 else r.choice(INTS)


def _params(fn, kind):
    """(name, has_default, kind) for each parameter of the callable, self dropped."""
    target = fn.__init__ if kind in ("layer", "opt", "schedule") else fn
    try:
        if kind == "rawclass":  # a Cython class: its docstring's first line is the signature
            head = fn.__doc__.split("\n", 1)[0]
            sig = inspect.signature(eval("lambda " + head[head.index("(") + 1:head.rindex(")")]
                                         + ": None"))
        else:
            sig = inspect.signature(target)
    except (TypeError, ValueError, SyntaxError, AttributeError, NameError):
        return []
    out = []
    for i, p in enumerate(sig.parameters.values()):
        if i == 0 and kind in ("method", "layer", "rawmethod", "devmethod", "opt", "schedule") and \
                p.name in ("self", "cls"):
            continue
        if p.kind is p.VAR_KEYWORD:
            continue
        out.append((p.name, p.default is not p.empty, p.kind))
    return out


ONNX_INTS = [[], [1], [2, 2], [1, 1, 1, 1], [0, 0], [-1], [3, 3], [1, 2, 3, 4], [2 ** 31],
             [0, -1, 1, 2], [0, 0, 1, 1], [-1, 0], [2 ** 62, 1]]
ONNX_STRINGS = ["", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "DCR", "CRD", "constant",
                "reflect", "edge", "nearest", "linear", "cubic", "tanh", "relu", "sigmoid",
                "none", "x", "half_pixel", "asymmetric", "round_prefer_floor", "floor"]


def _onnx_attr(r, a):
    """A value for ONNX attribute schema a (None: an attribute type not drawn)."""
    from onnx.defs import OpSchema
    t = OpSchema.AttrType
    if a.type == t.INT:
        return r.choice([0, 1, 2, 3, -1, -5, 7, 2 ** 31, 2 ** 62, 1, 0])
    if a.type == t.INTS:
        return r.choice(ONNX_INTS)
    if a.type == t.FLOAT:
        return r.choice([0.0, 1.0, 0.5, -1.0, 1e30, float("nan"), float("inf"), 1e-5])
    if a.type == t.FLOATS:
        return r.choice([[], [1.0], [0.5, 2.0], [float("nan")]])
    if a.type == t.STRING:
        return r.choice(ONNX_STRINGS)
    if a.type == t.STRINGS:
        return r.choice([["sigmoid", "tanh", "tanh"], [], ["x"], ["relu"]])
    if a.type == t.TENSOR:
        return ("onnx-tensor", _onnx_input(r))
    return None


def _onnx_input(r):
    spec = _tensor(r)
    u = r.random()
    if u < 0.25:
        spec.dtype, spec.fill = "int64", "index"
    elif u < 0.3:
        spec.dtype, spec.fill = "bool", "index"
    spec.grad = False
    return spec


def _draw_onnx(r, op):
    """(attributes, input specs, number of outputs) of a one-node model of ONNX op type op."""
    import onnx
    from onnx.defs import OpSchema
    schema = onnx.defs.get_schema(op)
    attrs = {}
    for a in schema.attributes.values():
        if a.required or r.random() < 0.5:
            v = _onnx_attr(r, a)
            if v is not None:  # typed: make_node cannot type an empty list by itself
                attrs[a.name] = ("onnx-attr", v, int(a.type))
    inputs = []
    for f in schema.inputs:
        if f.option == OpSchema.FormalParameterOption.Variadic:
            inputs += [_onnx_input(r) for _ in range(r.choice([0, 1, 2, 3]))]
        elif f.option == OpSchema.FormalParameterOption.Optional and r.random() < 0.4:
            inputs.append(None if r.random() < 0.5 else "stop")
            if inputs[-1] == "stop":
                inputs.pop()
                break
        else:
            inputs.append(_onnx_input(r))
    n_out = max(1, len(schema.outputs)) if r.random() < 0.7 else r.choice([1, 2, 3])
    return [attrs], {}, None, [inputs, n_out]


def draw(name, fn, kind, seed, i):
    """The arguments of call i of target name: (args, kwargs, receiver, layer call inputs), all as
    specs (TSpec / plain values), reproducible from (seed, name, i)."""
    r = random.Random("%d:%s:%d" % (seed, name, i))
    if kind == "onnx":
        return _draw_onnx(r, fn)
    if kind == "model":
        import fuzz_model
        return [fuzz_model.draw(r)], {}, None, None
    args, kwargs = [], {}
    positional = True  # until a parameter is left out or passed by keyword: then keywords only
    for pname, has_default, pkind in _params(fn, kind):
        if pkind is inspect.Parameter.VAR_POSITIONAL:
            if positional:
                args.extend(_tensor(r) for _ in range(r.choice([0, 1, 2, 2, 3])))
            continue
        if has_default and r.random() < 0.5:
            positional = False
            continue
        v = _value(r, pname, has_default)
        if pkind is inspect.Parameter.KEYWORD_ONLY or (has_default and r.random() < 0.3):
            positional = False
        if positional:
            args.append(v)
        else:
            kwargs[pname] = v
    receiver = _tensor(r) if kind in ("method", "rawmethod") else \
        ("device",) if kind == "devmethod" else None
    inputs = None
    if kind == "layer":
        inputs = [_tensor(r) for _ in range(r.choice([1, 1, 1, 2]))]
    elif kind == "opt":  # a parameter and its gradient, usually of one shape
        p = _tensor(r)
        p.grad = True
        inputs = [p, TSpec(p.shape, p.dtype, view=p.view) if r.random() < 0.7 else _tensor(r)]
    elif kind == "schedule":
        inputs = [r.choice(INTS + FLOATS + [TSpec((1,)), TSpec(())])]
    return args, kwargs, receiver, inputs


def describe(name, case):
    args, kwargs, receiver, inputs = case
    if name.startswith("sonnx."):  # attributes without their ONNX type numbers
        args = [{k: v[1] for k, v in args[0].items()}]
    parts = [repr(a) for a in args] + ["%s=%r" % kv for kv in kwargs.items()]
    text = "%s(%s)" % (name, ", ".join(parts))
    if receiver is not None:
        text = "%r.%s" % (receiver, text.split(".", 2)[2] if text.startswith("raw.")
                          else text.split("tensor.Tensor.", 1)[1])
    if inputs is not None and name.startswith("opt.") and len(inputs) == 2:
        text += ".update(%r, %r); .step()" % tuple(inputs)
    elif inputs is not None:
        text += "(%s)" % ", ".join(map(repr, inputs))
    return text


# ---------------------------------------------------------------- one call, classified


RAW_KINDS = ("raw", "rawclass", "rawmethod", "devmethod")


def _handle(cls_name, x, sizes):
    """A handle of the named class for core tensor x with the drawn sizes; where those do not
    make one, a valid handle for a (2, 3, 5, 5) input, so ops also meet a handle of another
    geometry than their input's."""
    from singa import singa_wrap
    k, s, p, c = sizes
    cls = getattr(singa_wrap, cls_name)
    try:
        if cls_name == "ConvHandle":
            cin = x.shape()[1] if x.nDim() == 4 else c
            return cls(x, k, s, p, cin, c, bool(p % 2))
        if cls_name == "PoolingHandle":
            return cls(x, k, s, p, bool(c % 2))
        return cls(x, 0.9)
    except DOCUMENTED:
        shape = [2, 3, 5, 5]
        if cls_name == "ConvHandle":
            return cls(shape, 3, 1, 1, 3, 4, True)
        return cls(shape, 2, 2, 0) if cls_name == "PoolingHandle" else cls(shape, 0.9)


def _build(v, rng, raw=False):
    """The value a spec stands for; raw: tensors as core tensors (singa_wrap.Tensor)."""
    if isinstance(v, TSpec):
        t = v.build(rng)
        return t.data if raw else t
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "numpy":
        return v[1].array(rng)
    if isinstance(v, tuple) and len(v) == 4 and v[0] == "handle":
        return _handle(v[1], v[2].build(rng).data, v[3])
    if v == ("device",):
        from singa import singa_wrap
        return singa_wrap.create_cpu_device()
    if isinstance(v, list):
        return [_build(x, rng, raw) for x in v]
    return v


def _run_onnx(op, attrs, inputs, rng):
    """One node of type op with these attributes on these inputs, through sonnx's run_node."""
    import numpy as np
    from onnx import helper, numpy_helper
    from singa.sonnx.backend import SingaBackend
    specs, n_out = inputs
    names = ["" if s is None else "in%d" % i for i, s in enumerate(specs)]
    node = helper.make_node(op, names, ["out%d" % i for i in range(n_out)])
    for k, (_, v, attr_type) in attrs.items():
        if isinstance(v, tuple):  # ("onnx-tensor", spec)
            v = numpy_helper.from_array(v[1].array(rng))
        node.attribute.append(helper.make_attribute(k, v, attr_type=attr_type))
    arrays = [None if s is None else s.array(rng) for s in specs]
    return [np.asarray(y) for y in SingaBackend.run_node(node, arrays)]


def _call(fn, kind, case, rng):
    """Builds the case's values and makes the call; returns what it returned."""
    args, kwargs, receiver, inputs = case
    raw = kind in RAW_KINDS
    a = [_build(v, rng, raw) for v in args]
    kw = {k: _build(v, rng, raw) for k, v in kwargs.items()}
    if kind in ("method", "rawmethod", "devmethod"):
        return fn(_build(receiver, rng, raw), *a, **kw)
    if kind == "layer":
        lay = fn(*a, **kw)
        return lay(*[_build(v, rng) for v in inputs])
    if kind == "opt":
        o = fn(*a, **kw)
        param, grad = [_build(v, rng) for v in inputs]
        o.update(param, grad)
        o.step()
        return param
    if kind == "schedule":
        return fn(*a, **kw)(_build(inputs[0], rng))
    if kind == "onnx":
        return _run_onnx(fn, args[0], inputs, rng)
    if kind == "model":
        return fn(args[0], int(rng.integers(1 << 30)))
    return fn(*a, **kw)


def _core_errors():
    """The exception classes of the core's binding (computed once: under a tight memory limit
    the classification must not allocate much)."""
    global _CORE_ERRORS
    if _CORE_ERRORS is None:
        from singa import singa_wrap
        _CORE_ERRORS = tuple(getattr(singa_wrap, n) for n in dir(singa_wrap)
                             if n.endswith("Error") and isinstance(getattr(singa_wrap, n), type))
    return _CORE_ERRORS


_CORE_ERRORS = None


def _origin(exc):
    """Where exc was raised: 'singa-raise' (a raise statement in singa's Python or the core's
    mapped exception), or 'internal' (numpy, Python itself, or an expression in singa)."""
    if isinstance(exc, _core_errors()):
        return "singa-raise"
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return "internal"
    fname = last.tb_frame.f_code.co_filename
    if fname.endswith(".pxi"):  # the bindings generated from the op tables (cython/gen_*.py)
        return "singa-raise"
    if "singa" not in fname or "site-packages/numpy" in fname:
        return "internal"
    try:
        import linecache
        line = linecache.getline(fname, last.tb_lineno).strip()
    except Exception:
        line = ""
    return "singa-raise" if line.startswith(("raise", "assert")) or fname.endswith(".pyx") \
        else "internal"


def _values(y):
    """The numpy values of every tensor (Python or core) a call returned."""
    from singa import singa_wrap, tensor
    outs = y if isinstance(y, (list, tuple)) else [y]
    return [tensor.to_numpy(o) if isinstance(o, tensor.Tensor) else singa_wrap.to_numpy(o)
            for o in outs if isinstance(o, (tensor.Tensor, singa_wrap.Tensor))]


# Targets whose values depend on the random generator or on reading tensor values while
# recording (the graph records ops; it cannot branch on data): under --graph only the shapes
# of their results are compared.
GRAPH_SHAPES_ONLY = ("bernoulli", "gaussian", "uniform", "dropout", "random", "layer.",
                     "initializer.",
                     "nonzero", "constant_of_shape", "Bernoulli", "Gaussian", "Uniform")


def graph_case(name, fn, kind, case, seed, eager):
    """The same call recorded with the default device's graph on, then run: its results must
    equal the eager ones (`eager`, numpy arrays). Returns (outcome, detail)."""
    import numpy as np
    from singa import device, singa_wrap
    dev = device.get_default_device()
    rng = np.random.default_rng(seed)
    try:
        dev.EnableGraph(True)
        try:
            y = _call(fn, kind, case, rng)
        finally:
            dev.EnableGraph(False)
        dev.RunGraph(False)
        got = _values(y)
    except DOCUMENTED + (singa_wrap.SingaError, BufferError) as e:
        # Reading values while recording (to_numpy, a tensor as a number) raises by design.
        return "refused", "eager computed, the graph raised %s: %s%s" % (
            type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "", _where(e))
    finally:
        dev.ResetGraph()
    if len(got) != len(eager):
        return "graph", "%d results in the graph, %d eager" % (len(got), len(eager))
    shapes_only = any(k in name for k in GRAPH_SHAPES_ONLY)
    for i, (g, e) in enumerate(zip(got, eager)):
        if g.shape != e.shape or g.dtype != e.dtype:
            return "graph", "result %d: %s %s in the graph, %s %s eager" % (
                i, g.dtype, g.shape, e.dtype, e.shape)
        if not shapes_only and not np.array_equal(g, e, equal_nan=g.dtype.kind == "f"):
            bad = np.argwhere(~((g == e) | (np.isnan(g) & np.isnan(e)) if g.dtype.kind == "f"
                                else g == e))
            return "graph", "result %d differs at %d places, first %s: graph %r, eager %r" % (
                i, len(bad), tuple(bad[0]), g[tuple(bad[0])], e[tuple(bad[0])])
    return "ok", ""


def run_case(name, fn, kind, case, seed, graph=False):
    """Run one call (and, with graph, the same call in a recorded graph); returns (outcome,
    detail)."""
    import numpy as np
    from singa import autograd, tensor
    rng = np.random.default_rng(seed)
    try:
        y = _call(fn, kind, case, rng)
        eager = _values(y)
        outs = y if isinstance(y, (list, tuple)) else [y]
        first = outs[0] if outs else None
        if autograd.training and isinstance(first, tensor.Tensor) and first.creator is not None \
                and getattr(first, "requires_grad", False) and first.dtype == tensor.float32:
            dy = tensor.from_numpy(np.ones(first.shape, np.float32))
            for p, g in autograd.backward(first, dy):
                tensor.to_numpy(g)
        if graph and kind in (None, "method", "raw", "rawmethod"):
            return graph_case(name, fn, kind, case, seed, eager)
        return "ok", ""
    except DOCUMENTED + _core_errors() as e:  # the core's DeviceError is a RuntimeError
        origin = _origin(e)
        msg = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
        return ("error" if origin == "singa-raise" else "leak"), msg + _where(e)
    except Exception as e:  # noqa: BLE001 - classifying is the point
        if hasattr(e, "outcome") and type(e).__name__.endswith("Mismatch"):  # fuzz_model.py
            return e.outcome, str(e)[:300]
        return "bug", "%s: %s%s" % (type(e).__name__, str(e)[:200], _where(e))


def _where(e):
    tb = traceback.extract_tb(e.__traceback__)
    for fr in reversed(tb):
        if "/singa/" in fr.filename or "singa" in os.path.basename(fr.filename):
            return "  [%s:%d]" % (os.path.relpath(fr.filename), fr.lineno)
    return ""


# ---------------------------------------------------------------- child and parent


def _mapped_bytes():
    """The process's address space now (Linux: VmSize of /proc/self/status), 0 elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) << 10
    except OSError:
        pass
    return 0


def child(opts):
    warnings.simplefilter("ignore")
    from singa import autograd
    autograd.training = True
    _core_errors()
    tg = {n: (f, k) for n, f, k in targets(opts.extra)}
    # The limit counts address space the imports mapped (a CUDA build maps its libraries'
    # gigabytes), so it is set after them, on top of what they took.
    if opts.mem_gib > 0:  # 0: no limit (AddressSanitizer reserves terabytes of address space)
        limit = _mapped_bytes() + (opts.mem_gib << 30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    log = open(opts.log, "a", buffering=1)
    for line in open(opts.plan):
        idx, name, i = line.split()
        idx, i = int(idx), int(i)
        if idx < opts.start:
            continue
        fn, kind = tg[name]
        log.write("BEGIN %d\n" % idx)  # line-buffered: in the page cache before the call starts
        sys.stdout = io.StringIO()  # ops that print (SINGA's verbose paths) stay quiet
        t0 = time.time()
        try:
            outcome, detail = run_case(name, fn, kind, draw(name, fn, kind, opts.seed, i),
                                       opts.seed, opts.graph)
        except MemoryError:  # the address-space limit hit again while the error was reported
            outcome, detail = "error", "MemoryError: (while reporting an earlier MemoryError)"
        sys.stdout = sys.__stdout__
        autograd.training = True
        log.write("END %d %s %.3f %s\n" % (idx, outcome, time.time() - t0, json.dumps(detail)))


def parent(opts):
    tg = targets(opts.extra)
    if opts.only:
        tg = [t for t in tg if any(t[0] == o or t[0].startswith(o + ".") for o in opts.only)]
    if opts.list:
        for n, f, k in tg:
            print(n, k or "")
        return 0
    with tempfile.TemporaryDirectory(prefix="singa-fuzz-") as work:
        return _run(opts, tg, work)


def _run(opts, tg, work):
    """Runs every case of the targets tg in child processes, logging under work; reports."""
    plan, logf = os.path.join(work, "plan"), os.path.join(work, "log")
    cases = [(n, i) for n, _, _ in tg for i in range(opts.calls)]
    with open(plan, "w") as f:
        for idx, (n, i) in enumerate(cases):
            f.write("%d %s %d\n" % (idx, n, i))
    open(logf, "w").close()
    results, seconds = {}, {}
    start = 0
    t0 = time.time()
    while start < len(cases):
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--plan", plan, "--log", logf,
               "--start", str(start), "--seed", str(opts.seed), "--mem-gib", str(opts.mem_gib)]
        cmd += ["--extra=" + e for e in opts.extra or ()] + (["--graph"] if opts.graph else [])
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        last_size, last_change = -1, time.time()
        while proc.poll() is None:
            time.sleep(0.2)
            size = os.path.getsize(logf)
            if size != last_size:
                last_size, last_change = size, time.time()
            elif time.time() - last_change > opts.timeout:
                proc.kill()
                proc.wait()
                break
        err = proc.stderr.read().decode(errors="replace")
        begun = None
        for line in open(logf):
            parts = line.rstrip("\n").split(" ", 4)
            if parts[0] == "BEGIN":
                begun = int(parts[1])
            elif parts[0] == "END":
                results[int(parts[1])] = (parts[2], json.loads(parts[4]))
                seconds[int(parts[1])] = float(parts[3])
                begun = None
        if proc.returncode == 0:
            break
        if begun is None:  # died outside a case (import, plan): report and stop
            print("child failed outside a case (rc %s):\n%s" % (proc.returncode, err[-3000:]))
            return 2
        rc = proc.returncode
        what = "hang" if rc == -signal.SIGKILL else "crash"
        lines = err.strip().splitlines()
        # a sanitizer's verdict (ASan's SUMMARY, UBSan's "runtime error") says more than the tail
        tail = "; ".join([l for l in lines if "SUMMARY:" in l or "runtime error:" in l][:2] or
                         lines[-3:])
        results[begun] = (what, "rc %s %s" % (rc, tail[:300]))
        with open(logf, "a") as f:
            f.write("END %d %s 0 %s\n" % (begun, what, json.dumps(results[begun][1])))
        start = begun + 1
    return report(opts, tg, cases, results, seconds, time.time() - t0)


def report(opts, tg, cases, results, durations, seconds):
    kinds = ("ok", "error", "leak", "bug", "crash", "hang", "graph", "refused", "onnx")
    per = {}
    for idx, (n, i) in enumerate(cases):
        outcome = results.get(idx, ("missing", ""))[0]
        per.setdefault(n, dict.fromkeys(kinds + ("missing",), 0))[outcome] += 1
    bad = [(idx, cases[idx], results[idx]) for idx in sorted(results)
           if results[idx][0] in ("bug", "crash", "hang", "graph", "onnx") or
           (results[idx][0] in ("leak", "refused") and opts.show_leaks)]
    fmap = {n: (f, k) for n, f, k in tg}
    print("| target | calls | %s |" % " | ".join(kinds))
    print("|---|---:|%s" % ("---:|" * len(kinds)))
    tot = dict.fromkeys(kinds, 0)
    for n in sorted(per):
        c = per[n]
        for k in kinds:
            tot[k] += c[k]
        if opts.all_rows or any(c[k] for k in ("leak", "bug", "crash", "hang", "graph") if k in c):
            print("| %s | %d | %s |" % (n, sum(c.values()), " | ".join(str(c[k]) for k in kinds)))
    print("| **all %d targets** | %d | %s |" % (len(per), len(cases),
                                               " | ".join(str(tot[k]) for k in kinds)))
    print("\n%d calls in %.0f s (seed %d); the slowest:" % (len(cases), seconds, opts.seed))
    for idx in sorted(durations, key=durations.get, reverse=True)[:3]:
        print("  %.2f s  %s:%d" % (durations[idx], cases[idx][0], cases[idx][1]))
    seen = set()
    for idx, (n, i), (outcome, detail) in bad:
        key = (n, outcome, detail.split("  [")[0][:80])
        if key in seen and not opts.every:
            continue
        seen.add(key)
        f, k = fmap[n]
        print("\n%s  %s:%d  %s\n    %s" % (outcome.upper(), n, i, detail,
                                         describe(n, draw(n, f, k, opts.seed, i))))
    fail = tot["bug"] + tot["crash"] + tot["hang"] + tot["graph"] + tot["onnx"] + \
        (tot["leak"] if opts.strict else 0)
    return 1 if fail else 0


def replay(opts):
    name, i = opts.case.rsplit(":", 1)
    tg = {n: (f, k) for n, f, k in targets(opts.extra)}
    fn, kind = tg[name]
    case = draw(name, fn, kind, opts.seed, int(i))
    print(describe(name, case))
    import numpy as np
    from singa import autograd
    autograd.training = True
    y = _call(fn, kind, case, np.random.default_rng(opts.seed))
    print("returned", type(y).__name__, getattr(y, "shape", ""))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=40, help="calls per target")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", help="targets (or prefixes: autograd, layer.Conv2d)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds without progress")
    ap.add_argument("--mem-gib", type=int, default=4,
                    help="address-space limit of the child (0: none)")
    ap.add_argument("--graph", action="store_true",
                    help="also record each call that computed in the device's graph, run it and "
                         "compare with the eager results (outcome 'graph' when they differ)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--case", help="replay NAME:I in this process, with the traceback")
    ap.add_argument("--show-leaks", action="store_true", help="print each leak's first case")
    ap.add_argument("--strict", action="store_true", help="fail on leaks too")
    ap.add_argument("--all-rows", action="store_true", help="a row for every target")
    ap.add_argument("--every", action="store_true", help="print every bad case, not one per kind")
    ap.add_argument("--extra", action="append", metavar="FILE:FUNC",
                    help="also fuzz this function (tests of the harness itself)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    ap.add_argument("--log", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.child:
        child(opts)
        return 0
    if opts.case:
        return replay(opts)
    return parent(opts)


if __name__ == "__main__":
    sys.exit(main())
