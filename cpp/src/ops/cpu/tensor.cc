// CPU reference kernels of Tensor's copies and conversions (Clone, Contiguous, AsType, CopyData,
// SetValue, CopyDataToFrom): the fronts are in ../../core/tensor.cc and ../shape.cc.
#include <algorithm>
#include <cstring>

#include "../../core/convert.h"
#include "../../core/dispatch.h"
#include "../kernel_slots.h"

namespace singa {
namespace cpu {
namespace {

void StridedCopy(const Tensor& in, const Tensor& out, Context*) {
  SINGA_DISPATCH_STORAGE(in.data_type(), "StridedCopy", S, {
    SINGA_DISPATCH_STORAGE(out.data_type(), "StridedCopy", D, {
      StridedConvert<D, S>(static_cast<const S*>(in.block()->data()), in.stride(),
                           static_cast<D*>(out.block()->mutable_data()), out.stride(),
                           in.shape());
    });
  });
}

void CopyBytes(const Tensor& from, size_t from_off, const Tensor& to, size_t to_off,
               size_t nbytes, Context*) {
  const char* s = static_cast<const char*>(from.block()->data()) + from_off;
  char* d = static_cast<char*>(to.block()->mutable_data()) + to_off;
  std::memmove(d, s, nbytes);  // src and dst may be the same block
}

void Fill(const Tensor& t, double value, Context*) {
  SINGA_DISPATCH_STORAGE(t.data_type(), "Fill", D, {
    // value holds the caller's float / int32 / double exactly, so this matches converting it.
    const D v = ConvertElement<D>(value);
    D* p = static_cast<D*>(t.block()->mutable_data());
    std::fill(p, p + t.Size(), v);
  });
}

}  // namespace

SINGA_REGISTER_KERNEL(StridedCopy, kCpuRef, &StridedCopy);
SINGA_REGISTER_KERNEL(CopyBytes, kCpuRef, &CopyBytes);
SINGA_REGISTER_KERNEL(Fill, kCpuRef, &Fill);
// Plain memory movement: oneDNN has nothing better; the reference kernels run.

}  // namespace cpu
}  // namespace singa
