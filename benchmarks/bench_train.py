"""Training speed and peak memory: singa (layer loop, Model eager, Model graph in BFS and serial
order, with and without the static memory planner) beside PyTorch eager, like the seed's table.

    .venv/bin/python benchmarks/bench_train.py --models mlp cnn resnet18 --iters 20
    .venv/bin/python benchmarks/bench_train.py --models resnet50 --batch 16 --iters 3
    .venv/bin/python benchmarks/bench_train.py --models resnet18 resnet50 --iters 5 --rounds 3 \
        --modes bfs-bf16 bfs-bf16-nolayout torch-cl-bf16   # bf16 kept layouts on / off
    .venv/bin/python benchmarks/bench_train.py --models resnet18 resnet50 --iters 5 --rounds 3 \
        --modes bfs-bf16 bfs-bf16-castgrad torch-bf16   # float32 weight grads from the conv / not
    .venv/bin/python benchmarks/bench_train.py --device gpu --models mlp cnn resnet18

With --device gpu (a CUDA build and a GPU; tests/gpu/run_all.sh runs it) singa trains on GPU 0
and Mem(MB) is the peak of the GPU memory pool (device.get_memory_stats(gpu)["peak_in_use"]);
the "reference kernels" rows and (without torch.cuda) the PyTorch rows are left out.

Each configuration runs in its own process. Mem(MB) is that process's peak resident memory
(VmHWM, reset through /proc/self/clear_refs after the imports) minus its resident memory at that
point: measured by the kernel, not by singa's counters. Time(s) covers --iters iterations after
--warmup ones (the first iteration buffers the graph). Reduction and Speedup are relative to
"model: disable graph". For graph rows, LB(MB) is the liveness lower bound computed from the
graph itself (bytes the graph never frees + the largest total of simultaneously live recyclable
blocks in the executed order) and Plan(MB) what the planner reserves (persistent + arena).

The workers run in the machine's default environment (this machine sets OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE, which keeps OpenBLAS off its AVX-512 kernels; PyTorch's oneDNN ignores them, as
does ours); --unset-openblas-env unsets both for a comparison table. The header line says which.
The "reference kernels" rows run singa's own CPU kernels (im2col + OpenBLAS) instead of oneDNN.
The "inference" rows time the forward alone in evaluation mode (their Speedup and Speed / PyTorch
are relative to the eager inference rows): singa's graph rows record net.forward once on the
device and replay it (where batch norms fold into the convolutions: graph.h, epilogue fusion).
The "OpenBLAS sgemm" rows keep oneDNN but run the matrix products through OpenBLAS
(device.set_gemm_backend("openblas")), what the default was before oneDNN's sgemm was chosen.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

SHAPES = {"mlp": ((784,), 10), "cnn": ((1, 28, 28), 10), "resnet18": ((3, 32, 32), 10),
          "resnet50": ((3, 224, 224), 1000)}
DEFAULT_BATCH = {"mlp": 64, "cnn": 64, "resnet18": 32, "resnet50": 16}
MODES = [("layer", "layer"), ("eager", "model: disable graph"),
         ("bfs", "model: enable graph, bfs"), ("serial", "model: enable graph, serial"),
         ("bfs-noplan", "model: enable graph, bfs, planner off"),
         ("serial-noplan", "model: enable graph, serial, planner off"),
         ("bfs-ref", "model: enable graph, bfs, reference kernels"),
         ("bfs-openblas", "model: enable graph, bfs, OpenBLAS sgemm"),
         ("bfs-nofuse", "model: enable graph, bfs, epilogue fusion off"),
         ("bfs-nocap", "model: enable graph, bfs, CUDA Graph capture off"),
         ("torch", "pytorch eager"),
         ("torch-notf32", "pytorch eager, TF32 off"),
         ("torch-compile", "pytorch torch.compile"),
         ("eval-eager", "inference: model eval, eager"),
         ("eval-graph", "inference: recorded forward, fusion on"),
         ("eval-graph-nofuse", "inference: recorded forward, fusion off"),
         ("torch-eval", "inference: pytorch eager, eval + no_grad"),
         ("bfs-bf16", "model: enable graph, bfs, bf16 AMP"),
         ("torch-bf16", "pytorch eager, autocast bf16"),
         ("torch-cl", "pytorch eager, channels_last"),
         ("torch-cl-bf16", "pytorch eager, channels_last, autocast bf16"),
         ("bfs-bf16-nolayout", "model: enable graph, bfs, bf16 AMP, kept layouts off"),
         ("bfs-bf16-castgrad", "model: enable graph, bfs, bf16 AMP, weight grads bf16 + cast")]
# capture exists on a GPU only; TF32 is a GPU setting; compile is slow on the CPU
GPU_ONLY = ("bfs-nocap", "torch-notf32", "torch-compile")


def rss_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def worker(cfg):
    import numpy as np
    name, mode, bs = cfg["model"], cfg["mode"], cfg["batch"]
    on_gpu = cfg.get("device") == "gpu"
    half = cfg.get("dtype") == "float16"
    shape, classes = SHAPES[name]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((bs,) + shape).astype(np.float16 if half else np.float32)
    y = rng.integers(0, classes, bs).astype(np.int32)
    if mode.startswith("torch"):
        import torch
        import torch_models
        torch.set_num_threads(os.cpu_count())
        if mode == "torch-notf32":  # PyTorch's cuDNN convolutions use TF32 by default; ours FP32
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        reset_peak()
        base = rss_kb("VmRSS")
        net = torch_models.build(name)
        if half:
            net = net.half()
        tx, ty = torch.from_numpy(x), torch.from_numpy(y).long()
        if "-cl" in mode and tx.dim() == 4:  # the memory format PyTorch recommends for CPU convs
            net = net.to(memory_format=torch.channels_last)
            tx = tx.contiguous(memory_format=torch.channels_last)
        if on_gpu:
            net, tx, ty = net.cuda(), tx.cuda(), ty.cuda()
        if mode == "torch-compile":  # the whole step compiled; its warm-up pays the compile
            net = torch.compile(net)
        if mode == "torch-eval":
            net.eval()

            def step():
                with torch.no_grad():
                    return net(tx)[0, 0]
        else:
            step = torch_models.train_step(
                net, tx, ty, autocast=torch.bfloat16 if mode.endswith("-bf16") else None)
    else:
        import models
        from singa import autograd, device, layer, opt, tensor
        dev = device.create_cuda_gpu() if on_gpu else device.get_default_device()
        dev.SetRandSeed(0)
        if mode.endswith("-ref"):
            dev.set_backend("cpu")
        if mode.endswith("-openblas"):  # the products' library before oneDNN's was chosen
            device.set_gemm_backend("openblas")
        if mode.endswith("-castgrad"):  # before: dW rounded to bf16, then cast to float32
            autograd.Cast.float32_grads = False
        reset_peak()
        base = rss_kb("VmRSS")
        net = {"mlp": models.MLP, "cnn": models.CNN, "resnet18": models.resnet18,
               "resnet50": lambda: models.resnet50(cifar=False)}[name]()
        sgd = opt.SGD(lr=0.01, momentum=0.9, weight_decay=1e-5,
                      **({"dtype": tensor.float16} if half else {}))
        net.set_optimizer(sgd)
        tx = tensor.from_numpy(x, dev)
        ty = tensor.from_numpy(y, dev)
        graph = mode not in ("layer", "eager", "eval-eager")
        if graph:
            dev.SetGraphPlanning("noplan" not in mode)
            dev.SetGraphFusion("nofuse" not in mode)
            dev.SetGraphLayouts("nolayout" not in mode)
            if on_gpu:
                dev.SetCaptureEnabled("nocap" not in mode)
        if mode.startswith("eval"):  # the forward alone; the graph recorded by hand
            net.compile([tx], is_train=False, use_graph=False)
            step = eval_step(net, dev, tx, graph)
        else:
            net.compile([tx], is_train=True, use_graph=graph,
                        sequential=mode.startswith("serial"),
                        **({"precision": "bfloat16"} if "-bf16" in mode else {}))
        if mode == "layer":
            autograd.training = True
            sce = layer.SoftMaxCrossEntropy()

            def step():
                out = net.forward(tx)
                loss = sce(out, ty)
                for p, g in autograd.backward(loss):
                    sgd.update(p, g)
                return loss
        elif not mode.startswith("eval"):
            def step():
                return net(tx, ty)[1]
    for _ in range(cfg["warmup"]):
        step()
    t0 = time.perf_counter()
    for _ in range(cfg["iters"]):
        loss = step()
    if mode.startswith("torch"):
        if on_gpu:
            torch.cuda.synchronize()
        float(loss)
    else:
        float(tensor.to_numpy(loss).reshape(-1)[0])
    elapsed = time.perf_counter() - t0
    extra = {}
    if not mode.startswith("torch") and graph:
        plan = dev.graph_memory_plan()
        extra = {"lb_mb": (plan["persistent_bytes"] + plan["lower_bound_bytes"]) / 2**20,
                 "plan_mb": (plan["persistent_bytes"] + plan["arena_bytes"]) / 2**20,
                 "nodes": dev.graph_num_nodes()}
    if on_gpu and not mode.startswith("torch"):
        mem_mb = device.get_memory_stats(dev)["peak_in_use"] / 2**20
    elif on_gpu:
        mem_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        mem_mb = (rss_kb("VmHWM") - base) / 1024.0
    out = {"mem_mb": mem_mb, "time": elapsed}
    out.update(extra)
    print("RESULT " + json.dumps(out))


def eval_step(net, dev, tx, graph):
    """Inference: net.forward(tx) eagerly, or recorded once as the device's graph (Model replays
    training steps only) and replayed; returns ``step() -> output``."""
    import gc
    net.eval()
    if not graph:
        return lambda: net.forward(tx)
    dev.EnableGraph(True)
    out = net.forward(tx)
    dev.EnableGraph(False)
    out.creator = None
    gc.collect()  # only the graph holds the recording's temporaries

    def step():
        dev.RunGraph(False)
        return out
    return step


def run_one(cfg, env, script=__file__):
    """Runs ``script --worker cfg`` (this file by default) and returns its RESULT dict."""
    cmd = [sys.executable, os.path.abspath(script), "--worker", json.dumps(cfg)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=cfg["timeout"])
    except subprocess.TimeoutExpired:
        sys.stderr.write("configuration %s: over its %ss limit\n" % (cfg, cfg["timeout"]))
        return None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.stderr.write("configuration %s failed:\n%s\n" % (cfg, p.stderr[-3000:]))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn", "resnet18"])
    ap.add_argument("--modes", nargs="+", default=[m for m, _ in MODES])
    ap.add_argument("--batch", type=int, default=0, help="0: the model's default")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every configuration this many times, interleaved; keep the fastest")
    ap.add_argument("--unset-openblas-env", action="store_true",
                    help="run the workers with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                    help="gpu: train on CUDA GPU 0 (needs a CUDA build and a GPU)")
    ap.add_argument("--dtype", choices=["float32", "float16"], default="float32",
                    help="float16: parameters, activations and optimizer state in float16 (GPU)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds one configuration may take before it is reported failed")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))
    try:
        import torch  # noqa: F401
        have_torch = not (args.device == "gpu" and not torch.cuda.is_available())
    except ImportError:
        have_torch = False
    if args.device == "gpu":
        from singa import device
        if device.get_num_gpus() == 0:
            sys.exit("bench_train.py --device gpu: no CUDA GPU is usable (singa_wrap.USE_CUDA=%s)"
                     % device.singa.USE_CUDA)
    env = dict(os.environ)
    if args.unset_openblas_env:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    print("machine: %d cores, %s; workers run with OPENBLAS_CORETYPE=%s; device %s; torch %s" % (
        os.cpu_count(), time.strftime("%Y-%m-%d"), env.get("OPENBLAS_CORETYPE", "(unset)"),
        args.device, torch.__version__ if have_torch else "(none)"))
    for name in args.models:
        bs = args.batch or DEFAULT_BATCH[name]
        print("\n%s, batch %d, %s, %d iterations after %d warm-up\n" % (
            name, bs, args.dtype, args.iters, args.warmup))
        print("| Cases | Mem(MB) | Time(s) | Speed(it/s) | Throughput | Reduction | Speedup "
              "| LB(MB) | Plan(MB) | Speed / PyTorch | Mem / PyTorch |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        rows = {}
        modes = [(m, l) for m, l in MODES
                 if m in args.modes and (not m.startswith("torch") or have_torch)
                 and not (args.device == "gpu" and m.endswith(("-ref", "-openblas")))
                 and not (args.device == "cpu" and m in GPU_ONLY)]
        for _ in range(args.rounds):  # interleaved, so that a slow spell hits every mode
            for mode, _label in modes:
                r = run_one({"model": name, "mode": mode, "batch": bs, "iters": args.iters,
                             "warmup": args.warmup, "device": args.device, "dtype": args.dtype,
                             "timeout": args.timeout}, env)
                if r is not None and (mode not in rows or r["time"] < rows[mode]["time"]):
                    rows[mode] = r
        for mode, label in modes:
            r = rows.get(mode)
            if r is None:
                print("| %s | failed | | | | | | | | | |" % label)
                continue
            inference = mode.startswith("eval") or mode == "torch-eval"
            ref = rows.get("eval-eager" if inference else "eager")
            pt = rows.get("torch-eval" if inference else "torch")
            speed = args.iters / r["time"]
            red = "%.1f%%" % (100 * (1 - r["mem_mb"] / ref["mem_mb"])) if ref else ""
            spd = "%.3f" % (ref["time"] / r["time"]) if ref else ""
            print("| %s | %.0f | %.3f | %.3f | %.1f | %s | %s | %s | %s | %s | %s |" % (
                label, r["mem_mb"], r["time"], speed, speed * bs, red, spd,
                "%.0f" % r["lb_mb"] if "lb_mb" in r else "",
                "%.0f" % r["plan_mb"] if "plan_mb" in r else "",
                "%.2fx" % (pt["time"] / r["time"]) if pt else "",
                "%.2fx" % (r["mem_mb"] / pt["mem_mb"]) if pt and pt["mem_mb"] > 0 else ""),
                flush=True)


if __name__ == "__main__":
    main()
