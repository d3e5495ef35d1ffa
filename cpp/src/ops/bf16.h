// bf16.h (private): where bfloat16 math runs natively and how the other ops reach it.
//
//   if (x.data_type() == kBFloat16 && !Bf16Native("Conv2d", *x.device()))
//     return ViaFloat32(...);            // convert -> the float32 op -> round to bfloat16
//
// Native bfloat16 (inputs bf16, products accumulated in float32 as oneDNN does) runs on a CPU
// device with the oneDNN backend: convolution, matrix products. It needs AVX512_BF16 (AMX is
// used when present): on a CPU without it Bf16Native throws NotImplementedError naming the
// instruction set (oneDNN would otherwise emulate bf16 several times slower than float32).
// Elementwise ops and reductions compute in float on every backend (their own loops); so do the
// CPU's batch norm and pooling kernels (Bf16ViaFloat32); everything else goes through float32
// and rounds its outputs once.
#pragma once

#include "singa/core/device.h"
#include "singa/core/tensor.h"
#include "kernel_slots.h"

namespace singa {

/// True when `op` runs natively in bfloat16 on dev (CPU + oneDNN + AVX512_BF16); false on the
/// reference backend and CUDA (the caller goes through float32); throws NotImplementedError on a
/// oneDNN device whose CPU lacks avx512_bf16.
bool Bf16Native(const char* op, const Device& dev);
/// Whether a bfloat16 activation x of batch norm or pooling goes through float32 (rounded once):
/// on CUDA devices. The CPU kernels (reference and oneDNN) read and write bfloat16 themselves.
bool Bf16ViaFloat32(const Tensor& x);
/// t as float32 (t itself when it is not bfloat16; an empty tensor stays empty).
Tensor ToFloat32(const Tensor& t);
/// t rounded to bfloat16.
Tensor ToBFloat16(const Tensor& t);

/// Matrix products of bfloat16 a, b into bfloat16 c (the BatchedGemm layout; batch may be empty),
/// accumulated in float32. kCpuDnnl: oneDNN's matmul; kCpuRef: float32 copies + sgemm.
SINGA_KERNEL_SLOT_DECL(GemmBf16, void(const BatchedGemmArgs& g, Context* ctx));
/// The offsets (in elements) of batch entry i's matrices in a and b.
inline void BatchOffsets(const BatchedGemmArgs& g, size_t i, std::ptrdiff_t* oa,
                         std::ptrdiff_t* ob) {
  *oa = *ob = 0;
  for (size_t d = g.batch.size(); d-- > 0;) {
    const size_t idx = i % g.batch[d];
    i /= g.batch[d];
    *oa += std::ptrdiff_t(idx) * g.a.stride()[d];
    *ob += std::ptrdiff_t(idx) * g.b.stride()[d];
  }
}

}  // namespace singa
