"""Looking at a device's computational graph.

Example::

    from singa import graph
    graph.save_dot(dev, "step.dot")            # operations as boxes, blocks as labelled edges
    graph.render(dev, "step.svg")              # needs Graphviz's `dot` (apt-get install graphviz)
    graph.memory_plan(dev)                     # arena size, liveness lower bound, ... in bytes
    print(graph.profile(dev))                  # per-operation times after dev.SetVerbosity(1)
    graph.plot_memory(dev, "memory.png")       # the planned arena and the bytes live (matplotlib)

The graph itself is built and replayed in C++ (cpp/include/singa/graph/graph.h); Model drives it
and names the blocks a user knows (parameters such as ``conv1.W``, the inputs, the results) with
name_blocks(), so the drawings show those names instead of ids.
"""
import os
import shutil
import subprocess

__all__ = ["to_dot", "save_dot", "render", "memory_plan", "profile", "set_planning",
           "name_blocks", "memory_layout", "live_bytes", "plot_memory"]


def to_dot(dev):
    """Graphviz source of the operations recorded on `dev`."""
    return dev.graph_dot()


def save_dot(dev, path):
    """Writes the Graphviz source of the operations recorded on ``dev`` (to_dot) to the file
    ``path`` and returns ``path``."""
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
    recyclable_bytes, persistent_bytes (blocks the graph never frees), num_recyclable; under a
    memory budget (Device.SetMemoryBudget) also budget_bytes, unconstrained_arena_bytes,
    num_recomputed, recompute_cost (ms per step by the cost model) and cost_measured (whether
    that model used times measured on this graph's replays or the estimate)."""
    return dev.graph_memory_plan()


def profile(dev):
    """Per-operation times (needs dev.SetVerbosity(1) before the replays)."""
    return dev.GetTimeProfiling()


def set_planning(dev, planned=True):
    """Static memory planning (default) or Apache SINGA's dynamic recycling through the pool."""
    dev.SetGraphPlanning(planned)


# ---- names ------------------------------------------------------------------------------------
def _core(t):
    """The singa_wrap.Tensor of a singa.tensor.Tensor (or t itself)."""
    return getattr(t, "data", t)


def _name(t, name):
    c = _core(t)
    if hasattr(c, "set_block_name"):
        c.set_block_name(name)


def _name_all(values, prefix):
    """Names every tensor in a tensor, list/tuple or dict: prefix, prefix[i], prefix[key]."""
    if isinstance(values, dict):
        for k, v in values.items():
            _name_all(v, "%s[%s]" % (prefix, k))
    elif isinstance(values, (list, tuple)):
        for i, v in enumerate(values):
            _name_all(v, "%s[%d]" % (prefix, i))
    elif values is not None and hasattr(_core(values), "set_block_name"):
        _name(values, prefix)


def name_blocks(model=None, inputs=(), results=None, optimizer=None, **tensors):
    """Gives the blocks of the tensors a user knows their names, for to_dot() and plot_memory():
    the model's parameters and states under their state names (``conv1.W``), the optimizer's
    per-parameter states (``moments[conv1.W]``), the inputs (``input[0]``), the results
    (``result[0]``, ...) and any ``name=tensor`` given. Model calls it when it records a graph."""
    if model is not None:
        for name, t in model.get_states().items():
            _name(t, name)
        if optimizer is None:
            optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:
        for key in (optimizer.state_names() if hasattr(optimizer, "state_names") else ()):
            states = getattr(optimizer, key, None)
            if isinstance(states, dict):
                for pname, t in states.items():
                    _name_all(t, "%s[%s]" % (key, pname))
        if getattr(optimizer, "step_counter", None) is not None:
            _name(optimizer.step_counter, "step_counter")
    _name_all(list(inputs), "input")
    if isinstance(results, (list, tuple)):
        _name_all(list(results), "result")
    elif results is not None:
        _name_all(results, "result")
    for name, t in tensors.items():
        _name_all(t, name)


# ---- the picture of memory -------------------------------------------------------------------
_ALIGN = 64  # the arena aligns every block to 64 bytes (cpp/src/graph/graph.cc)


def _aligned(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def memory_layout(dev):
    """The blocks of the last built graph (after a RunGraph), as dicts ordered by first use: id,
    name, size, kind ('input', 'intermediate', 'end'), recyclable, first, last (positions in the
    execution order), offset (bytes into the planned arena, for recyclable blocks) and
    recomputed (a block dropped under a memory budget has a second dict, recomputed=True, for
    its range after the recomputation)."""
    return dev.graph_blocks()


def live_bytes(dev):
    """(live, lower_bound): live[p] is the bytes of recyclable blocks alive at position p of the
    execution order (each block from its first to its last use, aligned as the arena aligns
    them); lower_bound is max(live), the least any arena could be for this order."""
    n = len(dev.graph_op_names())
    delta = [0] * (n + 1)
    for b in memory_layout(dev):
        if b["recyclable"]:
            delta[b["first"]] += _aligned(b["size"])
            delta[b["last"] + 1] -= _aligned(b["size"])
    live, cur = [], 0
    for d in delta[:n]:
        cur += d
        live.append(cur)
    return live, max(live, default=0)


def _mib(n):
    return n / float(1 << 20)


def _label_blocks(fig, ax, legend, rec, patches, op_names, label_top):
    """Labels up to ``label_top`` blocks, the largest first, each only where its text fits inside
    its own rectangle and overlaps neither an earlier label nor the legend (measured in display
    space after the layout, so no two labels ever overlap whatever the figure's shape)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig)                # a renderer to measure text with (the figure is new)
    fig.canvas.draw()                   # runs the constrained layout: the axes' final place
    fig.set_layout_engine("none")       # keep it: the labels are measured against this layout
    renderer = fig.canvas.get_renderer()
    taken = [legend.get_window_extent(renderer)]
    order = sorted(range(len(rec)), key=lambda i: -rec[i]["size"] *
                   (rec[i]["last"] + 1 - rec[i]["first"]))
    for i in order:
        if len(taken) > label_top:
            break
        b = rec[i]
        box = patches[i].get_window_extent(renderer)
        op = op_names[b["first"]]
        for text in ([b["name"]] if b["name"] else
                     ["%s output, %.1f MiB (ops %d-%d)" % (op, _mib(b["size"]), b["first"],
                                                           b["last"]), op]):
            t = ax.text((b["first"] + b["last"] + 1) / 2.0,
                        _mib(b["offset"] + _aligned(b["size"]) / 2), text, fontsize=7,
                        ha="center", va="center", color="white", clip_on=True)
            ext = t.get_window_extent(renderer)
            inside = (ext.x0 >= box.x0 and ext.x1 <= box.x1 and ext.y0 >= box.y0 and
                      ext.y1 <= box.y1)
            if inside and not any(ext.overlaps(o) for o in taken):
                taken.append(ext)
                break
            t.remove()


def plot_memory(dev, path=None, title=None, label_top=12):
    """Draws the graph's planned memory and returns the matplotlib Figure (written to `path`
    when given: png, svg, pdf). Top: the arena, one rectangle per recyclable block (x: the
    positions of the execution order from its first to its last use, y: its offset and size),
    the largest ``label_top`` labelled where the label fits inside its rectangle (labels never
    overlap each other or the legend); under a memory budget, the ranges after a recomputation
    are hatched and the budget's share for the arena (budget minus persistent blocks) is a red
    line. Bottom: the bytes live at each position beside the liveness lower bound, the arena's
    size and the budget line. Needs a graph that has run (RunGraph) with memory planning on,
    and matplotlib (an optional dependency)."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.patches import Rectangle
    except ImportError as e:
        raise ImportError("singa.graph.plot_memory needs matplotlib, an optional dependency: "
                          "pip install matplotlib") from e
    blocks = memory_layout(dev)
    if not blocks:
        raise ValueError("plot_memory: the device has no built graph; record a step and run it "
                         "(Model with use_graph=True, or dev.RunGraph()) first")
    plan = memory_plan(dev)
    if plan["arena_bytes"] == 0 and plan["num_recyclable"] > 0:
        raise ValueError("plot_memory: memory planning is off for this graph (dynamic "
                         "recycling has no arena to draw); call graph.set_planning(dev, True) "
                         "and run the graph again")
    live, lower = live_bytes(dev)
    op_names = dev.graph_op_names()
    n = len(live)
    rec = [b for b in blocks if b["recyclable"]]

    fig = Figure(figsize=(12, 8), constrained_layout=True)
    ax, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    colors = {"intermediate": "#4C72B0", "end": "#DD8452"}
    patches = []
    for b in rec:
        patches.append(ax.add_patch(Rectangle(
            (b["first"], _mib(b["offset"])), b["last"] + 1 - b["first"], _mib(_aligned(b["size"])),
            facecolor=colors.get(b["kind"], "grey"), edgecolor="black", linewidth=0.3,
            alpha=0.85, hatch="////" if b.get("recomputed") else None)))
    budget = plan.get("budget_bytes", 0)
    arena_budget = max(budget - plan["persistent_bytes"], 0) if budget else None
    top = max(plan["arena_bytes"], arena_budget or 0)
    ax.axhline(_mib(plan["arena_bytes"]), color="black", linestyle="--", linewidth=1)
    if arena_budget is not None:
        ax.axhline(_mib(arena_budget), color="#C44E52", linestyle="-", linewidth=1.2)
    ax.set_xlim(0, max(n, 1))
    ax.set_ylim(0, max(_mib(top) * 1.05, 1e-3))
    ax.set_ylabel("offset in the arena (MiB)")
    recomputed = plan.get("num_recomputed", 0)
    ax.set_title(title or "Planned arena: %d blocks in %.1f MiB (lower bound %.1f MiB); "
                 "%.1f MiB of persistent blocks outside it%s"
                 % (len(rec), _mib(plan["arena_bytes"]), _mib(lower),
                    _mib(plan["persistent_bytes"]),
                    "; budget %.1f MiB met by %d recomputations" % (_mib(budget), recomputed)
                    if budget else ""))
    handles = [Rectangle((0, 0), 1, 1, facecolor=c, label="%s block" % k)
               for k, c in colors.items()]
    if recomputed:
        handles.append(Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black",
                                 hatch="////", label="range after a recomputation"))
    legend = ax.legend(handles=handles, loc="upper right", fontsize=8)

    ax2.step(range(n), [_mib(v) for v in live], where="post", color="#4C72B0",
             label="bytes live")
    ax2.axhline(_mib(lower), color="#C44E52", linestyle=":", label="liveness lower bound")
    ax2.axhline(_mib(plan["arena_bytes"]), color="black", linestyle="--", label="arena")
    if arena_budget is not None:
        ax2.axhline(_mib(arena_budget), color="#C44E52", linestyle="-",
                    label="budget minus persistent blocks")
    ax2.set_xlabel("position in the execution order (operation)")
    ax2.set_ylabel("MiB")
    ax2.set_ylim(0, max(_mib(top), _mib(lower)) * 1.1 + 1e-3)
    ax2.legend(loc="upper right", fontsize=8)
    _label_blocks(fig, ax, legend, rec, patches, op_names, label_top)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
