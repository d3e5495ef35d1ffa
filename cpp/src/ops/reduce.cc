// Reductions (sum, mean, max, min, argmax, argmin), SINGA's row/column reductions and softmax:
// the fronts (see singa/ops/reduce.h; softmax's are schema/nn.py's rows, whose launch is
// generated). The CPU kernels are in cpu/reduce.cc.
//
// Every reduction is planned here as out[o, i] = reduce over r of x[o, r, i] on a buffer laid out
// as (outer, red, inner): the reduced axes, once size-1 axes are dropped and neighbours merged,
// usually form one block (a sum over the batch axis, over the last axis, over all axes).
// Transposed views are planned in memory order and reduced without a copy when that order keeps
// the output's axes in their logical order; other strided inputs are copied first. When the
// reduced axes are scattered (axes 0 and 2 of a 4-d tensor), the kept axes are permuted to the
// front and copied, which leaves inner == 1.
#include "singa/ops/reduce.h"

#include <algorithm>

#include "singa/ops/shape.h"
#include "kernel_slots.h"
#include "nn_kernels.h"

namespace singa {

SINGA_KERNEL_SLOT(ReduceSum, ReduceKernelFn);
SINGA_KERNEL_SLOT(ReduceMean, ReduceKernelFn);
SINGA_KERNEL_SLOT(ReduceMax, ReduceKernelFn);
SINGA_KERNEL_SLOT(ReduceMin, ReduceKernelFn);
SINGA_KERNEL_SLOT(Argmax, ReduceKernelFn);
SINGA_KERNEL_SLOT(Argmin, ReduceKernelFn);

namespace {

void CheckInput(const char* op, const Tensor& in) {
  SINGA_CHECK(in.block() != nullptr, ValueError, op << ": the input tensor is empty (no memory)");
}

// A reduction laid out as (outer, red, inner) over `src`, whose memory (from the start of its
// block) holds exactly that layout: a contiguous tensor or an in-place-reducible permuted view.
struct Plan {
  Tensor src;
  size_t outer = 1, red = 1, inner = 1;
  Shape out_shape;
};

Plan MakePlan(const char* op, const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  CheckInput(op, in);
  const size_t nd = in.nDim();
  std::vector<bool> reduced(nd, axes.empty());
  for (int a : axes) {
    size_t d = NormalizeAxis(a, nd, op);
    SINGA_CHECK_AXIS(!reduced[d], op << ": axis " << a << " is repeated in the axes list for a "
                                        "tensor of shape " << in.shape());
    reduced[d] = true;
  }
  Plan p;
  for (size_t d = 0; d < nd; ++d) {
    if (!reduced[d]) p.out_shape.push_back(in.shape()[d]);
    else if (keepdims) p.out_shape.push_back(1);
  }
  // The axes in memory order. A transposed (permuted) view of a dense block is reduced in place
  // when its kept axes appear in memory in their logical order, since the output is written in
  // memory order; anything else (broadcast views, other permutations) is copied first.
  std::vector<size_t> order;
  for (size_t d = 0; d < nd; ++d)
    if (in.shape()[d] != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return in.stride()[a] > in.stride()[b]; });
  bool in_place = true;
  std::ptrdiff_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    in_place = in_place && in.stride()[order[k]] == expect;
    expect *= static_cast<std::ptrdiff_t>(in.shape()[order[k]]);
  }
  for (size_t k = 0, prev_kept = 0; k < order.size() && in_place; ++k) {
    if (reduced[order[k]]) continue;
    in_place = order[k] >= prev_kept;
    prev_kept = order[k];
  }
  if (!in_place) std::sort(order.begin(), order.end());  // the layout of in.Contiguous()
  // Groups of neighbouring axes with the same role (size-1 axes change nothing).
  std::vector<std::pair<bool, size_t>> groups;
  for (size_t d : order) {
    const size_t n = in.shape()[d];
    if (!groups.empty() && groups.back().first == reduced[d]) groups.back().second *= n;
    else groups.emplace_back(reduced[d], n);
  }
  size_t red_groups = 0;
  for (const auto& g : groups) red_groups += g.first;
  if (red_groups <= 1) {
    bool seen_red = false;
    for (const auto& g : groups) {
      if (g.first) { p.red = g.second; seen_red = true; }
      else if (seen_red) p.inner *= g.second;
      else p.outer *= g.second;
    }
    p.src = in_place ? in : in.Contiguous();
    return p;
  }
  // Scattered reduced axes: kept axes first (keeping their order), then a copy.
  std::vector<size_t> perm;
  for (size_t d = 0; d < nd; ++d)
    if (!reduced[d]) perm.push_back(d);
  for (size_t d = 0; d < nd; ++d)
    if (reduced[d]) perm.push_back(d);
  p.src = Transpose(in, perm).Contiguous();
  p.outer = 1;
  p.red = 1;
  for (size_t d = 0; d < nd; ++d) (reduced[d] ? p.red : p.outer) *= in.shape()[d];
  return p;
}

// float16 data is reduced (in float, rounded once) by the CUDA kernels only: on the CPU it is
// storage only.
bool HalfMath(const Tensor& t) {
  return t.data_type() == kFloat16 && DeviceBackend(*t.device()) == Backend::kCuda;
}

enum class Kind { kSum, kMean, kMax, kMin, kArgmax, kArgmin };

Tensor Reduce(OpId id, Kind kind, const Tensor& in_raw, const std::vector<int>& axes,
              bool keepdims) {
  const char* name = OpName(id);
  CheckInput(name, in_raw);
  if (in_raw.data_type() == kBFloat16) {  // accumulated in float32 (double inside), rounded once
    const Tensor r = Reduce(id, kind, in_raw.AsType(kFloat32), axes, keepdims);
    return r.data_type() == kFloat32 ? r.AsType(kBFloat16) : r;
  }
  // numpy's mean of integers is a float: convert first so that the division is exact.
  const Tensor in = kind == Kind::kMean && in_raw.data_type() == kInt ? in_raw.AsType(kFloat32)
                                                                      : in_raw;
  SINGA_CHECK_DTYPE(in.data_type() == kFloat32 || in.data_type() == kInt || HalfMath(in),
                    name << ": dtype " << DataTypeName(in.data_type())
                         << " is not supported (expected float32 or int32; float16 on CUDA "
                            "devices)");
  const Plan p = MakePlan(name, in, axes, keepdims);
  const bool arg = kind == Kind::kArgmax || kind == Kind::kArgmin;
  SINGA_CHECK_VALUE(kind == Kind::kSum || kind == Kind::kMean || p.red > 0,
                    name << ": zero-size reduction over an empty axis of shape " << in.shape()
                         << " has no identity");
  ReduceKernelFn* k = nullptr;
  const Device& dev = *in.device();
  switch (kind) {
    case Kind::kSum: k = ReduceSumKernel().For(dev); break;
    case Kind::kMean: k = ReduceMeanKernel().For(dev); break;
    case Kind::kMax: k = ReduceMaxKernel().For(dev); break;
    case Kind::kMin: k = ReduceMinKernel().For(dev); break;
    case Kind::kArgmax: k = ArgmaxKernel().For(dev); break;
    case Kind::kArgmin: k = ArgminKernel().For(dev); break;
  }
  const Tensor src = p.src;
  Tensor out(p.out_shape, src.device(), arg ? kInt : src.data_type());
  const Dims3 d{p.outer, p.red, p.inner};
  src.device()->Exec({.id = id, .reads = {src.block()}, .writes = {out.block()}},
                     [k, src, out, d](Context* ctx) { k(src, d, out, ctx); });
  return out;
}

void CheckMatrix(const char* op, const Tensor& M) {
  CheckInput(op, M);
  SINGA_CHECK_SHAPE(M.nDim() == 2, op << ": expects a matrix (2-d tensor), got shape "
                                      << M.shape());
}

// Checks that softmax can run on `in` along `axis`.
void CheckSoft(const char* op, const Tensor& in, int axis) {
  CheckInput(op, in);
  SINGA_CHECK_DTYPE(in.data_type() == kFloat32 || HalfMath(in),
                    op << ": expects float32 (or float16 on a CUDA device), got "
                       << in.data_type() << " (shape " << in.shape() << "); convert with as_type");
  NormalizeAxis(axis, in.nDim(), op);
}

}  // namespace

Tensor ReduceSum(const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  return Reduce(OpId::kReduceSum, Kind::kSum, in, axes, keepdims);
}
Tensor ReduceMean(const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  return Reduce(OpId::kReduceMean, Kind::kMean, in, axes, keepdims);
}
Tensor ReduceMax(const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  return Reduce(OpId::kReduceMax, Kind::kMax, in, axes, keepdims);
}
Tensor ReduceMin(const Tensor& in, const std::vector<int>& axes, bool keepdims) {
  return Reduce(OpId::kReduceMin, Kind::kMin, in, axes, keepdims);
}
Tensor Argmax(const Tensor& in, int axis, bool keepdims) {
  return Reduce(OpId::kArgmax, Kind::kArgmax, in, {axis}, keepdims);
}
Tensor Argmin(const Tensor& in, int axis, bool keepdims) {
  return Reduce(OpId::kArgmin, Kind::kArgmin, in, {axis}, keepdims);
}

Tensor Sum(const Tensor& in, int axis) { return Reduce(OpId::kSum, Kind::kSum, in, {axis}, false); }
Tensor Average(const Tensor& in, int axis) {
  return Reduce(OpId::kAverage, Kind::kMean, in, {axis}, false);
}

float SumAll(const Tensor& in) {
  const bool bf16 = in.block() != nullptr && in.data_type() == kBFloat16;
  Tensor s = Reduce(OpId::kSumAll, Kind::kSum, bf16 ? in.AsType(kFloat32) : in, {}, false);
  // The reduction accumulated in double (int64 for int32), so only the final cast rounds.
  if (s.data_type() == kInt) return static_cast<float>(s.ToVector<int32_t>()[0]);
  return s.ToVector<float>()[0];
}

Tensor SumRows(const Tensor& M) {
  CheckMatrix("SumRows", M);
  return Reduce(OpId::kSumRows, Kind::kSum, M, {0}, false);
}
Tensor SumColumns(const Tensor& M) {
  CheckMatrix("SumColumns", M);
  return Reduce(OpId::kSumColumns, Kind::kSum, M, {1}, false);
}
Tensor RowMax(const Tensor& M) {
  CheckMatrix("RowMax", M);
  return Reduce(OpId::kRowMax, Kind::kMax, M, {1}, false);
}

// bfloat16 softmax runs through float32 (a float32 op, the AMP policy's too).
Tensor SoftMax(const Tensor& in, int axis) {
  if (in.data_type() == kBFloat16) return SoftMax(in.AsType(kFloat32), axis).AsType(kBFloat16);
  CheckSoft("SoftMax", in, axis);
  return RunSoftMax(in, axis);
}
Tensor LogSoftMax(const Tensor& in, int axis) {
  if (in.data_type() == kBFloat16)
    return LogSoftMax(in.AsType(kFloat32), axis).AsType(kBFloat16);
  CheckSoft("LogSoftMax", in, axis);
  return RunLogSoftMax(in, axis);
}

Tensor SoftMaxBackward(const Tensor& dy, const Tensor& y, int axis) {
  const char* name = "SoftMaxBackward";
  CheckInput(name, dy);
  CheckInput(name, y);
  CheckSameDevice(name, {&dy, &y});
  SINGA_CHECK_SHAPE(dy.shape() == y.shape(), name << ": dy has shape " << dy.shape()
                                                  << " but y has shape " << y.shape()
                                                  << " (they must be equal)");
  SINGA_CHECK_DTYPE(dy.data_type() == y.data_type(),
                    name << ": dy is " << dy.data_type() << " but y is " << y.data_type());
  if (y.data_type() == kBFloat16)
    return SoftMaxBackward(dy.AsType(kFloat32), y.AsType(kFloat32), axis).AsType(kBFloat16);
  CheckSoft(name, y, axis);
  return RunSoftMaxBackward(dy, y, axis);
}

}  // namespace singa
