// CUDA kernels of the data-movement ops (fronts: ops/shape.cc; CPU reference: ops/cpu/shape.cc):
// Concat and Slice are strided copies (cuda::StridedCopy, copy.cu); Repeat has its own kernel.
// They move elements only, so they run on every storage type (moved as 2- or 4-byte words).
#include "cuda_kernels.cuh"

namespace singa {
namespace cuda {
namespace {

void Concat(const std::vector<Tensor>& srcs, size_t axis, const Tensor& out, Context* ctx) {
  std::ptrdiff_t offset = 0;  // each source's window starts where the previous one ended
  for (const Tensor& t : srcs) {
    if (t.Size() > 0) StridedCopy(t, 0, out, offset, t.shape(), Stream(ctx), "Concat");
    offset += static_cast<std::ptrdiff_t>(t.shape()[axis]) * out.stride()[axis];
  }
}

void Slice(const Tensor& in, std::ptrdiff_t offset, const Tensor& out, Context* ctx) {
  StridedCopy(in, offset, out, 0, out.shape(), Stream(ctx), "Slice");
}

// The slot a repeated position t (in [0, total)) copies: uniform repeats divide, others search
// the running ends of the repeat counts (held in the kernel's parameters, up to kMaxReps).
constexpr int kMaxReps = 256;
struct RepeatMap {
  int64_t uniform;  // > 0: every slot repeated this many times
  int n;
  int64_t end[kMaxReps];  // end[j] = reps[0] + ... + reps[j]
  __device__ int64_t SlotOf(int64_t t) const {
    if (uniform > 0) return t / uniform;
    int lo = 0, hi = n - 1;  // the first j with end[j] > t
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (end[mid] > t) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
};

// y[o, t, i] = x[o, slot(t), i] over the contiguous (outer, total, inner) output.
template <typename T>
__global__ void RepeatKernel(const T* x, T* y, RepeatMap map, int64_t dim, int64_t total,
                             int64_t inner, int64_t n) {
  SINGA_GRID_STRIDE(k, n) {
    const int64_t i = k % inner, t = (k / inner) % total, o = k / (inner * total);
    y[k] = x[(o * dim + map.SlotOf(t)) * inner + i];
  }
}

// Many different counts: slot j (its reps[j] copies) at a time, x[o, j, i] -> y[o, t0 + r, i].
template <typename T>
__global__ void RepeatOneSlot(const T* x, T* y, int64_t j, int64_t t0, int64_t reps, int64_t dim,
                              int64_t total, int64_t inner, int64_t n) {
  SINGA_GRID_STRIDE(k, n) {  // n = outer * reps * inner
    const int64_t i = k % inner, r = (k / inner) % reps, o = k / (inner * reps);
    y[(o * total + t0 + r) * inner + i] = x[(o * dim + j) * inner + i];
  }
}

template <typename T>
void RepeatLaunch(const Tensor& in, const std::vector<size_t>& reps, size_t outer, size_t inner,
                  const Tensor& out, Context* ctx) {
  int64_t total = 0;
  bool uniform = true;
  for (size_t r : reps) {
    total += int64_t(r);
    uniform = uniform && r == reps[0];
  }
  const int64_t dim = int64_t(reps.size()), n = int64_t(outer) * total * int64_t(inner);
  if (n == 0) return;
  const T* x = DevPtr<const T>(in);
  T* y = MutDevPtr<T>(out);
  if (uniform || reps.size() <= size_t(kMaxReps)) {
    RepeatMap map{};
    map.uniform = uniform ? int64_t(reps[0]) : 0;
    map.n = uniform ? 0 : int(reps.size());
    int64_t end = 0;
    for (int j = 0; j < map.n; ++j) map.end[j] = end += int64_t(reps[j]);
    RepeatKernel<T><<<Blocks(n), kThreads, 0, Stream(ctx)>>>(x, y, map, dim, total,
                                                             int64_t(inner), n);
    SINGA_CUDA_CHECK_LAUNCH("Repeat");
    return;
  }
  int64_t t0 = 0;
  for (int64_t j = 0; j < dim; ++j) {
    const int64_t r = int64_t(reps[size_t(j)]), m = int64_t(outer) * r * int64_t(inner);
    if (m > 0) {
      RepeatOneSlot<T><<<Blocks(m), kThreads, 0, Stream(ctx)>>>(x, y, j, t0, r, dim, total,
                                                                int64_t(inner), m);
      SINGA_CUDA_CHECK_LAUNCH("Repeat");
    }
    t0 += r;
  }
}

void Repeat(const Tensor& in, const std::vector<size_t>& reps, size_t outer, size_t inner,
            const Tensor& out, Context* ctx) {
  switch (SizeOf(out.data_type())) {
    case 4: return RepeatLaunch<uint32_t>(in, reps, outer, inner, out, ctx);
    case 2: return RepeatLaunch<uint16_t>(in, reps, outer, inner, out, ctx);
    default:
      SINGA_THROW(DTypeError, "Repeat: dtype " << DataTypeName(out.data_type())
                                               << " is not supported (float32, int32, float16)");
  }
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(Concat, kCuda, &cuda::Concat);
SINGA_REGISTER_KERNEL(Slice, kCuda, &cuda::Slice);
SINGA_REGISTER_KERNEL(Repeat, kCuda, &cuda::Repeat);

}  // namespace singa
