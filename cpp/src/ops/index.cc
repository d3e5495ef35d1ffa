// Gather along an axis (IndexSelect, numpy.take) and its backward (IndexAdd) on the CPU; the
// kernels of embedding lookups (see singa/ops/nn.h).
//
// x is viewed as (outer, A, inner) around `axis`, the output as (outer, K, inner) with K the
// number of indices: each (o, k) pair copies one run of `inner` elements. Index values are read
// and checked inside the kernel before any parallel loop, so a bad index throws AxisError
// (eagerly at the call; in a graph at RunGraph).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../core/dispatch.h"
#include "singa/ops/nn.h"
#include "strided.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace singa {
namespace {

constexpr size_t kGrain = 1 << 15;

void CheckIndices(const char* op, const Tensor& indices) {
  SINGA_CHECK(indices.block() != nullptr, ValueError, op << ": the indices tensor is empty");
  SINGA_CHECK_DTYPE(indices.data_type() == kInt || indices.data_type() == kFloat32,
                    op << ": indices must be int32 (or float32 holding whole numbers), got "
                       << indices.data_type());
}

// x.shape[:axis] + indices.shape + x.shape[axis+1:].
Shape GatherShape(const Shape& x, size_t axis, const Shape& idx) {
  Shape s(x.begin(), x.begin() + std::ptrdiff_t(axis));
  s.insert(s.end(), idx.begin(), idx.end());
  s.insert(s.end(), x.begin() + std::ptrdiff_t(axis) + 1, x.end());
  return s;
}

// The indices as offsets into [0, A), negative ones wrapped; runs inside the kernel.
std::vector<size_t> ReadIndices(const char* op, const Tensor& idx, size_t A, size_t axis,
                                const Shape& x_shape) {
  const size_t K = idx.Size();
  std::vector<size_t> out(K);
  if (K == 0) return out;
  const void* raw = idx.block()->data();
  for (size_t k = 0; k < K; ++k) {
    double v = idx.data_type() == kInt ? double(static_cast<const int32_t*>(raw)[k])
                                       : double(static_cast<const float*>(raw)[k]);
    SINGA_CHECK_VALUE(std::nearbyint(v) == v,
                      op << ": index " << v << " (position " << k << ") is not a whole number");
    SINGA_CHECK_AXIS(v >= -double(A) && v < double(A),
                     op << ": index " << v << " is out of range for axis " << axis
                        << " of size " << A << " (shape " << x_shape << ")");
    out[k] = size_t(v < 0 ? v + double(A) : v);
  }
  return out;
}

// dx[o, ix[k], :] += dy[o, k, :]. Each task owns a disjoint part of dx: whole outer slices when
// there are enough of them, else column ranges of the inner run, so repeated indices never race.
template <typename T>
void ScatterAdd(const T* dy, const std::vector<size_t>& ix, size_t outer, size_t A, size_t inner,
                int nt, T* dx) {
  const size_t K = ix.size();
  const bool big = outer * K * inner >= kGrain && nt > 1;
  const bool by_outer = big && outer >= size_t(nt);
  const size_t tasks = !big ? 1 : by_outer ? outer : std::min<size_t>(inner, size_t(nt) * 4);
#pragma omp parallel for schedule(static) if (tasks > 1)
  for (std::ptrdiff_t task = 0; task < std::ptrdiff_t(tasks); ++task) {
    size_t o0 = 0, o1 = outer, i0 = 0, i1 = inner;
    if (by_outer) {
      o0 = size_t(task);
      o1 = o0 + 1;
    } else if (tasks > 1) {
      i0 = inner * size_t(task) / tasks;
      i1 = inner * (size_t(task) + 1) / tasks;
    }
    for (size_t o = o0; o < o1; ++o)
      for (size_t k = 0; k < K; ++k) {
        const T* src = dy + (o * K + k) * inner;
        T* dst = dx + (o * A + ix[k]) * inner;
        for (size_t i = i0; i < i1; ++i) dst[i] += src[i];
      }
  }
}

}  // namespace

Tensor IndexSelect(const Tensor& x_in, int axis_in, const Tensor& indices_in) {
  const char* op = "IndexSelect";
  SINGA_CHECK(x_in.block() != nullptr, ValueError, op << ": the input tensor is empty");
  CheckIndices(op, indices_in);
  CheckSameDevice(op, {&x_in, &indices_in});
  SINGA_CHECK_AXIS(x_in.nDim() > 0, op << ": cannot index a 0-d tensor");
  const size_t axis = NormalizeAxis(axis_in, x_in.nDim(), op);
  const size_t es = SizeOf(x_in.data_type());
  SINGA_CHECK_DTYPE(x_in.data_type() == kFloat32 || x_in.data_type() == kInt ||
                        x_in.data_type() == kFloat16,
                    op << ": dtype " << x_in.data_type()
                       << " is not supported (expected float32, int32 or float16)");
  const Tensor x = x_in.Contiguous(), idx = indices_in.Contiguous();
  const Shape xs = x.shape();
  const size_t outer = Product(xs, 0, axis), A = xs[axis], inner = Product(xs, axis + 1);
  Tensor out(GatherShape(xs, axis, idx.shape()), x.device(), x.data_type());
  const size_t K = idx.Size();
  x.device()->Exec(
      [x, idx, out, xs, axis, outer, A, inner, K, es, op](Context*) {
        const std::vector<size_t> ix = ReadIndices(op, idx, A, axis, xs);
        if (out.Size() == 0) return;
        const char* px = static_cast<const char*>(x.block()->data());
        char* py = static_cast<char*>(out.block()->mutable_data());
        const size_t row = inner * es;
        const std::ptrdiff_t pairs = std::ptrdiff_t(outer * K);
#pragma omp parallel for schedule(static) if (outer * K * inner >= kGrain && pairs > 1)
        for (std::ptrdiff_t p = 0; p < pairs; ++p) {
          const size_t o = size_t(p) / K, k = size_t(p) % K;
          std::memcpy(py + size_t(p) * row, px + (o * A + ix[k]) * row, row);
        }
      },
      {x.block(), idx.block()}, {out.block()}, op);
  return out;
}

Tensor IndexAdd(const Tensor& dy_in, int axis_in, const Tensor& indices_in,
                const Shape& x_shape) {
  const char* op = "IndexAdd";
  SINGA_CHECK(dy_in.block() != nullptr, ValueError, op << ": the gradient tensor is empty");
  CheckIndices(op, indices_in);
  CheckSameDevice(op, {&dy_in, &indices_in});
  SINGA_CHECK_AXIS(!x_shape.empty(), op << ": cannot index a 0-d tensor");
  const size_t axis = NormalizeAxis(axis_in, x_shape.size(), op);
  const Shape want = GatherShape(x_shape, axis, indices_in.shape());
  SINGA_CHECK_SHAPE(dy_in.shape() == want,
                    op << ": dy has shape " << dy_in.shape() << ", expected " << want
                       << " (x shape " << x_shape << " with indices of shape "
                       << indices_in.shape() << " on axis " << axis << ")");
  const Tensor dy = dy_in.Contiguous(), idx = indices_in.Contiguous();
  const size_t outer = Product(x_shape, 0, axis), A = x_shape[axis],
               inner = Product(x_shape, axis + 1), K = idx.Size();
  Tensor dx(x_shape, dy.device(), dy.data_type());
  const int nt = MaxThreads();
  SINGA_DISPATCH_FLOAT_INT(dy.data_type(), op, T, {
    dy.device()->Exec(
        [dy, idx, dx, x_shape, axis, outer, A, inner, K, nt, op](Context*) {
          const std::vector<size_t> ix = ReadIndices(op, idx, A, axis, x_shape);
          T* pdx = static_cast<T*>(dx.block()->mutable_data());
          std::fill(pdx, pdx + dx.Size(), T(0));
          if (dy.Size() == 0) return;
          ScatterAdd(static_cast<const T*>(dy.block()->data()), ix, outer, A, inner, nt, pdx);
        },
        {dy.block(), idx.block()}, {dx.block()}, op);
  });
  return dx;
}

}  // namespace singa
