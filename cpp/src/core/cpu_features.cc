// cpuid feature detection (singa/core/cpu_features.h).
#include "singa/core/cpu_features.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "singa/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define SINGA_X86 1
#endif

namespace singa {
namespace {

#ifdef SINGA_X86
struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs Cpuid(uint32_t leaf, uint32_t sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}

uint64_t Xcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

// (name, register word, bit, which OS state it needs: 0 none, 1 AVX, 2 AVX-512, 3 AMX)
struct Bit {
  const char* name;
  int reg;  // 0: leaf 1 ecx, 1: leaf 1 edx, 2: leaf 7.0 ebx, 3: 7.0 ecx, 4: 7.0 edx, 5: 7.1 eax
  int bit;
  int state;
};
constexpr Bit kBits[] = {
    {"sse2", 1, 26, 0},          {"ssse3", 0, 9, 0},
    {"sse4_1", 0, 19, 0},        {"sse4_2", 0, 20, 0},          {"popcnt", 0, 23, 0},
    {"fma", 0, 12, 1},           {"avx", 0, 28, 1},             {"f16c", 0, 29, 1},
    {"avx2", 2, 5, 1},           {"bmi2", 2, 8, 0},             {"avx512f", 2, 16, 2},
    {"avx512dq", 2, 17, 2},      {"avx512ifma", 2, 21, 2},      {"avx512cd", 2, 28, 2},
    {"avx512bw", 2, 30, 2},      {"avx512vl", 2, 31, 2},        {"avx512vbmi", 3, 1, 2},
    {"avx512_vnni", 3, 11, 2},   {"avx512_bf16", 5, 5, 2},      {"avx_vnni", 5, 4, 1},
    {"avx512_fp16", 4, 23, 2},   {"amx_bf16", 4, 22, 3},        {"amx_tile", 4, 24, 3},
    {"amx_int8", 4, 25, 3},
};

std::vector<std::string> Detect() {
  const Regs l0 = Cpuid(0, 0);
  const Regs l1 = Cpuid(1, 0);
  const Regs l70 = l0.a >= 7 ? Cpuid(7, 0) : Regs{};
  const Regs l71 = l0.a >= 7 && l70.a >= 1 ? Cpuid(7, 1) : Regs{};
  const uint32_t words[] = {l1.c, l1.d, l70.b, l70.c, l70.d, l71.a};
  const bool osxsave = (l1.c >> 27) & 1u;
  const uint64_t xcr0 = osxsave ? Xcr0() : 0;
  const bool state[] = {true, (xcr0 & 0x6) == 0x6, (xcr0 & 0xe6) == 0xe6,
                        (xcr0 & 0x60000) == 0x60000};
  std::vector<std::string> out;
  for (const Bit& b : kBits)
    if (((words[b.reg] >> b.bit) & 1u) && state[b.state]) out.push_back(b.name);
  return out;
}
#else
std::vector<std::string> Detect() { return {}; }
#endif

std::vector<std::string> Masked(std::vector<std::string> have) {
  const char* mask = std::getenv("SINGA_CPU_FEATURES_MASK");
  if (mask != nullptr) {
    std::stringstream ss(mask);
    std::string name;
    while (std::getline(ss, name, ','))
      have.erase(std::remove(have.begin(), have.end(), name), have.end());
  }
  std::sort(have.begin(), have.end());
  return have;
}

}  // namespace

const std::vector<std::string>& CpuFeatures() {
  static const std::vector<std::string> features = Masked(Detect());
  return features;
}

bool CpuHas(const std::string& feature) {
  const auto& f = CpuFeatures();
  return std::find(f.begin(), f.end(), feature) != f.end();
}

void RequireCpuFeature(const char* op, const char* feature) {
  if (CpuHas(feature)) return;
  std::string have;
  for (const std::string& f : CpuFeatures())
    if (f.rfind("avx512", 0) == 0 || f.rfind("amx", 0) == 0) have += (have.empty() ? "" : " ") + f;
  SINGA_THROW(NotImplementedError,
              op << ": needs the " << feature << " instruction set, which this CPU lacks (its "
                 << "AVX-512/AMX features: " << (have.empty() ? "none" : have)
                 << "); compute in float32 instead (as_type(float32), or precision=\"float32\")");
}

}  // namespace singa
