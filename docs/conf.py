"""Sphinx configuration of singa's API reference (`make docs`: HTML into build/docs).

The prose pages include README.md and BENCHMARKS.md (myst-parser), so that each text has one
source. The API pages (api/*.rst, written here at every build and not kept in git) list every
public name of tools/public_api.py, the same list tests/python/test_docs.py checks for docstrings.
"""
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)                      # the checkout's singa (with its built extension)
sys.path.insert(0, os.path.join(ROOT, "tools"))

import public_api  # noqa: E402

project = "singa"
author = "the singa developers"
copyright = "the singa developers; Apache License 2.0"
release = importlib.import_module("singa").__version__
version = release

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"
html_theme = "alabaster"
html_static_path = []
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_preserve_defaults = True        # dtype=float32, not dtype=0
napoleon_google_docstring = True
napoleon_numpy_docstring = True
napoleon_use_rtype = False
myst_heading_anchors = 3
# README's fenced blocks name no language or name shell commands; highlighting them is cosmetic.
suppress_warnings = ["misc.highlighting_failure"]

# One page per module of the API reference, in the order of public_api.MODULES.
_PAGE_INTRO = ".. This page is written by docs/conf.py at every build: edit that file, not this.\n\n"


def _directive(obj):
    import inspect
    if inspect.isclass(obj):
        return "autoclass"
    if inspect.isroutine(obj):
        return "autofunction"
    return "autodata"


def write_api_pages():
    """api/<module>.rst for each module: its docstring, then every public name; an object that
    several modules export is indexed on the first page only (no duplicate-description warning)."""
    api = os.path.join(HERE, "api")
    os.makedirs(api, exist_ok=True)
    seen = {}
    pages = []
    for modname in public_api.MODULES:
        mod = importlib.import_module(modname)
        short = modname.split(".", 1)[1]
        lines = [_PAGE_INTRO, modname, "=" * len(modname), "",
                 ".. automodule:: %s" % modname, "   :no-members:", "",
                 ".. currentmodule:: %s" % modname, ""]
        for name in public_api.public_names(modname):
            obj = getattr(mod, name)
            key = id(obj) if public_api.documentable(obj) else None
            lines.append(".. %s:: %s" % (_directive(obj), name))
            if key in seen:
                lines.append("   :no-index:")
                lines.append("")
                lines.append("   The same object as :py:obj:`%s`." % seen[key])
            elif key is not None:
                seen[key] = "%s.%s" % (modname, name)
            if _directive(obj) == "autodata":
                lines.append("   :annotation:")
            lines.append("")
        text = "\n".join(lines)
        path = os.path.join(api, short + ".rst")
        old = open(path).read() if os.path.exists(path) else None
        if old != text:                        # unchanged pages keep their time: no rebuild
            with open(path, "w") as f:
                f.write(text)
        pages.append("api/" + short)
    return pages


API_PAGES = write_api_pages()
