"""What the examples show while training: progress bars on a terminal only, a curve at the end.

    from monitor import History, progress
    hist = History()
    for epoch in range(3):
        for xb, yb in progress(batches, total=n, desc="epoch 1"):   # a tqdm bar on a terminal
            ...
            hist.step(loss)
        hist.epoch(seconds=12.3, accuracy=0.97)
    hist.save_curve("cnn-digits-curve.png")    # loss and accuracy per epoch (matplotlib)

A progress bar redraws itself with carriage returns; written to a file or a pipe (a log, CI) it
leaves one long line of partial bars, so `progress` draws one only when its stream is a terminal
and tqdm is installed, and otherwise returns the iterable unchanged.
"""
import sys

import numpy as np

__all__ = ["progress", "History"]


def progress(iterable, total=None, desc=None, stream=None):
    """`iterable` wrapped in a tqdm bar written to `stream` (stderr) when it is a terminal."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if not (callable(isatty) and isatty()):
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is optional
        return iterable
    return tqdm(iterable, total=total, desc=desc, leave=False, file=stream)


class History:
    """The losses of every step and, per epoch, the mean loss, the test accuracy and the time."""

    def __init__(self):
        self.step_losses = []
        self.epoch_losses = []
        self.accuracies = []
        self.seconds = []
        self._first_step_of_epoch = 0

    def step(self, loss):
        self.step_losses.append(float(loss))

    def epoch(self, seconds, accuracy=None):
        """Closes an epoch: its mean loss (over the steps since the last call) and its time."""
        losses = self.step_losses[self._first_step_of_epoch:]
        self._first_step_of_epoch = len(self.step_losses)
        self.epoch_losses.append(float(np.mean(losses)) if losses else float("nan"))
        self.accuracies.append(accuracy)
        self.seconds.append(float(seconds))
        return self.epoch_losses[-1]

    def save_curve(self, path, title=None):
        """Writes the loss (every step, and the mean per epoch) and the test accuracy per epoch
        to `path` (png, svg, pdf). Returns the path, or None, after saying why, when matplotlib
        (an optional dependency of the examples) is missing or nothing was recorded."""
        if not self.step_losses:
            print("no training step recorded: no curve written")
            return None
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError:
            print("matplotlib is not installed (pip install matplotlib): no curve written")
            return None
        fig = Figure(figsize=(10, 4), constrained_layout=True)
        FigureCanvasAgg(fig)
        ax_loss, ax_acc = fig.subplots(1, 2)
        steps_per_epoch = len(self.step_losses) / max(len(self.epoch_losses), 1)
        ax_loss.plot(np.arange(1, len(self.step_losses) + 1) / steps_per_epoch, self.step_losses,
                     color="#9DB4D9", linewidth=0.8, label="each step")
        epochs = np.arange(1, len(self.epoch_losses) + 1)
        ax_loss.plot(epochs, self.epoch_losses, "o-", color="#4C72B0", label="epoch mean")
        ax_loss.set_xlabel("epoch")
        ax_loss.set_ylabel("training loss")
        ax_loss.legend(fontsize=8)
        acc = [(e, a) for e, a in zip(epochs, self.accuracies) if a is not None]
        if acc:
            ax_acc.plot([e for e, _ in acc], [100 * a for _, a in acc], "o-", color="#55A868")
        ax_acc.set_xlabel("epoch")
        ax_acc.set_ylabel("test accuracy (%)")
        ax_acc.set_xlim(0.5, max(len(epochs), 1) + 0.5)
        if title:
            fig.suptitle(title)
        fig.savefig(path, dpi=100)
        return path
