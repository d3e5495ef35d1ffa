// Convolution with cuDNN (backend kCuda): forward (+ bias, + the fused ReLU), backward data,
// backward filter, backward bias. Fronts: ../conv.cc; the same numbers as ../cpu/conv*.cc.
//
// The prepare step (at the front's call, i.e. once when a graph records) builds the descriptors
// from the ConvHandle (pads, strides, dilations, groups) and picks the algorithm with cuDNN's
// heuristics (cudnnGet*Algorithm_v7: no benchmarking Find calls, which would allocate and run on
// the GPU at prepare time): the first one, in cuDNN's expected-speed order, that succeeds, fits
// kWorkspaceCap and, for the backward passes, is deterministic (replay == eager, bit for bit);
// failing that, the first that fits. Its workspace is returned in Prepared.workspace, so the
// graph plans it like any block. Plans are cached per (pass, device, dtype, geometry). The three
// algorithm-bearing directions share that one path (Prepare<Pass<d>>), described by one table
// with a column per direction (Pass); the bias gradient has no algorithm.
//
// float32 plans may take TF32 tensor-op algorithms on Ampere and later (cuDNN's default math,
// which Apache SINGA's descriptors keep, and PyTorch's torch.backends.cudnn.allow_tf32 default);
// SINGA_CUDNN_TF32=0 restricts them to CUDNN_FMA_MATH (the CPU's numbers within float rounding).
// float16 tensors use CUDNN_DATA_HALF with float compute (PSEUDO_HALF_CONFIG), tensor-op math
// allowed, and the math type cuDNN lists for the chosen algorithm. The run step only enqueues
// cuDNN calls on the device's stream.
//
// SINGA_CUDNN_DETERMINISTIC=0 lets the backward passes take any algorithm (PyTorch's default;
// graph replays then may differ from eager steps in the last bits). Both knobs are read once per
// process. Measured on an H200 (2026-11-28, BENCHMARKS.md), ResNet-50 b16 float32 graph: FMA
// math 24.1 it/s, TF32 60.2, TF32 without the determinism 60.1, FMA without it 32.9.
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "../env_flag.h"
#include "../nn_kernels.h"
#include "cudnn_common.h"

namespace singa {
namespace cuda {
namespace {

constexpr size_t kWorkspaceCap = size_t(1) << 30;  // bytes

const bool kAllowTf32 = EnvFlag("SINGA_CUDNN_TF32", true);
const bool kDeterministicBackward = EnvFlag("SINGA_CUDNN_DETERMINISTIC", true);

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
                          get(), t == kFloat16 ? CUDNN_TENSOR_OP_MATH
                                 : kAllowTf32  ? CUDNN_DEFAULT_MATH
                                               : CUDNN_FMA_MATH),
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
// skip tensor-op entries (TF32) where SINGA_CUDNN_TF32=0; a float16 plan (and a TF32 one) takes
// the math type cuDNN lists for its pick.
template <typename Perf>
int PickAlgo(ConvPlan* p, const Perf* perf, int n, bool want_deterministic, const char* op) {
  const bool half = p->dt == CUDNN_DATA_HALF, any_math = half || kAllowTf32;
  for (int pass = want_deterministic ? 0 : 1; pass < 2; ++pass)
    for (int i = 0; i < n; ++i) {
      const Perf& q = perf[i];
      const bool tensor_op = q.mathType == CUDNN_TENSOR_OP_MATH ||
                             q.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
      if (q.status != CUDNN_STATUS_SUCCESS || q.memory > kWorkspaceCap || (tensor_op && !any_math) ||
          (pass == 0 && q.determinism != CUDNN_DETERMINISTIC))
        continue;
      if (any_math)
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

// The three cuDNN passes as one table: Pass<d> reads direction d's column of each row below
// (forward, backward data, backward filter). cuDNN's calls of a pass take the same operands in
// the same order (two inputs, the convolution, the output), so a row names the pass's kernel
// Args, its calls (heuristic list, workspace query, run), the plan's descriptors and the Args'
// tensors of its operands in that order, the tensor giving the batch size and dtype (kBatch);
// the backward passes keep to deterministic algorithms, an empty batch zeroes dW (otherwise the
// front never calls with N = 0), and the forward adds the bias and the ReLU after (After).
enum class Dir { kForward, kBackwardData, kBackwardFilter };

template <Dir d, typename... V>
constexpr auto Of(V... column) {
  return std::get<int(d)>(std::make_tuple(column...));
}
template <Dir d, typename... T>
using TypeOf = std::tuple_element_t<int(d), std::tuple<T...>>;

template <Dir d>
struct Pass {
  using Args = TypeOf<d, ConvFwdArgs, ConvBwdXArgs, ConvBwdWArgs>;
  using Algo = TypeOf<d, cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdDataAlgo_t,
                      cudnnConvolutionBwdFilterAlgo_t>;
  using Perf = TypeOf<d, cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionBwdDataAlgoPerf_t,
                      cudnnConvolutionBwdFilterAlgoPerf_t>;
  static constexpr const char* kOp = Of<d>("Conv2dForward", "Conv2dBackwardX", "Conv2dBackwardW");
  static constexpr const char* kKey = Of<d>("fwd", "bwd_data", "bwd_filter");
  static constexpr int kCount =
      Of<d>(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  static constexpr bool kDeterministic = d != Dir::kForward, kZeroEmpty = d == Dir::kBackwardFilter;
  static constexpr auto kHeuristics =
      Of<d>(cudnnGetConvolutionForwardAlgorithm_v7, cudnnGetConvolutionBackwardDataAlgorithm_v7,
            cudnnGetConvolutionBackwardFilterAlgorithm_v7);
  static constexpr auto kWorkspace =
      Of<d>(cudnnGetConvolutionForwardWorkspaceSize, cudnnGetConvolutionBackwardDataWorkspaceSize,
            cudnnGetConvolutionBackwardFilterWorkspaceSize);
  static constexpr auto kRun =
      Of<d>(cudnnConvolutionForward, cudnnConvolutionBackwardData, cudnnConvolutionBackwardFilter);
  static constexpr auto kIn0 = Of<d>(&ConvFwdArgs::x, &ConvBwdXArgs::W, &ConvBwdWArgs::x);
  static constexpr auto kIn1 = Of<d>(&ConvFwdArgs::W, &ConvBwdXArgs::dy, &ConvBwdWArgs::dy);
  static constexpr auto kOut = Of<d>(&ConvFwdArgs::y, &ConvBwdXArgs::dx, &ConvBwdWArgs::dW);
  static constexpr auto kBatch = Of<d>(&ConvFwdArgs::x, &ConvBwdXArgs::dy, &ConvBwdWArgs::x);
  static constexpr auto kDesc0 = Of<d>(&ConvPlan::x, &ConvPlan::w, &ConvPlan::x);
  static constexpr auto kDesc1 = Of<d>(&ConvPlan::w, &ConvPlan::y, &ConvPlan::y);
  static constexpr auto kDescOut = Of<d>(&ConvPlan::y, &ConvPlan::x, &ConvPlan::w);
  static auto Descs(const ConvPlan& p) {
    return std::make_tuple((p.*kDesc0).get(), (p.*kDesc1).get(), (p.*kDescOut).get());
  }
  // the forward's bias and fused ReLU, in place on y
  static void After(cudnnHandle_t h, const ConvPlan& p, const Args& a) {
    if constexpr (d == Dir::kForward) {
      if (!a.b.empty())
        SINGA_CUDNN_CHECK(cudnnAddTensor(h, &kOne, p.bias.get(), Data(a.b), &kOne, p.y.get(),
                                         MutData(a.y)),
                          "Conv2dForward: adding the bias");
      if (a.relu)
        SINGA_CUDNN_CHECK(cudnnActivationForward(h, p.relu.get(), &kOne, p.y.get(), Data(a.y),
                                                 &kZero, p.y.get(), MutData(a.y)),
                          "Conv2dForward: ReLU");
    }
  }
};

// The one prepare path of every direction: the cached plan (descriptors, the algorithm picked
// from cuDNN's heuristics, its workspace), and a run step that enqueues the pass's cuDNN call.
template <typename Pass>
Prepared<typename Pass::Args> Prepare(const typename Pass::Args& a) {
  using Args = typename Pass::Args;
  const Tensor& batch = a.*Pass::kBatch;
  const size_t N = batch.shape(0);
  if constexpr (Pass::kZeroEmpty) {
    if (N == 0) return ZerosOf<Args>(Pass::kOut, Pass::kOp);
  }
  const DataType t = batch.data_type();
  Context* ctx = Ctx(batch);
  auto plan = Cached(KeyOf(Pass::kKey, a.h, N, t, ctx->device_id), [&] {
    auto p = std::make_shared<ConvPlan>(a.h, N, t);
    const auto [in0, in1, out] = Pass::Descs(*p);
    typename Pass::Perf perf[Pass::kCount];
    int n = 0;
    SINGA_CUDNN_CHECK(
        Pass::kHeuristics(Cudnn(ctx), in0, in1, p->conv.get(), out, Pass::kCount, &n, perf),
        Pass::kOp << ": choosing the algorithm");
    p->algo = PickAlgo(p.get(), perf, n, Pass::kDeterministic && kDeterministicBackward,
                       Pass::kOp);
    SINGA_CUDNN_CHECK(Pass::kWorkspace(Cudnn(ctx), in0, in1, p->conv.get(), out,
                                       typename Pass::Algo(p->algo), &p->ws_bytes),
                      Pass::kOp << ": workspace size");
    return p;
  });
  Prepared<Args> r;
  r.workspace = WorkspaceFloats(plan->ws_bytes);
  r.run = [plan](const Args& a, float* ws) {
    const ConvPlan& p = *plan;
    const cudnnHandle_t h = Cudnn(Ctx(a.*Pass::kOut));
    const auto [in0, in1, out] = Pass::Descs(p);
    SINGA_CUDNN_CHECK(Pass::kRun(h, &kOne, in0, Data(a.*Pass::kIn0), in1, Data(a.*Pass::kIn1),
                                 p.conv.get(), typename Pass::Algo(p.algo), ws, p.ws_bytes,
                                 &kZero, out, MutData(a.*Pass::kOut)),
                      Pass::kOp);
    Pass::After(h, p, a);
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

SINGA_REGISTER_KERNEL(Conv2dForward, kCuda, cuda::Prepare<cuda::Pass<cuda::Dir::kForward>>);
SINGA_REGISTER_KERNEL(Conv2dBackwardX, kCuda, cuda::Prepare<cuda::Pass<cuda::Dir::kBackwardData>>);
SINGA_REGISTER_KERNEL(Conv2dBackwardW, kCuda,
                      cuda::Prepare<cuda::Pass<cuda::Dir::kBackwardFilter>>);
SINGA_REGISTER_KERNEL(Conv2dBackwardB, kCuda, cuda::BackwardB);

}  // namespace singa
