"""bfloat16 against float32: one 3x3 convolution layer (128 -> 128 channels, 28x28, batch 32,
forward + backward data + backward weights) and a 1024^3 matrix product, singa's oneDNN kernels
beside PyTorch's on bf16 tensors; and an elementwise op (Add, Exp on 2^23 values) in float32,
in bf16 by the fused CPU loop, and in bf16 through float32 (convert, float32 kernel, convert).

    .venv/bin/python benchmarks/bench_bf16.py                 # default environment
    .venv/bin/python benchmarks/bench_bf16.py --rounds 6

GFLOP/s from the best of --rounds; the two libraries alternate round by round in separate
processes (two thread pools in one process slow each other, LESSONS.md #5). The oneDNN ISA is
read from ONEDNN_VERBOSE in a separate short run, and printed with the CPU model.
"""
import argparse
import json
import os
import subprocess
import sys
import time

CONV = dict(n=32, c=128, h=28, k=3)
MM = 1024
EW = 1 << 23


def conv_flops():
    n, c, h, k = CONV["n"], CONV["c"], CONV["h"], CONV["k"]
    return 3 * 2.0 * n * c * h * h * c * k * k  # three passes, each 2 N Cout OH OW Cin k k


def best(fn, repeat):
    fn()
    t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def worker_singa(dtype, repeat):
    import numpy as np
    from singa import singa_wrap, tensor
    dt = tensor.bfloat16 if dtype == "bf16" else tensor.float32
    rng = np.random.default_rng(0)

    def T(shape):
        return tensor.from_numpy(rng.normal(size=shape).astype(np.float32)).as_type(dt).data

    n, c, h, k = CONV["n"], CONV["c"], CONV["h"], CONV["k"]
    x, w, dy = T((n, c, h, h)), T((c, c, k, k)), T((n, c, h, h))
    hd = singa_wrap.ConvHandle((n, c, h, h), [k, k], [1, 1], [1, 1], c, c, False, 1, [1, 1])

    def conv():
        y = singa_wrap.Conv2dForward(x, w, singa_wrap.Tensor(), hd, False)
        singa_wrap.Conv2dBackwardX(dy, w, hd)
        singa_wrap.Conv2dBackwardW(dy, x, hd)
        return y
    a, b = T((MM, MM)), T((MM, MM))
    r = {"conv": best(conv, repeat), "matmul": best(lambda: singa_wrap.Mult(a, b), repeat)}
    u, v = T((EW,)), T((EW,))
    for name in ("Add", "Exp"):
        fn = getattr(singa_wrap, name)
        args = (u, v) if name == "Add" else (u,)
        r[name] = best(lambda: fn(*args), repeat)
        if dtype == "bf16":  # the fallback a fused loop replaces
            r[name + " via f32"] = best(lambda: fn(*[t.AsType(tensor.float32) for t in args])
                                        .AsType(tensor.bfloat16), repeat)
    return r


def worker_torch(dtype, repeat):
    import torch
    dt = torch.bfloat16 if dtype == "bf16" else torch.float32
    n, c, h, k = CONV["n"], CONV["c"], CONV["h"], CONV["k"]
    x = torch.randn(n, c, h, h, dtype=dt, requires_grad=True)
    conv = torch.nn.Conv2d(c, c, k, padding=1, bias=False).to(dt)
    dy = torch.randn(n, c, h, h, dtype=dt)

    def step():
        y = conv(x)
        y.backward(dy)
    a, b = torch.randn(MM, MM, dtype=dt), torch.randn(MM, MM, dtype=dt)
    u, v = torch.randn(EW, dtype=dt), torch.randn(EW, dtype=dt)
    return {"conv": best(step, repeat), "matmul": best(lambda: a @ b, repeat),
            "Add": best(lambda: u + v, repeat), "Exp": best(lambda: torch.exp(u), repeat)}


def run_worker(lib, dtype, repeat):
    out = subprocess.run([sys.executable, __file__, "--worker", lib, dtype, str(repeat)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def onednn_isa():
    """oneDNN's ISA line and the implementations its bf16 matmul and convolution ran."""
    code = ("from singa import singa_wrap, tensor\nimport numpy as np\n"
            "b = lambda s: tensor.from_numpy(np.ones(s, np.float32)).as_type(tensor.bfloat16).data\n"
            "singa_wrap.Mult(b((64, 64)), b((64, 64)))\n"
            "h = singa_wrap.ConvHandle((2, 16, 8, 8), [3, 3], [1, 1], [1, 1], 16, 16, False, 1,"
            " [1, 1])\n"
            "singa_wrap.Conv2dForward(b((2, 16, 8, 8)), b((16, 16, 3, 3)), singa_wrap.Tensor(),"
            " h, False)\n")
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    isa, impls = "unknown", []
    for line in out.stdout.splitlines():
        f = line.split(",")
        if len(f) > 3 and f[3].startswith("isa:"):
            isa = f[3][4:]
        elif len(f) > 4 and f[1] == "exec" and f[3] in ("matmul", "convolution"):
            impls.append("%s %s" % (f[3], f[4]))
    return "%s; bf16 kernels: %s" % (isa, ", ".join(impls) or "none reported")


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        lib, dtype, repeat = sys.argv[2], sys.argv[3], int(sys.argv[4])
        fn = worker_singa if lib == "singa" else worker_torch
        print(json.dumps(fn(dtype, repeat)))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="interleaved rounds (best kept)")
    p.add_argument("--repeat", type=int, default=5, help="timed calls per round")
    args = p.parse_args()
    from singa import device
    print("CPU: %s; bf16 features: %s" % (cpu_model(), ", ".join(
        sorted(f for f in device.cpu_features() if "bf16" in f or f.startswith("amx")))))
    print("oneDNN: %s" % onednn_isa())
    times = {}
    for _ in range(args.rounds):
        for lib in ("singa", "torch"):
            for dtype in ("fp32", "bf16"):
                r = run_worker(lib, dtype, args.repeat)
                for op, t in r.items():
                    key = (op, lib, dtype)
                    times[key] = min(times.get(key, float("inf")), t)
    flops = {"conv": conv_flops(), "matmul": 2.0 * MM ** 3}
    print("\n| op | singa fp32 | singa bf16 | bf16/fp32 | torch fp32 | torch bf16 | "
          "singa/torch bf16 |")
    print("|---|---|---|---|---|---|---|")
    for op, label in (("conv", "conv 3x3 128->128, 28x28, b32, fwd+bwd"),
                      ("matmul", "matmul 1024^3")):
        g = {k[1:]: flops[op] / t / 1e9 for k, t in times.items() if k[0] == op}
        print("| %s | %.0f | %.0f | %.2fx | %.0f | %.0f | %.2fx |" % (
            label, g[("singa", "fp32")], g[("singa", "bf16")],
            g[("singa", "bf16")] / g[("singa", "fp32")], g[("torch", "fp32")],
            g[("torch", "bf16")], g[("singa", "bf16")] / g[("torch", "bf16")]))
    print("\n(GFLOP/s, best of %d rounds x %d calls)" % (args.rounds, args.repeat))
    print("\n| op, 2^23 values | singa fp32 | singa bf16 fused | singa bf16 via f32 | "
          "torch fp32 | torch bf16 |")
    print("|---|---|---|---|---|---|")
    for op in ("Add", "Exp"):
        ms = lambda k: "%.2f" % (1e3 * times[k])  # noqa: E731
        print("| %s | %s | %s | %s | %s | %s |" % (
            op, ms((op, "singa", "fp32")), ms((op, "singa", "bf16")),
            ms((op + " via f32", "singa", "bf16")), ms((op, "torch", "fp32")),
            ms((op, "torch", "bf16"))))
    print("\n(ms per call, best of %d rounds x %d calls)" % (args.rounds, args.repeat))


if __name__ == "__main__":
    main()
