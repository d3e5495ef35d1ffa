// NcclComm (singa/dist/nccl.h): NCCL all-reduce of CUDA tensors, one collective Exec per call.
#include "singa/dist/nccl.h"

#include <nccl.h>

#include <cstring>
#include <map>
#include <mutex>

#include "../ops/kernel_slots.h"
#include "cuda_common.h"

#define SINGA_NCCL_CHECK(call, what)                                                   \
  do {                                                                                 \
    ncclResult_t singa_nccl_r_ = (call);                                               \
    SINGA_CHECK(singa_nccl_r_ == ncclSuccess, DeviceError,                             \
                what << ": NCCL " << ncclGetErrorString(singa_nccl_r_));               \
  } while (0)

namespace singa {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId().bytes),
              "NcclUniqueId must hold an ncclUniqueId");

bool BuiltWithNccl() { return true; }

NcclUniqueId NewNcclId() {
  ncclUniqueId id;
  SINGA_NCCL_CHECK(ncclGetUniqueId(&id), "NewNcclId");
  NcclUniqueId out;
  std::memcpy(out.bytes.data(), &id, sizeof(id));
  return out;
}

struct NcclComm::State {
  ncclComm_t comm = nullptr;
  std::mutex mutex;
  // Pre-multiplied-sum reduction ops, one per (scale, dtype): created on first use, kept for
  // the life of the communicator (a replay reuses them).
  std::map<std::pair<float, int>, ncclRedOp_t> ops;

  ncclRedOp_t Op(float scale, ncclDataType_t type) {
    std::lock_guard<std::mutex> lock(mutex);
    auto key = std::make_pair(scale, static_cast<int>(type));
    auto it = ops.find(key);
    if (it != ops.end()) return it->second;
    ncclRedOp_t op;
    if (scale == 1.f) {
      op = ncclSum;
    } else if (type == ncclHalf) {
      __half s = __float2half(scale);
      SINGA_NCCL_CHECK(ncclRedOpCreatePreMulSum(&op, &s, type, ncclScalarHostImmediate, comm),
                       "NcclComm: the scaled sum");
    } else {
      float s = scale;
      SINGA_NCCL_CHECK(ncclRedOpCreatePreMulSum(&op, &s, type, ncclScalarHostImmediate, comm),
                       "NcclComm: the scaled sum");
    }
    ops.emplace(key, op);
    return op;
  }

  ~State() {
    if (comm == nullptr) return;
    for (auto& [key, op] : ops)
      if (op != ncclSum) ncclRedOpDestroy(op, comm);
    ncclCommDestroy(comm);
  }
};

NcclComm::NcclComm(const NcclUniqueId& id, int world_size, int rank, std::shared_ptr<Device> gpu)
    : world_size_(world_size), rank_(rank), gpu_(std::move(gpu)),
      state_(std::make_shared<State>()) {
  SINGA_CHECK_VALUE(world_size >= 1 && rank >= 0 && rank < world_size,
                    "NcclComm: rank " << rank << " is outside a world of size " << world_size);
  SINGA_CHECK_DEVICE(gpu_ && gpu_->lang() == kCuda,
                     "NcclComm: NCCL reduces CUDA tensors; give it this process's CudaGPU");
  gpu_->Activate();
  ncclUniqueId nid;
  std::memcpy(&nid, id.bytes.data(), sizeof(nid));
  SINGA_NCCL_CHECK(ncclCommInitRank(&state_->comm, world_size, nid, rank),
                   "NcclComm(rank " << rank << " of " << world_size << ")");
}

NcclComm::~NcclComm() = default;

void NcclComm::AllReduce(const std::vector<Tensor>& ts, float scale, bool half) {
  if (ts.empty()) return;
  std::vector<Block*> blocks;
  std::vector<Tensor> bufs;  // the float16 copies that travel when `half`
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    SINGA_CHECK_DEVICE(t.device() == gpu_, "NcclComm::AllReduce: tensor " << i
                                               << " is not on this communicator's GPU");
    SINGA_CHECK_DTYPE(t.data_type() == kFloat32, "NcclComm::AllReduce: tensor " << i
                                                     << " is " << t.data_type()
                                                     << ", expected float32");
    SINGA_CHECK_SHAPE(t.IsContiguous(), "NcclComm::AllReduce: tensor " << i
                                            << " is a non-contiguous view");
    blocks.push_back(t.block());
    if (half) {
      bufs.emplace_back(t.shape(), gpu_, kFloat16);
      blocks.push_back(bufs.back().block());
    }
  }
  auto* convert = half ? StridedCopyKernel().Get(Backend::kCuda) : nullptr;
  auto st = state_;
  gpu_->Exec(
      {.id = OpId::kNcclAllReduce, .reads = blocks, .writes = blocks, .collective = true},
      [st, ts, bufs, scale, half, convert](Context* ctx) {
        if (half)
          for (size_t i = 0; i < ts.size(); ++i) convert(ts[i], bufs[i], ctx);
        const ncclDataType_t type = half ? ncclHalf : ncclFloat;
        const ncclRedOp_t op = st->Op(scale, type);
        SINGA_NCCL_CHECK(ncclGroupStart(), "NcclComm::AllReduce");
        for (size_t i = 0; i < ts.size(); ++i) {
          void* p = half ? bufs[i].block()->mutable_data() : ts[i].block()->mutable_data();
          SINGA_NCCL_CHECK(ncclAllReduce(p, p, ts[i].Size(), type, op, st->comm,
                                         cuda::Stream(ctx)),
                           "NcclComm::AllReduce");
        }
        SINGA_NCCL_CHECK(ncclGroupEnd(), "NcclComm::AllReduce");
        if (half)
          for (size_t i = 0; i < ts.size(); ++i) convert(bufs[i], ts[i], ctx);
      });
}

}  // namespace singa
