// The elementwise table's CPU loops (elementwise.cc) compiled a second time for AVX-512, reached
// through elementwise.cc's registered kernels when the CPU has AVX-512F/BW/DQ/VL.
//
// As batchnorm_avx512.cc: the headers come first, before elementwise.cc's `#pragma GCC target`,
// so their inline functions and the standard library's templates keep the baseline target (no
// AVX-512 copy of a shared inline function can be picked by the linker for the rest of the
// library); the loops, the row kernels and the lambdas defined after the pragma are AVX-512 code,
// and the table's functors inline into them. Only the rows' entry points (cpu::elem_avx512) are
// visible outside.
#include <cstdint>
#include <type_traits>

#include "../kernel_slots.h"
#include "../strided.h"
#include "singa/core/cpu_features.h"
#include "singa/ops/elementwise_functors.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)  // elementwise.cc's test
#define SINGA_ELEM_AVX512 1
#include "elementwise.cc"
#endif
