// The LSTM layer on the oneDNN backend: the host kernels' walk (cpu/rnn.cc) with its products
// through oneDNN's sgemm when the process chose oneDNN for products (singa/ops/gemm_backend.h),
// else the reference kernels as they are (OpenBLAS). Not oneDNN's own LSTM primitive: it wants
// the whole layer's input (its own x W_ih), while ours arrives projected (one product over all
// steps, shared with the composed cell and the CUDA path), and the same walk keeps every host
// backend's numbers within a product's rounding of each other.
#include "../rnn_kernels.h"
#include "singa/ops/gemm_backend.h"
#include "sgemm.h"

namespace singa {
namespace dnnl_kernel {
namespace {

void Products(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
              const float* b, int ldb, float beta, float* c, int ldc) {
  CheckStatus(Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), "LSTM", m, n, k);
}

void Forward(const LstmArgs& a, Context* ctx) {
  if (SelectedGemmLib() != GemmLib::kDnnl) {
    LSTMForwardKernel().Get(Backend::kCpuRef)(a, ctx);
    return;
  }
  NoteGemmRan(GemmLib::kDnnl);
  cpu::LstmForwardWith(a, &Products);
}

void Backward(const LstmArgs& a, Context* ctx) {
  if (SelectedGemmLib() != GemmLib::kDnnl) {
    LSTMBackwardKernel().Get(Backend::kCpuRef)(a, ctx);
    return;
  }
  NoteGemmRan(GemmLib::kDnnl);
  cpu::LstmBackwardWith(a, &Products);
}

}  // namespace

SINGA_REGISTER_KERNEL(LSTMForward, kCpuDnnl, &Forward);
SINGA_REGISTER_KERNEL(LSTMBackward, kCpuDnnl, &Backward);

}  // namespace dnnl_kernel
}  // namespace singa
