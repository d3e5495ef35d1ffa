// Convolution with cuDNN (backend kCuda): forward (+ bias, + the fused ReLU), backward data,
// backward filter, backward bias. Fronts: ../conv.cc; the same numbers as ../cpu/conv*.cc.
//
// The prepare step (at the front's call, i.e. once when a graph records) builds the descriptors
// from the ConvHandle (pads, strides, dilations, groups) and picks the algorithm with cuDNN's
// heuristics (cudnnGet*Algorithm_v7: no benchmarking Find calls, which would allocate and run on
// the GPU at prepare time): the first one, in cuDNN's expected-speed order, that succeeds, fits
// kWorkspaceCap and, for the backward passes, is deterministic (replay == eager, bit for bit);
// failing that, the first that fits. Its workspace is returned in Prepared.workspace, so the
// graph plans it like any block. Plans are cached per (pass, device, dtype, geometry).
//
// float32 runs with CUDNN_FMA_MATH and skips tensor-op algorithms (no TF32 on Ampere and later:
// the CPU's numbers within float rounding); float16 tensors use CUDNN_DATA_HALF with float
// compute (PSEUDO_HALF_CONFIG), tensor-op math allowed, and the math type cuDNN lists for the
// chosen algorithm. The run step only enqueues cuDNN calls on the device's stream.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "../nn_kernels.h"
#include "cudnn_common.h"

namespace singa {
namespace cuda {
namespace {

constexpr size_t kWorkspaceCap = size_t(1) << 30;  // bytes

class ConvDesc : public ConvDescBase {
 public:
  ConvDesc(const ConvHandle& h, DataType t) {
    const char* what = "Conv2d: cuDNN convolution descriptor";
    SINGA_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
                          get(), int(h.pad_h), int(h.pad_w), int(h.stride_h), int(h.stride_w),
                          int(h.dilation_h), int(h.dilation_w), CUDNN_CROSS_CORRELATION,
                          CUDNN_DATA_FLOAT),
                      what);
    SINGA_CUDNN_CHECK(cudnnSetConvolutionGroupCount(get(), int(h.group)), what);
    SINGA_CUDNN_CHECK(cudnnSetConvolutionMathType(
                          get(), t == kFloat16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
                      what);
  }
};

// Everything one pass needs, built once per shape.
struct ConvPlan {
  ConvPlan(const ConvHandle& h, size_t N, DataType t)
      : dt(DnnType(t)),
        x(dt, N, h.channels, h.height, h.width),
        y(dt, N, h.num_filters, h.conv_height, h.conv_width),
        bias(dt, 1, h.num_filters, 1, 1),
        w(dt, h.num_filters, h.channels / h.group, h.kernel_h, h.kernel_w),
        conv(h, t) {}
  cudnnDataType_t dt;
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  ReluDesc relu;
  int algo = 0;          // the cudnnConvolution*Algo_t of this pass
  size_t ws_bytes = 0;
};

std::string KeyOf(const char* pass, const ConvHandle& h, size_t N, DataType t, int device) {
  std::string k = pass;
  for (size_t v : {size_t(device), size_t(t), N, h.channels, h.height, h.width, h.num_filters,
                   h.group, h.kernel_h, h.kernel_w, h.stride_h, h.stride_w, h.pad_h, h.pad_w,
                   h.dilation_h, h.dilation_w})
    k += "," + std::to_string(v);
  return k;
}

// The plan cached under `key`, made by make() the first time (under the lock: plans are made
// when fronts are called, rarely, and two threads must not build the same one twice).
struct PlanCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const ConvPlan>> plans;
};
PlanCache& Plans() {  // one cache for every pass (the key names the pass)
  static PlanCache cache;
  return cache;
}

template <typename Make>
std::shared_ptr<const ConvPlan> Cached(const std::string& key, Make&& make) {
  PlanCache& c = Plans();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.plans.find(key);
  if (it != c.plans.end()) return it->second;
  std::shared_ptr<const ConvPlan> p = make();
  c.plans.emplace(key, p);
  return p;
}

// The algorithm of cuDNN's heuristic list (fastest first) as described at the top. float32 plans
// skip tensor-op entries (TF32); a float16 plan takes the math type cuDNN lists for its pick.
template <typename Perf>
int PickAlgo(ConvPlan* p, const Perf* perf, int n, bool want_deterministic, const char* op) {
  const bool half = p->dt == CUDNN_DATA_HALF;
  for (int pass = want_deterministic ? 0 : 1; pass < 2; ++pass)
    for (int i = 0; i < n; ++i) {
      const Perf& q = perf[i];
      const bool tensor_op = q.mathType == CUDNN_TENSOR_OP_MATH ||
                             q.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
      if (q.status != CUDNN_STATUS_SUCCESS || q.memory > kWorkspaceCap || (tensor_op && !half) ||
          (pass == 0 && q.determinism != CUDNN_DETERMINISTIC))
        continue;
      if (half)
        SINGA_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv.get(), q.mathType),
                          op << ": math type");
      return static_cast<int>(q.algo);
    }
  SINGA_THROW(DeviceError, op << ": cuDNN offers no algorithm for this shape within a "
                              << (kWorkspaceCap >> 20) << " MiB workspace");
}

size_t WorkspaceFloats(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

Context* Ctx(const Tensor& t) { return t.device()->context(); }

const float kOne = 1.f, kZero = 0.f;

Prepared<ConvFwdArgs> Forward(const ConvFwdArgs& a) {
  const size_t N = a.x.shape(0);
  const DataType t = a.x.data_type();
  Context* ctx = Ctx(a.x);
  auto plan = Cached(KeyOf("fwd", a.h, N, t, ctx->device_id), [&] {
    auto p = std::make_shared<ConvPlan>(a.h, N, t);
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    SINGA_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
                          Cudnn(ctx), p->x.get(), p->w.get(), p->conv.get(), p->y.get(),
                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf),
                      "Conv2dForward: choosing the algorithm");
    p->algo = PickAlgo(p.get(), perf, n, false, "Conv2dForward");
    SINGA_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
                          Cudnn(ctx), p->x.get(), p->w.get(), p->conv.get(), p->y.get(),
                          cudnnConvolutionFwdAlgo_t(p->algo), &p->ws_bytes),
                      "Conv2dForward: workspace size");
    return p;
  });
  Prepared<ConvFwdArgs> r;
  r.workspace = WorkspaceFloats(plan->ws_bytes);
  r.run = [plan](const ConvFwdArgs& a, float* ws) {
    const cudnnHandle_t h = Cudnn(Ctx(a.y));
    const ConvPlan& p = *plan;
    SINGA_CUDNN_CHECK(cudnnConvolutionForward(h, &kOne, p.x.get(), Data(a.x), p.w.get(),
                                              Data(a.W), p.conv.get(),
                                              cudnnConvolutionFwdAlgo_t(p.algo), ws, p.ws_bytes,
                                              &kZero, p.y.get(), MutData(a.y)),
                      "Conv2dForward");
    if (!a.b.empty())
      SINGA_CUDNN_CHECK(cudnnAddTensor(h, &kOne, p.bias.get(), Data(a.b), &kOne, p.y.get(),
                                       MutData(a.y)),
                        "Conv2dForward: adding the bias");
    if (a.relu)
      SINGA_CUDNN_CHECK(cudnnActivationForward(h, p.relu.get(), &kOne, p.y.get(), Data(a.y),
                                               &kZero, p.y.get(), MutData(a.y)),
                        "Conv2dForward: ReLU");
  };
  return r;
}

Prepared<ConvBwdXArgs> BackwardX(const ConvBwdXArgs& a) {
  const size_t N = a.dy.shape(0);
  const DataType t = a.dy.data_type();
  Context* ctx = Ctx(a.dy);
  auto plan = Cached(KeyOf("bwd_data", a.h, N, t, ctx->device_id), [&] {
    auto p = std::make_shared<ConvPlan>(a.h, N, t);
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int n = 0;
    SINGA_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                          Cudnn(ctx), p->w.get(), p->y.get(), p->conv.get(), p->x.get(),
                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf),
                      "Conv2dBackwardX: choosing the algorithm");
    p->algo = PickAlgo(p.get(), perf, n, true, "Conv2dBackwardX");
    SINGA_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
                          Cudnn(ctx), p->w.get(), p->y.get(), p->conv.get(), p->x.get(),
                          cudnnConvolutionBwdDataAlgo_t(p->algo), &p->ws_bytes),
                      "Conv2dBackwardX: workspace size");
    return p;
  });
  Prepared<ConvBwdXArgs> r;
  r.workspace = WorkspaceFloats(plan->ws_bytes);
  r.run = [plan](const ConvBwdXArgs& a, float* ws) {
    const ConvPlan& p = *plan;
    SINGA_CUDNN_CHECK(cudnnConvolutionBackwardData(
                          Cudnn(Ctx(a.dx)), &kOne, p.w.get(), Data(a.W), p.y.get(), Data(a.dy),
                          p.conv.get(), cudnnConvolutionBwdDataAlgo_t(p.algo), ws, p.ws_bytes,
                          &kZero, p.x.get(), MutData(a.dx)),
                      "Conv2dBackwardX");
  };
  return r;
}

// dW or db of an empty batch: zeros (cuDNN takes no N = 0 descriptor).
template <typename Args>
Prepared<Args> ZerosOf(Tensor Args::*out, const char* op) {
  Prepared<Args> r;
  r.run = [out, op](const Args& a, float*) {
    const Tensor& o = a.*out;
    SINGA_CUDA_CHECK(cudaMemsetAsync(MutData(o), 0, o.MemSize(), Stream(Ctx(o))), op);
  };
  return r;
}

Prepared<ConvBwdWArgs> BackwardW(const ConvBwdWArgs& a) {
  const size_t N = a.x.shape(0);
  if (N == 0) return ZerosOf<ConvBwdWArgs>(&ConvBwdWArgs::dW, "Conv2dBackwardW");
  const DataType t = a.x.data_type();
  Context* ctx = Ctx(a.x);
  auto plan = Cached(KeyOf("bwd_filter", a.h, N, t, ctx->device_id), [&] {
    auto p = std::make_shared<ConvPlan>(a.h, N, t);
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int n = 0;
    SINGA_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                          Cudnn(ctx), p->x.get(), p->y.get(), p->conv.get(), p->w.get(),
                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf),
                      "Conv2dBackwardW: choosing the algorithm");
    p->algo = PickAlgo(p.get(), perf, n, true, "Conv2dBackwardW");
    SINGA_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
                          Cudnn(ctx), p->x.get(), p->y.get(), p->conv.get(), p->w.get(),
                          cudnnConvolutionBwdFilterAlgo_t(p->algo), &p->ws_bytes),
                      "Conv2dBackwardW: workspace size");
    return p;
  });
  Prepared<ConvBwdWArgs> r;
  r.workspace = WorkspaceFloats(plan->ws_bytes);
  r.run = [plan](const ConvBwdWArgs& a, float* ws) {
    const ConvPlan& p = *plan;
    SINGA_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
                          Cudnn(Ctx(a.dW)), &kOne, p.x.get(), Data(a.x), p.y.get(), Data(a.dy),
                          p.conv.get(), cudnnConvolutionBwdFilterAlgo_t(p.algo), ws, p.ws_bytes,
                          &kZero, p.w.get(), MutData(a.dW)),
                      "Conv2dBackwardW");
  };
  return r;
}

Prepared<ConvBwdBArgs> BackwardB(const ConvBwdBArgs& a) {
  const size_t N = a.dy.shape(0);
  if (N == 0) return ZerosOf<ConvBwdBArgs>(&ConvBwdBArgs::db, "Conv2dBackwardB");
  const DataType t = a.dy.data_type();
  Context* ctx = Ctx(a.dy);
  // Only the dy and bias descriptors are used; no algorithm to choose.
  auto plan = Cached(KeyOf("bwd_bias", a.h, N, t, ctx->device_id),
                     [&] { return std::make_shared<ConvPlan>(a.h, N, t); });
  Prepared<ConvBwdBArgs> r;
  r.run = [plan](const ConvBwdBArgs& a, float*) {
    const ConvPlan& p = *plan;
    SINGA_CUDNN_CHECK(cudnnConvolutionBackwardBias(Cudnn(Ctx(a.db)), &kOne, p.y.get(),
                                                   Data(a.dy), &kZero, p.bias.get(),
                                                   MutData(a.db)),
                      "Conv2dBackwardB");
  };
  return r;
}

}  // namespace
}  // namespace cuda

SINGA_REGISTER_KERNEL(Conv2dForward, kCuda, cuda::Forward);
SINGA_REGISTER_KERNEL(Conv2dBackwardX, kCuda, cuda::BackwardX);
SINGA_REGISTER_KERNEL(Conv2dBackwardW, kCuda, cuda::BackwardW);
SINGA_REGISTER_KERNEL(Conv2dBackwardB, kCuda, cuda::BackwardB);

}  // namespace singa
