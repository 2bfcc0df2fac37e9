// The single dispatch point picks the best table the CPU runs, and on aarch64
// the NEON tables follow the HWCAP bits exactly. TERN_EXPECT_ISA lets a CI
// script pin the choice per emulated CPU (e.g. QEMU_CPU=cortex-a72
// TERN_EXPECT_ISA=neon): a wrong guess fails here instead of dying of SIGILL.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tern/core/cpu.h"
#include "test_tables.h"

namespace tern::kernels {
namespace {

TEST(Dispatch, PicksTheBestTableTheCpuRuns) {
  const std::vector<Isa> avail = available_isas();
  ASSERT_FALSE(avail.empty());
  EXPECT_EQ(avail.front(), Isa::Scalar);
  for (Isa isa : avail) {
    ASSERT_NE(kernel_table(isa), nullptr) << isa_name(isa);
    EXPECT_STREQ(kernel_table(isa)->isa, isa_name(isa));
  }
  if (!std::getenv("TERN_KERNELS")) {
    EXPECT_EQ(active_isa(), avail.back()) << isa_choice();
  }
  EXPECT_STREQ(kernel_isa(), isa_name(active_isa()));
#if defined(__aarch64__)
  const CpuFeatures& cpu = cpu_features();
  EXPECT_TRUE(cpu.neon);
  EXPECT_TRUE(isa_available(Isa::Neon));
  EXPECT_EQ(isa_available(Isa::NeonDotprod), cpu.dotprod) << isa_choice();
  EXPECT_EQ(isa_available(Isa::NeonI8mm), cpu.dotprod && cpu.i8mm) << isa_choice();
  for (Isa x86 : {Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni}) EXPECT_FALSE(isa_available(x86));
#else
  for (Isa arm : {Isa::Neon, Isa::NeonDotprod, Isa::NeonI8mm}) EXPECT_FALSE(isa_available(arm));
#endif
}

TEST(Dispatch, MatchesTernExpectIsa) {
  const char* want = std::getenv("TERN_EXPECT_ISA");
  if (!want || !*want) GTEST_SKIP() << "TERN_EXPECT_ISA not set; chose " << isa_choice();
  EXPECT_STREQ(kernel_isa(), want) << isa_choice();
}

}  // namespace
}  // namespace tern::kernels
