// The LSTM and GRU layer ops of singa/ops/rnn.h on the host's default backend against plain C++
// references: one step against the cells' equations, reverse against a flipped sequence, the
// backward's batched dW_hh / db_hh against their per-step definitions; errors and NaN. (Python:
// tests/python/test_rnn_layer_ops.py, finite differences and the layers.)
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "test_helpers.h"

using namespace singa;
using singa_test::FromVector;

namespace {

std::vector<float> Values(size_t n, float scale, unsigned seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * float(i) + float(seed));
  return v;
}

std::vector<float> ToVec(const Tensor& t) { return t.ToVector<float>(); }

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(Rnn, OneStepIsTheLstmCell) {
  const size_t N = 2, H = 3, G = 4 * H;
  const auto gx = Values(N * G, 1.5f, 1), h0 = Values(N * H, 1.f, 2), c0 = Values(N * H, 1.f, 3);
  const auto w = Values(H * G, 0.5f, 4), b = Values(G, 0.3f, 5);
  auto r = LSTMForward(FromVector(gx, {1, N, G}), FromVector(h0, {N, H}), FromVector(c0, {N, H}),
                       FromVector(w, {H, G}), FromVector(b, {G}), false);
  const auto hs = ToVec(r[0]), cs = ToVec(r[1]), gates = ToVec(r[2]);
  for (size_t n = 0; n < N; ++n)
    for (size_t k = 0; k < H; ++k) {
      double a[4];
      for (size_t q = 0; q < 4; ++q) {
        const size_t j = q * H + k;
        a[q] = gx[n * G + j] + b[j];
        for (size_t m = 0; m < H; ++m) a[q] += double(h0[n * H + m]) * w[m * G + j];
      }
      const double i = Sigmoid(a[0]), f = Sigmoid(a[1]), g = std::tanh(a[2]), o = Sigmoid(a[3]);
      const double c = f * c0[n * H + k] + i * g;
      EXPECT_NEAR(cs[n * H + k], c, 1e-5);
      EXPECT_NEAR(hs[n * H + k], o * std::tanh(c), 1e-5);
      EXPECT_NEAR(gates[n * G + 2 * H + k], g, 1e-6);
      EXPECT_NEAR(gates[n * G + 3 * H + k], o, 1e-6);
    }
}

TEST(Rnn, GruOneStepIsTheCell) {
  const size_t N = 2, H = 3, G = 3 * H;
  const auto gx = Values(N * G, 1.5f, 21), h0 = Values(N * H, 1.f, 22);
  const auto w = Values(H * G, 0.5f, 23), b = Values(G, 0.3f, 24);
  auto r = GRUForward(FromVector(gx, {1, N, G}), FromVector(h0, {N, H}), FromVector(w, {H, G}),
                      FromVector(b, {G}), false);
  const auto hs = ToVec(r[0]), ghn = ToVec(r[2]);
  for (size_t n = 0; n < N; ++n)
    for (size_t k = 0; k < H; ++k) {
      double gh[3];
      for (size_t q = 0; q < 3; ++q) {
        gh[q] = b[q * H + k];
        for (size_t m = 0; m < H; ++m) gh[q] += double(h0[n * H + m]) * w[m * G + q * H + k];
      }
      const double rr = Sigmoid(gx[n * G + k] + gh[0]), z = Sigmoid(gx[n * G + H + k] + gh[1]);
      const double nn = std::tanh(gx[n * G + 2 * H + k] + rr * gh[2]);
      EXPECT_NEAR(hs[n * H + k], nn + z * (h0[n * H + k] - nn), 1e-5);
      EXPECT_NEAR(ghn[n * H + k], gh[2], 1e-5);
    }
}

TEST(Rnn, PlainRnnStepsAreTanhOrReluOfTheSum) {
  const size_t T = 2, N = 2, H = 3;
  const auto gx = Values(T * N * H, 1.5f, 31), h0 = Values(N * H, 1.f, 32);
  const auto w = Values(H * H, 0.5f, 33), b = Values(H, 0.3f, 34);
  for (bool relu : {false, true}) {
    auto r = RNNForward(FromVector(gx, {T, N, H}), FromVector(h0, {N, H}), FromVector(w, {H, H}),
                        FromVector(b, {H}), relu, false);
    const auto hs = ToVec(r[0]);
    std::vector<double> h(h0.begin(), h0.end());
    for (size_t t = 0; t < T; ++t) {
      std::vector<double> next(N * H);
      for (size_t n = 0; n < N; ++n)
        for (size_t k = 0; k < H; ++k) {
          double a = gx[(t * N + n) * H + k] + b[k];
          for (size_t m = 0; m < H; ++m) a += h[n * H + m] * w[m * H + k];
          next[n * H + k] = relu ? std::max(a, 0.0) : std::tanh(a);
          EXPECT_NEAR(hs[(t * N + n) * H + k], next[n * H + k], 1e-5) << relu << " t " << t;
        }
      h = next;
    }
  }
}

TEST(Rnn, ReverseIsTheForwardOfTheFlippedSequence) {
  const size_t T = 4, N = 3, H = 5, G = 4 * H;
  const auto gx = Values(T * N * G, 1.f, 6);
  std::vector<float> flipped(gx.size());
  for (size_t t = 0; t < T; ++t)
    std::copy(gx.begin() + t * N * G, gx.begin() + (t + 1) * N * G,
              flipped.begin() + (T - 1 - t) * N * G);
  const Tensor h0 = FromVector(Values(N * H, 1.f, 7), {N, H});
  const Tensor c0 = FromVector(Values(N * H, 1.f, 8), {N, H});
  const Tensor w = FromVector(Values(H * G, 0.4f, 9), {H, G});
  auto rev = LSTMForward(FromVector(gx, {T, N, G}), h0, c0, w, Tensor(), true);
  auto fwd = LSTMForward(FromVector(flipped, {T, N, G}), h0, c0, w, Tensor(), false);
  const auto a = ToVec(rev[0]), b = ToVec(fwd[0]);
  for (size_t t = 0; t < T; ++t)
    for (size_t i = 0; i < N * H; ++i)
      EXPECT_FLOAT_EQ(a[t * N * H + i], b[(T - 1 - t) * N * H + i]) << "step " << t;
}

// dW_hh = sum over steps of h_{t-1}^T dG_t and db_hh = sum of dG, with h_{t-1} the state before
// step t in the direction's order (h0 for the first): the backward's two batched products.
TEST(Rnn, BackwardWeightGradientsSumOverTheStepsInEitherDirection) {
  const size_t T = 5, N = 2, H = 3, G = 4 * H;
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    const Tensor gx = FromVector(Values(T * N * G, 1.f, 10), {T, N, G});
    const auto h0v = Values(N * H, 1.f, 11);
    const Tensor h0 = FromVector(h0v, {N, H}), c0 = FromVector(Values(N * H, 1.f, 12), {N, H});
    const Tensor w = FromVector(Values(H * G, 0.4f, 13), {H, G});
    auto f = LSTMForward(gx, h0, c0, w, FromVector(Values(G, 0.2f, 14), {G}), reverse);
    const Tensor dhs = FromVector(Values(T * N * H, 1.f, 15), {T, N, H});
    const Tensor dcT = FromVector(Values(N * H, 1.f, 16), {N, H});
    auto g = LSTMBackward(dhs, Tensor(), dcT, f[2], f[0], f[1], h0, c0, w, true, reverse);
    const auto dgx = ToVec(g[0]), dw = ToVec(g[3]), db = ToVec(g[4]), hs = ToVec(f[0]);
    std::vector<double> want_w(H * G, 0.0), want_b(G, 0.0);
    for (size_t s = 0; s < T; ++s) {
      const size_t t = reverse ? T - 1 - s : s;
      for (size_t n = 0; n < N; ++n)
        for (size_t j = 0; j < G; ++j) {
          const double d = dgx[(t * N + n) * G + j];
          want_b[j] += d;
          for (size_t m = 0; m < H; ++m) {
            const size_t prev = reverse ? t + 1 : t - 1;
            const double h = s == 0 ? h0v[n * H + m] : hs[(prev * N + n) * H + m];
            want_w[m * G + j] += h * d;
          }
        }
    }
    for (size_t i = 0; i < H * G; ++i) EXPECT_NEAR(dw[i], want_w[i], 1e-5) << "dw " << i;
    for (size_t j = 0; j < G; ++j) EXPECT_NEAR(db[j], want_b[j], 1e-5) << "db " << j;
    EXPECT_EQ(g[1].shape(), (Shape{N, H}));
    EXPECT_EQ(g[2].shape(), (Shape{N, H}));
  }
}

// Past a sequence's end (mask 0) the states are carried: a sequence of length 1 keeps step 0's
// h and c; its backward passes the gradients of the carried steps to step 0 unchanged.
TEST(Rnn, MaskedStepsCarryTheStates) {
  const size_t T = 3, N = 2, H = 2, G = 4 * H;
  const Tensor gx = FromVector(Values(T * N * G, 1.f, 41), {T, N, G});
  const Tensor h0 = FromVector(Values(N * H, 1.f, 42), {N, H}), c0 = h0;
  const Tensor w = FromVector(Values(H * G, 0.4f, 43), {H, G});
  const Tensor mask = FromVector({1, 1, 1, 0, 1, 0}, {T, N});  // lengths 3 and 1
  auto f = LSTMForward(gx, h0, c0, w, Tensor(), false, mask);
  const auto hs = ToVec(f[0]), cs = ToVec(f[1]);
  for (size_t t = 1; t < T; ++t)
    for (size_t k = 0; k < H; ++k) {
      EXPECT_EQ(hs[(t * N + 1) * H + k], hs[(0 * N + 1) * H + k]) << t;
      EXPECT_EQ(cs[(t * N + 1) * H + k], cs[(0 * N + 1) * H + k]) << t;
    }
  auto unmasked = LSTMForward(gx, h0, c0, w, Tensor(), false);
  EXPECT_EQ(ToVec(unmasked[0])[(2 * N + 0) * H], hs[(2 * N + 0) * H]);  // sequence 0: all valid
  const Tensor dhT = FromVector({0, 0, 1, -1}, {N, H});  // only sequence 1's final h
  Tensor dhs({T, N, H});
  dhs.SetValue(0.f);
  auto g = LSTMBackward(dhs, dhT, Tensor(), f[2], f[0], f[1], h0, c0, w, false, false, mask);
  const auto dgx = ToVec(g[0]);
  for (size_t t = 1; t < T; ++t)
    for (size_t j = 0; j < G; ++j) EXPECT_EQ(dgx[(t * N + 1) * G + j], 0.f) << t;
  bool reached = false;  // step 0 of sequence 1 receives the gradient
  for (size_t j = 0; j < G; ++j) reached |= dgx[(0 * N + 1) * G + j] != 0.f;
  EXPECT_TRUE(reached);
}

TEST(Rnn, BadOperandsRaiseNamingTheOpAndShapes) {
  const Tensor gx({3, 2, 8}), h({2, 2}), w({2, 8});
  EXPECT_THROW(LSTMForward(Tensor({3, 2, 7}), h, h, w, Tensor(), false), ShapeError);
  EXPECT_THROW(LSTMForward(Tensor({0, 2, 8}), h, h, w, Tensor(), false), ShapeError);
  EXPECT_THROW(LSTMForward(gx, Tensor({3, 2}), h, w, Tensor(), false), ShapeError);
  EXPECT_THROW(LSTMForward(gx, h, h, w, Tensor({7}), false), ShapeError);
  EXPECT_THROW(LSTMForward(gx, h, h, Tensor({2, 8}, kInt), Tensor(), false), DTypeError);
  try {
    LSTMForward(gx, h, h, Tensor({8, 2}), Tensor(), false);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("LSTMForward"), std::string::npos) << m;
    EXPECT_NE(m.find("w_hh"), std::string::npos) << m;
  }
  auto f = LSTMForward(gx, h, h, w, Tensor(), false);
  EXPECT_THROW(LSTMBackward(Tensor({3, 2, 3}), Tensor(), Tensor(), f[2], f[0], f[1], h, h, w,
                            false, false),
               ShapeError);
  // a GRU takes 3 gates: the LSTM's 4-gate gx is refused, naming the op
  try {
    GRUForward(gx, h, Tensor({2, 6}), Tensor(), false);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("GRUForward"), std::string::npos) << e.what();
  }
}

TEST(Rnn, NaNInOneStepReachesEveryLaterStepAndNoEarlierOne) {
  const size_t T = 3, N = 1, H = 2, G = 4 * H;
  auto gx = Values(T * N * G, 1.f, 17);
  gx[1 * G] = std::numeric_limits<float>::quiet_NaN();  // step 1, gate i of h 0
  const Tensor h = FromVector(std::vector<float>(N * H, 0.f), {N, H});
  auto f = LSTMForward(FromVector(gx, {T, N, G}), h, h, FromVector(Values(H * G, 0.3f, 18), {H, G}),
                       Tensor(), false);
  const auto hs = ToVec(f[0]);
  EXPECT_FALSE(std::isnan(hs[0]) || std::isnan(hs[1]));
  EXPECT_TRUE(std::isnan(hs[2]));
  EXPECT_TRUE(std::isnan(hs[4]) && std::isnan(hs[5]));  // through w_hh to every unit
}

}  // namespace
