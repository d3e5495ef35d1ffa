"""Multi-layer bidirectional LSTM and GRU against PyTorch's nn.LSTM / nn.GRU with copied weights:
outputs, final states and every gradient, for SINGA's per-gate layers (layer.LSTM, layer.GRU) and
for the fused layer.CudnnRNN (cuDNN's flat packing, which is PyTorch's per-layer w_ih, w_hh, b_ih,
b_hh), with and without seq_lengths (PyTorch's packed sequences)."""
import numpy as np
import pytest

from singa import autograd, layer, tensor

torch = pytest.importorskip("torch", reason="PyTorch is the reference of these tests")

N = tensor.to_numpy
F32 = np.float32
GATES = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}  # PyTorch's = cuDNN's order
T, B, I, H, L = 4, 3, 3, 5, 2


def make_torch(mode, batch_first=False):
    torch.manual_seed(0)
    cls = torch.nn.LSTM if mode == "lstm" else torch.nn.GRU
    net = cls(I, H, num_layers=L, bidirectional=True, batch_first=batch_first)
    with torch.no_grad():  # asymmetric per gate: a distinct offset per row chunk
        for name, p in net.named_parameters():
            for k, _ in enumerate(GATES[mode]):
                p[k * H:(k + 1) * H] += 0.3 * (k - 1.5) * (1 if "weight" in name else 2)
    return net


def torch_suffix(p):
    return "_l%d%s" % (p // 2, "_reverse" if p % 2 else "")


def singa_suffix(p):
    return ("_l%d" % (p // 2) if p // 2 else "") + ("_reverse" if p % 2 else "")


def copy_to_layer(tnet, net, mode):
    """torch's (G * H, in) matrices, gate chunks of rows, into SINGA's per-gate (in, H) ones."""
    values = {}
    for p in range(2 * L):
        tp = {k: getattr(tnet, k + torch_suffix(p)).detach().numpy()
              for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
        for k, g in enumerate(GATES[mode]):
            rows = slice(k * H, (k + 1) * H)
            s = "_%s%s" % (g, singa_suffix(p))
            values["Wx" + s] = tp["weight_ih"][rows].T
            values["Wh" + s] = tp["weight_hh"][rows].T
            values["Bx" + s] = tp["bias_ih"][rows]
            values["Bh" + s] = tp["bias_hh"][rows]
    params = net.get_params()
    net.set_params({k: np.ascontiguousarray(values[k.split(".")[-1]], F32) for k in params})


def data(rng):
    x = rng.normal(0, 1, (T, B, I)).astype(F32)
    h0 = rng.normal(0, 0.5, (2 * L, B, H)).astype(F32)
    c0 = rng.normal(0, 0.5, (2 * L, B, H)).astype(F32)
    dy = rng.uniform(-1, 1, (T, B, 2 * H)).astype(F32)
    return x, h0, c0, dy


def leaf(a):
    return torch.tensor(a, requires_grad=True)


def grad_tensor(a):
    t = tensor.from_numpy(a)
    t.requires_grad = t.stores_grad = True
    return t


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_layer_matches_torch(mode, rng):
    x, h0, c0, dy = data(rng)
    tnet = make_torch(mode)
    tx, th, tc = leaf(x), leaf(h0), leaf(c0)
    ty, tstate = tnet(tx, (th, tc)) if mode == "lstm" else tnet(tx, th)
    (ty * torch.tensor(dy)).sum().backward()

    net = layer.LSTM(I, H, num_layers=L, bidirectional=True) if mode == "lstm" else \
        layer.GRU(I, H, num_layers=L, bidirectional=True)
    sx, sh, sc = grad_tensor(x), grad_tensor(h0), grad_tensor(c0)
    state = (sh, sc) if mode == "lstm" else sh
    net(sx, state)
    copy_to_layer(tnet, net, mode)
    autograd.training = True
    out = net(sx, state)
    y = out[0]
    np.testing.assert_allclose(N(y), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    if mode == "lstm":
        np.testing.assert_allclose(N(out[1]), tstate[0].detach().numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(N(out[2]), tstate[1].detach().numpy(), rtol=1e-4, atol=1e-5)
    else:
        np.testing.assert_allclose(N(out[1]), tstate.detach().numpy(), rtol=1e-4, atol=1e-5)
    loss = autograd.reduce_sum(autograd.mul(y, tensor.from_numpy(dy)))
    got = {id(t): N(g) for t, g in autograd.backward(loss)}
    np.testing.assert_allclose(got[id(sx)], tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[id(sh)], th.grad.numpy(), rtol=1e-4, atol=1e-5)
    if mode == "lstm":
        np.testing.assert_allclose(got[id(sc)], tc.grad.numpy(), rtol=1e-4, atol=1e-5)
    params = {k.split(".")[-1]: v for k, v in net.get_params().items()}
    for p in range(2 * L):
        tg = {k: getattr(tnet, k + torch_suffix(p)).grad.numpy()
              for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
        for k, g in enumerate(GATES[mode]):
            rows = slice(k * H, (k + 1) * H)
            s = "_%s%s" % (g, singa_suffix(p))
            for ours, theirs in (("Wx", tg["weight_ih"][rows].T), ("Wh", tg["weight_hh"][rows].T),
                                 ("Bx", tg["bias_ih"][rows]), ("Bh", tg["bias_hh"][rows])):
                np.testing.assert_allclose(got[id(params[ours + s])], theirs, rtol=1e-4,
                                           atol=1e-5, err_msg=ours + s)


def flat_weights(tnet):
    """cuDNN's packing from PyTorch's parameters: per pseudo-layer w_ih, w_hh, b_ih, b_hh."""
    return np.concatenate([getattr(tnet, k + torch_suffix(p)).detach().numpy().reshape(-1)
                           for p in range(2 * L)
                           for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")])


def flat_grads(tnet):
    return np.concatenate([getattr(tnet, k + torch_suffix(p)).grad.numpy().reshape(-1)
                           for p in range(2 * L)
                           for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")])


@pytest.mark.parametrize("masked", [False, True], ids=["full", "seq_lengths"])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_cudnn_rnn_matches_torch(mode, masked, rng):
    x, h0, c0, _ = data(rng)
    xb = np.ascontiguousarray(x.transpose(1, 0, 2))  # batch first, CudnnRNN's default
    lengths = np.array([4, 2, 3] if masked else [T] * B, np.int64)
    dy = rng.uniform(-1, 1, (B, T, 2 * H)).astype(F32) * (
        np.arange(T)[None, :, None] < lengths[:, None, None])
    tnet = make_torch(mode, batch_first=True)
    tx, th, tc = leaf(xb), leaf(h0), leaf(c0)
    packed = torch.nn.utils.rnn.pack_padded_sequence(tx, torch.tensor(lengths),
                                                     batch_first=True, enforce_sorted=False)
    tout, tstate = tnet(packed, (th, tc)) if mode == "lstm" else tnet(packed, th)
    ty = torch.nn.utils.rnn.pad_packed_sequence(tout, batch_first=True, total_length=T)[0]
    (ty * torch.tensor(dy)).sum().backward()

    net = layer.CudnnRNN(H, num_layers=L, bidirectional=True, rnn_mode=mode, use_mask=masked)
    sx, sh, sc = grad_tensor(xb), grad_tensor(h0), grad_tensor(c0)
    seq = tensor.from_numpy(lengths.astype(np.int32))
    net(sx, sh, sc, seq)
    net.W.copy_from_numpy(flat_weights(tnet).astype(F32))
    autograd.training = True
    y = net(sx, sh, sc, seq)
    np.testing.assert_allclose(N(y), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    loss = autograd.reduce_sum(autograd.mul(y, tensor.from_numpy(dy.astype(F32))))
    got = {id(t): N(g) for t, g in autograd.backward(loss)}
    np.testing.assert_allclose(got[id(net.W)], flat_grads(tnet), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[id(sx)], tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[id(sh)], th.grad.numpy(), rtol=1e-4, atol=1e-5)
    if mode == "lstm":
        np.testing.assert_allclose(got[id(sc)], tc.grad.numpy(), rtol=1e-4, atol=1e-5)
