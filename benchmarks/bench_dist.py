"""Data-parallel training on one node: two MPI processes (one thread each) against one process
with two threads, singa beside PyTorch DistributedDataParallel (gloo), like the seed's
multi-process table.

    .venv/bin/python benchmarks/bench_dist.py                          # cnn and resnet18
    .venv/bin/python benchmarks/bench_dist.py --models cnn --iters 2 --warmup 1   # ~1 min check

Rows, per model (batch --batch per process, default the single-process benchmark's):
  2 processes x 1 thread (mpirun -np 2, OMP_NUM_THREADS=1): singa `layer` (forward, backward and
  DistOpt.backward_and_update called directly), `model: disable graph`, `model: enable graph,
  bfs`, `model: enable graph, serial` (all with overlap of the all-reduce with backward, the
  default), the two graph-off / serial rows again with overlap off, and PyTorch 2.13 DDP
  (torchrun --nproc_per_node 2, gloo, OMP_NUM_THREADS=1, torch.set_num_threads(1));
  1 process x 2 threads (OMP_NUM_THREADS = cores): singa `model: enable graph, serial` and
  PyTorch eager, for the scaling baseline.
Columns as in the seed: Mem per process (MB: peak resident memory minus the resident memory
after the imports and the communicator's set-up, the largest over the ranks; measured by the
kernel), Time(s) for --iters steps after --warmup ones (the slowest rank), Speed(it/s),
Throughput (images/s over all processes), Reduction (memory, relative to `layer`), Speedup
(relative to `layer`); then speed and memory relative to DDP, and throughput relative to the
same library's single process with two threads. Below each table: per step, the bytes
all-reduced and the number of buckets (singa: DistOpt.last_step_elements/_buckets; DDP: its
bucket sizes), for the scaling explanation in BENCHMARKS.md.

The default environment is kept, except OMP_NUM_THREADS (the point of the comparison), set the
same way for singa and torch. Each configuration runs in processes of its own.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))

from bench_train import DEFAULT_BATCH, SHAPES, reset_peak, rss_kb  # noqa: E402

# (mode, label, processes); modes: singa <order>[-nooverlap], torch-ddp, single-<order>, torch
ROWS = [("layer", "layer", 2), ("eager", "model: disable graph", 2),
        ("bfs", "model: enable graph, bfs", 2), ("serial", "model: enable graph, serial", 2),
        ("eager-nooverlap", "model: disable graph, overlap off", 2),
        ("serial-nooverlap", "model: enable graph, serial, overlap off", 2),
        ("torch-ddp", "pytorch 2.13 DDP (gloo)", 2),
        ("single-serial", "1 process x 2 threads: model: enable graph, serial", 1),
        ("torch", "1 process x 2 threads: pytorch 2.13 eager", 1)]


def _data(cfg, rank):
    import numpy as np
    shape, classes = SHAPES[cfg["model"]]
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((cfg["batch"],) + shape).astype(np.float32)
    y = rng.integers(0, classes, cfg["batch"]).astype(np.int32)
    return x, y


def _torch_step(cfg, rank, distributed):
    import torch
    import torch_models
    if distributed:
        import torch.distributed as dist
        torch.set_num_threads(1)
        dist.init_process_group("gloo")
    else:
        torch.set_num_threads(os.cpu_count())
    reset_peak()
    base = rss_kb("VmRSS")
    net = torch_models.build(cfg["model"])
    if distributed:
        net = torch.nn.parallel.DistributedDataParallel(net)
    x, y = _data(cfg, rank)
    step = torch_models.train_step(net, torch.from_numpy(x), torch.from_numpy(y).long())

    def comm():
        if not distributed:
            return {}
        sizes = [int(s) for s in
                 str(net._get_ddp_logging_data().get("bucket_sizes", "")).split(",") if s]
        return {"bytes": sum(sizes), "buckets": len(sizes)}

    return base, step, lambda loss: float(loss), comm


def _singa_step(cfg, rank, distributed):
    import models
    from singa import autograd, device, layer, opt, tensor
    mode = cfg["mode"].replace("single-", "")
    order = mode.replace("-nooverlap", "")
    dev = device.get_default_device()
    dev.SetRandSeed(0)
    sgd = opt.SGD(lr=0.01, momentum=0.9, weight_decay=1e-5)
    if distributed:
        sgd = opt.DistOpt(sgd, overlap="nooverlap" not in mode)
    reset_peak()
    base = rss_kb("VmRSS")
    net = {"cnn": models.CNN, "mlp": models.MLP, "resnet18": models.resnet18}[cfg["model"]]()
    net.set_optimizer(sgd)
    x, y = _data(cfg, rank)
    tx, ty = tensor.from_numpy(x, dev), tensor.from_numpy(y, dev)
    graph = order in ("bfs", "serial")
    net.compile([tx], is_train=True, use_graph=graph, sequential=order == "serial")
    if order == "layer":
        autograd.training = True
        sce = layer.SoftMaxCrossEntropy()

        def step():
            loss = sce(net.forward(tx), ty)
            sgd.backward_and_update(loss)
            return loss
    else:
        def step():
            return net(tx, ty)[1]

    def comm():
        if not distributed:
            return {}
        return {"bytes": 4 * sgd.last_step_elements, "buckets": sgd.last_step_buckets}

    return base, step, lambda loss: float(tensor.to_numpy(loss).reshape(-1)[0]), comm


def worker(cfg):
    mode = cfg["mode"]
    distributed = cfg["procs"] > 1
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    make = _torch_step if mode.startswith("torch") else _singa_step
    base, step, value, comm = make(cfg, rank, distributed)
    for _ in range(cfg["warmup"]):
        step()
    t0 = time.perf_counter()
    loss = None
    for _ in range(cfg["iters"]):
        loss = step()
    value(loss)  # waits for the last step
    elapsed = time.perf_counter() - t0
    out = {"rank": rank, "mem_mb": (rss_kb("VmHWM") - base) / 1024.0, "time": elapsed}
    out.update(comm())
    # a file per rank: mpirun interleaves the ranks' stdout
    with open(os.path.join(cfg["out"], "rank%d.json" % rank), "w") as f:
        json.dump(out, f)


def _command(cfg, args):
    me = [os.path.abspath(__file__), "--worker", json.dumps(cfg)]
    if cfg["procs"] == 1:
        return [sys.executable] + me
    if cfg["mode"] == "torch-ddp":
        torchrun = shutil.which("torchrun") or os.path.join(os.path.dirname(sys.executable),
                                                            "torchrun")
        return [torchrun, "--nproc_per_node", str(cfg["procs"]), "--master_port",
                str(args.port)] + me
    from singa import launch
    return launch.mpirun_command(cfg["procs"], me, extra=["--bind-to", args.bind])


def run_one(cfg, args):
    out = tempfile.mkdtemp(prefix="bench_dist_")
    cfg = dict(cfg, out=out)
    try:
        return _run_in(cfg, args)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _run_in(cfg, args):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1" if cfg["procs"] > 1 else str(os.cpu_count())
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    try:
        p = subprocess.run(_command(cfg, args), capture_output=True, text=True, env=env,
                           timeout=args.timeout)
    except subprocess.TimeoutExpired:
        sys.stderr.write("configuration %s timed out\n" % cfg)
        return None
    res = []
    for name in sorted(os.listdir(cfg["out"])):
        with open(os.path.join(cfg["out"], name)) as f:
            res.append(json.load(f))
    if p.returncode != 0 or len(res) != cfg["procs"]:
        sys.stderr.write("configuration %s failed (exit %d):\n%s\n"
                         % (cfg, p.returncode, (p.stdout + p.stderr)[-3000:]))
        return None
    worst = {"mem_mb": max(r["mem_mb"] for r in res), "time": max(r["time"] for r in res)}
    for k in ("bytes", "buckets"):
        if k in res[0]:
            worst[k] = res[0][k]
    return worst


def table(name, bs, rows, labels, args):
    print("\n%s, batch %d per process, %d iterations after %d warm-up\n"
          % (name, bs, args.iters, args.warmup))
    print("| Cases | Procs x threads | Mem per process(MB) | Time(s) | Speed(it/s) | Throughput "
          "| Reduction | Speedup | Speed / DDP | Mem / DDP | Throughput / 1 process |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ref, ddp = rows.get("layer"), rows.get("torch-ddp")
    for mode, label, procs in labels:
        r = rows.get(mode)
        threads = "%d x %d" % (procs, 1 if procs > 1 else os.cpu_count())
        if r is None:
            print("| %s | %s | failed | | | | | | | | |" % (label, threads))
            continue
        speed = args.iters / r["time"]
        thr = speed * bs * procs
        single = rows.get("torch" if mode.startswith("torch") else "single-serial")
        print("| %s | %s | %.0f | %.3f | %.3f | %.1f | %s | %s | %s | %s | %s |" % (
            label, threads, r["mem_mb"], r["time"], speed, thr,
            "%.2f%%" % (100 * (1 - r["mem_mb"] / ref["mem_mb"])) if ref else "",
            "%.4f" % (ref["time"] / r["time"]) if ref else "",
            "%.2fx" % (ddp["time"] / r["time"]) if ddp and procs > 1 else "",
            "%.2fx" % (r["mem_mb"] / ddp["mem_mb"]) if ddp and ddp["mem_mb"] > 0 else "",
            "%.2fx" % (thr / (args.iters / single["time"] * bs))
            if single and procs > 1 else ""), flush=True)
    print("\nall-reduced per step and rank:")
    for mode, label, procs in labels:
        r = rows.get(mode)
        if r is not None and "bytes" in r:
            print("  %-45s %10.2f MB in %d bucket(s)" % (label, r["bytes"] / 2**20,
                                                          r["buckets"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["cnn", "resnet18"])
    ap.add_argument("--modes", nargs="+", default=[m for m, _, _ in ROWS])
    ap.add_argument("--batch", type=int, default=0, help="per process; 0: the model's default")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every configuration this many times, interleaved; keep the fastest")
    ap.add_argument("--bind", default="none", help="mpirun --bind-to (none, core, ...)")
    ap.add_argument("--port", type=int, default=29533, help="torchrun's master port")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per configuration")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    print("machine: %d cores, %s; OPENBLAS_CORETYPE=%s; mpirun --bind-to %s"
          % (os.cpu_count(), time.strftime("%Y-%m-%d"),
             os.environ.get("OPENBLAS_CORETYPE", "(unset)"), args.bind))
    labels = [r for r in ROWS if r[0] in args.modes and (have_torch or "torch" not in r[0])]
    for name in args.models:
        bs = args.batch or DEFAULT_BATCH[name]
        rows = {}
        for _ in range(args.rounds):  # interleaved, so that a slow spell hits every mode
            for mode, _label, procs in labels:
                r = run_one({"model": name, "mode": mode, "batch": bs, "iters": args.iters,
                             "warmup": args.warmup, "procs": procs}, args)
                if r is not None and (mode not in rows or r["time"] < rows[mode]["time"]):
                    rows[mode] = r
        table(name, bs, rows, labels, args)


if __name__ == "__main__":
    main()
