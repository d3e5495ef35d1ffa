// 2-d max / average pooling, the reference CPU kernels (backend kCpuRef).
//
// Each (n, c) plane is independent: planes are split between OpenMP threads. The window, the
// divisor and the max's routing are ../pool_window.h's (shared with the CUDA kernels); the
// per-plane loops are pool_plane.h's (shared with the oneDNN kernels' NaN fix-up), for float32
// and bfloat16 planes.
#include "../nn_kernels.h"
#include "pool_plane.h"

namespace singa {
namespace cpu {
namespace {

constexpr size_t kGrain = 1 << 14;

Prepared<PoolFwdArgs> PoolForward(const PoolFwdArgs&) {
  Prepared<PoolFwdArgs> r;
  r.run = [](const PoolFwdArgs& a, float*) {
    ByElemType(a.x, [&](auto t) {
      using T = decltype(t);
      const PoolGeom g = PoolGeom::Of(a.h);
      const T* px = In<T>(a.x);
      T* py = Out<T>(a.y);
      const size_t in = size_t(g.H) * g.W, out = size_t(g.PH) * g.PW;
      const std::ptrdiff_t planes = std::ptrdiff_t(a.x.shape(0) * a.h.channels);
#pragma omp parallel for schedule(static) if (size_t(planes) * in >= kGrain)
      for (std::ptrdiff_t p = 0; p < planes; ++p)
        PoolPlaneForward(g, px + size_t(p) * in, py + size_t(p) * out);
    });
  };
  return r;
}

Prepared<PoolBwdArgs> PoolBackward(const PoolBwdArgs&) {
  Prepared<PoolBwdArgs> r;
  r.run = [](const PoolBwdArgs& a, float*) {
    ByElemType(a.x, [&](auto t) {
      using T = decltype(t);
      const PoolGeom g = PoolGeom::Of(a.h);
      const T* pdy = In<T>(a.dy);
      const T* px = In<T>(a.x);
      T* pdx = Out<T>(a.dx);
      const size_t in = size_t(g.H) * g.W, out = size_t(g.PH) * g.PW;
      const std::ptrdiff_t planes = std::ptrdiff_t(a.x.shape(0) * a.h.channels);
#pragma omp parallel for schedule(static) if (size_t(planes) * in >= kGrain)
      for (std::ptrdiff_t p = 0; p < planes; ++p)
        PoolPlaneBackward(g, px + size_t(p) * in, pdy + size_t(p) * out, pdx + size_t(p) * in);
    });
  };
  return r;
}

}  // namespace
}  // namespace cpu

SINGA_REGISTER_KERNEL(Pool2dForward, kCpuRef, cpu::PoolForward);
SINGA_REGISTER_KERNEL(Pool2dBackward, kCpuRef, cpu::PoolBackward);

}  // namespace singa
