// The recurrent layers on the oneDNN backend: the host kernels' walk (cpu/rnn.cc) with its
// products through oneDNN's sgemm when the process chose oneDNN for products
// (singa/ops/gemm_backend.h), else the reference kernels as they are (OpenBLAS). Not oneDNN's
// own RNN primitives: they want the whole layer's input (their own x W_ih), while ours arrives
// projected (one product over all steps, shared with the composed cells and the CUDA path), and
// the same walk keeps every host backend's numbers within a product's rounding of each other.
#include "../rnn_kernels.h"
#include "singa/ops/gemm_backend.h"
#include "sgemm.h"

namespace singa {
namespace dnnl_kernel {
namespace {

void Products(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
              const float* b, int ldb, float beta, float* c, int ldc) {
  CheckStatus(Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), "recurrent layer", m,
              n, k);
}

// The walk `with` (cpu/rnn.cc) with oneDNN's products, or the reference kernel of `slot`.
template <void (*with)(const RnnArgs&, cpu::RowSgemm)>
void Run(const RnnArgs& a, Context* ctx, KernelSlot<void(const RnnArgs&, Context*)>& slot) {
  if (SelectedGemmLib() != GemmLib::kDnnl) {
    slot.Get(Backend::kCpuRef)(a, ctx);
    return;
  }
  NoteGemmRan(GemmLib::kDnnl);
  with(a, &Products);
}

void LstmForward(const RnnArgs& a, Context* ctx) {
  Run<&cpu::LstmForwardWith>(a, ctx, LSTMForwardKernel());
}
void LstmBackward(const RnnArgs& a, Context* ctx) {
  Run<&cpu::LstmBackwardWith>(a, ctx, LSTMBackwardKernel());
}
void GruForward(const RnnArgs& a, Context* ctx) {
  Run<&cpu::GruForwardWith>(a, ctx, GRUForwardKernel());
}
void GruBackward(const RnnArgs& a, Context* ctx) {
  Run<&cpu::GruBackwardWith>(a, ctx, GRUBackwardKernel());
}
void RnnForward(const RnnArgs& a, Context* ctx) {
  Run<&cpu::RnnForwardWith>(a, ctx, RNNForwardKernel());
}
void RnnBackward(const RnnArgs& a, Context* ctx) {
  Run<&cpu::RnnBackwardWith>(a, ctx, RNNBackwardKernel());
}

}  // namespace

SINGA_REGISTER_KERNEL(LSTMForward, kCpuDnnl, &LstmForward);
SINGA_REGISTER_KERNEL(LSTMBackward, kCpuDnnl, &LstmBackward);
SINGA_REGISTER_KERNEL(GRUForward, kCpuDnnl, &GruForward);
SINGA_REGISTER_KERNEL(GRUBackward, kCpuDnnl, &GruBackward);
SINGA_REGISTER_KERNEL(RNNForward, kCpuDnnl, &RnnForward);
SINGA_REGISTER_KERNEL(RNNBackward, kCpuDnnl, &RnnBackward);

}  // namespace dnnl_kernel
}  // namespace singa
