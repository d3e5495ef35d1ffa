// singa/dist/communicator.h: data-parallel collectives over MPI for float32 CPU tensors.
//
//   singa::Communicator comm;                 // MPI world; outside mpirun a singleton of size 1
//   comm.Synch(grad);                         // grad <- sum over ranks of grad (in place)
//   comm.FusedSynch(grads, /*send=*/true);    // one all-reduce through the fusion buffer
//   comm.Wait();                              // no-op on CPU (calls are blocking when they run)
//   int b = comm.StartBucket(grads, false);   // overlap: reduce on the communication thread...
//   ...                                       // ...while backward goes on
//   comm.WaitBucket(b, 0.5f);                 // grads <- 0.5 * sum over ranks, once it is done
//
// Every collective is submitted through Device::Exec with the blocks it reads and writes, so a
// buffered graph records it and replays it. They are submitted as collectives (Exec's
// `collective` flag): a graph chains them in submission order, as it chains the random-number
// ops, so every rank runs its collectives in the same order whatever the schedule.
//
// Overlap. StartBucket and WaitBucket are operations too (collectives, chained like the others).
// The start copies the tensors into the bucket's own buffer and queues its all-reduce on the
// communicator's thread, which alone calls MPI while a bucket is in flight (Open MPI makes no
// progress on a non-blocking collective unless some thread calls MPI, so the thread drives it:
// non-blocking calls completed by MPI_Test with sleeps of SINGA_DIST_POLL_US microseconds
// (default 50) between tests while the computation runs: Open MPI's blocking
// calls poll a core at full speed, a core the computation needs when the ranks have one each;
// without sleeps once the compute thread waits for a bucket). The wait blocks until that bucket is
// reduced, rethrows an error the thread met (as the singa::Error it was), and writes the scaled
// sum back into the tensors. The start only reads the tensors, so backward may still read a
// gradient whose bucket is in flight. set_overlap(false) makes the start reduce at once on the
// calling thread (same numbers, no overlap: for comparison). Blocking collectives first wait for
// the thread to be idle, so MPI calls on this communicator never run on two threads at once.
//
// Errors throw singa::Error (MPI's error handler on the world communicator is set to return
// errors; every return code is checked). A build without MPI (USE_DIST=OFF) compiles this header
// and its constructor throws NotImplementedError.
//
// The MPI half lives in libsinga_mpi.so, loaded at the first Communicator(buff_size): libsinga
// itself never needs libmpi, so it loads where Open MPI is not installed, and only then does the
// constructor throw NotImplementedError saying how to install it (src/dist/communicator_mpi.cc
// gives the reason).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include "singa/core/tensor.h"
#include "singa/dist/nccl.h"

namespace singa {

/// True when libsinga was built with MPI (USE_DIST).
bool BuiltWithDist();

class Communicator {
 public:
  /// Joins MPI's world (initialising MPI when nobody has). `buff_size`: elements of the fusion
  /// buffer; a fused list larger than it is reduced in several rounds.
  explicit Communicator(size_t buff_size = 4194304);
  /// Apache SINGA's multiprocess form (Python's multiprocessing + NcclIdHolder, no mpirun):
  /// NCCL only, this process is rank `local_rank` of `world_size`, CUDA tensors only. Needs a
  /// CUDA build (NcclComm throws NotImplementedError otherwise, at the first collective).
  Communicator(int local_rank, int world_size, const NcclUniqueId& id, size_t buff_size);
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

  /// Overlap: submits the start of an all-reduce of `ts` (float32 values, or float16 on the
  /// wire when `half`) as one bucket and returns its handle for WaitBucket.
  int StartBucket(std::vector<Tensor>& ts, bool half = false);
  /// Submits the wait for bucket `handle`: then each tensor <- scale * sum over ranks.
  void WaitBucket(int handle, float scale = 1.0f);
  /// Buckets started but not yet waited for (submission time).
  int pending_buckets() const;
  /// true (default): buckets reduce on the communication thread; false: at the start op.
  void set_overlap(bool on);
  bool overlap() const;
  /// MPI_Abort on the world: the other ranks stop instead of waiting in a collective.
  static void Abort(int code);
  /// MPI_Finalize, when this process initialised MPI and has not finalised it.
  static void Finalize();

  struct State;  // defined in communicator_mpi.cc
  struct Job;
  struct Mpi;    // the entry points of libsinga_mpi.so (src/dist/mpi_table.h)

 private:
  void Submit(std::vector<Tensor>& ts, OpId id, int mode, float scale, float spars, bool topK,
              Tensor* acc);
  void SubmitMpi(std::vector<Tensor>& ts, OpId id, int mode, float scale, float spars,
                 bool topK, Tensor* acc);
  int StartBucketMpi(std::vector<Tensor>& ts, bool half);
  void WaitBucketMpi(int handle, float scale);
  // Defined in libsinga_mpi.so and called through Mpi only (libsinga does not link them).
  void InitMpi(size_t buff_size);
  void SetOverlapMpi(bool on);
  static void AbortMpi(int code);
  static void FinalizeMpi();
  // CUDA tensors go to NCCL (singa/dist/nccl.h): one clique per communicator, made on the first
  // collective on a GPU tensor, on that tensor's device. Under mpirun rank 0 makes the id and
  // broadcasts it over MPI; the multiprocess form was given it.
  static bool OnGpu(const std::vector<Tensor>& ts);
  NcclComm* Nccl(const Tensor& t);
  void BroadcastNcclId();  // MPI builds; fills nccl_id_
  std::unique_ptr<NcclUniqueId> nccl_id_;
  std::unique_ptr<NcclComm> nccl_;
  bool nccl_only_ = false;
  std::map<int, std::pair<std::vector<Tensor>, bool>> nccl_pending_;  // GPU buckets started
  int world_size_ = 1, global_rank_ = 0, local_rank_ = 0;
  size_t buff_size_;
  bool overlap_ = true;
  int next_handle_ = 0;
  std::map<int, std::shared_ptr<Job>> pending_;  // started, wait not yet submitted
  std::shared_ptr<State> state_;  // shared with the recorded operations (a graph may outlive us)
};

}  // namespace singa
