// The recurrent layers on the GPU (kCuda; front: ../rnn.cc; host kernels: ../cpu/rnn.cc,
// the same walk): per step one cuBLAS product and one pointwise kernel (rnn_kernels.h's cell
// functions, the host's, compiled for the device), all on the device's stream; dW_hh as two
// products over all steps and db_hh as column sums at the end (WeightGrads).
#include "../rnn_kernels.h"
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

// Row-major C(m, n) = alpha op(A) op(B) + beta C through column-major cuBLAS (blas.cc's swap).
void RowGemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha,
             const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc,
             const char* what) {
  if (m == 0 || n == 0) return;
  SINGA_CUBLAS_CHECK(cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc),
                     what);
}

__global__ void AddBias(const float* x, const float* b, float* g, int64_t N, int64_t G) {
  SINGA_GRID_STRIDE(i, N * G) { g[i] = b ? x[i] + b[i % G] : x[i]; }
}

// mask: this step's (N,) of the (T, N) mask, or null; 0: past the sequence's end (cpu/rnn.cc).
__device__ inline bool Past(const float* mask, int64_t n) { return mask && mask[n] == 0.f; }

__global__ void CellsForward(float* g, const float* c_prev, const float* h_prev, float* c,
                             float* h, const float* mask, int64_t N, int64_t H) {
  SINGA_GRID_STRIDE(i, N * H) {
    float* gi = g + (i / H) * 4 * H + i % H;
    const rnn_cell::LstmCell r = rnn_cell::LstmStep(gi[0], gi[H], gi[2 * H], gi[3 * H], c_prev[i]);
    gi[0] = r.i;
    gi[H] = r.f;
    gi[2 * H] = r.g;
    gi[3 * H] = r.o;
    const bool past = Past(mask, i / H);
    c[i] = past ? c_prev[i] : r.c;
    h[i] = past ? h_prev[i] : r.h;
  }
}

// dh holds the gradient reaching h_t from the next step; it leaves as the part of h_{t-1}'s that
// the product after this kernel does not add (all of it past the end, else 0).
__global__ void CellsBackward(const float* act, float* dg, const float* c, const float* c_prev,
                              const float* dhs, float* dh, float* dc, const float* mask,
                              int64_t N, int64_t H) {
  SINGA_GRID_STRIDE(i, N * H) {
    const int64_t at = (i / H) * 4 * H + i % H;
    float* d = dg + at;
    if (Past(mask, i / H)) {
      d[0] = d[H] = d[2 * H] = d[3 * H] = 0.f;
      dh[i] += dhs[i];
      continue;
    }
    const float* a = act + at;
    const rnn_cell::LstmGrad r = rnn_cell::LstmStepGrad(a[0], a[H], a[2 * H], a[3 * H], c[i],
                                                        c_prev[i], dhs[i] + dh[i], dc[i]);
    d[0] = r.di;
    d[H] = r.df;
    d[2 * H] = r.dg;
    d[3 * H] = r.d_o;
    dc[i] = r.dc_prev;
    dh[i] = 0.f;
  }
}

__global__ void BiasRows(const float* b, float* g, int64_t N, int64_t G) {
  SINGA_GRID_STRIDE(i, N * G) { g[i] = b ? b[i % G] : 0.f; }
}

__global__ void GruCellsForward(const float* x, const float* gh, const float* h_prev,
                                float* gates, float* hn, float* h, const float* mask, int64_t N,
                                int64_t H) {
  SINGA_GRID_STRIDE(i, N * H) {
    const int64_t row = (i / H) * 3 * H, k = i % H;
    const float *xr = x + row, *g = gh + row;
    const rnn_cell::GruCell c =
        rnn_cell::GruStep(xr[k], xr[H + k], xr[2 * H + k], g[k], g[H + k], g[2 * H + k],
                          h_prev[i]);
    gates[row + k] = c.r;
    gates[row + H + k] = c.z;
    gates[row + 2 * H + k] = c.n;
    hn[i] = g[2 * H + k];
    h[i] = Past(mask, i / H) ? h_prev[i] : c.h;
  }
}

__global__ void GruCellsBackward(const float* gates, const float* hn, const float* h_prev,
                                 const float* dhs, float* dh, float* dgx, float* dgh,
                                 const float* mask, int64_t N, int64_t H) {
  SINGA_GRID_STRIDE(i, N * H) {
    const int64_t row = (i / H) * 3 * H, k = i % H;
    if (Past(mask, i / H)) {
      dgx[row + k] = dgx[row + H + k] = dgx[row + 2 * H + k] = 0.f;
      dgh[row + k] = dgh[row + H + k] = dgh[row + 2 * H + k] = 0.f;
      dh[i] += dhs[i];
      continue;
    }
    const float* a = gates + row;
    const rnn_cell::GruGrad g =
        rnn_cell::GruStepGrad(a[k], a[H + k], a[2 * H + k], hn[i], h_prev[i], dhs[i] + dh[i]);
    dgx[row + k] = dgh[row + k] = g.dr;
    dgx[row + H + k] = dgh[row + H + k] = g.dz;
    dgx[row + 2 * H + k] = g.dn;
    dgh[row + 2 * H + k] = g.dhn;
    dh[i] = g.dh_prev;
  }
}

__global__ void PlainForward(const float* x, const float* b, float* h, int64_t N, int64_t H) {
  SINGA_GRID_STRIDE(i, N * H) { h[i] = b ? x[i] + b[i % H] : x[i]; }
}

__global__ void PlainActivate(float* h, const float* h_prev, const float* mask, int64_t N,
                              int64_t H, bool relu) {
  SINGA_GRID_STRIDE(i, N * H) {
    h[i] = Past(mask, i / H) ? h_prev[i] : rnn_cell::PlainAct(h[i], relu);
  }
}

__global__ void PlainBackward(const float* h, const float* dhs, float* dh, float* dg,
                              const float* mask, int64_t N, int64_t H, bool relu) {
  SINGA_GRID_STRIDE(i, N * H) {
    if (Past(mask, i / H)) {
      dg[i] = 0.f;
      dh[i] += dhs[i];
    } else {
      dg[i] = rnn_cell::PlainGrad(h[i], dhs[i] + dh[i], relu);
      dh[i] = 0.f;
    }
  }
}

// db = the column sums of the (rows, cols) gate gradients, a strip block per kStripCols columns.
__global__ void __launch_bounds__(kStripCols * kStripLanes)
    ColumnSums(const float* x, float* out, int64_t rows, int64_t cols) {
  __shared__ float smem[kStripLanes * kStripCols];
  for (int64_t s = blockIdx.x; s < Strips(cols); s += gridDim.x) {  // the same for the block
    const int64_t j = s * kStripCols + threadIdx.x;
    float acc = 0.f;
    if (j < cols)
      for (int64_t r = threadIdx.y; r < rows; r += kStripLanes) acc += x[r * cols + j];
    acc = StripReduce(acc, SumMerge{}, smem);
    if (threadIdx.y == 0 && j < cols) out[j] = acc;
  }
}

// Step t's row of the (T, N) mask, or null without one.
const float* StepMask(const RnnArgs& a, int64_t t) {
  return a.mask.empty() ? nullptr : DevPtr<const float>(a.mask) + t * a.N;
}

// A carried gradient's start: the incoming final-state gradient, or zeros without one.
void StartState(float* dst, const Tensor& from, int64_t n, cudaStream_t st, const char* op) {
  const size_t bytes = sizeof(float) * size_t(n);
  if (from.empty())
    SINGA_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, st), op);
  else
    SINGA_CUDA_CHECK(
        cudaMemcpyAsync(dst, DevPtr<const float>(from), bytes, cudaMemcpyDeviceToDevice, st), op);
}

// dW_hh = sum over steps of h_{t-1}^T dG_t (two products: h0's rows and hs's, cpu/rnn.cc's
// WeightGrads) and db_hh = the column sums of dG (T, N, G).
void WeightGrads(const RnnArgs& a, int64_t G, const float* dG, Context* ctx, const char* op) {
  const int64_t N = a.N, H = a.H, T = a.T;
  const cudaStream_t st = Stream(ctx);
  float* dw = MutDevPtr<float>(a.dw);
  const float* hs = DevPtr<const float>(a.hs);
  SINGA_CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(float) * size_t(H * G), st), op);
  if (N > 0) {
    RowGemm(Cublas(ctx), true, false, int(H), int(G), int(N), 1.f, DevPtr<const float>(a.h0),
            int(H), dG + a.Step(0) * N * G, int(G), 1.f, dw, int(G), op);
    if (T > 1)
      RowGemm(Cublas(ctx), true, false, int(H), int(G), int((T - 1) * N), 1.f,
              a.reverse ? hs + N * H : hs, int(H), a.reverse ? dG : dG + N * G, int(G), 1.f, dw,
              int(G), op);
  }
  if (!a.db.empty()) {
    ColumnSums<<<UnitBlocks(Strips(G)), dim3(kStripCols, kStripLanes), 0, st>>>(
        dG, MutDevPtr<float>(a.db), T * N, G);
    SINGA_CUDA_CHECK_LAUNCH(op);
  }
}

void LstmForward(const RnnArgs& a, Context* ctx) {
  const int64_t N = a.N, H = a.H, G = 4 * H, T = a.T;
  const cudaStream_t st = Stream(ctx);
  const float *gx = DevPtr<const float>(a.gx), *w = DevPtr<const float>(a.w);
  const float* b = a.b.empty() ? nullptr : DevPtr<const float>(a.b);
  float *hs = MutDevPtr<float>(a.hs), *cs = MutDevPtr<float>(a.cs);
  float* gates = MutDevPtr<float>(a.gates);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = a.Step(s);
    const float* hp = s == 0 ? DevPtr<const float>(a.h0) : hs + a.Step(s - 1) * N * H;
    const float* cp = s == 0 ? DevPtr<const float>(a.c0) : cs + a.Step(s - 1) * N * H;
    float* g = gates + t * N * G;
    AddBias<<<Blocks(size_t(N * G)), kThreads, 0, st>>>(gx + t * N * G, b, g, N, G);
    SINGA_CUDA_CHECK_LAUNCH("LSTMForward");
    RowGemm(Cublas(ctx), false, false, int(N), int(G), int(H), 1.f, hp, int(H), w, int(G), 1.f, g,
            int(G), "LSTMForward");
    CellsForward<<<Blocks(size_t(N * H)), kThreads, 0, st>>>(
        g, cp, hp, cs + t * N * H, hs + t * N * H, StepMask(a, t), N, H);
    SINGA_CUDA_CHECK_LAUNCH("LSTMForward");
  }
}

void LstmBackward(const RnnArgs& a, Context* ctx) {
  const int64_t N = a.N, H = a.H, G = 4 * H, T = a.T;
  const cudaStream_t st = Stream(ctx);
  const float *gates = DevPtr<const float>(a.gates), *cs = DevPtr<const float>(a.cs);
  const float *dhs = DevPtr<const float>(a.dhs), *c0 = DevPtr<const float>(a.c0);
  const float* w = DevPtr<const float>(a.w);
  float *dgx = MutDevPtr<float>(a.dgx), *dh = MutDevPtr<float>(a.dh0);
  float* dc = MutDevPtr<float>(a.dc0);
  StartState(dh, a.dhT, N * H, st, "LSTMBackward");
  StartState(dc, a.dcT, N * H, st, "LSTMBackward");
  for (int64_t p = T - 1; p >= 0; --p) {
    const int64_t t = a.Step(p);
    const float* cp = p == 0 ? c0 : cs + a.Step(p - 1) * N * H;
    float* dg = dgx + t * N * G;
    if (N > 0) {
      CellsBackward<<<Blocks(size_t(N * H)), kThreads, 0, st>>>(
          gates + t * N * G, dg, cs + t * N * H, cp, dhs + t * N * H, dh, dc, StepMask(a, t), N,
          H);
      SINGA_CUDA_CHECK_LAUNCH("LSTMBackward");
    }
    RowGemm(Cublas(ctx), false, true, int(N), int(H), int(G), 1.f, dg, int(G), w, int(G), 1.f, dh,
            int(H), "LSTMBackward");
  }
  WeightGrads(a, G, dgx, ctx, "LSTMBackward");
}

void GruForward(const RnnArgs& a, Context* ctx) {
  const int64_t N = a.N, H = a.H, G = 3 * H, T = a.T;
  const cudaStream_t st = Stream(ctx);
  const float *gx = DevPtr<const float>(a.gx), *w = DevPtr<const float>(a.w);
  const float* b = a.b.empty() ? nullptr : DevPtr<const float>(a.b);
  float *hs = MutDevPtr<float>(a.hs), *gates = MutDevPtr<float>(a.gates);
  float *ghn = MutDevPtr<float>(a.ghn), *gh = MutDevPtr<float>(a.gh);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = a.Step(s);
    const float* hp = s == 0 ? DevPtr<const float>(a.h0) : hs + a.Step(s - 1) * N * H;
    BiasRows<<<Blocks(size_t(N * G)), kThreads, 0, st>>>(b, gh, N, G);
    SINGA_CUDA_CHECK_LAUNCH("GRUForward");
    RowGemm(Cublas(ctx), false, false, int(N), int(G), int(H), 1.f, hp, int(H), w, int(G), 1.f,
            gh, int(G), "GRUForward");
    GruCellsForward<<<Blocks(size_t(N * H)), kThreads, 0, st>>>(
        gx + t * N * G, gh, hp, gates + t * N * G, ghn + t * N * H, hs + t * N * H,
        StepMask(a, t), N, H);
    SINGA_CUDA_CHECK_LAUNCH("GRUForward");
  }
}

void GruBackward(const RnnArgs& a, Context* ctx) {
  const int64_t N = a.N, H = a.H, G = 3 * H, T = a.T;
  const cudaStream_t st = Stream(ctx);
  const float *gates = DevPtr<const float>(a.gates), *ghn = DevPtr<const float>(a.ghn);
  const float *hs = DevPtr<const float>(a.hs), *dhs = DevPtr<const float>(a.dhs);
  const float *h0 = DevPtr<const float>(a.h0), *w = DevPtr<const float>(a.w);
  float *dgx = MutDevPtr<float>(a.dgx), *dgh = MutDevPtr<float>(a.dgh);
  float* dh = MutDevPtr<float>(a.dh0);
  StartState(dh, a.dhT, N * H, st, "GRUBackward");
  for (int64_t p = T - 1; p >= 0; --p) {
    const int64_t t = a.Step(p);
    const float* hp = p == 0 ? h0 : hs + a.Step(p - 1) * N * H;
    if (N > 0) {
      GruCellsBackward<<<Blocks(size_t(N * H)), kThreads, 0, st>>>(
          gates + t * N * G, ghn + t * N * H, hp, dhs + t * N * H, dh, dgx + t * N * G,
          dgh + t * N * G, StepMask(a, t), N, H);
      SINGA_CUDA_CHECK_LAUNCH("GRUBackward");
    }
    RowGemm(Cublas(ctx), false, true, int(N), int(H), int(G), 1.f, dgh + t * N * G, int(G), w,
            int(G), 1.f, dh, int(H), "GRUBackward");
  }
  WeightGrads(a, G, dgh, ctx, "GRUBackward");
}

void RnnForward(const RnnArgs& a, Context* ctx) {
  const int64_t N = a.N, H = a.H, T = a.T;
  const cudaStream_t st = Stream(ctx);
  const float *gx = DevPtr<const float>(a.gx), *w = DevPtr<const float>(a.w);
  const float* b = a.b.empty() ? nullptr : DevPtr<const float>(a.b);
  float* hs = MutDevPtr<float>(a.hs);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = a.Step(s);
    const float* hp = s == 0 ? DevPtr<const float>(a.h0) : hs + a.Step(s - 1) * N * H;
    float* ht = hs + t * N * H;
    PlainForward<<<Blocks(size_t(N * H)), kThreads, 0, st>>>(gx + t * N * H, b, ht, N, H);
    SINGA_CUDA_CHECK_LAUNCH("RNNForward");
    RowGemm(Cublas(ctx), false, false, int(N), int(H), int(H), 1.f, hp, int(H), w, int(H), 1.f,
            ht, int(H), "RNNForward");
    PlainActivate<<<Blocks(size_t(N * H)), kThreads, 0, st>>>(ht, hp, StepMask(a, t), N, H,
                                                              a.relu);
    SINGA_CUDA_CHECK_LAUNCH("RNNForward");
  }
}

void RnnBackward(const RnnArgs& a, Context* ctx) {
  const int64_t N = a.N, H = a.H, T = a.T;
  const cudaStream_t st = Stream(ctx);
  const float *hs = DevPtr<const float>(a.hs), *dhs = DevPtr<const float>(a.dhs);
  const float* w = DevPtr<const float>(a.w);
  float *dgx = MutDevPtr<float>(a.dgx), *dh = MutDevPtr<float>(a.dh0);
  StartState(dh, a.dhT, N * H, st, "RNNBackward");
  for (int64_t p = T - 1; p >= 0; --p) {
    const int64_t t = a.Step(p);
    if (N > 0) {
      PlainBackward<<<Blocks(size_t(N * H)), kThreads, 0, st>>>(
          hs + t * N * H, dhs + t * N * H, dh, dgx + t * N * H, StepMask(a, t), N, H, a.relu);
      SINGA_CUDA_CHECK_LAUNCH("RNNBackward");
    }
    RowGemm(Cublas(ctx), false, true, int(N), int(H), int(H), 1.f, dgx + t * N * H, int(H), w,
            int(H), 1.f, dh, int(H), "RNNBackward");
  }
  WeightGrads(a, H, dgx, ctx, "RNNBackward");
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(LSTMForward, kCuda, &cuda::LstmForward);
SINGA_REGISTER_KERNEL(LSTMBackward, kCuda, &cuda::LstmBackward);
SINGA_REGISTER_KERNEL(GRUForward, kCuda, &cuda::GruForward);
SINGA_REGISTER_KERNEL(GRUBackward, kCuda, &cuda::GruBackward);
SINGA_REGISTER_KERNEL(RNNForward, kCuda, &cuda::RnnForward);
SINGA_REGISTER_KERNEL(RNNBackward, kCuda, &cuda::RnnBackward);

}  // namespace singa
