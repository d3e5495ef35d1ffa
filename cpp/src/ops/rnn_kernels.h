// rnn_kernels.h (private): the kernel slots of singa/ops/rnn.h and the LSTM, GRU and plain cells'
// pointwise math, shared by the front (rnn.cc) and the kernels (cpu/rnn.cc, dnnl/rnn.cc,
// cuda/rnn.cu).
//
//   SINGA_REGISTER_KERNEL(LSTMForward, kCpuRef, &LstmForward);   // cpu/rnn.cc
//   auto* k = LSTMForwardKernel().For(*dev);  k(args, ctx);      // the front, inside Exec
//
// A kernel walks the steps itself: per step one product h_{t-1} w_hh, (N, H) x (H, G), then
// rnn_cell::LstmStep (GruStep, PlainAct) on every (n, h); the backward's per step pass is
// rnn_cell::LstmStepGrad (GruStepGrad, PlainGrad), then one product for dh_{t-1}; dW_hh and
// db_hh come at the end, from all steps at once.
#pragma once

#include <cstdint>

#include "kernel_slots.h"
#include "singa/core/host_device.h"
#include "singa/ops/elementwise_functors.h"

namespace singa {

/// The operands of one recurrent layer's forward or backward (singa/ops/rnn.h names them).
/// Every tensor is contiguous float32; b / db and dhT / dcT may be empty (absent, zeros); the
/// c's are the LSTM's; ghn (the GRU's saved h_{t-1} W_hn + b_hn) and the scratch tensors
/// (gh: one step's recurrent projections, forward; dgh: every step's gradient of them,
/// backward) the GRU's.
struct RnnArgs {
  Tensor gx, h0, c0, w, b;        // inputs of the forward
  Tensor hs, cs, gates, ghn;      // outputs of the forward, inputs of the backward
  Tensor dhs, dhT, dcT;           // incoming gradients
  Tensor dgx, dh0, dc0, dw, db;   // outputs of the backward
  Tensor gh, dgh;                 // scratch
  Tensor mask;                    // (T, N), 0 past a sequence's end, or empty
  int64_t T = 0, N = 0, H = 0;
  bool reverse = false;
  bool relu = false;  // the plain RNN's activation: max(x, 0), else tanh
  /// The step processed s-th (s = 0 .. T-1): T-1-s in reverse.
  SINGA_HOST_DEVICE int64_t Step(int64_t s) const { return reverse ? T - 1 - s : s; }
};
SINGA_KERNEL_SLOT_DECL(LSTMForward, void(const RnnArgs& a, Context* ctx));
SINGA_KERNEL_SLOT_DECL(LSTMBackward, void(const RnnArgs& a, Context* ctx));
SINGA_KERNEL_SLOT_DECL(GRUForward, void(const RnnArgs& a, Context* ctx));
SINGA_KERNEL_SLOT_DECL(GRUBackward, void(const RnnArgs& a, Context* ctx));
SINGA_KERNEL_SLOT_DECL(RNNForward, void(const RnnArgs& a, Context* ctx));
SINGA_KERNEL_SLOT_DECL(RNNBackward, void(const RnnArgs& a, Context* ctx));

namespace cpu {
/// Row-major C(m, n) = alpha op(A) op(B) + beta C on host pointers (leading dimensions given).
using RowSgemm = void (*)(bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                          int lda, const float* b, int ldb, float beta, float* c, int ldc);
/// The host kernels' walk over the steps, with the products through `gemm` (cpu/rnn.cc):
/// OpenBLAS for the reference backend, oneDNN's sgemm for the oneDNN one (dnnl/rnn.cc).
void LstmForwardWith(const RnnArgs& a, RowSgemm gemm);
void LstmBackwardWith(const RnnArgs& a, RowSgemm gemm);
void GruForwardWith(const RnnArgs& a, RowSgemm gemm);
void GruBackwardWith(const RnnArgs& a, RowSgemm gemm);
void RnnForwardWith(const RnnArgs& a, RowSgemm gemm);
void RnnBackwardWith(const RnnArgs& a, RowSgemm gemm);
}  // namespace cpu

namespace rnn_cell {

/// One cell (one n, one h) of a step: the activated gates, c_t and h_t.
struct LstmCell {
  float i, f, g, o, c, h;
};
/// From the pre-activations of gates i, f, g, o and c_{t-1}. Inlined into the host's loops over
/// h, which vectorise (cpu/rnn.cc); the CUDA kernels call it per thread.
SINGA_HOST_DEVICE SINGA_FN_INLINE LstmCell LstmStep(float ai, float af, float ag, float ao,
                                                   float c_prev) {
  LstmCell r;
  r.i = fn::SigmoidOf(ai);
  r.f = fn::SigmoidOf(af);
  r.g = fn::TanhOf(ag);
  r.o = fn::SigmoidOf(ao);
  r.c = r.f * c_prev + r.i * r.g;
  r.h = r.o * fn::TanhOf(r.c);
  return r;
}

/// The gradients of one cell: of the pre-activations of i, f, g, o and of c_{t-1}.
struct LstmGrad {
  float di, df, dg, d_o, dc_prev;
};
/// From the activated gates, c_t and c_{t-1}, the gradient dh reaching h_t (the output's and
/// the next step's) and dc reaching c_t from the next step.
SINGA_HOST_DEVICE SINGA_FN_INLINE LstmGrad LstmStepGrad(float i, float f, float g, float o,
                                                        float c, float c_prev, float dh,
                                                        float dc) {
  const float tc = fn::TanhOf(c);
  const float dct = dc + dh * o * (1.f - tc * tc);
  LstmGrad r;
  r.di = dct * g * i * (1.f - i);
  r.df = dct * c_prev * f * (1.f - f);
  r.dg = dct * i * (1.f - g * g);
  r.d_o = dh * tc * o * (1.f - o);
  r.dc_prev = dct * f;
  return r;
}

/// One GRU cell (cuDNN's and PyTorch's equations, gates r, z, n): the activated gates and h_t,
/// from the input projections x*, the recurrent ones h* (h_{t-1} W_h* + b_h*) and h_{t-1}:
/// r = sigmoid(xr + hr), z = sigmoid(xz + hz), n = tanh(xn + r * hn), h = n + z (h_{t-1} - n).
struct GruCell {
  float r, z, n, h;
};
SINGA_HOST_DEVICE SINGA_FN_INLINE GruCell GruStep(float xr, float xz, float xn, float hr,
                                                     float hz, float hn, float h_prev) {
  GruCell c;
  c.r = fn::SigmoidOf(xr + hr);
  c.z = fn::SigmoidOf(xz + hz);
  c.n = fn::TanhOf(xn + c.r * hn);
  c.h = c.n + c.z * (h_prev - c.n);
  return c;
}

/// The gradients of one GRU cell: of the pre-activations of r, z, n (which are also those of
/// hr, hz and of xn), of hn (dn * r) and the direct part of h_{t-1}'s (dh z).
struct GruGrad {
  float dr, dz, dn, dhn, dh_prev;
};
SINGA_HOST_DEVICE SINGA_FN_INLINE GruGrad GruStepGrad(float r, float z, float n, float hn,
                                                      float h_prev, float dh) {
  GruGrad g;
  g.dn = dh * (1.f - z) * (1.f - n * n);
  g.dz = dh * (h_prev - n) * z * (1.f - z);
  g.dr = g.dn * hn * r * (1.f - r);
  g.dhn = g.dn * r;
  g.dh_prev = dh * z;
  return g;
}

/// The plain RNN's activation (ReLU as the elementwise table's: NaN passes) and its gradient
/// from the output h (ReLU's: dh where the input was > 0, which is where h > 0 or h is NaN).
SINGA_HOST_DEVICE SINGA_FN_INLINE float PlainAct(float a, bool relu) {
  return relu ? (a <= 0.f ? 0.f : a) : fn::TanhOf(a);
}
SINGA_HOST_DEVICE SINGA_FN_INLINE float PlainGrad(float h, float dh, bool relu) {
  return relu ? (h <= 0.f ? 0.f : dh) : dh * (1.f - h * h);
}

}  // namespace rnn_cell
}  // namespace singa
