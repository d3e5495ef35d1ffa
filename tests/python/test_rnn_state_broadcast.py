"""A batch-1 input against initial states of a larger batch, as SINGA's char-rnn example samples
(its model keeps the training batch's (batch, hidden) states and feeds one character): SINGA's
LSTM adds x Wx and h Wh with broadcasting, so the input's row meets every state row. Reference:
PyTorch's nn.LSTM / nn.GRU on the input expanded to the states' batch (torch.expand, whose
gradient sums over the copies)."""
import numpy as np
import pytest

from singa import autograd, layer, tensor
from singa.errors import CheckShapeError

torch = pytest.importorskip("torch", reason="PyTorch is the reference of these tests")
from test_rnn_torch import grad_tensor as leaf  # noqa: E402  (needs torch too)

N = tensor.to_numpy
F32 = np.float32
T, B, I, H = 3, 4, 5, 6
GATES = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}


def copy_from_torch(tnet, net, mode):
    """torch's (G * H, in) weights, one chunk of rows per gate, into SINGA's per-gate layout."""
    w = {k: getattr(tnet, k + "_l0").detach().numpy()
         for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    values = {}
    for k, g in enumerate(GATES[mode]):
        rows = slice(k * H, (k + 1) * H)
        values["Wx_" + g], values["Wh_" + g] = w["weight_ih"][rows].T, w["weight_hh"][rows].T
        values["Bx_" + g], values["Bh_" + g] = w["bias_ih"][rows], w["bias_hh"][rows]
    net.set_params({k: np.ascontiguousarray(values[k.split(".")[-1]], F32)
                    for k in net.get_params()})


@pytest.mark.parametrize("batch", [2, B])  # 2: the smallest batch a state broadcasts from
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_batch1_input_broadcasts_to_state_batch(mode, batch, rng):
    x = rng.normal(0, 1, (T, 1, I)).astype(F32)
    h0 = rng.normal(0, 0.5, (batch, H)).astype(F32)
    c0 = rng.normal(0, 0.5, (batch, H)).astype(F32)
    dy = rng.uniform(-1, 1, (T, batch, H)).astype(F32)

    torch.manual_seed(0)
    tnet = torch.nn.LSTM(I, H) if mode == "lstm" else torch.nn.GRU(I, H)
    tx = torch.tensor(x, requires_grad=True)
    th, tc = (torch.tensor(a[None], requires_grad=True) for a in (h0, c0))
    ty, tstate = tnet(tx.expand(T, batch, I), (th, tc)) if mode == "lstm" else \
        tnet(tx.expand(T, batch, I), th)
    (ty * torch.tensor(dy)).sum().backward()

    net = layer.LSTM(I, H) if mode == "lstm" else layer.GRU(I, H)
    xs = [leaf(x[t]) for t in range(T)]
    sh, sc = leaf(h0), leaf(c0)
    autograd.training = True
    try:
        net(xs, (sh, sc)) if mode == "lstm" else net(xs, sh)       # creates the parameters
        copy_from_torch(tnet, net, mode)
        out = net(xs, (sh, sc)) if mode == "lstm" else net(xs, sh)
        ys, h = out[0], out[1]
        terms = [autograd.reduce_sum(autograd.mul(y, tensor.from_numpy(dy[t])))
                 for t, y in enumerate(ys)]
        loss = terms[0]
        for term in terms[1:]:
            loss = autograd.add(loss, term)
        grads = {id(p): g for p, g in autograd.backward(loss)}
    finally:
        autograd.training = False

    np.testing.assert_allclose(np.stack([N(y) for y in ys]), ty.detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    final_h = tstate[0] if mode == "lstm" else tstate
    np.testing.assert_allclose(N(h), final_h.detach().numpy()[0], rtol=1e-5, atol=1e-5)
    # each step's (1, I) input gets the sum over the batch rows it was broadcast to
    for t in range(T):
        np.testing.assert_allclose(N(grads[id(xs[t])]), tx.grad.numpy()[t], rtol=1e-4,
                                   atol=1e-5)
    np.testing.assert_allclose(N(grads[id(sh)]), th.grad.numpy()[0], rtol=1e-4, atol=1e-5)


def test_state_batch_that_does_not_broadcast_still_raises(rng):
    net = layer.LSTM(I, H)
    xs = [tensor.from_numpy(rng.normal(0, 1, (2, I)).astype(F32)) for _ in range(T)]
    h0 = tensor.from_numpy(np.zeros((B, H), F32))
    with pytest.raises(CheckShapeError, match=r"h0 must have shape \(2, 6\)"):
        net(xs, (h0, h0))
