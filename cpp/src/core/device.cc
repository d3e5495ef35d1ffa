// Device and the host device CppCPU (see singa/core/device.h).
#include "singa/core/device.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "singa/core/error.h"
#include "singa/graph/graph.h"

namespace singa {

namespace {
// A rerun form refills the operation's first output, and writes nothing the operation does not.
void CheckRerun(const OpDesc& d) {
  const OpRerun& r = d.rerun;
  if (!r.fn && !r.with_epilogue && r.reads.empty() && r.writes.empty()) return;  // none
  SINGA_CHECK(r.fn, ValueError, d.name() << ": a rerun form (OpDesc::rerun) needs its function");
  SINGA_CHECK(!d.writes.empty() && !r.writes.empty() && r.writes[0] == d.writes[0], ValueError,
              d.name() << ": the rerun form must write the operation's first written block "
                          "first (OpDesc::rerun.writes)");
  for (Block* b : r.writes)
    SINGA_CHECK(std::find(d.writes.begin(), d.writes.end(), b) != d.writes.end(), ValueError,
                d.name() << ": the rerun form writes a block the operation does not");
}
}  // namespace

Device::Device(int id, LangType lang, std::unique_ptr<MemPool> pool)
    : id_(id), lang_(lang), pool_(std::move(pool)), graph_(std::make_unique<Graph>(this)) {}

Device::~Device() { graph_.reset(); }

void Device::Exec(OpDesc desc, OpFunc fn) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  CheckRerun(desc);  // the same errors in eager mode as while recording
  if (buffering_) {
    graph_version_.fetch_add(1, std::memory_order_relaxed);
    graph_->AddOperation(std::move(desc), std::move(fn));
  } else {
    Activate();
    AllocateBlocks(desc.writes);  // before the kernel's threads could race to allocate them
    fn(&ctx_);
    if (check_finite_) CheckFinite(desc.writes, desc.name());
  }
}

namespace {

struct NonFiniteCount {
  size_t nan = 0, inf = 0;
};

template <typename T>
NonFiniteCount CountNonFinite(const T* x, size_t n) {
  NonFiniteCount c;
  for (size_t i = 0; i < n; ++i) {
    c.nan += std::isnan(x[i]);
    c.inf += std::isinf(x[i]);
  }
  return c;
}

// 16-bit floats by their bits: float16's exponent is 0x7C00, bfloat16's 0x7F80 (the mantissa
// is the bits below the exponent).
NonFiniteCount CountNonFinite16(const uint16_t* x, size_t n, uint16_t exponent) {
  const uint16_t low = uint16_t((exponent & -exponent) - 1);  // the bits below the exponent
  NonFiniteCount c;
  for (size_t i = 0; i < n; ++i) {
    const bool all_ones = (x[i] & exponent) == exponent;  // exponent all ones: Inf or NaN
    const bool mantissa = (x[i] & low) != 0;
    c.nan += all_ones && mantissa;
    c.inf += all_ones && !mantissa;
  }
  return c;
}

NonFiniteCount CountNonFinite(const void* p, DataType t, size_t bytes) {
  switch (t) {
    case kFloat32: return CountNonFinite(static_cast<const float*>(p), bytes / sizeof(float));
    case kDouble: return CountNonFinite(static_cast<const double*>(p), bytes / sizeof(double));
    case kFloat16: return CountNonFinite16(static_cast<const uint16_t*>(p), bytes / 2, 0x7C00u);
    case kBFloat16: return CountNonFinite16(static_cast<const uint16_t*>(p), bytes / 2, 0x7F80u);
    default: return {};  // integers are always finite
  }
}

}  // namespace

void Device::CheckFinite(const std::vector<Block*>& blocks, const std::string& op_name) {
  // Copies move values without computing any, and may fill only part of their destination (the
  // rest can hold whatever a recycled buffer held): the operation that reads what they moved is
  // the one named, as for a NaN the user fed in.
  if (op_name == "CopyDataToFrom") return;
  std::vector<char> host;
  for (Block* b : blocks) {
    if (b == nullptr || !b->has_layout() || !b->allocated() || b->size() == 0) continue;
    const DataType t = b->dtype();
    if (t != kFloat32 && t != kFloat16 && t != kBFloat16 && t != kDouble) continue;
    const void* p = b->data();
    if (!is_host()) {  // one copy to the host (synchronises with the operation)
      host.resize(b->size());
      CopyRaw(host.data(), p, b->size(), kDeviceToHost, &ctx_);
      p = host.data();
    }
    const NonFiniteCount c = CountNonFinite(p, t, b->size());
    if (c.nan == 0 && c.inf == 0) continue;
    SINGA_THROW(NonFiniteError,
                "operation '" << (op_name.empty() ? std::string("(unnamed)") : op_name)
                              << "' produced " << c.nan << " NaN and " << c.inf
                              << " Inf value(s) in its output of shape " << b->shape() << " ("
                              << t << ") (the device checks every output: SetCheckFinite(True) "
                              << "/ compile(check_finite=True); when the input already held "
                              << "NaN or Inf, this is the first operation that read it)");
  }
}

void Device::set_backend(Backend b) {
  SINGA_CHECK_DEVICE(SupportsBackend(b), "set_backend: this device cannot run the "
                                             << BackendName(b) << " backend"
                                             << (b == Backend::kCpuDnnl
                                                     ? " (libsinga was built without oneDNN)"
                                                     : ""));
  backend_ = b;
}

Backend DeviceBackend(const Device& dev) { return dev.backend(); }

void Device::RunGraph(bool sequential) {
  SINGA_CHECK(!buffering_, Error,
              "RunGraph: buffering is still on; call EnableGraph(false) before running the graph");
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Activate();
  graph_->Run(sequential);
}

void Device::ResetGraph() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  graph_version_.fetch_add(1, std::memory_order_relaxed);
  graph_->Reset();
}

int Device::RemoveHandle() noexcept {
  const int left = handles_.fetch_sub(1, std::memory_order_acq_rel) - 1;
  try {
    if (left == 0 && this != defaultDevice().get()) ResetGraph();
  } catch (...) {
    // Reset only releases memory and drops recorded operations; nothing there is expected to
    // throw, and a destructor must not: the graph then stays (a leak, not a crash).
  }
  return left;
}

void Device::SetMemoryBudget(size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  graph_->SetMemoryBudget(bytes);
}

void Device::SetMemoryBudgetFraction(double fraction) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  graph_->SetMemoryBudgetFraction(fraction);
}

void Device::SetVerbosity(int verbosity) {
  verbosity_ = verbosity;
  graph_->EnableProfiling(verbosity > 0);
}

void Device::PrintTimeProfiling() {
  if (!graph_->profiling()) {
    std::fputs("Time profiling is off: call SetVerbosity(1) before running the graph to time each "
               "operation\n", stdout);
    std::fflush(stdout);
    return;
  }
  std::fputs(graph_->TimeProfile(skip_iteration_).c_str(), stdout);
  std::fflush(stdout);
}

std::shared_ptr<Block> Device::NewBlock(size_t size) {
  return std::make_shared<Block>(this, size);
}

void Device::CopyDataToFrom(Block* dst, Block* src, size_t nbytes, CopyDirection direction,
                            size_t dst_offset, size_t src_offset) {
  SINGA_CHECK_VALUE(dst_offset + nbytes <= dst->size() && src_offset + nbytes <= src->size(),
                    "CopyDataToFrom: copying " << nbytes << " bytes from offset " << src_offset
                                               << " of a " << src->size()
                                               << "-byte block to offset " << dst_offset
                                               << " of a " << dst->size() << "-byte block");
  Exec({.id = OpId::kCopyDataToFrom, .reads = {src}, .writes = {dst}},
       [this, dst, src, nbytes, direction, dst_offset, src_offset](Context* ctx) {
         const char* s = static_cast<const char*>(src->data()) + src_offset;
         char* d = static_cast<char*>(dst->mutable_data()) + dst_offset;
         CopyRaw(d, s, nbytes, direction, ctx);
       });
}

void Device::CopyDataFromHostPtr(Block* dst, const void* src, size_t nbytes, size_t dst_offset) {
  SINGA_CHECK_VALUE(dst_offset + nbytes <= dst->size(),
                    "CopyDataFromHostPtr: " << nbytes << " bytes at offset " << dst_offset
                                            << " do not fit a block of " << dst->size()
                                            << " bytes");
  if (nbytes == 0) return;
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  Activate();
  char* d = static_cast<char*>(dst->mutable_data()) + dst_offset;
  CopyRaw(d, src, nbytes, is_host() ? kHostToHost : kHostToDevice, &ctx_);
}

void Device::CopyDataToHostPtr(Block* src, void* dst, size_t nbytes, size_t src_offset) {
  SINGA_CHECK_VALUE(src_offset + nbytes <= src->size(),
                    "CopyDataToHostPtr: " << nbytes << " bytes at offset " << src_offset
                                          << " exceed a block of " << src->size() << " bytes");
  SINGA_CHECK(!buffering_, Error,
              "reading tensor values while operations are buffered into a graph: nothing has run "
              "yet (read them after the training step, or outside Model.train_one_batch)");
  std::lock_guard<std::recursive_mutex> lock(mutex_);  // waits for a replay in another thread
  Activate();
  Sync();
  if (nbytes == 0) return;
  const char* s = static_cast<const char*>(src->data()) + src_offset;
  CopyRaw(dst, s, nbytes, is_host() ? kHostToHost : kDeviceToHost, &ctx_);
}

void Device::SetRandSeed(uint64_t seed) {
  ctx_.seed = seed;
  ctx_.random_generator.seed(static_cast<std::mt19937::result_type>(seed));
}

void* Device::Malloc(size_t bytes) { return pool_->Malloc(bytes); }

void Device::FillZero(void* ptr, size_t bytes) {
  SINGA_CHECK(is_host(), NotImplementedError,
              "FillZero: this device (lang " << lang() << ") does not implement zeroing memory");
  std::memset(ptr, 0, bytes);
}

void Device::Free(void* ptr) noexcept {
  try {
    pool_->Free(ptr);
  } catch (...) {
    // Free must never throw (it runs in destructors); a bad pointer here is a library bug, and
    // leaking it is the safest outcome.
  }
}

CppCPU::CppCPU(int id, std::unique_ptr<MemPool> pool)
    : Device(id, kCpp,
             pool ? std::move(pool)
                  : std::make_unique<CnMemPool>(std::make_unique<HostAllocator>())) {
#ifdef SINGA_USE_DNNL
  backend_ = Backend::kCpuDnnl;
#endif
}

bool CppCPU::SupportsBackend(Backend b) const {
#ifdef SINGA_USE_DNNL
  if (b == Backend::kCpuDnnl) return true;
#endif
  return b == Backend::kCpuRef;
}


void CppCPU::CopyRaw(void* dst, const void* src, size_t nbytes, CopyDirection, Context*) {
  if (dst != src) std::memmove(dst, src, nbytes);
}

std::shared_ptr<Device> defaultDevice() {
  static std::shared_ptr<Device> dev = std::make_shared<CppCPU>(-1);
  return dev;
}

void SetNumThreads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int GetNumThreads() { return omp_get_max_threads(); }

}  // namespace singa
