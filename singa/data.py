"""Mini-batches of images, prepared by a background process (Apache SINGA 3.3's singa.data).

Example::

    from singa import data, image_tool
    tool = image_tool.ImageTool()

    def transform(path):                       # one image path -> a list of PIL images
        return tool.load(path).resize_by_range((112, 128)).random_crop((96, 96)).flip().get()

    it = data.ImageBatchIter("train.txt", 32, transform, shuffle=True, delimeter=" ",
                             image_folder="images/", capacity=10)
    it.start()
    x, y = it.next()        # x: float32 (32, 3, 96, 96) RGB in 0..255, y: int32 (32,)
    it.end()                # stops and reaps the process (also on garbage collection / exit)

The list file has one image per line: ``<path relative to image_folder><delimeter><int label>``.

Note: the worker process
  start() forks one process that reads the list, (re)shuffles it at the start of every pass,
  runs ``image_transform`` on each path and puts whole batches into a bounded queue. Unlike
  SINGA's worker, it watches a shared stop event (SINGA sets a flag in the parent that the child
  never sees, and never joins the child, leaving a zombie); end() sets the event, waits briefly,
  terminates the process if it is still running and joins it. The process is a daemon, so a
  forgotten end() cannot hang interpreter exit. An exception in the worker (a bad line, an
  unreadable image, too many augmented images for a batch) is sent to the parent, and next()
  raises it as a RuntimeError instead of waiting forever.
"""
import multiprocessing
import numbers
import os
import queue as _queue
import random
import traceback
import warnings
import weakref

import numpy as np

__all__ = ["ImageBatchIter"]

_POLL_S = 0.05      # how often a blocked put/get re-checks the stop event / worker liveness
_GRACE_S = 1.0      # how long end() lets the worker stop by itself before terminating it


def _context():
    # fork lets image_transform be any callable (a closure, a lambda), as SINGA's examples use
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


def _read_list(path, delimeter):
    """[(label, relative path)] of the non-empty lines of the image list file."""
    items = []
    with open(path, "r") as fd:
        for lineno, line in enumerate(fd, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split(delimeter)
            if len(parts) < 2:
                raise ValueError("ImageBatchIter: %s line %d has no %r-separated label: %r"
                                 % (path, lineno, delimeter, line))
            try:
                label = int(parts[1])
            except ValueError:
                raise ValueError("ImageBatchIter: %s line %d: the label %r is not an int"
                                 % (path, lineno, parts[1])) from None
            items.append((label, parts[0]))
    return items


def _stop_process(p, stop_event):
    """Stops worker p: set the event, wait, terminate, kill; always joins (no zombie)."""
    if p is None:
        return
    stop_event.set()
    p.join(_GRACE_S)
    if p.is_alive():
        p.terminate()
        p.join(_GRACE_S)
    if p.is_alive():
        p.kill()
        p.join()


class ImageBatchIter(object):
    """Iterates over an image data set in mini-batches filled by a background process.

    Args:
        img_list_file (str): the list file; each line is ``image_path<delimeter>label``.
        batch_size (int): images per mini-batch.
        image_transform: a function of the full image path returning a list of PIL images
            (the augmented versions of that image; together they must fit in one batch).
        shuffle (bool): shuffle the list at the start of every pass.
        delimeter (str): separates the path from the label (SINGA's spelling).
        image_folder (str): prefix of the image paths (None: the paths are used as they are).
        capacity (int): the most mini-batches waiting in the queue.
        seed (int): extra (not in SINGA): seeds the shuffle; None uses the process's ``random``
            state, as SINGA does.
    """

    def __init__(self, img_list_file, batch_size, image_transform, shuffle=True,
                 delimeter=" ", image_folder=None, capacity=10, seed=None):
        if not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError("ImageBatchIter: batch_size must be a positive int, got %r"
                             % (batch_size,))
        if not isinstance(capacity, numbers.Integral) or capacity <= 0:
            raise ValueError("ImageBatchIter: capacity must be a positive int, got %r"
                             % (capacity,))
        if not callable(image_transform):
            raise TypeError("ImageBatchIter: image_transform must be callable")
        self.img_list_file = img_list_file
        self.batch_size = int(batch_size)
        self.image_transform = image_transform
        self.shuffle = shuffle
        self.delimeter = delimeter
        self.image_folder = image_folder
        self.capacity = int(capacity)
        self.seed = seed
        # SINGA counts every line, blank ones too (and its worker then fails on them)
        self.num_samples = len(_read_list(img_list_file, delimeter))
        if self.num_samples == 0:
            raise ValueError("ImageBatchIter: %s lists no images" % img_list_file)
        ctx = _context()
        self._ctx = ctx
        self.queue = ctx.Queue(self.capacity)
        self._stop_event = ctx.Event()
        self._fresh = True  # queue and event not used by a worker yet
        self.stop = False
        self.p = None
        self._finalizer = None

    def start(self):
        """Starts the worker process (once; call end() before starting again)."""
        if self.p is not None:
            raise RuntimeError("ImageBatchIter.start: already started; call end() first")
        # A fresh queue per run: a terminated worker may leave the old one's lock held, and the
        # old one may still hold batches of the previous run.
        if not self._fresh:
            self.queue = self._ctx.Queue(self.capacity)
            self._stop_event = self._ctx.Event()
        self._fresh = False
        self.stop = False
        self.p = self._ctx.Process(target=self._worker().run, name="ImageBatchIter",
                                   daemon=True)
        with warnings.catch_warnings():
            # Python 3.12+ warns about fork() in a process with threads (ours has the OpenMP
            # pool). The worker runs only Python, numpy and Pillow code, never OpenMP, and
            # starts no threads before its queue's feeder, so forking is safe here.
            warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
            self.p.start()
        self._finalizer = weakref.finalize(self, _stop_process, self.p, self._stop_event)

    def next(self):
        """The next mini-batch (x, y): x float32 (batch_size, 3, H, W), y int32 (batch_size,)."""
        if self.p is None:
            raise AssertionError("ImageBatchIter.next: call start before next")
        while True:
            alive = self.p.is_alive()  # checked before the get: a batch sent just before
            try:                       # the worker exited is still read
                kind, payload = self.queue.get(timeout=_POLL_S)
            except _queue.Empty:
                if alive:
                    continue
                raise RuntimeError("ImageBatchIter.next: the worker process exited (code %s) "
                                   "without sending a batch" % self.p.exitcode) from None
            if kind == "error":
                self.p.join(_GRACE_S)  # it exits right after its report: reap it now
                raise RuntimeError("ImageBatchIter: the worker failed:\n%s" % payload)
            return payload

    def end(self):
        """Stops the worker and reaps it (returns within about two seconds)."""
        if self.p is None:
            return
        self.stop = True
        self._finalizer()  # _stop_process, once
        self.queue.close()
        self.p = None
        self._finalizer = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.end()
        return False

    # ---- the worker process ------------------------------------------------------------------
    def _worker(self):
        return _Worker(self.img_list_file, self.batch_size, self.image_transform, self.shuffle,
                       self.delimeter, self.image_folder, self.seed, self.queue,
                       self._stop_event)

    def run(self):
        """The worker's loop, as run in the process that start() creates (it returns once the
        stop event is set)."""
        self._worker().run()


class _Worker(object):
    """What the worker process needs, apart from the iterator: the process must not hold the
    iterator, or the iterator could never be garbage collected (and its finaliser, which stops
    the process, never run) while the process lives."""

    def __init__(self, list_file, batch_size, transform, shuffle, delimeter, folder, seed,
                 queue, stop_event):
        self.list_file, self.batch_size, self.transform = list_file, batch_size, transform
        self.shuffle, self.delimeter, self.folder, self.seed = shuffle, delimeter, folder, seed
        self.queue, self.stop_event = queue, stop_event

    def run(self):
        try:
            self._fill()
        except Exception:  # noqa: BLE001  (reported to the parent, which raises it)
            if self._put(("error", traceback.format_exc())):
                self.queue.close()
                self.queue.join_thread()  # the report must reach the pipe before we exit
                return
        # Stopped: unsent batches must not hold up this process's exit.
        self.queue.cancel_join_thread()

    def _put(self, item):
        """Puts item into the queue, waiting for room; False once the stop event is set."""
        while not self.stop_event.is_set():
            try:
                self.queue.put(item, timeout=_POLL_S)
                return True
            except _queue.Full:
                continue
        return False

    def _fill(self):
        items = _read_list(self.list_file, self.delimeter)
        rng = random if self.seed is None else random.Random(self.seed)
        index = 0
        while not self.stop_event.is_set():
            x, y = [], np.empty(self.batch_size, dtype=np.int32)
            while len(x) < self.batch_size:
                # SINGA reshuffles only when a batch starts at index 0, i.e. rarely when the
                # batch size does not divide the data set; we reshuffle at every pass.
                if index == 0 and self.shuffle:
                    rng.shuffle(items)
                label, rel = items[index]
                path = rel if self.folder is None else os.path.join(self.folder, rel)
                imgs = self.transform(path)
                if len(x) + len(imgs) > self.batch_size:
                    raise ValueError("too many images (%d) in a batch (%d): image_transform "
                                     "returned %d for %s" % (len(x) + len(imgs),
                                                             self.batch_size, len(imgs), path))
                for img in imgs:
                    arr = np.asarray(img.convert("RGB"), dtype=np.float32).transpose(2, 0, 1)
                    if x and arr.shape != x[0].shape:
                        raise ValueError("images of one batch must share a size: %s is %s, "
                                         "the batch's first is %s" % (path, arr.shape[1:],
                                                                       x[0].shape[1:]))
                    y[len(x)] = label
                    x.append(arr)
                index = (index + 1) % len(items)
            if not self._put(("batch", (np.stack(x), y))):
                return
