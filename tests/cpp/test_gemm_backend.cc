// The rule that picks the CPU products' library (singa/ops/gemm_backend.h), as a table.
#include <gtest/gtest.h>

#include "singa/core/error.h"
#include "singa/ops/gemm_backend.h"

using namespace singa;

TEST(GemmBackend, CoreNamesMapToTheirKernelsInstructionSet) {
  EXPECT_EQ(OpenBlasCoreLevel("Prescott"), IsaLevel::kBaseline);
  EXPECT_EQ(OpenBlasCoreLevel("Nehalem"), IsaLevel::kBaseline);
  EXPECT_EQ(OpenBlasCoreLevel(""), IsaLevel::kBaseline);
  EXPECT_EQ(OpenBlasCoreLevel("Sandybridge"), IsaLevel::kAvx);
  EXPECT_EQ(OpenBlasCoreLevel("Haswell"), IsaLevel::kAvx2);
  EXPECT_EQ(OpenBlasCoreLevel("Zen"), IsaLevel::kAvx2);
  EXPECT_EQ(OpenBlasCoreLevel("SkylakeX"), IsaLevel::kAvx512);
  EXPECT_EQ(OpenBlasCoreLevel("COOPERLAKE"), IsaLevel::kAvx512);
}

TEST(GemmBackend, AutoPicksOneDnnWhereOpenBlasKernelsAreOlderThanTheCpu) {
  struct Row {
    const char* mode;
    const char* core;
    IsaLevel cpu;
    bool have_dnnl;
    GemmLib want;
  };
  const Row rows[] = {
      {"", "Prescott", IsaLevel::kAvx512, true, GemmLib::kDnnl},      // Debian's 0.3.21 on SPR
      {"auto", "Haswell", IsaLevel::kAvx512, true, GemmLib::kDnnl},   // OPENBLAS_CORETYPE=Haswell
      {"AUTO", "SkylakeX", IsaLevel::kAvx512, true, GemmLib::kOpenBlas},
      {"auto", "Haswell", IsaLevel::kAvx2, true, GemmLib::kOpenBlas},
      {"auto", "Prescott", IsaLevel::kBaseline, true, GemmLib::kOpenBlas},
      {"auto", "Prescott", IsaLevel::kAvx512, false, GemmLib::kOpenBlas},
      {"openblas", "Prescott", IsaLevel::kAvx512, true, GemmLib::kOpenBlas},
      {"dnnl", "SkylakeX", IsaLevel::kAvx512, true, GemmLib::kDnnl},
      {"dnnl", "Prescott", IsaLevel::kAvx512, false, GemmLib::kOpenBlas},
  };
  for (const Row& r : rows) {
    const GemmChoice c = ChooseGemmLib(r.mode, r.core, r.cpu, r.have_dnnl);
    EXPECT_EQ(c.lib, r.want) << r.mode << " " << r.core << " " << IsaLevelName(r.cpu) << " "
                             << r.have_dnnl << ": " << c.reason;
    EXPECT_FALSE(c.reason.empty());
  }
  const GemmChoice c = ChooseGemmLib("auto", "Prescott", IsaLevel::kAvx512, true);
  EXPECT_NE(c.reason.find("Prescott"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("avx512"), std::string::npos) << c.reason;
}

TEST(GemmBackend, OtherModesThrowValueError) {
  EXPECT_THROW(ChooseGemmLib("mkl", "Prescott", IsaLevel::kAvx512, true), ValueError);
  EXPECT_THROW(SetGemmBackend("fastest"), ValueError);
  EXPECT_NO_THROW(SetGemmBackend("auto"));
}
