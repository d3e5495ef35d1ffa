// Which library runs the CPU's float32 products (singa/ops/gemm_backend.h): the rule, decided
// once per process, and the record of the last product.
#include "singa/ops/gemm_backend.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "singa/core/cpu_features.h"
#include "singa/core/error.h"

namespace singa {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool HaveDnnl() {
#ifdef SINGA_USE_DNNL
  return true;
#else
  return false;
#endif
}

// Decided lazily (the first product or query), so that SINGA_GEMM set before the first product
// counts and a bad value surfaces as an exception of that call, not at load time.
std::mutex g_mu;
bool g_decided = false;
GemmChoice g_choice;
std::atomic<int> g_lib{-1};   // the decided GemmLib, -1 before the first decision
std::atomic<int> g_last{-1};  // the GemmLib of the last product, -1 before any

void DecideLocked(const std::string& mode) {
  const char* core = openblas_get_corename();
  g_choice = ChooseGemmLib(mode, core ? core : "", CpuIsaLevel(), HaveDnnl());
  g_decided = true;
  g_lib = static_cast<int>(g_choice.lib);
}

const GemmChoice& Decided() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_decided) {
    const char* env = std::getenv("SINGA_GEMM");
    DecideLocked(env ? env : "");
  }
  return g_choice;
}

}  // namespace

const char* IsaLevelName(IsaLevel l) {
  switch (l) {
    case IsaLevel::kAvx512: return "avx512";
    case IsaLevel::kAvx2: return "avx2";
    case IsaLevel::kAvx: return "avx";
    default: return "sse";
  }
}

IsaLevel OpenBlasCoreLevel(const std::string& core) {
  // OpenBLAS' DYNAMIC_ARCH core names (driver/others/dynamic.c) by the widest vectors their
  // sgemm kernels use; any other name (Prescott, Nehalem, Core2, generic...) is SSE.
  static const char* const kAvx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
  static const char* const kAvx2[] = {"haswell", "zen"};
  static const char* const kAvx[] = {"sandybridge", "bulldozer", "piledriver", "steamroller",
                                     "excavator"};
  const std::string c = Lower(core);
  for (const char* n : kAvx512)
    if (c == n) return IsaLevel::kAvx512;
  for (const char* n : kAvx2)
    if (c == n) return IsaLevel::kAvx2;
  for (const char* n : kAvx)
    if (c == n) return IsaLevel::kAvx;
  return IsaLevel::kBaseline;
}

IsaLevel CpuIsaLevel() {
  // From the library's one CPU query (cpu_features.h: cpuid and the OS's register state).
  // avx512: the F + BW + DQ + VL set that OpenBLAS' SkylakeX and oneDNN's avx512_core kernels use
  if (CpuHas("avx512f") && CpuHas("avx512bw") && CpuHas("avx512dq") && CpuHas("avx512vl"))
    return IsaLevel::kAvx512;
  if (CpuHas("avx2") && CpuHas("fma")) return IsaLevel::kAvx2;
  if (CpuHas("avx")) return IsaLevel::kAvx;
  return IsaLevel::kBaseline;
}

GemmChoice ChooseGemmLib(const std::string& mode, const std::string& openblas_core,
                         IsaLevel cpu, bool have_dnnl) {
  const std::string m = Lower(mode);
  SINGA_CHECK(m.empty() || m == "auto" || m == "openblas" || m == "dnnl", ValueError,
              "SINGA_GEMM / SetGemmBackend: expected auto, openblas or dnnl, got '" << mode
                                                                                   << "'");
  const IsaLevel blas = OpenBlasCoreLevel(openblas_core);
  const std::string kernels = "OpenBLAS runs its " + openblas_core + " (" +
                              IsaLevelName(blas) + ") kernels on a CPU with " +
                              IsaLevelName(cpu);
  GemmChoice c;
  if (m == "openblas") {
    c.reason = "openblas requested (SINGA_GEMM or SetGemmBackend)";
  } else if (m == "dnnl") {
    c.lib = have_dnnl ? GemmLib::kDnnl : GemmLib::kOpenBlas;
    c.reason = have_dnnl ? "dnnl requested (SINGA_GEMM or SetGemmBackend)"
                         : "dnnl requested, but libsinga was built without oneDNN";
  } else if (!have_dnnl) {
    c.reason = "auto: built without oneDNN";
  } else if (blas < cpu) {
    c.lib = GemmLib::kDnnl;
    c.reason = "auto: " + kernels;
  } else {
    c.reason = "auto: " + kernels + " (its best)";
  }
  return c;
}

GemmLib SelectedGemmLib() {
  const int lib = g_lib.load(std::memory_order_relaxed);
  return lib >= 0 ? static_cast<GemmLib>(lib) : Decided().lib;
}

std::string GemmBackendName() {
  return Decided().lib == GemmLib::kDnnl ? "dnnl" : "openblas";
}

std::string GemmBackendReason() { return Decided().reason; }

void SetGemmBackend(const std::string& mode) {
  std::lock_guard<std::mutex> lock(g_mu);
  DecideLocked(mode);
}

std::string LastGemmBackend() {
  const int last = g_last.load();
  return last < 0 ? "none" : last == static_cast<int>(GemmLib::kDnnl) ? "dnnl" : "openblas";
}

void NoteGemmRan(GemmLib lib) { g_last.store(static_cast<int>(lib), std::memory_order_relaxed); }

}  // namespace singa
