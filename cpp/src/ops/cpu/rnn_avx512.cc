// The recurrent layers' host walks (rnn.cc) compiled a second time for AVX-512, reached through
// rnn.cc's cpu::*With functions when the CPU has AVX-512F/BW/DQ/VL (SINGA_CPU_FEATURES_MASK=avx512f
// forces the baseline).
//
// As elementwise_avx512.cc: the headers come first, before rnn.cc's `#pragma GCC target`, so
// their inline functions and the standard library's templates keep the baseline target; the row
// loops and walks defined after the pragma (namespace cpu::rnn_avx512) are AVX-512 code, and the
// cell functions (rnn_kernels.h, always inlined) inline into them.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../rnn_kernels.h"
#include "singa/core/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)  // rnn.cc's test
#define SINGA_RNN_AVX512 1
#include "rnn.cc"
#endif
