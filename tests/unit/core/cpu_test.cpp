#include "tern/core/cpu.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

// MIDR_EL1 values as Linux shows them in .../regs/identification/midr_el1.
TEST(Cpu, ArmCoreNamesFromMidr) {
  EXPECT_EQ(arm_core_name(0x414fd0b1), "Arm Cortex-A76");   // Raspberry Pi 5
  EXPECT_EQ(arm_core_name(0x410fd083), "Arm Cortex-A72");   // Raspberry Pi 4
  EXPECT_EQ(arm_core_name(0x413fd0c1), "Arm Neoverse N1");  // Graviton 2
  EXPECT_EQ(arm_core_name(0x411fd401), "Arm Neoverse V1");  // Graviton 3
  EXPECT_EQ(arm_core_name(0x000000004e0f0030ull), "aarch64 implementer 0x4e part 0x003");
}

TEST(Cpu, FeaturesAreConsistent) {
  const CpuFeatures& f = cpu_features();
  EXPECT_GE(f.logical_cores, 1);
  EXPECT_TRUE(!f.i8mm || f.neon);
  EXPECT_TRUE(!f.dotprod || f.neon);
  EXPECT_TRUE(!f.avx512vnni || f.avx512f);
#if defined(__aarch64__)
  EXPECT_TRUE(f.neon);  // Advanced SIMD is mandatory on aarch64 Linux
#endif
}

}  // namespace
}  // namespace tern
