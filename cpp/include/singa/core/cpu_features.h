// singa/core/cpu_features.h: the instruction sets the host CPU (and its OS) can run, from cpuid.
//
//   for (const std::string& f : singa::CpuFeatures()) std::cout << f << " ";  // avx2 avx512f ...
//   if (singa::CpuHas("amx_bf16")) { ... }
//   singa::RequireCpuFeature("MatMul(bfloat16)", "avx512_bf16");  // throws NotImplementedError
//
// A bf16 compute path on a CPU without the instructions would run oneDNN's emulation several
// times slower than float32: those paths refuse instead, naming the missing instruction set.
// The environment variable SINGA_CPU_FEATURES_MASK (comma-separated names, read once at the
// first query) pretends features are absent, so that the refusal can be tested on any machine.
#pragma once

#include <string>
#include <vector>

namespace singa {

/// The names (lower case, as Linux's /proc/cpuinfo spells them) of the features present, sorted:
/// sse4_2 avx avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16
/// avx512_fp16 amx_tile amx_bf16 amx_int8 ...; AVX and AMX ones only when the OS saves their
/// registers (xgetbv). Minus those named in SINGA_CPU_FEATURES_MASK.
const std::vector<std::string>& CpuFeatures();
bool CpuHas(const std::string& feature);
/// Throws NotImplementedError naming `op` and the missing feature when the CPU lacks it.
void RequireCpuFeature(const char* op, const char* feature);

}  // namespace singa
