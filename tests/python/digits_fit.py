"""The training loop that the digits accuracy tests share (test_gpu.py, test_amp.py).

    fit(net, tx, ty, xtr, ytr, epochs=1, bs=64)   # tx, ty: the compiled placeholders
"""
import datasets  # noqa: F401  (examples/, put on sys.path by the importing test)


def fit(net, tx, ty, xtr, ytr, epochs, bs):
    """``epochs`` passes over (xtr, ytr) in batches of bs, reshuffled per epoch (seed = epoch)."""
    for epoch in range(epochs):
        for xb, yb in datasets.batches(xtr, ytr, bs, seed=epoch):
            tx.copy_from_numpy(xb)
            ty.copy_from_numpy(yb)
            net(tx, ty)
