// ONNX's GatherElements and GatherND and their scatter-add backwards (see singa/ops/
// transformer.h): the fronts check shapes and dtypes; index values stay on the device and the
// kernels (cpu/gather.cc, cuda/gather.cu) check them when they run, as IndexSelect's do.
#include "singa/ops/transformer.h"
#include "transformer_kernels.h"

namespace singa {

SINGA_KERNEL_SLOT(GatherElements, void(const Tensor&, const ElementsArgs&, const Tensor&,
                                       Context*));
SINGA_KERNEL_SLOT(GatherElementsBackward, void(const Tensor&, const ElementsArgs&,
                                               const Tensor&, Context*));
SINGA_KERNEL_SLOT(GatherND, void(const Tensor&, const NdArgs&, const Tensor&, Context*));
SINGA_KERNEL_SLOT(GatherNDBackward, void(const Tensor&, const NdArgs&, const Tensor&, Context*));

namespace {

void CheckData(const char* op, const char* what, const Tensor& t, bool allow_half) {
  SINGA_CHECK(t.block() != nullptr, ValueError, op << ": the " << what << " tensor is empty");
  const DataType dt = t.data_type();
  SINGA_CHECK_DTYPE(dt == kFloat32 || dt == kInt || (allow_half && dt == kFloat16),
                    op << ": dtype " << DataTypeName(dt) << " of the " << what
                       << " is not supported (float32, int32" << (allow_half ? ", float16" : "")
                       << ")");
}

ElementsArgs ElementsGeometry(const char* op, const Shape& x_shape, const Tensor& indices,
                              int axis_in) {
  SINGA_CHECK_AXIS(!x_shape.empty(), op << ": cannot index a 0-d tensor");
  const Shape& is = indices.shape();
  SINGA_CHECK_SHAPE(is.size() == x_shape.size(),
                    op << ": indices " << is << " must have the rank of the input " << x_shape);
  ElementsArgs g;
  g.axis = NormalizeAxis(axis_in, x_shape.size(), op);
  for (size_t d = 0; d < is.size(); ++d)
    SINGA_CHECK_SHAPE(d == g.axis || is[d] <= x_shape[d],
                      op << ": indices " << is << " are larger than the input " << x_shape
                         << " on axis " << d << " (only axis " << g.axis << " may differ)");
  g.indices = indices.Contiguous();
  g.x_shape = x_shape;
  g.idx_shape = is;
  return g;
}

NdArgs NdGeometry(const char* op, const Shape& x_shape, const Tensor& indices, int batch_dims,
                  Shape* out_shape) {
  const Shape& is = indices.shape();
  SINGA_CHECK_SHAPE(!is.empty(), op << ": indices must have at least one axis, got a 0-d tensor");
  SINGA_CHECK_VALUE(batch_dims >= 0 && size_t(batch_dims) < std::min(is.size(), x_shape.size()),
                    op << ": batch_dims " << batch_dims << " must be in [0, "
                       << std::min(is.size(), x_shape.size()) << ") for input " << x_shape
                       << " and indices " << is);
  const size_t b = size_t(batch_dims), q = is.back();
  for (size_t d = 0; d < b; ++d)
    SINGA_CHECK_SHAPE(is[d] == x_shape[d], op << ": the batch axes of the input " << x_shape
                                              << " and the indices " << is << " differ");
  SINGA_CHECK_SHAPE(q >= 1 && q <= x_shape.size() - b,
                    op << ": the last axis of the indices " << is << " holds " << q
                       << " coordinates; the input " << x_shape << " after " << b
                       << " batch axes has " << x_shape.size() - b);
  NdArgs g;
  g.indices = indices.Contiguous();
  g.batch = Product(x_shape, 0, b);
  g.batch_dims = b;
  g.per_batch = Product(is, b, is.size() - 1);
  g.slice = Product(x_shape, b + q);
  g.x_dims.assign(x_shape.begin() + std::ptrdiff_t(b), x_shape.begin() + std::ptrdiff_t(b + q));
  g.x_shape = x_shape;
  out_shape->assign(is.begin(), is.end() - 1);
  out_shape->insert(out_shape->end(), x_shape.begin() + std::ptrdiff_t(b + q), x_shape.end());
  return g;
}

template <typename Args, typename Fn>
void Submit(OpId id, Fn* k, const Tensor& in, const Args& g, const Tensor& out) {
  in.device()->Exec({.id = id, .reads = {in.block(), g.indices.block()}, .writes = {out.block()}},
                    [k, in, g, out](Context* ctx) { k(in, g, out, ctx); });
}

}  // namespace

Tensor GatherElements(const Tensor& x_in, const Tensor& indices, int axis) {
  const OpId id = OpId::kGatherElements;
  const char* op = OpName(id);
  CheckData(op, "input", x_in, true);
  CheckIndices(op, indices);
  CheckSameDevice(op, {&x_in, &indices});
  const ElementsArgs g = ElementsGeometry(op, x_in.shape(), indices, axis);
  const Tensor x = x_in.Contiguous();
  Tensor out(g.idx_shape, x.device(), x.data_type());
  Submit(id, GatherElementsKernel().For(*x.device()), x, g, out);
  return out;
}

Tensor GatherElementsBackward(const Tensor& dy_in, const Tensor& indices, int axis,
                              const Shape& x_shape) {
  const OpId id = OpId::kGatherElementsBackward;
  const char* op = OpName(id);
  CheckData(op, "gradient", dy_in, false);
  CheckIndices(op, indices);
  CheckSameDevice(op, {&dy_in, &indices});
  const ElementsArgs g = ElementsGeometry(op, x_shape, indices, axis);
  SINGA_CHECK_SHAPE(dy_in.shape() == g.idx_shape, op << ": dy has shape " << dy_in.shape()
                                                     << ", expected the indices' "
                                                     << g.idx_shape);
  const Tensor dy = dy_in.Contiguous();
  Tensor dx(x_shape, dy.device(), dy.data_type());
  Submit(id, GatherElementsBackwardKernel().For(*dy.device()), dy, g, dx);
  return dx;
}

Tensor GatherND(const Tensor& x_in, const Tensor& indices, int batch_dims) {
  const OpId id = OpId::kGatherND;
  const char* op = OpName(id);
  CheckData(op, "input", x_in, true);
  CheckIndices(op, indices);
  CheckSameDevice(op, {&x_in, &indices});
  Shape out_shape;
  const NdArgs g = NdGeometry(op, x_in.shape(), indices, batch_dims, &out_shape);
  const Tensor x = x_in.Contiguous();
  Tensor out(out_shape, x.device(), x.data_type());
  Submit(id, GatherNDKernel().For(*x.device()), x, g, out);
  return out;
}

Tensor GatherNDBackward(const Tensor& dy_in, const Tensor& indices, int batch_dims,
                        const Shape& x_shape) {
  const OpId id = OpId::kGatherNDBackward;
  const char* op = OpName(id);
  CheckData(op, "gradient", dy_in, false);
  CheckIndices(op, indices);
  CheckSameDevice(op, {&dy_in, &indices});
  Shape out_shape;
  const NdArgs g = NdGeometry(op, x_shape, indices, batch_dims, &out_shape);
  SINGA_CHECK_SHAPE(dy_in.shape() == out_shape, op << ": dy has shape " << dy_in.shape()
                                                   << ", expected " << out_shape);
  const Tensor dy = dy_in.Contiguous();
  Tensor dx(x_shape, dy.device(), dy.data_type());
  Submit(id, GatherNDBackwardKernel().For(*dy.device()), dy, g, dx);
  return dx;
}

}  // namespace singa
