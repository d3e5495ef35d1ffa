// singa/ops/rnn.h: one LSTM, GRU or plain (tanh / ReLU) RNN layer in one direction over a
// whole sequence, as one op each way.
//
//   // gx: the input projections of every step, x_t W_ih + b_ih, computed beforehand as one
//   // (T * N, I) x (I, 4H) product; gates in cuDNN's order i, f, g, o
//   auto f = singa::LSTMForward(gx, h0, c0, w_hh, b_hh, /*reverse=*/false);  // {hs, cs, gates}
//   auto g = singa::LSTMBackward(dhs, dhT, dcT, f[2], f[0], f[1], h0, c0, w_hh, false);
//   // g: {dgx, dh0, dc0, dw_hh, db_hh}; dgx is also the gradient of b_ih (summed) and, through
//   // the projection, of x and W_ih (two (T * N)-row products, outside this op)
//   auto r = singa::GRUForward(gx3, h0, w_hh3, b_hh3, false);        // {hs, gates, ghn}
//   auto d = singa::GRUBackward(dhs, dhT, r[1], r[2], r[0], h0, w_hh3, true, false);
//   auto p = singa::RNNForward(gx1, h0, w_hh1, b_hh1, /*relu=*/false, false);   // {hs}
//   auto q = singa::RNNBackward(dhs, dhT, p[0], h0, w_hh1, true, false, false);
//
// Why an op: composed from core ops, a step is ~14 ops forward and ~30 backward, and the weight
// gradient dW_hh is T small products of (H, N) x (N, 4H) added up. Here each step is one
// product and one pass over the gates, and dW_hh is one (H, T * N) x (T * N, 4H) product
// (PyTorch's oneDNN LSTM batches it the same way). layer.LSTM / GRU / RNN, layer.CudnnRNN and
// autograd's _RNN run through them (singa/autograd/rnn.py); the composed cells stay the
// reference.
//
// Shapes: gx (T, N, 4H), h0 and c0 (N, H), w_hh (H, 4H), b_hh (4H,) or an empty Tensor(); all
// float32 on one device, T >= 1. reverse: the steps run T-1 .. 0 (a bidirectional layer's
// backward direction); hs[t] is always the state after step t. mask (optional, every op): a
// float32 (T, N) of 1 and 0 (sequences of different lengths, seq_lengths): where it is 0 the
// step is past that sequence's end, and its states are carried unchanged (hs[t] = hs[t-1]) and
// its gradients passed through; the caller zeroes those outputs (hs * mask).
#pragma once

#include <vector>

#include "singa/core/tensor.h"

namespace singa {

/// c_t = f * c_{t-1} + i * g, h_t = o * tanh(c_t) with (i, f, g, o) = (sigmoid, sigmoid, tanh,
/// sigmoid) of gx_t + h_{t-1} w_hh + b_hh. Returns {hs, cs, gates}: hs and cs (T, N, H), the
/// states after every step; gates (T, N, 4H), the activated i, f, g, o (kept for the backward).
std::vector<Tensor> LSTMForward(const Tensor& gx, const Tensor& h0, const Tensor& c0,
                                const Tensor& w_hh, const Tensor& b_hh, bool reverse,
                                const Tensor& mask = Tensor());

/// The gradients of LSTMForward from dhs (T, N, H) (every step's output h) and the final
/// states' dhT, dcT (N, H; empty Tensor()s for zeros), given the forward's gates, hs and cs.
/// Returns {dgx (T, N, 4H), dh0, dc0, dw_hh (H, 4H), db_hh (4H,), empty without b_hh}.
std::vector<Tensor> LSTMBackward(const Tensor& dhs, const Tensor& dhT, const Tensor& dcT,
                                 const Tensor& gates, const Tensor& hs, const Tensor& cs,
                                 const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                                 bool has_bias, bool reverse, const Tensor& mask = Tensor());

/// GRU (cuDNN's and PyTorch's equations, gates r, z, n): r = sigmoid(xr + hr), z = sigmoid(xz +
/// hz), n = tanh(xn + r * hn), h_t = n + z (h_{t-1} - n), with x* the blocks of gx_t (T, N, 3H)
/// and h* those of h_{t-1} w_hh + b_hh (w_hh (H, 3H), b_hh (3H,) or empty). Returns {hs (T, N,
/// H), gates (T, N, 3H): the activated r, z, n, ghn (T, N, H): each step's hn, kept for the
/// backward}.
std::vector<Tensor> GRUForward(const Tensor& gx, const Tensor& h0, const Tensor& w_hh,
                               const Tensor& b_hh, bool reverse, const Tensor& mask = Tensor());

/// The gradients of GRUForward from dhs (T, N, H) and the final state's dhT (N, H; empty for
/// zeros), given the forward's gates, ghn and hs. Returns {dgx (T, N, 3H), dh0, dw_hh (H, 3H),
/// db_hh (3H,), empty without b_hh}.
std::vector<Tensor> GRUBackward(const Tensor& dhs, const Tensor& dhT, const Tensor& gates,
                                const Tensor& ghn, const Tensor& hs, const Tensor& h0,
                                const Tensor& w_hh, bool has_bias, bool reverse,
                                const Tensor& mask = Tensor());

/// The plain RNN: h_t = act(gx_t + h_{t-1} w_hh + b_hh), act tanh or (relu) max(x, 0), with
/// gx (T, N, H), w_hh (H, H), b_hh (H,) or empty. Returns {hs (T, N, H)}.
std::vector<Tensor> RNNForward(const Tensor& gx, const Tensor& h0, const Tensor& w_hh,
                               const Tensor& b_hh, bool relu, bool reverse,
                               const Tensor& mask = Tensor());

/// The gradients of RNNForward from dhs (T, N, H) and dhT (N, H; empty for zeros), given its
/// hs. Returns {dgx (T, N, H), dh0, dw_hh (H, H), db_hh (H,), empty without b_hh}.
std::vector<Tensor> RNNBackward(const Tensor& dhs, const Tensor& dhT, const Tensor& hs,
                                const Tensor& h0, const Tensor& w_hh, bool has_bias, bool relu,
                                bool reverse, const Tensor& mask = Tensor());

}  // namespace singa
