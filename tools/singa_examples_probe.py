"""Run Apache SINGA's own Python examples, unchanged, against this package.

    .venv/bin/python tools/singa_examples_probe.py                 # every case, a table at the end
    .venv/bin/python tools/singa_examples_probe.py --only cnn-mlp  # cases whose name contains it
    .venv/bin/python tools/singa_examples_probe.py --list

A conformance probe, not a test: it needs a git snapshot of apache/singa (`--snapshot`, default
the mirror at /work/.mirror/apache+singa/repo), so `make test` never runs it. SINGA's code stays
outside this repository: the snapshot's `examples/` is extracted into a scratch folder
(`--scratch`, default /tmp/singa-ex), and everything runs there.

What it changes in that scratch copy, and nothing else (TESTING.md lists the results):
- hard-coded GPU devices (`device.create_cuda_gpu_on(i)`, `device.create_cuda_gpu()`) become
  `device.get_default_device()`, as the examples' own comments ask on a CPU-only machine
  (`--keep-gpu` leaves them, to see the error a CPU build gives);
- numpy 2.4 made `'%f' % np.zeros(1)` a TypeError, which the examples' progress lines hit with
  numpy alone: their (1,)-shaped accumulators become 0-d arrays (rbm's sums are read with
  .item()), and `np.float` (gone since numpy 1.24) becomes np.float64;
- run lengths with no flag (the GAN's 1,000,000 iterations, Xception's 20) are shortened, and
  the CIFAR-10 loaders' fixed 10,000 images per batch file follows the synthetic files.
The data are synthetic, in exactly the formats the loaders read (MNIST IDX .gz files in /tmp,
CIFAR-10 python pickles, the GAN's mnist.pkl.gz, a text file for char-rnn): each class draws its
own fixed template plus noise, so a working model's accuracy rises above chance.
"""

import argparse
import gzip
import os
import pickle
import re
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- synthetic data

def class_images(n, channels, size, num_classes=10, seed=0):
    """uint8 images (n, channels, size, size) and labels: a class template plus noise.

    size must be a multiple of 4."""
    rng = np.random.default_rng(seed)
    # coarse 4x4 templates, so the examples' random shifts and flips keep most of the signal
    coarse = np.random.default_rng(1234).uniform(0, 255, (num_classes, channels, 4, 4))
    templates = np.kron(coarse, np.ones((size // 4, size // 4)))
    labels = rng.integers(0, num_classes, n)
    noise = rng.normal(0, 40, (n, channels, size, size))
    images = np.clip(templates[labels] * 0.8 + noise, 0, 255).astype(np.uint8)
    return images, labels.astype(np.uint8)


def write_mnist_idx(folder, n_train, n_test):
    """The four files SINGA's MNIST loaders open (IDX format, gzip)."""
    for prefix, n, seed in (("train", n_train, 0), ("t10k", n_test, 1)):
        images, labels = class_images(n, 1, 28, seed=seed)
        with gzip.open(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28) + images.tobytes())
        with gzip.open(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">II", 2049, n) + labels.tobytes())


def write_cifar10(folder, per_batch, n_test):
    """cifar-10-batches-py: data_batch_1..5 and test_batch, pickled dicts as CIFAR's site has."""
    os.makedirs(folder, exist_ok=True)
    for i, name in enumerate([f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]):
        n = n_test if name == "test_batch" else per_batch
        images, labels = class_images(n, 3, 32, seed=10 + i)
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump({"data": images.reshape(n, -1), "labels": labels.tolist()}, f)


def write_mnist_pkl(path, n):
    """mnist.pkl.gz as deeplearning.net shipped it: (train, valid, test) pairs of (x in [0,1], y)."""
    sets = []
    for seed in (0, 1, 2):
        images, labels = class_images(n, 1, 28, seed=seed)
        sets.append((images.reshape(n, -1).astype(np.float32) / 255, labels.astype(np.int64)))
    with gzip.open(path, "wb") as f:
        pickle.dump(tuple(sets), f)


def write_text(path, chars=20000):
    """Text with structure for char-rnn: a few words repeated in a learnable order."""
    words = "the quick brown fox jumps over a lazy dog and runs away".split()
    rng = np.random.default_rng(0)
    out, i = [], 0
    while sum(map(len, out)) < chars:
        i = (i + 1 + int(rng.integers(0, 2))) % len(words)
        out.append(words[i] + " ")
    Path(path).write_text("".join(out))


def write_table_csv(path, n=400, features=12, header=True):
    """A table whose last column is a 0/1 label that the first features decide."""
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (n, features))
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float64)
    lines = ([",".join(f"f{i}" for i in range(features)) + ",label"] if header else [])
    lines += [",".join(f"{v:.5f}" for v in row) + f",{int(t)}" for row, t in zip(x, y)]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n")


def write_kidney(folder, n=400, windows=6, features=50):
    """kidney_features.pkl / kidney_labels.pkl: (patients, visit windows, codes) one-hot
    (MIMIC-III's 6 windows; fewer codes than its 2549) and a label the first codes decide."""
    rng = np.random.default_rng(0)
    x = (rng.uniform(0, 1, (n, windows, features)) < 0.1).astype(np.float32)
    y = (x[:, :, :5].sum((1, 2)) > 3).astype(np.int64)
    os.makedirs(folder, exist_ok=True)
    for name, value in (("kidney_features.pkl", x), ("kidney_labels.pkl", y)):
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump(value, f)


def write_resnet18_zoo(tmp="/tmp"):
    """Stand-ins for what SINGA's ONNX ResNet-18 examples download into /tmp: the model zoo's
    resnet18v1.tar.gz (a ResNet-18 of random weights exported by torch, same op set:
    Conv, BatchNormalization, Relu, MaxPool, Add, GlobalAveragePool, Flatten, Gemm),
    synset.txt (1000 labels) and kitten.jpg (a random picture). Returns onnxruntime's top-5
    (label, probability) on the example's preprocessed picture, to compare with its print."""
    import tarfile
    import torch
    from PIL import Image
    from torch import nn

    def block(cin, cout, stride):
        body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                             nn.BatchNorm2d(cout))
        down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        return body, down

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body, self.down = block(cin, cout, stride)

        def forward(self, x):
            return torch.relu(self.body(x) + (x if self.down is None else self.down(x)))

    torch.manual_seed(0)
    widths = [(64, 64, 1), (64, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2),
              (256, 256, 1), (256, 512, 2), (512, 512, 1)]
    net = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                        nn.MaxPool2d(3, 2, 1), *[Block(*w) for w in widths],
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)).eval()
    net[-1].weight.data *= 40        # spread the logits: a top-5 that rounding cannot reorder
    for m in net.modules():          # non-trivial batch-norm statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    folder = os.path.join(tmp, "resnet18v1")
    os.makedirs(folder, exist_ok=True)
    with warnings.catch_warnings():   # the TorchScript exporter's deprecation notice
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(net, torch.zeros(1, 3, 224, 224), os.path.join(folder, "resnet18v1.onnx"),
                          opset_version=13, dynamo=False, input_names=["data"])
    with tarfile.open(os.path.join(tmp, "resnet18v1.tar.gz"), "w:gz") as t:
        t.add(folder, arcname="resnet18v1")
    labels = [f"n{i:08d} synthetic class {i}" for i in range(1000)]
    Path(tmp, "synset.txt").write_text("\n".join(labels) + "\n")
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)).save(
        os.path.join(tmp, "kitten.jpg"))
    # the example's preprocess(), on the picture as JPEG decodes it
    img = Image.open(os.path.join(tmp, "kitten.jpg")).resize((256, 256)).crop((16, 16, 240, 240))
    x = np.rollaxis(np.array(img).astype(np.float32) / 255., 2, 0)
    for c, (mean, std) in enumerate(zip([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])):
        x[c] = (x[c] - mean) / std
    import onnxruntime
    sess = onnxruntime.InferenceSession(os.path.join(folder, "resnet18v1.onnx"))
    logits = sess.run(None, {"data": x[None]})[0][0]
    prob = np.exp(logits - logits.max())
    prob /= prob.sum()
    return [(labels[i], float(prob[i])) for i in np.argsort(prob)[::-1][:5]]


def write_cmn_eng(path, n=400):
    """cmn-eng pairs as manythings.org ships them (English TAB Chinese TAB attribution): each
    English word has its own Chinese character, so the translation is learnable."""
    words = "i you we see eat like the a red big cat dog fish tea rice book".split()
    chars = {w: chr(0x4e00 + 37 * k) for k, w in enumerate(words)}
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(n):
        sentence = [words[int(k)] for k in rng.integers(0, len(words), int(rng.integers(2, 6)))]
        lines.append(" ".join(sentence).capitalize() + ".\t" + "".join(chars[w] for w in sentence)
                     + "\u3002\tCC-BY 2.0 (France) synthetic\n")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(lines), encoding="utf-8")


def write_png_folders(root, n, classes, size, folder_of, stem, seed=0):
    """n PNG pictures root/<folder_of(label)>/<stem><k>.png, class templates plus noise."""
    from PIL import Image
    images, labels = class_images(n, 3, size, num_classes=classes, seed=seed)
    for k, (img, label) in enumerate(zip(images, labels)):
        folder = Path(root, folder_of(label))
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img.transpose(1, 2, 0)).save(folder / f"{stem}{k}.png")


def write_malaria(root, n=48):
    """training_set/ and testing_set/, each with Parasitized/ and Uninfected/ cells (Kaggle's
    malaria layout)."""
    for split, seed in (("training_set", 0), ("testing_set", 1)):
        write_png_folders(Path(root, split), n, 2, 32,
                          lambda label: "Parasitized" if label else "Uninfected", "cell", seed)


def write_diaret(root, n=160, classes=3):
    """One folder of fundus pictures per grade (0, 1, ...), as the DR loader lists them."""
    write_png_folders(root, n, classes, 32, str, "eye")


def write_bloodmnist(root, n=96, classes=4):
    """train/ and val/ with one folder of 28x28 pictures per class number, and param.json."""
    import json
    for split, seed in (("train", 0), ("val", 1)):
        write_png_folders(Path(root, split), n, classes, 28, str, "blood", seed)
    Path(root, "param.json").write_text(json.dumps({"num_classes": classes}))


# ---------------------------------------------------------------- references

def torch_mlp_native(epochs=301):
    """mlp/native.py written in PyTorch: the same draws of numpy's generator (data, then w0,
    then w1), zero biases, SGD(lr 0.05, momentum 0.8), mean cross entropy. Returns the losses
    the example prints (steps 0, 100, 200...), so its numbers can be compared digit by digit."""
    import torch
    np.random.seed(0)
    x = np.random.uniform(-1, 1, 400)
    y = 5 * x + 1 + 2 * np.random.randn(len(x))
    labels = torch.tensor((5 * x + 1 > y).astype(np.int64))
    data = torch.tensor(np.stack([x, y], 1).astype(np.float32))
    w0 = torch.tensor(np.random.normal(0, 0.1, (2, 3)).astype(np.float32), requires_grad=True)
    w1 = torch.tensor(np.random.normal(0, 0.1, (3, 2)).astype(np.float32), requires_grad=True)
    b0, b1 = torch.zeros(3, requires_grad=True), torch.zeros(2, requires_grad=True)
    sgd = torch.optim.SGD([w0, b0, w1, b1], lr=0.05, momentum=0.8)
    printed = []
    for i in range(epochs):
        loss = torch.nn.functional.cross_entropy(torch.relu(data @ w0 + b0) @ w1 + b1, labels)
        sgd.zero_grad()
        loss.backward()
        sgd.step()
        if i % 100 == 0:
            printed.append(loss.item())
    return printed


REFERENCES = {"mlp-native": lambda: "PyTorch replica's losses: " + ", ".join(
    "%.6g" % v for v in torch_mlp_native())}


# ---------------------------------------------------------------- the scratch copy

GPU_CALL = re.compile(r"device\.create_cuda_gpu(_on)?\([^()]*\)")


def extract(snapshot, scratch, keep_gpu):
    """Fresh copy of the snapshot's examples/ in scratch; returns the redirected lines."""
    subprocess.run(["rm", "-rf", os.path.join(scratch, "examples")], check=True)
    os.makedirs(scratch, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", snapshot, "archive", "HEAD", "examples"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", scratch], input=archive, check=True)
    changed = []
    for path in Path(scratch, "examples").rglob("*.py"):
        text = path.read_text(errors="replace")
        new = text if keep_gpu else GPU_CALL.sub("device.get_default_device()", text)
        new = new.replace("iterations = 1000000", "iterations = 300")     # GANs
        new = new.replace("niters = 20\n", "niters = 3\n")               # autograd/xceptionnet
        new = new.replace("batchsize = 10000", "batchsize = CIFAR_PER_BATCH")
        # numpy 2.4 refuses '%f' % array-of-shape-(1,) (the examples' accumulators): 0-d ones
        new = new.replace("np.zeros(shape=[1], dtype=np.float32)", "np.zeros(shape=[], dtype=np.float32)")
        new = new.replace("output = tensor.to_numpy(reducer)\n", "output = tensor.to_numpy(reducer)[0]\n")
        new = re.sub(r"np\.float\b(?!\d)", "np.float64", new)    # removed in numpy 1.24
        for total in ("trainerrorsum", "validerrorsum"):                  # rbm's (1, 1) sums
            new = new.replace(f"(tensor.to_numpy({total}) /", f"(tensor.to_numpy({total}).item() /")
        if "CIFAR_PER_BATCH" in new:
            new = new.replace("import numpy as np",
                              "import numpy as np\nCIFAR_PER_BATCH = int(__import__('os')"
                              ".environ.get('CIFAR_PER_BATCH', 10000))", 1)
        if new != text:
            path.write_text(new)
            changed.append(str(path.relative_to(scratch)))
    return changed


# ---------------------------------------------------------------- the cases

def cases(ex):
    """(name, folder, argv, data[, stdin]) per run; data: what to write first."""
    cnn = f"{ex}/cnn"
    out = []
    for model in ("cnn", "mlp", "resnet", "xceptionnet", "alexnet"):
        small = model in ("resnet", "xceptionnet", "alexnet")   # 224/299 inputs: a few steps
        for data in ("mnist", "cifar10"):
            for graph in (True, False):
                argv = ["train_cnn.py", model, data, "-m", "1" if small else "3",
                        "-b", "8" if small else "32"] + ([] if graph else ["-g"])
                size = ("mnist-tiny" if small else "mnist") if data == "mnist" else \
                    ("cifar-tiny" if small else "cifar")
                out.append((f"cnn-{model}-{data}-{'graph' if graph else 'eager'}", cnn, argv, size))
        out.append((f"cnn-{model}-mnist-float16", cnn,
                    ["train_cnn.py", model, "mnist", "-p", "float16", "-m", "1", "-b", "8"],
                    "mnist-tiny"))
    ms = f"{ex}/cnn_ms"
    out += [
        ("cnn_ms-train_cnn-cnn", ms, ["train_cnn.py", "cnn", "mnist", "-m", "2", "-b", "32"],
         "mnist"),
        ("cnn_ms-train_ms_model-msmlp", ms, ["train_ms_model.py", "msmlp", "mnist", "-m", "3",
                                             "-b", "32"], "mnist"),
        ("cnn_ms-train_cnn-msmlp", ms, ["train_cnn.py", "msmlp", "mnist", "-m", "3", "-b", "32"],
         "mnist"),
    ]
    hc = f"{ex}/healthcare/application"
    health = [  # (case, folder, train.py's arguments, data)
        ("candidiasis", "Candidiasis_Disease",
         "candidiasisnet candidiasis -m 20 -b 32 -dir /tmp/probe-health",
         "csv:/tmp/probe-health/candidiasis_data.csv"),
        ("cerebrovascular", "Cerebrovascular_Disease",
         "cerebrovascularnet cerebrovascular -m 20 -b 32 -dir /tmp/probe-health",
         "csv:/tmp/probe-health/cerebrovascular_data.csv"),
        ("kidney", "Kidney_Disease", "kidneynet -m 10 -b 32 -dir /tmp/probe-kidney", "kidney"),
        ("malaria", "Malaria_Disease", "malarianet malaria -m 3 -b 16 -dir /tmp/probe-malaria",
         "malaria"),
        ("hematologic", "Hematologic_Disease", "hematologicnet -m 3 -b 16 -dir /tmp/probe-blood",
         "bloodmnist"),
        ("diabetic_retinopathy", "Diabetic_Disease/Diabetic_Retinopathy_Classification",
         "drnet diaret -m 3 -b 16 -dir /tmp/probe-diaret", "diaret"),
        ("thyroid_eye", "Thyroid_Eye_Disease", "tedctnet -dir /tmp/cifar-10-batches-py -m 2",
         "cifar"),
        ("cardiovascular", "Cardiovascular_Disease",
         "cardionet -m 5 -dir /tmp/probe-health/cardio.csv", None),
    ]
    out += [(f"healthcare-{name}", f"{hc}/{folder}", ["train.py"] + args.split(), data)
            for name, folder, args, data in health]
    out.append(("malaria_cnn-cnn", f"{ex}/malaria_cnn",
                "train_cnn.py cnn malaria -m 3 -b 16 -dir /tmp/probe-malaria".split(), "malaria"))
    auto = f"{cnn}/autograd"
    out += [
        ("autograd-mnist_cnn", auto, ["mnist_cnn.py"], "mnist"),
        ("autograd-resnet_cifar10", auto, ["resnet_cifar10.py"], "cifar-tiny-local"),
        ("autograd-xceptionnet", auto, ["xceptionnet.py"], None),
        ("autograd-sparsification_mnist", auto, ["sparsification_mnist.py", "2"], "mnist"),
        ("autograd-mnist_multiprocess", auto, ["mnist_multiprocess.py", "2"], "mnist"),
        ("autograd-mnist_dist-mpi2", auto, ["@mpi", "mnist_dist.py"], "mnist"),
        ("autograd-resnet_dist-mpi2", auto, ["@mpi", "resnet_dist.py"], None),
        ("cnn-train_mpi-cnn-mpi2", cnn, ["@mpi", "train_mpi.py", "cnn", "mnist", "-m", "2",
                                         "-b", "32"], "mnist"),
        ("cnn-train_mpi-cnn-half-mpi2", cnn, ["@mpi", "train_mpi.py", "cnn", "mnist", "-m", "2",
                                              "-b", "32", "-d", "half"], "mnist"),
        ("cnn-train_mpi-cnn-partialUpdate-mpi2", cnn, ["@mpi", "train_mpi.py", "cnn", "mnist", "-m",
                                                       "2", "-b", "32", "-d", "partialUpdate",
                                                       "-g"], "mnist"),
        ("cnn-train_mpi-cnn-sparseTopK-mpi2", cnn, ["@mpi", "train_mpi.py", "cnn", "mnist", "-m",
                                                    "2", "-b", "32", "-d", "sparseTopK"], "mnist"),
        ("cnn-train_mpi-cnn-sparseThreshold-mpi2", cnn, ["@mpi", "train_mpi.py", "cnn", "mnist",
                                                         "-m", "2", "-b", "32", "-d",
                                                         "sparseThreshold"], "mnist"),
        ("cnn-cnn-mnist-graph-verbose", cnn, ["train_cnn.py", "cnn", "mnist", "-m", "1", "-b", "32",
                                              "-v", "1"], "mnist"),
        ("cnn-train_multiprocess-cnn", cnn, ["train_multiprocess.py", "cnn", "mnist", "-m", "1"],
         "mnist"),
        ("mlp-model-graph", f"{ex}/mlp", ["model.py", "-m", "301"], None),
        ("mlp-model-eager", f"{ex}/mlp", ["model.py", "-m", "301", "-g"], None),
        ("mlp-model-float16", f"{ex}/mlp", ["model.py", "-m", "101", "-p", "float16"], None),
        ("mlp-native", f"{ex}/mlp", ["native.py", "-m", "301"], None),
        ("mlp-native-float16", f"{ex}/mlp", ["native.py", "-m", "101", "-p", "float16"], None),
    ]
    for folder in ("msmlp", "ms_model_mlp", "msmodel_mlp"):
        out.append((f"{folder}-native", f"{ex}/{folder}", ["native.py", "-m", "301"], None))
        if folder != "msmodel_mlp":
            out.append((f"{folder}-model", f"{ex}/{folder}", ["model.py", "-m", "301"], None))
    out += [
        ("rnn-char_rnn", f"{ex}/rnn", ["char_rnn.py", "input.txt", "-m", "3", "-b", "16",
                                       "-l", "32", "-d", "64"], "text",
         "y\nthe \nn\n" * 3),      # its sampling prompt, answered once per epoch
        ("onnx-resnet18", f"{ex}/onnx", ["resnet18.py"], "onnx-resnet18"),
        ("onnx-training-resnet18v1", f"{ex}/onnx/training",
         ["train.py", "--model", "resnet18v1", "--data", "cifar10", "--epoch", "2", "--bs", "8"],
         "onnx-resnet18+cifar-tiny"),
        ("trans-train", f"{ex}/trans",
         ["train.py", "--dataset", "cmn-eng/cmn-2000.txt", "--max-epoch", "4", "--batch-size",
          "16", "--d_model", "32", "--n_head", "2", "--dim_feedforward", "64", "--n_layers", "1"],
         "cmn"),
        ("rbm-train", f"{ex}/rbm", ["train.py", "mnist.pkl.gz"], "mnist-pkl"),
        ("singa_peft-mlp-linear_lora", f"{ex}/singa_peft",
         ["-m", "examples.train", "mlp", "mnist", "linear_lora", "-m", "3", "-dir", "/tmp"],
         "mnist+src"),
        ("singa_peft-cnn-linear_lora", f"{ex}/singa_peft",
         ["-m", "examples.train", "cnn", "mnist", "linear_lora", "-m", "2", "-dir", "/tmp"],
         "mnist+src"),
        ("gan-vanilla", f"{ex}/gan", ["vanilla.py", "mnist.pkl.gz"], "mnist-pkl"),
        ("gan-lsgan", f"{ex}/gan", ["lsgan.py", "mnist.pkl.gz"], "mnist-pkl"),
    ]
    return out


def write_data(kind, folder):
    """Writes what a case reads; returns the environment variables it needs."""
    if kind is None:
        return {}
    if kind.endswith("+src"):            # a package of the example's own under src/
        write_data(kind[:-4], folder)
        return {"PYTHONPATH": os.pathsep.join([str(REPO), os.path.join(folder, "src")])}
    if kind.startswith("onnx-resnet18"):
        top5 = write_resnet18_zoo()
        print("    onnxruntime's top-5 on the stand-in: " + ", ".join(
            f"{label.split()[-1]} {p:.6f}" for label, p in top5), flush=True)
        kind = kind.partition("+")[2] or None
        if kind is None:
            return {}
    if kind.startswith("mnist-pkl"):
        write_mnist_pkl(os.path.join(folder, "mnist.pkl.gz"), 512)
    elif kind.startswith("mnist"):
        write_mnist_idx("/tmp", *((32, 16) if kind == "mnist-tiny" else (640, 128)))
    elif kind.startswith("cifar"):
        per_batch, n_test = (8, 16) if "tiny" in kind else (128, 128)
        target = os.path.join(folder, "cifar-10-batches-py") if kind.endswith("local") \
            else "/tmp/cifar-10-batches-py"
        write_cifar10(target, per_batch, n_test)
        return {"CIFAR_PER_BATCH": str(per_batch)}
    elif kind.startswith("csv:"):
        write_table_csv(kind[4:])
    elif kind == "malaria":
        subprocess.run(["rm", "-rf", "/tmp/probe-malaria"], check=True)
        write_malaria("/tmp/probe-malaria")
    elif kind == "bloodmnist":
        subprocess.run(["rm", "-rf", "/tmp/probe-blood"], check=True)
        write_bloodmnist("/tmp/probe-blood")
    elif kind == "diaret":
        subprocess.run(["rm", "-rf", "/tmp/probe-diaret"], check=True)
        write_diaret("/tmp/probe-diaret")
    elif kind == "kidney":
        write_kidney("/tmp/probe-kidney")
    elif kind == "cmn":
        write_cmn_eng(os.path.join(folder, "cmn-eng", "cmn-2000.txt"))
    elif kind == "text":
        write_text(os.path.join(folder, "input.txt"))
    return {}


NUMBER = r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?|nan|inf"


def summary(output):
    """First and last loss / accuracy the run printed, or its last error line."""
    found = {}
    for key, pat in (("loss", rf"(?:loss|training erroraverage)\s*(?:is|=|:)?\s*=?\s*\[?({NUMBER})"),
                     ("acc", rf"accuracy\s*(?:is|=|:)\s*({NUMBER})"),
                     ("top-5 probabilities", rf"probability=({NUMBER})")):
        vals = re.findall(pat, output, flags=re.IGNORECASE)
        if vals:
            found[key] = ", ".join(vals) if key.startswith("top") else \
                f"{vals[0]} -> {vals[-1]} ({len(vals)})"
    return found


def last_error(output):
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^\w*(Error|Exception|error)\b|^\w+\.\w+Error|Error:", ln.strip()):
            return ln.strip()[:160]
    return lines[-1][:160] if lines else ""


def run_case(name, folder, argv, data, python, timeout, logdir, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    env.update(write_data(data, folder))
    if argv[0] == "@mpi":
        cmd = [python, "-m", "singa.launch", "-n", "2", argv[1]] + argv[2:]
    else:
        cmd = [python] + argv
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                           timeout=timeout, input=stdin or "")
        rc, output = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(
            errors="replace")
    secs = time.time() - t0
    Path(logdir, f"{name}.log").write_text(" ".join(cmd) + "\n\n" + output)
    return rc, secs, output


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--snapshot", default="/work/.mirror/apache+singa/repo")
    ap.add_argument("--scratch", default="/tmp/singa-ex")
    ap.add_argument("--only", action="append", help="run the cases whose name contains this")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per case")
    ap.add_argument("--keep-gpu", action="store_true", help="leave create_cuda_gpu calls alone")
    ap.add_argument("--no-extract", action="store_true", help="reuse the scratch copy")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()

    ex = os.path.join(args.scratch, "examples")
    todo = [c for c in cases(ex) if not args.only or any(o in c[0] for o in args.only)]
    if args.list:
        for name, folder, argv, *_ in todo:
            shown = ["-m", "singa.launch", "-n", "2"] + argv[1:] if argv[0] == "@mpi" else argv
            print(f"{name:40s} cd {folder} && python {' '.join(shown)}")
        return
    if not args.no_extract:
        commit = subprocess.run(["git", "--git-dir", args.snapshot, "log", "-1", "--format=%h"],
                                capture_output=True, text=True, check=True).stdout.strip()
        changed = extract(args.snapshot, args.scratch, args.keep_gpu)
        print(f"apache/singa {commit}: examples in {ex}; {len(changed)} files redirected")
    logdir = os.path.join(args.scratch, "logs")
    os.makedirs(logdir, exist_ok=True)
    rows = []
    for name, folder, argv, data, *stdin in todo:
        rc, secs, output = run_case(name, folder, argv, data, sys.executable, args.timeout, logdir,
                                    *stdin)
        found = summary(output)
        note = "; ".join(f"{k} {v}" for k, v in found.items()) if rc == 0 else last_error(output)
        if name in REFERENCES:
            note += "; " + REFERENCES[name]()
        rows.append((name, str(rc), f"{secs:.0f}s", note))
        print(f"{name:36s} rc={rc!s:8s} {secs:6.0f}s  {note}", flush=True)
    print(f"\n| case | rc | time | loss / accuracy (first -> last) or error |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\nlogs: {logdir}")


if __name__ == "__main__":
    main()
