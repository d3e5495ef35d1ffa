"""The public Python API of singa, as one list: what the API reference documents (docs/conf.py)
and what tests/python/test_docs.py requires a docstring of.

A module's public names are its ``__all__`` where it defines one; otherwise the names not starting
with an underscore whose object is a class or function defined in that module, in one of its
sub-modules or in a private module (``singa._core``, ``singa._tensor_funcs``...), so that imported
helpers (``numpy``, ``functools.reduce``) and names re-exported from another public module
(``singa.autograd.Tensor`` is ``singa.tensor.Tensor``) are not counted twice. Constants (``float32``,
``FORMAT_VERSION``) are listed but cannot carry a docstring of their own.
"""
import importlib
import inspect

# The modules of the reference, in the order of its pages.
MODULES = ("singa.tensor", "singa.device", "singa.autograd", "singa.layer", "singa.model",
           "singa.opt", "singa.initializer", "singa.sonnx", "singa.graph", "singa.data",
           "singa.utils", "singa.image_tool", "singa.snapshot", "singa.launch")


def _defined_here(modname, obj):
    home = getattr(obj, "__module__", None) or ""
    if home == modname or home.startswith(modname + "."):
        return True
    # private modules (singa._core, singa.layers._util) are implementation homes
    return home.startswith("singa.") and any(p.startswith("_") for p in home.split(".")[1:])


def public_names(modname):
    """The public names of one module, in definition order where known (a list of str)."""
    mod = importlib.import_module(modname)
    if hasattr(mod, "__all__"):
        return list(dict.fromkeys(mod.__all__))
    names = []
    for name, obj in vars(mod).items():
        if name.startswith("_") or inspect.ismodule(obj):
            continue
        if (inspect.isclass(obj) or inspect.isroutine(obj)) and _defined_here(modname, obj):
            names.append(name)
    return names


def documentable(obj):
    """Whether obj can carry its own docstring (a class or a function, not a constant)."""
    return inspect.isclass(obj) or inspect.isroutine(obj)


def has_own_doc(obj):
    """A docstring written for obj itself (not one inherited from object or a base class)."""
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    return bool(doc and doc.strip())


def undocumented():
    """(module, name) of every public class or function without a docstring of its own."""
    missing = []
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name in public_names(modname):
            obj = getattr(mod, name)
            if documentable(obj) and not has_own_doc(obj):
                missing.append((modname, name))
    return missing


def _introduced_by(cls, name):
    """The class of cls's MRO, farthest from cls, whose namespace holds name."""
    owners = [c for c in cls.__mro__ if name in vars(c)]
    return owners[-1]


def public_methods(cls):
    """The names of the public methods and properties cls defines itself, less the hooks that a
    private base introduces (``_Unary.deriv``, ``_Binary``'s ``grads``...: how an operator class
    is written, not what a user calls)."""
    names = []
    for name, v in vars(cls).items():
        if name.startswith("_"):
            continue
        if not (inspect.isfunction(v) or isinstance(v, (property, staticmethod, classmethod))):
            continue
        if _introduced_by(cls, name).__name__.startswith("_"):
            continue
        names.append(name)
    return names


def undocumented_methods():
    """'module.Class.method' of every public method or property of a public class with no
    docstring, its own or one it inherits from the method it overrides (as autodoc shows it)."""
    missing, seen = [], set()
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name in public_names(modname):
            cls = getattr(mod, name)
            if not inspect.isclass(cls) or id(cls) in seen:
                continue
            seen.add(id(cls))
            for meth in public_methods(cls):
                v = vars(cls)[meth]
                doc = v.__doc__ if isinstance(v, property) else inspect.getdoc(getattr(cls, meth))
                if not (doc and doc.strip()):
                    missing.append("%s.%s.%s" % (modname, name, meth))
    return missing


if __name__ == "__main__":
    total = 0
    for m in MODULES:
        names = public_names(m)
        total += len(names)
        print(m, len(names))
    missing = undocumented()
    print("public names:", total, "without a docstring:", len(missing))
    for m, n in missing:
        print("  %s.%s" % (m, n))
    methods = undocumented_methods()
    print("public methods without a docstring:", len(methods))
    for m in methods:
        print("  " + m)
