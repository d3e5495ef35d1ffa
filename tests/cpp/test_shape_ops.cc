// Tests of the copying ops of singa/ops/shape.h (concatenation, slicing, CopyDataToFrom) and of
// Tensor::Repeat, against reference loops, with strided inputs, every storage dtype and every
// error path.
#include "singa/ops/shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "singa/core/error.h"

#include "test_helpers.h"

namespace {

using singa::Shape;
using singa::Tensor;


// A tensor holding 0, 1, 2, ... (plus `start`) in row-major order.
Tensor Iota(const Shape& shape, float start = 0.f) {
  std::vector<float> v(singa::Product(shape));
  std::iota(v.begin(), v.end(), start);
  Tensor t(shape);
  t.CopyDataFromHostPtr(v.data(), v.size());
  return t;
}

// Row-major multi-index of `flat` in `shape`.
std::vector<size_t> Unravel(size_t flat, const Shape& shape) {
  std::vector<size_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

size_t Ravel(const std::vector<size_t>& idx, const Shape& shape) {
  size_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

// Reference concatenation of row-major buffers.
std::vector<float> RefConcat(const std::vector<Shape>& shapes,
                             const std::vector<std::vector<float>>& data, size_t axis) {
  Shape out = shapes[0];
  out[axis] = 0;
  for (const auto& s : shapes) out[axis] += s[axis];
  std::vector<float> r(singa::Product(out));
  size_t offset = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    for (size_t f = 0; f < data[k].size(); ++f) {
      auto idx = Unravel(f, shapes[k]);
      idx[axis] += offset;
      r[Ravel(idx, out)] = data[k][f];
    }
    offset += shapes[k][axis];
  }
  return r;
}

std::vector<float> RefSlice(const Shape& shape, const std::vector<float>& x, size_t start,
                            size_t end, size_t axis) {
  Shape out = shape;
  out[axis] = end - start;
  std::vector<float> r;
  for (size_t f = 0; f < x.size(); ++f) {
    auto idx = Unravel(f, shape);
    if (idx[axis] >= start && idx[axis] < end) r.push_back(x[f]);
  }
  EXPECT_EQ(r.size(), singa::Product(out));
  return r;
}

TEST(OpsShape, ConcatOnEveryAxis) {
  for (size_t axis = 0; axis < 3; ++axis) {
    std::vector<Shape> shapes{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
    shapes[1][axis] = 1;
    shapes[2][axis] = 5;
    std::vector<Tensor> ts;
    std::vector<std::vector<float>> data;
    for (size_t k = 0; k < shapes.size(); ++k) {
      ts.push_back(Iota(shapes[k], 100.f * k));
      data.push_back(ts.back().ToVector<float>());
    }
    const auto want = RefConcat(shapes, data, axis);
    for (int a : {static_cast<int>(axis), static_cast<int>(axis) - 3}) {
      Tensor c = singa::ConcatOn(ts, a);
      Shape ws{2, 3, 4};
      ws[axis] += 1 + 5;
      EXPECT_EQ(c.shape(), ws);
      EXPECT_TRUE(c.IsContiguous());
      EXPECT_EQ(c.ToVector<float>(), want) << "axis " << a;
    }
  }
}

TEST(OpsShape, ConcatStridedInputsAndSingaNames) {
  const Tensor a = Iota({3, 2});
  const Tensor t = singa::Transpose(Iota({2, 3}, 10.f));  // (3, 2), strided
  const Tensor b = singa::Broadcast(Iota({1, 2}, 50.f), {3, 2});  // stride 0 rows
  const std::vector<std::vector<float>> data{a.ToVector<float>(), t.ToVector<float>(),
                                             b.ToVector<float>()};
  EXPECT_EQ(singa::ConcatOn({a, t, b}, 0).ToVector<float>(),
            RefConcat({{3, 2}, {3, 2}, {3, 2}}, data, 0));
  EXPECT_EQ(singa::ConcatenateColumns({a, t, b}).ToVector<float>(),
            RefConcat({{3, 2}, {3, 2}, {3, 2}}, data, 1));
  EXPECT_EQ(singa::ConcatenateRows({a, t, b}).shape(), (Shape{9, 2}));
  // The same tensor twice, a single tensor, and an empty piece.
  EXPECT_EQ(singa::ConcatOn({a, a}, 1).ToVector<float>(),
            RefConcat({{3, 2}, {3, 2}}, {data[0], data[0]}, 1));
  EXPECT_EQ(singa::ConcatOn({a}, -1).ToVector<float>(), data[0]);
  EXPECT_EQ(singa::ConcatOn({a, Tensor({0, 2})}, 0).ToVector<float>(), data[0]);
}

TEST(OpsShape, ConcatOtherStorageTypes) {
  const Tensor a = Iota({2, 2}).AsType(singa::kInt), b = Iota({2, 1}, 7.f).AsType(singa::kInt);
  EXPECT_EQ(singa::ConcatOn({a, b}, 1).ToVector<int32_t>(),
            (std::vector<int32_t>{0, 1, 7, 2, 3, 8}));
  const Tensor h = singa::ConcatOn({Iota({2}).AsType(singa::kFloat16),
                                    Iota({1}, 5.f).AsType(singa::kFloat16)}, 0);
  EXPECT_EQ(h.data_type(), singa::kFloat16);
  EXPECT_EQ(h.AsType(singa::kFloat32).ToVector<float>(), (std::vector<float>{0, 1, 5}));
}

TEST(OpsShape, SliceOnAndSingaNames) {
  const Shape shape{4, 5, 3};
  const Tensor x = Iota(shape);
  const auto xv = x.ToVector<float>();
  for (size_t axis = 0; axis < 3; ++axis) {
    for (size_t start = 0; start <= shape[axis]; ++start) {
      for (size_t end = start; end <= shape[axis]; ++end) {
        Tensor s = singa::SliceOn(x, start, end, static_cast<int>(axis) - 3);
        Shape ws = shape;
        ws[axis] = end - start;
        ASSERT_EQ(s.shape(), ws);
        EXPECT_EQ(s.ToVector<float>(), RefSlice(shape, xv, start, end, axis));
      }
    }
  }
  // A strided input: slicing a transpose slices the transposed values.
  const Tensor t = singa::Transpose(x);  // (3, 5, 4)
  const auto tv = t.ToVector<float>();
  EXPECT_EQ(singa::SliceOn(t, 1, 4, 1).ToVector<float>(), RefSlice({3, 5, 4}, tv, 1, 4, 1));
  const Tensor m = Iota({4, 6});
  const auto mv = m.ToVector<float>();
  EXPECT_EQ(singa::SliceRows(m, 1, 3).ToVector<float>(), RefSlice({4, 6}, mv, 1, 3, 0));
  EXPECT_EQ(singa::CopyRows(m, 2, 4).ToVector<float>(), RefSlice({4, 6}, mv, 2, 4, 0));
  EXPECT_EQ(singa::SliceColumns(m, 2, 5).ToVector<float>(), RefSlice({4, 6}, mv, 2, 5, 1));
  EXPECT_EQ(singa::CopyColumns(m, 0, 1).ToVector<float>(), RefSlice({4, 6}, mv, 0, 1, 1));
  EXPECT_EQ(singa::CopyColumns(singa::Transpose(m), 1, 3).ToVector<float>(),
            RefSlice({6, 4}, singa::Transpose(m).ToVector<float>(), 1, 3, 1));
  // A slice is a copy: writing into it leaves the source alone.
  Tensor s = singa::SliceRows(m, 0, 1);
  s.SetValue(-1.f);
  EXPECT_EQ(m.ToVector<float>(), mv);
  // Storage types.
  EXPECT_EQ(singa::SliceOn(m.AsType(singa::kInt), 1, 2, 0).ToVector<int32_t>(),
            (std::vector<int32_t>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(singa::SliceOn(m.AsType(singa::kFloat16), 5, 6, 1).AsType(singa::kFloat32)
                .ToVector<float>(),
            (std::vector<float>{5, 11, 17, 23}));
}

TEST(OpsShape, CopyDataToFrom) {
  Tensor dst = Iota({3, 4});
  const Tensor src = Iota({2, 3}, 100.f);
  singa::CopyDataToFrom(&dst, src, 4, 5, 1);
  std::vector<float> want(12);
  std::iota(want.begin(), want.end(), 0.f);
  for (size_t i = 0; i < 4; ++i) want[5 + i] = 101.f + i;
  EXPECT_EQ(dst.ToVector<float>(), want);
  // A transposed source is read in its row-major (logical) order.
  singa::CopyDataToFrom(&dst, singa::Transpose(src), 6, 0, 0);
  const std::vector<float> tv{100, 103, 101, 104, 102, 105};
  for (size_t i = 0; i < 6; ++i) want[i] = tv[i];
  EXPECT_EQ(dst.ToVector<float>(), want);
  // Overlapping copy within one tensor behaves like memmove.
  Tensor v = Iota({6});
  singa::CopyDataToFrom(&v, v, 4, 2, 0);
  EXPECT_EQ(v.ToVector<float>(), (std::vector<float>{0, 1, 0, 1, 2, 3}));
  // Zero elements at the very end is fine; int32 and float16 too.
  singa::CopyDataToFrom(&dst, src, 0, 12, 6);
  Tensor di = Iota({3}).AsType(singa::kInt);
  singa::CopyDataToFrom(&di, Iota({2}, 9.f).AsType(singa::kInt), 2, 1, 0);
  EXPECT_EQ(di.ToVector<int32_t>(), (std::vector<int32_t>{0, 9, 10}));
  Tensor dh = Iota({3}).AsType(singa::kFloat16);
  singa::CopyDataToFrom(&dh, Iota({3}, 4.f).AsType(singa::kFloat16), 1, 0, 2);
  EXPECT_EQ(dh.AsType(singa::kFloat32).ToVector<float>(), (std::vector<float>{6, 1, 2}));
}

// numpy.repeat reference for a row-major buffer.
std::vector<float> RefRepeat(const Shape& shape, const std::vector<float>& x,
                             const std::vector<size_t>& reps, size_t axis) {
  std::vector<float> r;
  size_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  for (size_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < shape[axis]; ++j)
      for (size_t k = 0; k < (reps.size() == 1 ? reps[0] : reps[j]); ++k)
        for (size_t i = 0; i < inner; ++i) r.push_back(x[(o * shape[axis] + j) * inner + i]);
  return r;
}

TEST(OpsShape, RepeatLikeNumpy) {
  const Shape shape{2, 3, 2};
  const Tensor x = Iota(shape);
  const auto xv = x.ToVector<float>();
  for (size_t axis = 0; axis < 3; ++axis) {
    std::vector<size_t> per(shape[axis]);
    for (size_t j = 0; j < per.size(); ++j) per[j] = j % 3;  // includes zero repeats
    for (const auto& reps : {std::vector<size_t>{2}, per}) {
      const auto want = RefRepeat(shape, xv, reps, axis);
      for (int a : {static_cast<int>(axis), static_cast<int>(axis) - 3}) {
        Tensor r = x.Repeat(reps, a);
        Shape ws = shape;
        ws[axis] = want.size() / (singa::Product(shape) / shape[axis]);
        EXPECT_EQ(r.shape(), ws);
        EXPECT_EQ(r.ToVector<float>(), want) << "axis " << a;
      }
    }
  }
  // 9999 is numpy's axis=None: the flattened tensor, in row-major order even when strided.
  const Tensor t = singa::Transpose(x);
  const auto tv = t.ToVector<float>();
  EXPECT_EQ(t.Repeat({2}, 9999).shape(), Shape{24});
  EXPECT_EQ(t.Repeat({2}, 9999).ToVector<float>(), RefRepeat({12}, tv, {2}, 0));
  std::vector<size_t> per12(12, 1);
  per12[0] = 3;
  EXPECT_EQ(x.Repeat(per12, 9999).ToVector<float>(), RefRepeat({12}, xv, per12, 0));
  // Broadcast input, zero repeats, other storage types.
  const Tensor b = singa::Broadcast(Iota({1, 2}), {2, 2});
  EXPECT_EQ(b.Repeat({2}, 0).ToVector<float>(), (std::vector<float>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(x.Repeat({0}, 1).shape(), (Shape{2, 0, 2}));
  EXPECT_EQ(x.AsType(singa::kInt).Repeat({1, 2}, 0).ToVector<int32_t>().size(), 18u);
  EXPECT_EQ(Iota({2}).AsType(singa::kFloat16).Repeat({2}, 0).AsType(singa::kFloat32)
                .ToVector<float>(),
            (std::vector<float>{0, 0, 1, 1}));
  // Large enough for the threaded path.
  const Tensor big = Iota({4096, 8});
  EXPECT_EQ(big.Repeat({3}, 1).ToVector<float>(),
            RefRepeat({4096, 8}, big.ToVector<float>(), {3}, 1));
}

TEST(OpsShape, Errors) {
  const Tensor a = Iota({2, 3}), b = Iota({2, 4});
  EXPECT_THROW_MSG(singa::ConcatOn({}, 0), singa::ValueError, "ConcatOn");
  EXPECT_THROW_MSG(singa::ConcatOn({a, b}, 0), singa::ShapeError, "ConcatOn");
  EXPECT_THROW_MSG(singa::ConcatOn({a, Iota({6})}, 0), singa::ShapeError, "ranks differ");
  EXPECT_THROW_MSG(singa::ConcatOn({a, b}, 2), singa::AxisError, "ConcatOn");
  EXPECT_THROW_MSG(singa::ConcatOn({a, b}, -3), singa::AxisError, "ConcatOn");
  EXPECT_THROW_MSG(singa::ConcatOn({Tensor(Shape{}), Tensor(Shape{})}, 0), singa::AxisError,
                   "ConcatOn");
  EXPECT_THROW_MSG(singa::ConcatOn({a, a.AsType(singa::kInt)}, 0), singa::DTypeError,
                   "ConcatOn");
  EXPECT_THROW_MSG(singa::ConcatOn({a, Tensor()}, 0), singa::ValueError, "ConcatOn");
  auto other = std::make_shared<singa::CppCPU>(3);
  EXPECT_THROW_MSG(singa::ConcatOn({a, Tensor({2, 3}, other)}, 0), singa::DeviceError,
                   "ConcatOn");
  EXPECT_THROW_MSG(singa::ConcatOn({Tensor({2}, singa::kDouble)}, 0), singa::DTypeError,
                   "ConcatOn");
  EXPECT_THROW_MSG(singa::ConcatenateRows({a, b}), singa::ShapeError, "ConcatenateRows");
  EXPECT_THROW_MSG(singa::ConcatenateRows({Tensor(Shape{})}), singa::ShapeError,
                   "ConcatenateRows");
  EXPECT_THROW_MSG(singa::ConcatenateColumns({a, Iota({3, 3})}), singa::ShapeError,
                   "ConcatenateColumns");
  EXPECT_THROW_MSG(singa::ConcatenateColumns({Iota({3})}), singa::ShapeError,
                   "ConcatenateColumns");

  EXPECT_THROW_MSG(singa::SliceOn(a, 2, 1, 0), singa::AxisError, "SliceOn");
  EXPECT_THROW_MSG(singa::SliceOn(a, 0, 4, 1), singa::AxisError, "SliceOn");
  EXPECT_THROW_MSG(singa::SliceOn(a, 0, 1, 2), singa::AxisError, "SliceOn");
  EXPECT_THROW_MSG(singa::SliceOn(Tensor(), 0, 1, 0), singa::ValueError, "SliceOn");
  EXPECT_THROW_MSG(singa::SliceRows(a, 0, 3), singa::ShapeError, "SliceRows");
  EXPECT_THROW_MSG(singa::CopyRows(Tensor(Shape{}), 0, 0), singa::ShapeError, "CopyRows");
  EXPECT_THROW_MSG(singa::SliceColumns(Iota({2, 3, 4}), 0, 1), singa::ShapeError,
                   "SliceColumns");
  EXPECT_THROW_MSG(singa::CopyColumns(a, 1, 5), singa::AxisError, "CopyColumns");

  Tensor dst = Iota({4});
  EXPECT_THROW_MSG(singa::CopyDataToFrom(nullptr, a, 1), singa::ValueError, "CopyDataToFrom");
  EXPECT_THROW_MSG(singa::CopyDataToFrom(&dst, a, 5), singa::ShapeError, "destination");
  EXPECT_THROW_MSG(singa::CopyDataToFrom(&dst, a, 2, 3), singa::ShapeError, "destination");
  EXPECT_THROW_MSG(singa::CopyDataToFrom(&dst, a, 2, 0, 5), singa::ShapeError, "source");
  EXPECT_THROW_MSG(singa::CopyDataToFrom(&dst, a, 1, 0, 7), singa::ShapeError, "source");
  EXPECT_THROW_MSG(singa::CopyDataToFrom(&dst, a.AsType(singa::kInt), 1), singa::DTypeError,
                   "CopyDataToFrom");
  Tensor tview = singa::Transpose(Iota({2, 3}));
  EXPECT_THROW_MSG(singa::CopyDataToFrom(&tview, a, 1), singa::ShapeError, "non-contiguous");

  EXPECT_THROW_MSG(a.Repeat({1, 2, 3}, 0), singa::ShapeError, "Repeat");
  EXPECT_THROW_MSG(a.Repeat({}, 1), singa::ShapeError, "Repeat");
  EXPECT_THROW_MSG(a.Repeat({2}, 2), singa::AxisError, "Repeat");
  EXPECT_THROW_MSG(a.Repeat({2}, -3), singa::AxisError, "Repeat");
  EXPECT_THROW_MSG(a.Repeat({1, 2}, 9999), singa::ShapeError, "Repeat");
  EXPECT_THROW_MSG(Tensor().Repeat({2}, 0), singa::ValueError, "Repeat");
}

}  // namespace
