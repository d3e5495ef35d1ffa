"""singa.data.ImageBatchIter on a small image folder written here: batch contents and labels,
order with and without shuffling, augmentation, worker errors, and process cleanup."""
import gc
import os
import random
import time

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")

from singa import data  # noqa: E402

N = 10          # images in the folder
H, W = 5, 6


def _pixels(i):
    """Image i: a pattern that identifies it (so a batch row can be matched to its label)."""
    a = np.zeros((H, W, 3), np.uint8)
    a[..., 0] = 20 * i
    a[..., 1] = np.arange(W)[None, :] * 10 + i
    a[..., 2] = np.arange(H)[:, None] * 30
    return a


@pytest.fixture
def folder(tmp_path):
    for i in range(N):
        Image.fromarray(_pixels(i), "RGB").save(str(tmp_path / ("img_%d.png" % i)))
    # label 100 + i: labels differ from indices and from each other
    (tmp_path / "train.txt").write_text("".join("img_%d.png %d\n" % (i, 100 + i)
                                                for i in range(N)) + "\n")
    return tmp_path


def _open(path):
    return [Image.open(path)]


def _expected_x(labels):
    return np.stack([_pixels(l - 100).astype(np.float32).transpose(2, 0, 1) for l in labels])


def _reaped(pid):
    """True when process pid is gone (not even a zombie waiting for its parent)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] == "X"
    except FileNotFoundError:
        return True


def _batches(it, n):
    return [it.next() for _ in range(n)]


def test_batches_in_list_order(folder):
    it = data.ImageBatchIter(str(folder / "train.txt"), 4, _open, shuffle=False,
                             image_folder=str(folder), capacity=2)
    assert it.num_samples == N                          # the blank last line is not a sample
    it.start()
    try:
        got = _batches(it, 3)
    finally:
        it.end()
    order = [(k % N) + 100 for k in range(12)]          # wraps around after the 10th image
    for b, (x, y) in enumerate(got):
        assert x.dtype == np.float32 and x.shape == (4, 3, H, W)
        assert y.dtype == np.int32 and y.tolist() == order[4 * b:4 * b + 4]
        np.testing.assert_array_equal(x, _expected_x(y))


def test_shuffle_is_a_fresh_permutation_every_pass(folder):
    it = data.ImageBatchIter(str(folder / "train.txt"), 5, _open, shuffle=True,
                             image_folder=str(folder), seed=7)
    it.start()
    try:
        labels = np.concatenate([y for _, y in _batches(it, 6)])     # three passes
        x, y = it.next()
        np.testing.assert_array_equal(x, _expected_x(y))
    finally:
        it.end()
    passes = labels.reshape(3, N).tolist()
    for p in passes:
        assert sorted(p) == list(range(100, 100 + N))
    # the worker shuffles the list in place with random.Random(7) at the start of every pass
    rng, items, want = random.Random(7), list(range(100, 100 + N)), []
    for _ in range(3):
        rng.shuffle(items)
        want.append(list(items))
    assert passes == want
    assert passes[0] != list(range(100, 100 + N)) and passes[0] != passes[1]


def test_augmented_images_share_a_batch(folder, tmp_path):
    lst = tmp_path / "list.csv"
    lst.write_text("".join("%s,%d\n" % (folder / ("img_%d.png" % i), 100 + i) for i in (3, 5)))

    def two(path):
        img = Image.open(path)
        return [img, img.transpose(getattr(Image, "Transpose", Image).FLIP_LEFT_RIGHT)]

    it = data.ImageBatchIter(str(lst), 4, two, shuffle=False, delimeter=",", capacity=1)
    it.start()
    x, y = it.next()
    it.end()
    assert y.tolist() == [103, 103, 105, 105]
    np.testing.assert_array_equal(x[0], _expected_x([103])[0])
    np.testing.assert_array_equal(x[1], _expected_x([103])[0][:, :, ::-1])
    np.testing.assert_array_equal(x[3], _expected_x([105])[0][:, :, ::-1])


def test_worker_errors_reach_next(folder):
    def two(path):
        return [Image.open(path)] * 2

    it = data.ImageBatchIter(str(folder / "train.txt"), 3, two, shuffle=False,
                             image_folder=str(folder))
    it.start()
    with pytest.raises(RuntimeError, match=r"too many images \(4\) in a batch \(3\)"):
        it.next()
    assert _reaped(it.p.pid)                            # reaped without waiting for end()
    with pytest.raises(RuntimeError, match="exited"):
        it.next()
    it.end()

    it = data.ImageBatchIter(str(folder / "train.txt"), 2, _open, image_folder=str(folder / "x"))
    it.start()
    with pytest.raises(RuntimeError, match="No such file"):
        it.next()
    it.end()


def test_bad_list_or_arguments(folder, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("img_0.png 1\nimg_1.png one\n")
    with pytest.raises(ValueError, match="line 2"):
        data.ImageBatchIter(str(bad), 2, _open)
    with pytest.raises(ValueError, match="batch_size"):
        data.ImageBatchIter(str(folder / "train.txt"), 0, _open)
    it = data.ImageBatchIter(str(folder / "train.txt"), 2, _open)
    with pytest.raises(AssertionError, match="start"):
        it.next()
    it.end()                                            # before start: nothing to do


def test_end_is_prompt_and_leaves_no_process(folder):
    it = data.ImageBatchIter(str(folder / "train.txt"), 2, _open, image_folder=str(folder),
                             capacity=1)
    it.start()
    it.next()
    pid = it.p.pid
    p = it.p
    time.sleep(0.3)                                     # the worker blocks on the full queue
    t0 = time.monotonic()
    it.end()
    assert time.monotonic() - t0 < 4.0                 # 1 s grace + terminate, with slack
    assert _reaped(pid) and p.exitcode is not None   # _reaped first: exitcode reaps
    it.end()                                            # twice is fine
    it.start()                                          # and it starts again
    x, y = it.next()
    assert x.shape == (2, 3, H, W)
    it.end()


def test_dropped_iterator_stops_its_worker(folder):
    it = data.ImageBatchIter(str(folder / "train.txt"), 2, _open, image_folder=str(folder))
    it.start()
    it.next()
    p = it.p
    del it
    gc.collect()
    assert _reaped(p.pid) and p.exitcode is not None


def test_context_manager(folder):
    with data.ImageBatchIter(str(folder / "train.txt"), 3, _open, shuffle=False,
                             image_folder=str(folder)) as it:
        _, y = it.next()
        p = it.p
    assert y.tolist() == [100, 101, 102]
    assert _reaped(p.pid) and p.exitcode is not None
    assert os.path.exists(str(folder / "img_0.png"))


def test_singa_style_pipeline_with_image_tool(folder):
    """SINGA's own usage: a module-level ImageTool used by the transform in the worker."""
    from singa import image_tool
    tool = image_tool.ImageTool()

    def transform(path):
        return tool.load(path).resize_by_range((6, 8)).random_crop((4, 4)).flip().get()

    it = data.ImageBatchIter(str(folder / "train.txt"), 3, transform, shuffle=True,
                             delimeter=" ", image_folder=str(folder) + "/", capacity=10)
    it.start()
    try:
        batches = _batches(it, 4)
    finally:
        it.end()
    for x, y in batches:
        assert x.shape == (3, 3, 4, 4) and x.dtype == np.float32
        assert set(y.tolist()) <= set(range(100, 100 + N))
        for img, label in zip(x, y):
            # channel 0 of image i is the constant 20 * i, whatever the crop, resize and flip
            np.testing.assert_array_equal(img[0], np.full((4, 4), 20 * (label - 100)))
