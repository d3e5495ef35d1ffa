// singa/dist/nccl.h: all-reduce of CUDA tensors across processes with NCCL (CUDA builds).
//
//   // rank 0 makes the id and hands it to the others (MPI_Bcast, or Python's multiprocessing
//   // through singa_wrap.NcclIdHolder, as Apache SINGA's train_multiprocess.py does):
//   singa::NcclUniqueId id = singa::NewNcclId();
//   singa::NcclComm comm(id, world_size, rank, gpu);     // gpu: this process's CudaGPU
//   std::vector<singa::Tensor> grads = {...};            // float32 tensors on `gpu`
//   comm.AllReduce(grads, 1.f / world_size);             // in place: scale * sum over ranks
//   comm.AllReduce(grads, 1.f / world_size, /*half=*/true);   // values travel as float16
//
// Each call is one operation submitted through Device::Exec as a collective (a graph records it,
// keeps every collective in submission order, and never captures it as a CUDA Graph): inside,
// one ncclGroupStart/End around an in-place ncclAllReduce per tensor, so NCCL fuses them, with a
// pre-multiplied sum (ncclRedOpCreatePreMulSum) applying the scale on the way. Everything runs on
// the GPU's stream, ordered with the backward kernels that produced the gradients.
// A build without CUDA compiles this header; NewNcclId and the constructor throw
// NotImplementedError.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "singa/core/device.h"
#include "singa/core/tensor.h"

namespace singa {

/// ncclUniqueId's 128 bytes, as plain data (copyable between processes).
struct NcclUniqueId {
  std::array<char, 128> bytes{};
};

/// True when libsinga was built with CUDA and NCCL.
bool BuiltWithNccl();
/// A fresh id for a new clique (ncclGetUniqueId).
NcclUniqueId NewNcclId();

class NcclComm {
 public:
  /// Joins the clique `id` as `rank` of `world_size` on `gpu` (a CudaGPU); blocks until every
  /// rank has joined. Throws DeviceError on NCCL failures, ValueError for a bad rank.
  NcclComm(const NcclUniqueId& id, int world_size, int rank, std::shared_ptr<Device> gpu);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int world_size() const { return world_size_; }
  int rank() const { return rank_; }
  const std::shared_ptr<Device>& device() const { return gpu_; }
  /// In place, every tensor: t <- scale * sum over ranks of t (float32 tensors of this GPU).
  /// `half`: the values travel (and are summed by NCCL) as float16.
  void AllReduce(const std::vector<Tensor>& ts, float scale = 1.f, bool half = false);

 private:
  struct State;
  int world_size_, rank_;
  std::shared_ptr<Device> gpu_;
  std::shared_ptr<State> state_;  // shared with recorded operations
};

}  // namespace singa
