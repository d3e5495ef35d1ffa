// singa/dist/communicator.h: data-parallel collectives over MPI for float32 CPU tensors.
//
//   singa::Communicator comm;                 // MPI world; outside mpirun a singleton of size 1
//   comm.Synch(grad);                         // grad <- sum over ranks of grad (in place)
//   comm.FusedSynch(grads, /*send=*/true);    // one all-reduce through the fusion buffer
//   comm.Wait();                              // no-op on CPU (calls are blocking when they run)
//
// Every collective is submitted through Device::Exec with the blocks it reads and writes, so a
// buffered graph records it and replays it. They are submitted as collectives (Exec's
// `collective` flag): a graph chains them in submission order, as it chains the random-number
// ops, so every rank runs its collectives in the same order whatever the schedule.
//
// Errors throw singa::Error (MPI's error handler on the world communicator is set to return
// errors; every return code is checked). A build without MPI (USE_DIST=OFF) compiles this header
// and its constructor throws NotImplementedError.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "singa/core/tensor.h"

namespace singa {

/// True when libsinga was built with MPI (USE_DIST).
bool BuiltWithDist();

class Communicator {
 public:
  /// Joins MPI's world (initialising MPI when nobody has). `buff_size`: elements of the fusion
  /// buffer; a fused list larger than it is reduced in several rounds.
  explicit Communicator(size_t buff_size = 4194304);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int world_size() const { return world_size_; }
  int global_rank() const { return global_rank_; }
  /// Rank among the processes on this node (MPI_COMM_TYPE_SHARED).
  int local_rank() const { return local_rank_; }

  /// In place: t <- scale * sum over ranks of t.
  void Synch(Tensor& t, float scale = 1.0f);
  /// All-reduces every tensor of `ts` through one buffer. SINGA's send=false stages the tensors;
  /// here staging happens when the send=true call runs, so send=false submits nothing.
  void FusedSynch(std::vector<Tensor>& ts, bool send = true, float scale = 1.0f);
  /// As Synch / FusedSynch, but the values travel as IEEE float16 (summed in float).
  void SynchHalf(Tensor& t, float scale = 1.0f);
  void FusedSynchHalf(std::vector<Tensor>& ts, bool send = true, float scale = 1.0f);
  /// Sparse all-reduce: each rank sends only its significant elements (|g| >= spars when
  /// !topK, else the ceil(spars * n) largest |g|); the result is the sum of what was sent.
  /// With `acc` (same size, float32), g += acc first and acc keeps what was not sent.
  void Sparsification(Tensor& t, float spars, bool topK);
  void Sparsification(Tensor& t, Tensor& acc, float spars, bool topK);
  void FusedSparsification(std::vector<Tensor>& ts, float spars, bool topK);
  void FusedSparsification(std::vector<Tensor>& ts, Tensor& acc, float spars, bool topK);
  /// Waits for pending collectives (they are blocking on the CPU: returns at once).
  void Wait();
  /// MPI_Abort on the world: the other ranks stop instead of waiting in a collective.
  static void Abort(int code);
  /// MPI_Finalize, when this process initialised MPI and has not finalised it.
  static void Finalize();

 private:
  struct State;
  void Submit(std::vector<Tensor>& ts, const char* op, int mode, float scale, float spars,
              bool topK, Tensor* acc);
  int world_size_ = 1, global_rank_ = 0, local_rank_ = 0;
  size_t buff_size_;
  std::shared_ptr<State> state_;  // shared with the recorded operations (a graph may outlive us)
};

}  // namespace singa
