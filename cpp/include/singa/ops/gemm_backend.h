// singa/ops/gemm_backend.h: which library computes the CPU's float32 matrix products.
//
//   singa::GemmBackendName();            // "dnnl" or "openblas": what the rule picked
//   singa::GemmBackendReason();          // why, e.g. "auto: OpenBLAS runs its Prescott (sse3)
//                                        //   kernels on a CPU with avx512"
//   singa::SetGemmBackend("openblas");   // "auto" | "openblas" | "dnnl" (SINGA_GEMM's values)
//   singa::LastGemmBackend();            // which library ran the last product ("none" before)
//
// Why a choice at all: Debian's OpenBLAS 0.3.21 does not know recent Xeons and runs its SSE3
// ("Prescott") kernels there, 5-8x slower than oneDNN's AVX-512 sgemm on the same cores
// (BENCHMARKS.md). The rule, decided once per process (at the first product or query): with
// SINGA_GEMM unset or "auto", oneDNN when libsinga has it and OpenBLAS' kernels target an older
// instruction set than the CPU offers (cpuid), else OpenBLAS. SINGA_GEMM=openblas|dnnl forces
// one (dnnl falls back to OpenBLAS, with the reason saying so, in a build without oneDNN).
//
// The choice applies to the oneDNN backend's Gemm and BatchedGemm kernels (every Mult of a CPU
// device on its default backend); `dev.set_backend("cpu")` keeps the reference kernels, which
// always call OpenBLAS.
#pragma once

#include <string>

namespace singa {

enum class GemmLib : int { kOpenBlas = 0, kDnnl = 1 };

/// The instruction-set levels the rule compares: what a CPU offers, what a BLAS targets.
enum class IsaLevel : int { kBaseline = 0, kAvx = 1, kAvx2 = 2, kAvx512 = 3 };

struct GemmChoice {
  GemmLib lib = GemmLib::kOpenBlas;
  std::string reason;
};

/// The rule as a pure function (the tests drive it): mode is "auto", "openblas", "dnnl" or ""
/// (= auto); openblas_core is openblas_get_corename()'s answer. Throws ValueError for another
/// mode.
GemmChoice ChooseGemmLib(const std::string& mode, const std::string& openblas_core,
                         IsaLevel cpu, bool have_dnnl);
/// The level of OpenBLAS' kernels for a core name (unknown names: kBaseline).
IsaLevel OpenBlasCoreLevel(const std::string& core);
/// What this CPU offers (cpuid).
IsaLevel CpuIsaLevel();
const char* IsaLevelName(IsaLevel l);

/// The library this process uses (the rule's answer for SINGA_GEMM, or the last SetGemmBackend).
GemmLib SelectedGemmLib();
std::string GemmBackendName();
std::string GemmBackendReason();
/// Re-decides with `mode` in place of SINGA_GEMM ("auto" | "openblas" | "dnnl"); throws
/// ValueError for another. Products recorded in a graph follow the new choice at replay.
void SetGemmBackend(const std::string& mode);
/// "openblas" or "dnnl": the library that ran the most recent CPU product; "none" before any.
std::string LastGemmBackend();
/// Called by the CPU kernels as they run a product.
void NoteGemmRan(GemmLib lib);

}  // namespace singa
