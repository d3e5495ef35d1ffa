"""singa/singa.h is the whole public C++ API (issue 16, point 9): it includes every header under
cpp/include/singa/, so a header added later cannot be forgotten there. (The C++ side,
tests/cpp/test_public_header.cc, compiles a program that includes singa.h alone.)"""
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
INCLUDE = os.path.join(ROOT, "cpp", "include")
UMBRELLA = os.path.join(INCLUDE, "singa", "singa.h")


def public_headers():
    found = set()
    for folder, _, files in os.walk(os.path.join(INCLUDE, "singa")):
        for f in files:
            if f.endswith((".h", ".hpp")):
                found.add(os.path.relpath(os.path.join(folder, f), INCLUDE).replace(os.sep, "/"))
    return found - {"singa/singa.h"}


def umbrella_includes():
    with open(UMBRELLA) as f:
        return re.findall(r'^\s*#\s*include\s*[<"](singa/[^>"]+)[>"]', f.read(), re.M)


def test_singa_h_includes_every_public_header():
    headers = public_headers()
    assert "singa/ops/nn.h" in headers and len(headers) > 10  # the walk found the tree
    missing = sorted(headers - set(umbrella_includes()))
    assert not missing, "cpp/include/singa/singa.h does not include %s" % ", ".join(missing)


def test_singa_h_includes_only_existing_headers_once():
    inc = umbrella_includes()
    assert len(inc) == len(set(inc)), "duplicate includes in singa.h"
    assert not [h for h in inc if not os.path.exists(os.path.join(INCLUDE, h))]
    assert "singa/singa.h" not in inc
