// Gather along an axis (IndexSelect, numpy.take) and its backward (IndexAdd): the fronts of
// embedding lookups (see singa/ops/nn.h). x is viewed as (outer, A, inner) around `axis`.
// Index values live on the device: the kernels (cpu/index.cc) read and check them, so a bad index
// throws AxisError from the kernel (eagerly at the call; in a graph at RunGraph).
#include "kernel_slots.h"
#include "singa/ops/nn.h"

namespace singa {

SINGA_KERNEL_SLOT(IndexSelect, void(const Tensor&, const GatherArgs&, const Tensor&, Context*));
SINGA_KERNEL_SLOT(IndexAdd, void(const Tensor&, const GatherArgs&, const Tensor&, Context*));

namespace {

// x.shape[:axis] + indices.shape + x.shape[axis+1:].
Shape GatherShape(const Shape& x, size_t axis, const Shape& idx) {
  Shape s(x.begin(), x.begin() + std::ptrdiff_t(axis));
  s.insert(s.end(), idx.begin(), idx.end());
  s.insert(s.end(), x.begin() + std::ptrdiff_t(axis) + 1, x.end());
  return s;
}

}  // namespace

Tensor IndexSelect(const Tensor& x_in, int axis_in, const Tensor& indices_in) {
  const OpId id = OpId::kIndexSelect;
  const char* op = OpName(id);
  SINGA_CHECK(x_in.block() != nullptr, ValueError, op << ": the input tensor is empty");
  CheckIndices(op, indices_in);
  CheckSameDevice(op, {&x_in, &indices_in});
  SINGA_CHECK_AXIS(x_in.nDim() > 0, op << ": cannot index a 0-d tensor");
  const size_t axis = NormalizeAxis(axis_in, x_in.nDim(), op);
  SINGA_CHECK_DTYPE(x_in.data_type() == kFloat32 || x_in.data_type() == kInt ||
                        x_in.data_type() == kFloat16,
                    op << ": dtype " << x_in.data_type()
                       << " is not supported (expected float32, int32 or float16)");
  const Tensor x = x_in.Contiguous();
  GatherArgs g;
  g.indices = indices_in.Contiguous();
  g.x_shape = x.shape();
  g.axis = axis;
  g.d = {Product(g.x_shape, 0, axis), g.x_shape[axis], Product(g.x_shape, axis + 1)};
  Tensor out(GatherShape(g.x_shape, axis, g.indices.shape()), x.device(), x.data_type());
  auto* k = IndexSelectKernel().For(*x.device());
  x.device()->Exec({.id = id, .reads = {x.block(), g.indices.block()}, .writes = {out.block()}},
                   [k, x, g, out](Context* ctx) { k(x, g, out, ctx); });
  return out;
}

Tensor IndexAdd(const Tensor& dy_in, int axis_in, const Tensor& indices_in,
                const Shape& x_shape) {
  const OpId id = OpId::kIndexAdd;
  const char* op = OpName(id);
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
  SINGA_CHECK_DTYPE(dy_in.data_type() == kFloat32 || dy_in.data_type() == kInt,
                    op << ": dtype " << DataTypeName(dy_in.data_type())
                       << " is not supported (expected float32 or int32)");
  const Tensor dy = dy_in.Contiguous();
  GatherArgs g;
  g.indices = indices_in.Contiguous();
  g.x_shape = x_shape;
  g.axis = axis;
  g.d = {Product(x_shape, 0, axis), x_shape[axis], Product(x_shape, axis + 1)};
  Tensor dx(x_shape, dy.device(), dy.data_type());
  auto* k = IndexAddKernel().For(*dy.device());
  dy.device()->Exec({.id = id, .reads = {dy.block(), g.indices.block()}, .writes = {dx.block()}},
                    [k, dy, g, dx](Context* ctx) { k(dy, g, dx, ctx); });
  return dx;
}

}  // namespace singa
