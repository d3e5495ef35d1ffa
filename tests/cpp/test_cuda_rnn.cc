// The CUDA kernels of singa/ops/rnn.h (LSTM, GRU, plain RNN layers) against the host's
// kernels, both directions, with and without biases, incoming final-state gradients and a
// mask. Every test skips where no GPU is usable (SINGA_REQUIRE_GPU).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "singa/ops/rnn.h"

namespace singa {
namespace {

using singa_test::ExpectSameOnGpu;
using singa_test::OnGpu;
using singa_test::RandomTensor;

// The (T, N) mask of sequences of these lengths: 1 while t < length.
Tensor LengthMask(size_t T, const std::vector<size_t>& lengths) {
  std::vector<float> m(T * lengths.size());
  for (size_t t = 0; t < T; ++t)
    for (size_t n = 0; n < lengths.size(); ++n) m[t * lengths.size() + n] = t < lengths[n];
  Tensor out({T, lengths.size()});
  out.CopyDataFromHostPtr(m.data(), m.size());
  return out;
}

TEST(CudaRnn, LstmForwardBackwardMatchTheHost) {
  SINGA_REQUIRE_GPU();
  const size_t T = 6, N = 5, H = 33, G = 4 * H;
  for (bool reverse : {false, true})
    for (bool bias : {true, false}) {
      SCOPED_TRACE(std::string(reverse ? "reverse" : "forward") + (bias ? ", bias" : ""));
      const Tensor gx = RandomTensor({T, N, G}, -2.f, 2.f, 61);
      const Tensor h0 = RandomTensor({N, H}, -1.f, 1.f, 62);
      const Tensor c0 = RandomTensor({N, H}, -1.f, 1.f, 63);
      const Tensor w = RandomTensor({H, G}, -0.3f, 0.3f, 64);
      const Tensor b = bias ? RandomTensor({G}, -0.5f, 0.5f, 65) : Tensor();
      // without biases, sequences of lengths 6, 3, 1, 6, 2 (a mask)
      const Tensor mask = bias ? Tensor() : LengthMask(T, {6, 3, 1, 6, 2});
      const Tensor gmask = bias ? mask : OnGpu(mask);
      auto c = LSTMForward(gx, h0, c0, w, b, reverse, mask);
      auto g = LSTMForward(OnGpu(gx), OnGpu(h0), OnGpu(c0), OnGpu(w), bias ? OnGpu(b) : b,
                           reverse, gmask);
      for (int i = 0; i < 3; ++i) ExpectSameOnGpu(c[i], g[i], 1e-5f);
      const Tensor dhs = RandomTensor({T, N, H}, -1.f, 1.f, 66);
      const Tensor dhT = bias ? RandomTensor({N, H}, -1.f, 1.f, 67) : Tensor();
      const Tensor dcT = RandomTensor({N, H}, -1.f, 1.f, 68);
      auto cb = LSTMBackward(dhs, dhT, dcT, c[2], c[0], c[1], h0, c0, w, bias, reverse, mask);
      auto gb = LSTMBackward(OnGpu(dhs), bias ? OnGpu(dhT) : dhT, OnGpu(dcT), g[2], g[0], g[1],
                             OnGpu(h0), OnGpu(c0), OnGpu(w), bias, reverse, gmask);
      for (int i = 0; i < (bias ? 5 : 4); ++i) ExpectSameOnGpu(cb[i], gb[i], 1e-4f);
    }
}

TEST(CudaRnn, GruForwardBackwardMatchTheHost) {
  SINGA_REQUIRE_GPU();
  const size_t T = 6, N = 5, H = 33, G = 3 * H;
  for (bool reverse : {false, true})
    for (bool bias : {true, false}) {
      SCOPED_TRACE(std::string(reverse ? "reverse" : "forward") + (bias ? ", bias" : ""));
      const Tensor gx = RandomTensor({T, N, G}, -2.f, 2.f, 71);
      const Tensor h0 = RandomTensor({N, H}, -1.f, 1.f, 72);
      const Tensor w = RandomTensor({H, G}, -0.3f, 0.3f, 73);
      const Tensor b = bias ? RandomTensor({G}, -0.5f, 0.5f, 74) : Tensor();
      const Tensor mask = bias ? Tensor() : LengthMask(T, {6, 3, 1, 6, 2});
      const Tensor gmask = bias ? mask : OnGpu(mask);
      auto c = GRUForward(gx, h0, w, b, reverse, mask);
      auto g = GRUForward(OnGpu(gx), OnGpu(h0), OnGpu(w), bias ? OnGpu(b) : b, reverse, gmask);
      for (int i = 0; i < 3; ++i) ExpectSameOnGpu(c[i], g[i], 1e-5f);
      const Tensor dhs = RandomTensor({T, N, H}, -1.f, 1.f, 75);
      const Tensor dhT = bias ? RandomTensor({N, H}, -1.f, 1.f, 76) : Tensor();
      auto cb = GRUBackward(dhs, dhT, c[1], c[2], c[0], h0, w, bias, reverse, mask);
      auto gb = GRUBackward(OnGpu(dhs), bias ? OnGpu(dhT) : dhT, g[1], g[2], g[0], OnGpu(h0),
                            OnGpu(w), bias, reverse, gmask);
      for (int i = 0; i < (bias ? 4 : 3); ++i) ExpectSameOnGpu(cb[i], gb[i], 1e-4f);
    }
}

TEST(CudaRnn, PlainRnnForwardBackwardMatchTheHost) {
  SINGA_REQUIRE_GPU();
  const size_t T = 6, N = 5, H = 33;
  for (bool relu : {false, true})
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::string(relu ? "relu" : "tanh") + (reverse ? ", reverse" : ""));
      const Tensor gx = RandomTensor({T, N, H}, -2.f, 2.f, 81);
      const Tensor h0 = RandomTensor({N, H}, -1.f, 1.f, 82);
      const Tensor w = RandomTensor({H, H}, -0.3f, 0.3f, 83);
      const Tensor b = RandomTensor({H}, -0.5f, 0.5f, 84);
      const Tensor mask = LengthMask(T, {6, 3, 1, 6, 2});
      auto c = RNNForward(gx, h0, w, b, relu, reverse, mask);
      auto g = RNNForward(OnGpu(gx), OnGpu(h0), OnGpu(w), OnGpu(b), relu, reverse, OnGpu(mask));
      ExpectSameOnGpu(c[0], g[0], 1e-5f);
      const Tensor dhs = RandomTensor({T, N, H}, -1.f, 1.f, 85);
      auto cb = RNNBackward(dhs, Tensor(), c[0], h0, w, true, relu, reverse, mask);
      auto gb = RNNBackward(OnGpu(dhs), Tensor(), g[0], OnGpu(h0), OnGpu(w), true, relu, reverse,
                            OnGpu(mask));
      for (int i = 0; i < 4; ++i) ExpectSameOnGpu(cb[i], gb[i], 1e-4f);
    }
}

}  // namespace
}  // namespace singa
