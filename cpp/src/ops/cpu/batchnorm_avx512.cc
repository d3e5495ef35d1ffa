// The batch norm kernels (batchnorm.cc) compiled a second time for AVX-512, reached through
// batchnorm.cc's registered kernels when the CPU has AVX-512F/BW/DQ/VL.
//
// Why this way: only the functions batchnorm.cc defines after its `#pragma GCC target` become
// AVX-512 code, all of them in an anonymous namespace but the three entry points
// (cpu::bn_avx512). The headers are included here first, before the pragma, so their inline
// functions and the standard library's templates keep the baseline target: no AVX-512 copy of a
// shared inline function can be picked by the linker for the rest of the library. The file is
// built with -ffp-contract=off (CMakeLists.txt), as the baseline has no FMA to contract into:
// both copies compute the same bits.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "../epilogue_cpu.h"
#include "../nn_kernels.h"
#include "elem_io.h"
#include "singa/core/cpu_features.h"
#include "singa/ops/elementwise_functors.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)  // batchnorm.cc's test
#define SINGA_BN_AVX512 1
#include "batchnorm.cc"
#endif
