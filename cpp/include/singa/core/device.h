// singa/core/device.h: where memory lives and operations run.
//
//   std::shared_ptr<singa::Device> cpu = singa::defaultDevice();   // or std::make_shared<CppCPU>()
//   cpu->SetRandSeed(42);
//   cpu->Exec({.id = singa::OpId::kAdd, .reads = {a.block(), b.block()}, .writes = {c.block()}},
//             [=](singa::Context* ctx) { /* kernel: reads a and b, writes c */ });
//   cpu->Exec({.reads = {a.block()}, .writes = {c.block()}, .label = "MyOp"},  // OpId::kCustom
//             [=](singa::Context* ctx) { /* ... */ });
//   singa::PoolStats s = cpu->mem_stats();    // bytes in use, peak, reserved
//
// Every operation of the library goes through Exec(desc, fn): desc (OpDesc) says what the
// operation is (its OpId, singa/core/op_ids.h), which blocks it reads and writes, and how a graph
// may treat it; fn is the kernel call. Without a graph Exec runs fn at once; with the graph on
// it records (desc, fn) instead, and the recorded operations replay later. That is why an op
// must (1) declare every block it reads and writes, (2) capture tensors by value so that what it
// touches outlives the call (Apache SINGA's replay crashed on a captured reference to a
// temporary), and (3) fetch data pointers inside fn.
// Reading values on the host (CopyDataToHostPtr) while buffering throws: nothing has run yet.
// A graph holds the tensors its operations captured, and they hold the device: call ResetGraph()
// before dropping a device that recorded a graph. Handles that own the device from outside C++
// (the Python wrapper) count themselves with AddHandle/RemoveHandle; the last one to go resets
// the graph, which breaks that cycle for them.
//
// Threads (the Python bindings release the GIL around every call that runs kernels): a device
// runs one thing at a time. Exec, RunGraph, ResetGraph and the host copies hold the device's
// (recursive) mutex, so two threads submitting to one device are serialised, and reading a tensor
// while another thread replays the graph waits for the step to end. What a thread may touch
// without that mutex is itself thread-safe: the pool (its own mutex), Block::external_refs
// (atomic), the shared_ptr counts of blocks and devices (atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "singa/core/block.h"
#include "singa/core/common.h"
#include "singa/core/context.h"
#include "singa/core/fusion.h"
#include "singa/core/kernel.h"
#include "singa/core/layout.h"
#include "singa/core/op_ids.h"
#include "singa/memory/pool.h"

namespace singa {

class Graph;
using OpFunc = std::function<void(Context*)>;

/// How a graph under a memory budget recomputes an operation when that is not by running it
/// again (OpDesc::rerun): batch norm in training reruns as a normalisation with the batch
/// statistics it saved, leaving the running statistics alone. The graph runs `fn`
/// (`with_epilogue`, given the operation's epilogue, when the graph fused one into it) to refill
/// the operation's first written block; the rerun reads `reads` and writes `writes`: that block
/// first, then scratch, all written by the operation too. Its output must be bit-identical to
/// the operation's. Empty (no fn): the operation has no rerun form.
struct OpRerun {
  OpFunc fn = nullptr;
  EpilogueFn with_epilogue = nullptr;
  std::vector<Block*> reads{}, writes{};
};

/// What Device::Exec is asked to run, besides the kernel call itself. Designated initialisers
/// name the fields in this order; every one has a default.
struct OpDesc {
  OpId id = OpId::kCustom;
  std::vector<Block*> reads{};   ///< every block the operation reads
  std::vector<Block*> writes{};  ///< every block it writes ({} initialisers: may be left out)
  /// The printed name of an OpId::kCustom operation (tests, user kernels); for a library op,
  /// leave it null: OpName(id) is printed. Only read during the Exec call.
  const char* label = nullptr;
  /// The operation draws from the device's generator: a graph keeps such operations in
  /// submission order and never recomputes them.
  bool use_rand_generator = false;
  /// The same operation with an epilogue (batch norm, residual add, ReLU: singa/core/fusion.h)
  /// applied to writes[0]: a graph runs it instead when that block's only reader is such an
  /// operation (Graph: epilogue fusion).
  FusionHooks fusion = nullptr;
  /// A cross-process collective (singa/dist): a graph keeps all of them in submission order, so
  /// every rank runs its collectives in the same order.
  bool collective = false;
  /// false when the kernel is not a pure function of its reads in ways the graph cannot see
  /// (hidden state): a graph under a memory budget then never reruns it (graph.h).
  bool recomputable = true;
  /// Its rerun form under a memory budget, when recomputing it is not running it again (an
  /// operation that updates state in place, as batch norm's running statistics): OpRerun. A
  /// graph checks it when recording (ValueError); eager execution ignores it.
  OpRerun rerun{};
  /// The arithmetic of a product (matrix products, convolutions, attention: 2 per
  /// multiply-add; 0 for the rest): what a graph's cost estimate counts besides the bytes
  /// moved, when it has not measured the operation (Graph: cost model).
  double flops = 0;
  /// Which reads and writes the kernel accepts in a blocked layout (singa/core/layout.h); a
  /// graph keeps an activation blocked only where every operation touching it accepts that.
  LayoutHooks layouts{};

  /// The name profiles, graph dumps and error messages print.
  const char* name() const { return id == OpId::kCustom && label && *label ? label : OpName(id); }
};

class Device {
 public:
  Device(int id, LangType lang, std::unique_ptr<MemPool> pool);
  virtual ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int id() const { return id_; }
  LangType lang() const { return lang_; }
  bool is_host() const { return lang_ == kCpp; }
  Context* context() { return &ctx_; }

  /// The kernel family this device computes with (singa/core/kernel.h).
  Backend backend() const { return backend_; }
  /// Switches the kernel family, e.g. a CPU device to its reference kernels (kCpuRef) to compare
  /// with oneDNN; throws DeviceError when this device or build cannot run `b`. Affects operations
  /// submitted afterwards (a recorded graph keeps the kernels it recorded).
  void set_backend(Backend b);
  virtual bool SupportsBackend(Backend b) const = 0;

  /// Submits an operation: runs fn now, or records (desc, fn) while a graph buffers. See the
  /// file comment for the contract and OpDesc for the fields.
  void Exec(OpDesc desc, OpFunc fn);

  /// A block of `size` bytes with no memory yet.
  std::shared_ptr<Block> NewBlock(size_t size);

  /// Copies between blocks of this device (or host and this device), as a recorded operation.
  /// It captures the raw blocks: the caller keeps them alive while a graph may replay it
  /// (tensor-level code uses singa::CopyDataToFrom, which captures the tensors).
  void CopyDataToFrom(Block* dst, Block* src, size_t nbytes, CopyDirection direction,
                      size_t dst_offset = 0, size_t src_offset = 0);
  /// Copies host memory into a block now (not recorded): how new data reaches a graph's inputs.
  void CopyDataFromHostPtr(Block* dst, const void* src, size_t nbytes, size_t dst_offset = 0);
  /// Copies a block into host memory now, after waiting for pending work.
  void CopyDataToHostPtr(Block* src, void* dst, size_t nbytes, size_t src_offset = 0);

  /// Waits for submitted work (a no-op on the CPU device, which runs synchronously).
  virtual void Sync() {}
  /// Seeds this device's generator(s): Context::random_generator, and cuRAND's on a CudaGPU.
  virtual void SetRandSeed(uint64_t seed);
  /// Makes this device current for the calling thread before it submits work (cudaSetDevice on
  /// a CudaGPU; nothing on the host). Exec, RunGraph and the host copies call it.
  virtual void Activate() {}

  // Memory, through this device's pool.
  void* Malloc(size_t bytes);
  /// Sets `bytes` bytes of this device's memory at `ptr` to zero (see Block::ZeroOnFirstAlloc).
  /// The default serves host memory and throws NotImplementedError for other devices, so a
  /// device class that does not override it still builds.
  virtual void FillZero(void* ptr, size_t bytes);
  void Free(void* ptr) noexcept;
  PoolStats mem_stats() const { return pool_->stats(); }
  void ResetPeak() { pool_->ResetPeak(); }
  MemPool* pool() { return pool_.get(); }

  // The computational graph (singa/graph/graph.h). While buffering, Exec records operations
  // instead of running them; RunGraph builds the graph once and replays it.
  /// Turns buffering on or off (Apache SINGA's name).
  void EnableGraph(bool enable) { buffering_ = enable; }
  bool graph_enabled() const { return buffering_; }
  Graph* graph() { return graph_.get(); }
  void RunGraph(bool sequential = false);
  void ResetGraph();
  /// Changes whenever the recorded operations change (each operation recorded, each reset):
  /// whoever recorded a graph keeps the version it saw and replays only while it still holds
  /// (singa.model re-records when, say, a user reset the device's graph between two steps).
  uint64_t graph_version() const { return graph_version_.load(std::memory_order_relaxed); }
  /// A budget for the graph's memory, met by recomputing activations (Graph: memory budget):
  /// in bytes (0: none), or as a fraction in (0, 1] of the unconstrained plan. Read at the next
  /// build of the graph; a budget no plan reaches throws OutOfMemoryError there.
  void SetMemoryBudget(size_t bytes);
  void SetMemoryBudgetFraction(double fraction);
  /// 0: quiet; 1 or more: profile each operation's time during RunGraph.
  void SetVerbosity(int verbosity);
  int verbosity() const { return verbosity_; }
  /// Replays captured as one launch (a CUDA Graph on a CudaGPU; nothing to capture on the host).
  /// On by default where the device can capture; the graph captures only when every recorded
  /// operation allows it (see singa/core/cuda_gpu.h). Off: replays enqueue op by op.
  void SetCaptureEnabled(bool on) { capture_enabled_ = on; }
  bool capture_enabled() const { return capture_enabled_ && !check_finite_ && CanCapture(); }
  virtual bool CanCapture() const { return false; }
  /// Capture protocol used by Graph::Run: Begin, enqueue the operations, End (instantiates what
  /// was captured, replacing any earlier capture), then Launch for each replay; Drop forgets it.
  virtual void BeginCapture() {}
  virtual void EndCapture() {}
  virtual void LaunchCaptured() {}
  virtual void DropCaptured() {}
  /// Opt-in anomaly detection (PyTorch's detect_anomaly): after each operation that runs (eager
  /// Exec and every graph replay), scan the float blocks it wrote (float32, float16, float64) and
  /// throw NonFiniteError naming the operation, the output's shape and its NaN / Inf counts. The
  /// first operation whose output is not finite is named, so a NaN fed in by the user is reported
  /// at the first operation that reads it (copies, CopyDataToFrom, are not checked: they compute
  /// nothing and may fill part of a block). Off: one branch per operation. On a GPU each check
  /// copies the output to the host and graph replays are not captured.
  void SetCheckFinite(bool on) { check_finite_ = on; }
  bool check_finite() const { return check_finite_; }
  /// Throws NonFiniteError if one of `blocks` (those whose layout is known) holds NaN or Inf;
  /// `op_name` names the operation in the message. Runs after the operation, inside it.
  void CheckFinite(const std::vector<Block*>& blocks, const std::string& op_name);

  /// Iterations of RunGraph ignored by the profiler (warm-up).
  void SetSkipIteration(int n) { skip_iteration_ = n; }
  int skip_iteration() const { return skip_iteration_; }
  /// The per-operation profile of the graph, or a one-line hint when profiling is off.
  void PrintTimeProfiling();

  /// Owners outside C++ (the Python wrapper) register while they hold the device. When the last
  /// one is removed, the graph is reset (unless this is the process-wide default device, which
  /// lives anyway): its recorded operations hold tensors, which hold the device, a cycle nobody
  /// could reach any more. Returns the handles left. Never throws (it runs in destructors).
  void AddHandle() { handles_.fetch_add(1, std::memory_order_relaxed); }
  int RemoveHandle() noexcept;
  int handles() const { return handles_.load(std::memory_order_relaxed); }


 protected:
  /// Copies raw memory of this device kind; runs inside an operation.
  virtual void CopyRaw(void* dst, const void* src, size_t nbytes, CopyDirection direction,
                       Context* ctx) = 0;

 private:
  int id_;
  LangType lang_;
  std::unique_ptr<MemPool> pool_;
  Context ctx_;
  std::unique_ptr<Graph> graph_;
  bool buffering_ = false;
  std::atomic<uint64_t> graph_version_{0};  // read without the mutex (Python, other threads)
  int verbosity_ = 0;
  int skip_iteration_ = 5;
  bool capture_enabled_ = true;
  bool check_finite_ = false;
  std::recursive_mutex mutex_;  // see "Threads" at the top of this file
  std::atomic<int> handles_{0};

 protected:
  Backend backend_ = Backend::kCpuRef;
};

/// The host device: OpenBLAS and our own OpenMP kernels, memory from a CnMemPool over malloc.
class CppCPU : public Device {
 public:
  explicit CppCPU(int id = -1, std::unique_ptr<MemPool> pool = nullptr);
  /// kCpuRef always; kCpuDnnl when built with oneDNN (SINGA_USE_DNNL), then also the default.
  bool SupportsBackend(Backend b) const override;

 protected:
  void CopyRaw(void* dst, const void* src, size_t nbytes, CopyDirection direction,
               Context* ctx) override;
};

/// The process-wide host device, created on first use.
std::shared_ptr<Device> defaultDevice();

/// Threads used by OpenMP kernels and OpenBLAS (one runtime, one knob). 0 = the OpenMP default.
void SetNumThreads(int n);
int GetNumThreads();

}  // namespace singa
