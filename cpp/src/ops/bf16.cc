// Where bfloat16 math runs (bf16.h).
#include "bf16.h"

#include <string>

#include "singa/core/cpu_features.h"
#include "singa/core/kernel.h"

namespace singa {

bool Bf16Native(const char* op, const Device& dev) {
  if (DeviceBackend(dev) != Backend::kCpuDnnl) return false;
  RequireCpuFeature((std::string(op) + " (bfloat16)").c_str(), "avx512_bf16");
  return true;
}

bool Bf16ViaFloat32(const Tensor& x) {
  return x.data_type() == kBFloat16 && DeviceBackend(*x.device()) == Backend::kCuda;
}

SINGA_KERNEL_SLOT(GemmBf16, void(const BatchedGemmArgs&, Context*));

Tensor ToFloat32(const Tensor& t) {
  return t.block() == nullptr || t.data_type() != kBFloat16 ? t : t.AsType(kFloat32);
}

Tensor ToBFloat16(const Tensor& t) {
  return t.block() == nullptr || t.data_type() == kBFloat16 ? t : t.AsType(kBFloat16);
}

}  // namespace singa
