// Layer normalisation over trailing axes (see singa/ops/transformer.h): the device-independent
// fronts. Kernels: cpu/layer_norm.cc (reference), dnnl/layer_norm.cc, cuda/layer_norm.cu.
#include <vector>

#include "singa/ops/transformer.h"
#include "transformer_kernels.h"

namespace singa {

SINGA_KERNEL_SLOT(LayerNormForward, PrepareFn<LnFwdArgs>);
SINGA_KERNEL_SLOT(LayerNormBackward, PrepareFn<LnBwdArgs>);

namespace {

// x's trailing axes equal normalized_shape; returns (M, N).
void CheckRows(const char* op, const Tensor& x, const Shape& ns, size_t* M, size_t* N) {
  CheckNnFloat(op, "input", x);
  SINGA_CHECK_SHAPE(!ns.empty(), op << ": normalized_shape is empty");
  const size_t k = ns.size(), nd = x.nDim();
  bool fits = nd >= k;
  for (size_t i = 0; fits && i < k; ++i) fits = x.shape(nd - k + i) == ns[i];
  SINGA_CHECK_SHAPE(fits, op << ": normalized_shape " << ns
                             << " must equal the trailing axes of the input " << x.shape());
  *N = Product(ns);
  *M = Product(x.shape(), 0, nd - k);
}

// An affine parameter of normalized_shape (or its element count as a flat vector).
void CheckParam(const char* op, const char* what, const Tensor& p, const Tensor& x,
                const Shape& ns) {
  SINGA_CHECK_DTYPE(p.data_type() == x.data_type(),
                    op << ": " << what << " has dtype " << p.data_type() << ", the input "
                       << x.data_type());
  SINGA_CHECK_SHAPE(p.shape() == ns || (p.nDim() == 1 && p.Size() == Product(ns)),
                    op << ": " << what << " has shape " << p.shape()
                       << ", expected normalized_shape " << ns);
  CheckSameDevice(op, {&x, &p});
}

void CheckStats(const char* op, const Tensor& mean, const Tensor& rstd, size_t M) {
  for (const Tensor* t : {&mean, &rstd}) {
    SINGA_CHECK(t->block() != nullptr, ValueError, op << ": a statistics tensor is empty");
    SINGA_CHECK_DTYPE(t->data_type() == kFloat32,
                      op << ": mean and rstd must be float32, got " << t->data_type());
    SINGA_CHECK_SHAPE(t->Size() == M, op << ": mean / rstd have " << t->Size()
                                         << " values, expected one per row (" << M << ")");
  }
}

}  // namespace

std::vector<Tensor> LayerNormForward(const Tensor& x_in, const Tensor& weight,
                                     const Tensor& bias, const Shape& ns, float eps) {
  const OpId id = OpId::kLayerNormForward;
  const char* op = OpName(id);
  LnFwdArgs a;
  CheckRows(op, x_in, ns, &a.M, &a.N);
  SINGA_CHECK_VALUE(eps >= 0.f, op << ": eps must be >= 0, got " << eps);
  std::vector<Block*> reads;
  if (!weight.empty()) {
    CheckParam(op, "weight", weight, x_in, ns);
    a.weight = weight.Contiguous();
    reads.push_back(a.weight.block());
  }
  if (!bias.empty()) {
    CheckParam(op, "bias", bias, x_in, ns);
    a.bias = bias.Contiguous();
    reads.push_back(a.bias.block());
  }
  a.x = x_in.Contiguous();
  a.eps = eps;
  const auto& dev = a.x.device();
  a.y = Tensor(a.x.shape(), dev, a.x.data_type());
  Shape rows(a.x.shape().begin(), a.x.shape().end() - std::ptrdiff_t(ns.size()));
  a.mean = Tensor(rows, dev, kFloat32);
  a.rstd = Tensor(rows, dev, kFloat32);
  if (a.y.Size() == 0) return {a.y, a.mean, a.rstd};
  reads.insert(reads.begin(), a.x.block());
  LaunchKernel(LayerNormForwardKernel(), a, dev, reads,
               {a.y.block(), a.mean.block(), a.rstd.block()}, id);
  return {a.y, a.mean, a.rstd};
}

std::vector<Tensor> LayerNormBackward(const Tensor& dy_in, const Tensor& x_in,
                                      const Tensor& weight, const Tensor& mean,
                                      const Tensor& rstd, const Shape& ns) {
  const OpId id = OpId::kLayerNormBackward;
  const char* op = OpName(id);
  LnBwdArgs a;
  CheckRows(op, x_in, ns, &a.M, &a.N);
  CheckNnFloat(op, "gradient dy", dy_in);
  SINGA_CHECK_SHAPE(dy_in.shape() == x_in.shape(), op << ": dy has shape " << dy_in.shape()
                                                      << " but x has shape " << x_in.shape());
  CheckSameDevice(op, {&x_in, &dy_in, &mean, &rstd});
  CheckSameDtype(op, {&x_in, &dy_in});
  CheckStats(op, mean, rstd, a.M);
  a.dy = dy_in.Contiguous();
  a.x = x_in.Contiguous();
  a.mean = mean.Contiguous();
  a.rstd = rstd.Contiguous();
  const auto& dev = a.x.device();
  a.dx = Tensor(a.x.shape(), dev, a.x.data_type());
  std::vector<Block*> reads{a.dy.block(), a.x.block(), a.mean.block(), a.rstd.block()};
  std::vector<Block*> writes{a.dx.block()};
  if (!weight.empty()) {
    CheckParam(op, "weight", weight, x_in, ns);
    a.weight = weight.Contiguous();
    a.dweight = Tensor(weight.shape(), dev, weight.data_type());
    a.dbias = Tensor(weight.shape(), dev, weight.data_type());
    reads.push_back(a.weight.block());
    writes.insert(writes.end(), {a.dweight.block(), a.dbias.block()});
  }
  if (a.M == 0) {  // no rows: the parameter gradients are zeros
    for (Tensor* t : {&a.dweight, &a.dbias})
      if (!t->empty()) t->SetValue(0.f);
    return {a.dx, a.dweight, a.dbias};
  }
  LaunchKernel(LayerNormBackwardKernel(), a, dev, reads, writes, id);
  return {a.dx, a.dweight, a.dbias};
}

}  // namespace singa
