// The MPI half of singa::Communicator, built as its own library (libsinga_mpi.so) that libsinga
// loads with dlopen at the first Communicator (communicator.cc, LoadMpi).
//
// Why a separate library rather than linking libsinga to libmpi: the system's Open MPI must be
// the one its mpirun belongs to, so a wheel cannot bundle it, and a libsinga that needed libmpi
// would fail to load (so `import singa` would fail) wherever Open MPI is not installed. Why not
// dlopen libmpi itself: the MPI API is Open MPI's headers (MPI_COMM_WORLD, MPI_FLOAT are its
// global objects), so every call would have to be looked up by hand; compiled here against
// mpi.h, the code stays plain MPI and only the eight entry points of Communicator::Mpi cross
// the dlopen boundary. This library does not list libmpi (its MPI symbols stay undefined):
// libsinga loads the system's libmpi with RTLD_GLOBAL just before it, so nothing in a wheel
// names a library auditwheel would have to bundle or reject.
//
// Why every all-reduce is MPI_Reduce to rank 0 then MPI_Bcast rather than MPI_Allreduce: an
// all-reduce may add the ranks' values in a different order on each rank (recursive doubling),
// so float sums could differ in the last bit between ranks and the replicas would drift apart.
// Reducing at one rank and broadcasting its result keeps the parameters bitwise identical.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "singa/core/error.h"
#include "singa/dist/communicator.h"
#include "mpi_table.h"

namespace singa {

namespace {

bool g_we_initialised = false;

void Check(int rc, const char* op, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  throw Error(std::string(op) + ": " + call + " failed: " + std::string(msg, len));
}

bool MpiFinalized() {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

// Half sum for MPI_Reduce on uint16 words holding IEEE halves (added in float, stored as half).
void HalfSum(void* in, void* inout, int* len, MPI_Datatype*) {
  const Half* a = static_cast<const Half*>(in);
  Half* b = static_cast<Half*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = FloatToHalf(HalfToFloat(a[i]) + HalfToFloat(b[i]));
}

}  // namespace

// One bucket of the overlap path: the tensors, their packed copy, the state of its all-reduce.
// Shared by the start and wait operations (a graph replays both with the same job).
struct Communicator::Job {
  std::vector<Tensor> ts;
  OpId id = OpId::kCommStartBucket;
  const char* op = "";  // OpName(id)
  bool half = false;
  size_t total = 0;
  std::vector<float> buf;
  std::vector<Half> hbuf;
  bool done = true;  // guarded by State::mu
  std::exception_ptr err;
};

struct Communicator::State {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Op half_sum = MPI_OP_NULL;
  int size = 1;
  size_t chunk = 4194304;
  std::vector<float> buf;       // the fusion buffer
  std::vector<Half> hbuf;       // its float16 image
  std::atomic<bool> overlap{true};
  int poll_us = 50;  // the communication thread's sleep between MPI_Test calls
  std::atomic<int> awaiting{0};  // compute threads blocked in Await

  // The communication thread (started by the first bucket): it runs the queued jobs in order.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> queue;
  bool busy = false, stop = false;
  std::atomic<bool> stopping{false};  // stop, readable without the lock
  std::thread thread;

  ~State() {
    StopThread();
    if (MpiFinalized()) return;
    if (half_sum != MPI_OP_NULL) MPI_Op_free(&half_sum);
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }

  // Every rank must reduce the same number of elements: a mismatch (different models, or
  // collectives submitted in a different order) is reported on every rank, not left to hang
  // or to corrupt memory.
  void CheckCount(const char* op, size_t n, bool polite = false) {
    long long mine[2] = {static_cast<long long>(n), -static_cast<long long>(n)}, ext[2];
    if (polite) {
      MPI_Request req;
      Check(MPI_Iallreduce(mine, ext, 2, MPI_LONG_LONG, MPI_MAX, comm, &req), op,
            "MPI_Iallreduce");
      Complete(&req, op, "MPI_Iallreduce");
    } else {
      Check(MPI_Allreduce(mine, ext, 2, MPI_LONG_LONG, MPI_MAX, comm), op, "MPI_Allreduce");
    }
    SINGA_CHECK_SHAPE(ext[0] == mine[0] && ext[1] == mine[1],
                      op << ": ranks reduce different numbers of elements (this rank " << n
                         << ", others between " << -ext[1] << " and " << ext[0]
                         << "): the parameter shapes or the order of collectives differ");
  }

  // Waits for a non-blocking call on the communication thread. Open MPI's blocking calls poll
  // without pause: that would take a core from the computation the thread is meant to overlap
  // (two ranks on two cores have none to spare). So while the computation runs, the thread
  // tests (MPI_Test makes the progress a non-blocking collective needs) and sleeps poll_us
  // between tests; once the compute thread waits for a bucket (Await), it has nothing else to
  // do and the thread polls without sleeping. Longer sleeps starve the transfer: shared-memory
  // messages move in fragments, each needing a test on both sides (1 ms sleeps made a ResNet-18
  // step 2-5x slower).
  void Complete(MPI_Request* req, const char* op, const char* call) {
    for (;;) {
      int flag = 0;
      Check(MPI_Test(req, &flag, MPI_STATUS_IGNORE), op, call);
      if (flag) return;
      // Finalize (at exit) must not wait forever for a peer that will never join this call
      SINGA_CHECK(!stopping.load(), Error,
                  op << ": " << call << " still in flight when MPI was being finalised");
      if (awaiting.load() > 0 || poll_us <= 0) continue;
      std::this_thread::sleep_for(std::chrono::microseconds(poll_us));
    }
  }

  // The all-reduce of a bucket (on the communication thread when polite, or inline without
  // overlap).
  void Reduce(Job& j, bool polite) {
    CheckCount(j.op, j.total, polite);
    if (!j.half) {
      ReduceBcast(j.op, j.buf.data(), j.total, MPI_FLOAT, MPI_SUM, polite);
      return;
    }
    j.hbuf.resize(j.total);
    for (size_t i = 0; i < j.total; ++i) j.hbuf[i] = FloatToHalf(j.buf[i]);
    ReduceBcast(j.op, j.hbuf.data(), j.total, MPI_UINT16_T, half_sum, polite);
    for (size_t i = 0; i < j.total; ++i) j.buf[i] = HalfToFloat(j.hbuf[i]);
  }

  // Runs job j: queued for the thread, or at once without overlap. (A singleton uses the
  // thread too: one code path, and tests outside mpirun exercise it.)
  void Start(const std::shared_ptr<Job>& j) {
    if (!overlap.load()) {
      Drain();
      std::exception_ptr err;
      try {
        Reduce(*j, false);
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard<std::mutex> l(mu);
      j->err = err;
      j->done = true;
      return;
    }
    std::lock_guard<std::mutex> l(mu);
    SINGA_CHECK(!stop, Error, j->op << ": MPI was finalised; no collective can start");
    j->done = false;
    j->err = nullptr;
    if (!thread.joinable()) thread = std::thread([this] { Loop(); });
    queue.push_back(j);
    cv.notify_all();
  }

  void Loop() {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [this] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stopping, nothing left to run
      std::shared_ptr<Job> j = queue.front();
      queue.pop_front();
      busy = true;
      l.unlock();
      std::exception_ptr err;
      try {
        Reduce(*j, true);
      } catch (...) {  // surfaces at the wait, on the compute thread
        err = std::current_exception();
      }
      l.lock();
      j->err = err;
      j->done = true;
      busy = false;
      cv.notify_all();
    }
  }

  // Blocks until j is reduced; rethrows what its reduction threw.
  void Await(Job& j) {
    std::unique_lock<std::mutex> l(mu);
    awaiting.fetch_add(1);
    cv.wait(l, [&j] { return j.done; });
    awaiting.fetch_sub(1);
    if (j.err) {
      std::exception_ptr e = j.err;
      j.err = nullptr;
      std::rethrow_exception(e);
    }
  }

  // Blocks until the thread has nothing queued or running (before a blocking collective).
  void Drain() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [this] { return queue.empty() && !busy; });
  }

  void StopThread() {
    {
      std::lock_guard<std::mutex> l(mu);
      stop = true;
      stopping.store(true);
    }
    cv.notify_all();
    if (thread.joinable() && thread.get_id() != std::this_thread::get_id()) thread.join();
  }

  template <typename T>
  void ReduceBcast(const char* op, T* data, size_t n, MPI_Datatype type, MPI_Op sum,
                   bool polite = false) {
    int rank = 0;
    Check(MPI_Comm_rank(comm, &rank), op, "MPI_Comm_rank");
    for (size_t at = 0; at < n; at += chunk) {
      const int cnt = static_cast<int>(std::min(chunk, n - at));
      void* send = rank == 0 ? MPI_IN_PLACE : static_cast<void*>(data + at);
      if (polite) {
        MPI_Request req;
        Check(MPI_Ireduce(send, data + at, cnt, type, sum, 0, comm, &req), op, "MPI_Ireduce");
        Complete(&req, op, "MPI_Ireduce");
        Check(MPI_Ibcast(data + at, cnt, type, 0, comm, &req), op, "MPI_Ibcast");
        Complete(&req, op, "MPI_Ibcast");
        continue;
      }
      Check(MPI_Reduce(send, data + at, cnt, type, sum, 0, comm), op, "MPI_Reduce");
      Check(MPI_Bcast(data + at, cnt, type, 0, comm), op, "MPI_Bcast");
    }
  }

  // g (n floats) <- sum over ranks of each rank's selected elements of g (+ acc).
  void Sparse(const char* op, float* g, size_t n, float* acc, float spars, bool topK) {
    if (acc) for (size_t i = 0; i < n; ++i) g[i] += acc[i];
    std::vector<int> idx;
    if (topK) {
      size_t k = std::min(n, static_cast<size_t>(std::ceil(spars * static_cast<double>(n))));
      k = std::max<size_t>(k, 1);
      idx.resize(n);
      std::iota(idx.begin(), idx.end(), 0);
      // the k largest |g|, ties by index, so the choice is deterministic
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [g](int a, int b) {
        float fa = std::fabs(g[a]), fb = std::fabs(g[b]);
        return fa > fb || (fa == fb && a < b);
      });
      idx.resize(k);
      std::sort(idx.begin(), idx.end());
    } else {
      for (size_t i = 0; i < n; ++i)
        if (std::fabs(g[i]) >= spars) idx.push_back(static_cast<int>(i));
    }
    std::vector<float> val(idx.size());
    for (size_t j = 0; j < idx.size(); ++j) val[j] = g[idx[j]];
    if (acc) {  // error correction: keep what was not sent
      std::memcpy(acc, g, n * sizeof(float));
      for (int i : idx) acc[i] = 0.0f;
    }
    int mine = static_cast<int>(idx.size());
    std::vector<int> counts(size), displs(size, 0);
    Check(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm), op,
          "MPI_Allgather");
    for (int r = 1; r < size; ++r) displs[r] = displs[r - 1] + counts[r - 1];
    const int total = displs[size - 1] + counts[size - 1];
    std::vector<int> all_idx(std::max(total, 1));
    std::vector<float> all_val(std::max(total, 1));
    Check(MPI_Allgatherv(idx.data(), mine, MPI_INT, all_idx.data(), counts.data(),
                         displs.data(), MPI_INT, comm), op, "MPI_Allgatherv");
    Check(MPI_Allgatherv(val.data(), mine, MPI_FLOAT, all_val.data(), counts.data(),
                         displs.data(), MPI_FLOAT, comm), op, "MPI_Allgatherv");
    // every rank adds the contributions in rank order: identical results everywhere
    std::fill(g, g + n, 0.0f);
    for (int j = 0; j < total; ++j) g[all_idx[j]] += all_val[j];
  }
};

namespace {
// Every live communicator state: Finalize stops their threads before MPI_Finalize.
std::mutex g_states_mu;
std::vector<std::weak_ptr<Communicator::State>>& States() {
  static auto* v = new std::vector<std::weak_ptr<Communicator::State>>();
  return *v;
}
}  // namespace

void Communicator::InitMpi(size_t buff_size) {
  const char* op = "Communicator";
  SINGA_CHECK_VALUE(buff_size > 0 && buff_size <= (1u << 30),
                    op << ": buffSize must be in [1, 2^30] elements, got " << buff_size);
  int inited = 0;
  Check(MPI_Initialized(&inited), op, "MPI_Initialized");
  if (!inited) {
    SINGA_CHECK(!MpiFinalized(), Error, op << ": MPI was already finalised in this process");
    int provided = 0;
    // Our own calls are serialised (a bucket's thread runs alone while it is busy: see Drain),
    // but MPI_Abort from the excepthook may come while that thread waits in a collective, and
    // a user may call MPI from threads of their own: ask for full thread support.
    Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), op,
          "MPI_Init_thread");
    g_we_initialised = true;
  }
  Check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), op,
        "MPI_Comm_set_errhandler");
  state_ = std::make_shared<State>();
  state_->chunk = buff_size;
  if (const char* poll = std::getenv("SINGA_DIST_POLL_US")) state_->poll_us = std::atoi(poll);
  // our own communicator: the user's MPI traffic on the world cannot interleave with ours
  Check(MPI_Comm_dup(MPI_COMM_WORLD, &state_->comm), op, "MPI_Comm_dup");
  Check(MPI_Comm_set_errhandler(state_->comm, MPI_ERRORS_RETURN), op, "MPI_Comm_set_errhandler");
  Check(MPI_Comm_size(state_->comm, &world_size_), op, "MPI_Comm_size");
  Check(MPI_Comm_rank(state_->comm, &global_rank_), op, "MPI_Comm_rank");
  state_->size = world_size_;
  MPI_Comm node;
  Check(MPI_Comm_split_type(state_->comm, MPI_COMM_TYPE_SHARED, global_rank_, MPI_INFO_NULL,
                            &node), op, "MPI_Comm_split_type");
  int rc = MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
  Check(rc, op, "MPI_Comm_rank");
  Check(MPI_Op_create(&HalfSum, 1, &state_->half_sum), op, "MPI_Op_create");
  std::lock_guard<std::mutex> l(g_states_mu);
  States().push_back(state_);
}

void Communicator::AbortMpi(int code) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited && !MpiFinalized()) MPI_Abort(MPI_COMM_WORLD, code);
}

void Communicator::FinalizeMpi() {
  {
    std::lock_guard<std::mutex> l(g_states_mu);
    for (auto& w : States())
      if (auto st = w.lock()) st->StopThread();
    States().clear();
  }
  if (g_we_initialised && !MpiFinalized()) MPI_Finalize();
}

namespace {
// The blocks of ts (float32, contiguous, one CPU device), checked; total = their elements.
std::vector<Block*> CheckedBlocks(const std::vector<Tensor>& ts, const char* op, size_t* total) {
  SINGA_CHECK_VALUE(!ts.empty(), op << ": no tensor to reduce");
  std::vector<Block*> blocks;
  *total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    SINGA_CHECK_VALUE(t.block() != nullptr, op << ": tensor " << i << " is empty (no memory)");
    SINGA_CHECK_DTYPE(t.data_type() == kFloat32, op << ": tensor " << i << " (shape "
                                                    << t.shape() << ") must be float32, got "
                                                    << t.data_type());
    SINGA_CHECK_SHAPE(t.IsContiguous(), op << ": tensor " << i << " (shape " << t.shape()
                                           << ") is a non-contiguous view");
    SINGA_CHECK_DEVICE(t.device()->is_host() && t.device() == ts[0].device(),
                       op << ": MPI collectives take tensors of one CPU device (tensor " << i
                          << "); CUDA tensors need the NCCL build");
    blocks.push_back(t.block());
    *total += t.Size();
  }
  return blocks;
}
}  // namespace

void Communicator::SetOverlapMpi(bool on) { state_->overlap.store(on); }

void Communicator::BroadcastNcclId() {
  NcclUniqueId id;
  if (global_rank_ == 0) id = NewNcclId();
  state_->Drain();  // the communication thread is idle: MPI from this thread only
  Check(MPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_CHAR, 0, state_->comm),
        "Communicator (NCCL id)", "MPI_Bcast");
  nccl_id_ = std::make_unique<NcclUniqueId>(id);
}

int Communicator::StartBucketMpi(std::vector<Tensor>& ts, bool half) {
  auto j = std::make_shared<Job>();
  j->id = half ? OpId::kCommStartBucketHalf : OpId::kCommStartBucket;
  j->op = OpName(j->id);
  std::vector<Block*> reads = CheckedBlocks(ts, j->op, &j->total);
  j->ts = ts;  // the job keeps the blocks alive for a graph
  j->half = half;
  j->buf.resize(j->total);
  auto st = state_;
  ts[0].device()->Exec({.id = j->id, .reads = std::move(reads), .collective = true},
                       [st, j](Context*) {
                         size_t at = 0;
                         for (const Tensor& t : j->ts) {
                           std::memcpy(j->buf.data() + at, t.block()->data(),
                                       t.Size() * sizeof(float));
                           at += t.Size();
                         }
                         st->Start(j);
                       });
  const int handle = next_handle_++;
  pending_[handle] = j;
  return handle;
}

void Communicator::WaitBucketMpi(int handle, float scale) {
  auto it = pending_.find(handle);
  SINGA_CHECK_VALUE(it != pending_.end(), "Communicator.waitBucket: no started bucket "
                                              << handle << " (already waited for, or never "
                                              << "started)");
  std::shared_ptr<Job> j = it->second;
  pending_.erase(it);
  std::vector<Block*> writes;
  for (const Tensor& t : j->ts) writes.push_back(t.block());
  auto st = state_;
  j->ts[0].device()->Exec(
      {.id = OpId::kCommWaitBucket, .writes = std::move(writes), .collective = true},
      [st, j, scale](Context*) {
        st->Await(*j);
        size_t at = 0;
        for (const Tensor& t : j->ts) {
          float* dst = static_cast<float*>(t.block()->mutable_data());
          for (size_t i = 0; i < t.Size(); ++i) dst[i] = j->buf[at + i] * scale;
          at += t.Size();
        }
      });
}

void Communicator::SubmitMpi(std::vector<Tensor>& ts, OpId id, int mode, float scale,
                             float spars, bool topK, Tensor* acc) {
  const char* op = OpName(id);
  size_t total = 0;
  std::vector<Block*> blocks = CheckedBlocks(ts, op, &total);
  std::vector<Block*> reads = blocks;
  if (acc) {
    SINGA_CHECK_SHAPE(acc->block() != nullptr && acc->data_type() == kFloat32 &&
                          acc->IsContiguous() && acc->Size() == total,
                      op << ": the accumulation tensor must be a contiguous float32 tensor of "
                         << total << " elements, got shape " << acc->shape());
    reads.push_back(acc->block());
    blocks.push_back(acc->block());
  }
  const std::vector<Tensor> keep = ts;  // the lambda keeps the blocks alive for a graph
  const Tensor acc_t = acc ? *acc : Tensor();
  const bool has_acc = acc != nullptr;
  auto st = state_;
  ts[0].device()->Exec(
      {.id = id, .reads = std::move(reads), .writes = std::move(blocks), .collective = true},
      [st, keep, acc_t, has_acc, op, mode, scale, spars, topK, total](Context*) {
        st->Drain();  // MPI on this communicator from one thread at a time
        st->CheckCount(op, total);
        st->buf.resize(total);
        float* buf = st->buf.data();
        size_t at = 0;
        for (const Tensor& t : keep) {
          std::memcpy(buf + at, t.block()->data(), t.Size() * sizeof(float));
          at += t.Size();
        }
        if (mode == kDense) {
          st->ReduceBcast(op, buf, total, MPI_FLOAT, MPI_SUM);
        } else if (mode == kHalf) {
          st->hbuf.resize(total);
          for (size_t i = 0; i < total; ++i) st->hbuf[i] = FloatToHalf(buf[i]);
          st->ReduceBcast(op, st->hbuf.data(), total, MPI_UINT16_T, st->half_sum);
          for (size_t i = 0; i < total; ++i) buf[i] = HalfToFloat(st->hbuf[i]);
        } else {
          float* a = has_acc ? static_cast<float*>(acc_t.block()->mutable_data()) : nullptr;
          st->Sparse(op, buf, total, a, spars, topK);
        }
        at = 0;
        for (const Tensor& t : keep) {
          float* dst = static_cast<float*>(t.block()->mutable_data());
          for (size_t i = 0; i < t.Size(); ++i) dst[i] = buf[at + i] * scale;
          at += t.Size();
        }
      });
}

const Communicator::Mpi& Communicator::Mpi::Table() {
  static const Mpi table{
      kMpiTableVersion,
      [](Communicator& c, size_t n) { c.InitMpi(n); },
      [](Communicator& c, bool on) { c.SetOverlapMpi(on); },
      [](Communicator& c) { c.BroadcastNcclId(); },
      [](Communicator& c, std::vector<Tensor>& ts, bool half) {
        return c.StartBucketMpi(ts, half);
      },
      [](Communicator& c, int handle, float scale) { c.WaitBucketMpi(handle, scale); },
      [](Communicator& c, std::vector<Tensor>& ts, OpId id, int mode, float scale, float spars,
         bool topK, Tensor* acc) {
        c.SubmitMpi(ts, id, mode, scale, spars, topK, acc);
      },
      &Communicator::AbortMpi,
      &Communicator::FinalizeMpi,
  };
  return table;
}

}  // namespace singa

extern "C" __attribute__((visibility("default"))) const void* singa_mpi_table() {
  return &singa::Communicator::Mpi::Table();
}
