"""The memory-budget planner, before and after: early reruns, or the cost model.

    .venv/bin/python benchmarks/bench_remat_cost.py --model resnet18 --batch 32 --rounds 5
    .venv/bin/python benchmarks/bench_remat_cost.py --compare cost     # GPT batch 4, half the arena

Three copies of one network (bench_memory_budget.py's) train side by side in one process, each
on its own device: without a budget, and twice with a budget of the persistent blocks + `--arena`
of the unconstrained arena. `--compare early` (default): planned by measured times (the graph
times its own replays and replans at the sixth step) without early reruns
(strategy="greedy-unrefined", before) and with them (the default planner, after; remat.h:
"Early reruns"). `--compare cost`: planned by the estimate alone (cost="estimate": a roofline
over bytes and declared flops; before) and by measured times (after). Blocked layouts stay on in
every copy (a budget keeps them). After each one's warm-up, steps run in
rounds, one step of each per round in a rotating order, so that a slow spell of the shared
machine falls on all three alike. Every replay is profiled (dev.SetVerbosity(1): a clock pair
around each operation, which on the CPU adds no synchronisation), so the table also gives what
the recomputations took per step and their share of it, both as means over the rounds and as
each operation's fastest run summed over the step (Graph::TimeProfile's "fastest runs": the
cost model's own times, the step as a quiet machine would run it, which a loaded machine
disturbs far less than the means); then which operations each plan recomputes, by name.
Default environment; prints Markdown.
"""
import argparse
import collections
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_gpt import cpu_model  # noqa: E402
from bench_memory_budget import SINGA_BUDGET_WARMUP, build_singa  # noqa: E402

# (name, cost model, strategy) per --compare
CONFIGS = {
    "early": [("no budget", None, None),
              ("no early reruns (before)", "measured", "greedy-unrefined"),
              ("early reruns (after)", "measured", "greedy")],
    "cost": [("no budget", None, None), ("estimate (before)", "estimate", "greedy"),
             ("measured (after)", "measured", "greedy")],
}


def recomputed_by_name(dev):
    names = [n[:-len(" (recomputed)")] for n in dev.graph_op_names() if n.endswith("(recomputed)")]
    return collections.Counter(names)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt", help="gpt, resnet18, resnet50, cnn, mlp")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--arena", type=float, default=0.5,
                    help="the budget: persistent blocks + this fraction of the arena")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--compare", choices=sorted(CONFIGS), default="early")
    args = ap.parse_args(argv)
    from singa import device, graph
    print("machine: %s, %d cores; %s; load average at the start %.1f; OPENBLAS_CORETYPE=%s"
          % (cpu_model(), os.cpu_count(), time.strftime("%Y-%m-%d %H:%M"), os.getloadavg()[0],
             os.environ.get("OPENBLAS_CORETYPE", "(unset)")), flush=True)
    runs = []
    for name, cost, strategy in CONFIGS[args.compare]:
        dev = device.create_cpu_device(0)
        dev.SetRandSeed(0)
        net, tx, ty = build_singa(args.model, args.batch, dev)
        net.compile([tx], is_train=True, use_graph=True)
        runs.append({"name": name, "cost": cost, "strategy": strategy, "dev": dev,
                     "step": lambda n=net, x=tx, y=ty: n(x, y)})
    free = runs[0]
    free["step"]()
    plan = graph.memory_plan(free["dev"])
    budget = int(plan["persistent_bytes"] + args.arena * plan["arena_bytes"])
    for r in runs[1:]:
        r["dev"].SetMemoryBudget(budget, r["strategy"], cost=r["cost"])
    for r in runs:
        r["dev"].SetVerbosity(1)
        r["dev"].SetSkipIteration(SINGA_BUDGET_WARMUP)
        r["times"] = []
    for r in runs:  # every device to SINGA_BUDGET_WARMUP steps (the free one has run one)
        for _ in range(SINGA_BUDGET_WARMUP - (r is free)):
            r["step"]()
    print("warm-up done, load %.1f" % os.getloadavg()[0], flush=True)
    for k in range(args.rounds):
        for j in range(len(runs)):
            r = runs[(j + k) % len(runs)]
            t0 = time.perf_counter()
            r["step"]()
            r["times"].append(time.perf_counter() - t0)
        print("round %d: %s, load %.1f" % (k + 1, ", ".join(
            "%.2f s" % r["times"][-1] for r in runs), os.getloadavg()[0]), flush=True)
    mib = 2.0 ** 20
    base = statistics.median(free["times"])
    print("\n%s batch %d (--compare %s), budget = persistent + %d%% of the arena (%.1f MiB); "
          "median of %d interleaved rounds after %d warm-up steps; load average at the end %.1f\n"
          % (args.model, args.batch, args.compare, 100 * args.arena, budget / mib, args.rounds,
             SINGA_BUDGET_WARMUP, os.getloadavg()[0]))
    print("| plan | arena MiB | recomputed ops | planner's cost ms | recompute ms/step "
          "(mean) | share | fastest runs: step ms | recompute ms | share | median step s | "
          "vs no budget |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        p = graph.memory_plan(r["dev"])
        prof = graph.profile(r["dev"])
        m = re.search(r"recomputed: \d+ operations .*?, ([\d.]+) ms/iter, ([\d.]+)% of the step",
                      prof)
        f = re.search(r"fastest runs: ([\d.]+) ms/iter .*?recomputations ([\d.]+) ms "
                      r"\(([\d.]+)%\)", prof)
        med = statistics.median(r["times"])
        model = "-" if r["cost"] is None else "%.1f (%s)" % (
            p["recompute_cost"], "measured" if p["cost_measured"] else "estimated")
        print("| %s | %.1f | %d | %s | %s | %s | %s | %s | %s%% | %.2f | %.3fx |" % (
            r["name"], p["arena_bytes"] / mib, p["num_recomputed"], model,
            m.group(1) if m else "0", (m.group(2) + "%") if m else "0%", f.group(1),
            f.group(2), f.group(3), med, med / base))
    print()
    for r in runs[1:]:
        by = recomputed_by_name(r["dev"])
        print("- %s recomputes: %s" % (r["name"], ", ".join(
            "%d %s" % (c, n) for n, c in by.most_common())))


if __name__ == "__main__":
    main()
