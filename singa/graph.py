"""Looking at a device's computational graph.

    from singa import graph
    graph.save_dot(dev, "step.dot")            # operations as boxes, blocks as labelled edges
    graph.render(dev, "step.svg")              # needs Graphviz's `dot` (apt-get install graphviz)
    graph.memory_plan(dev)                     # arena size, liveness lower bound, ... in bytes
    print(graph.profile(dev))                  # per-operation times after dev.SetVerbosity(1)

The graph itself is built and replayed in C++ (cpp/include/singa/graph/graph.h); Model drives it.
"""
import os
import shutil
import subprocess

__all__ = ["to_dot", "save_dot", "render", "memory_plan", "profile", "set_planning"]


def to_dot(dev):
    """Graphviz source of the operations recorded on `dev`."""
    return dev.graph_dot()


def save_dot(dev, path):
    with open(path, "w") as f:
        f.write(dev.graph_dot())
    return path


def render(dev, path, fmt=None):
    """Writes the graph as an image (format from the extension: svg, png, pdf). Raises
    RuntimeError when Graphviz is not installed."""
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("render: Graphviz's `dot` was not found; install graphviz "
                           "(apt-get install graphviz) or use save_dot()")
    fmt = fmt or os.path.splitext(path)[1].lstrip(".") or "svg"
    subprocess.run([exe, "-T" + fmt, "-o", path], input=dev.graph_dot().encode(), check=True)
    return path


def memory_plan(dev):
    """What the static planner decided for the last built graph, in bytes: arena_bytes,
    lower_bound_bytes (the most bytes of recyclable blocks alive at once in the executed order),
    recyclable_bytes, persistent_bytes (blocks the graph never frees), num_recyclable."""
    return dev.graph_memory_plan()


def profile(dev):
    """Per-operation times (needs dev.SetVerbosity(1) before the replays)."""
    return dev.GetTimeProfiling()


def set_planning(dev, planned=True):
    """Static memory planning (default) or Apache SINGA's dynamic recycling through the pool."""
    dev.SetGraphPlanning(planned)
