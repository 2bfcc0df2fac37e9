#pragma once
// CPU features read once at start-up (CPUID on x86-64; the kernel's hardware
// capability bits on Linux aarch64, sysctl on macOS): the single input to
// kernel dispatch (kernels::active_isa()).
#include <cstdint>
#include <string>

namespace tern {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vnni = false;
  bool avx512vl = false;
  bool avx512bf16 = false;
  bool avxvnni = false;
  bool amd = false;  // CPUID vendor AuthenticAMD
  // aarch64
  bool neon = false;     // Advanced SIMD (always there on aarch64 Linux/macOS)
  bool dotprod = false;  // SDOT/UDOT (HWCAP_ASIMDDP)
  bool i8mm = false;     // SMMLA/UMMLA (HWCAP2_I8MM)
  bool fp16 = false;     // half-precision arithmetic (HWCAP_FPHP and HWCAP_ASIMDHP)
  bool bf16 = false;     // BFDOT/BFMMLA (HWCAP2_BF16)
  bool sve = false;      // HWCAP_SVE
  bool sve2 = false;     // HWCAP2_SVE2
  int logical_cores = 1;
  int physical_cores = 1;
  std::string brand;
};

const CpuFeatures& cpu_features();

// The core an aarch64 MIDR_EL1 value names ("Arm Cortex-A76", "Arm
// Neoverse N1", ...; "implementer 0x.. part 0x.." when unknown). On Linux
// aarch64 cpu_features().brand is this name for cpu0, read from
// /sys/devices/system/cpu/cpu0/regs/identification/midr_el1.
std::string arm_core_name(uint64_t midr);

}  // namespace tern
