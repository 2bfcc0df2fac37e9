#pragma once
// CPU features read once at start-up (CPUID on x86-64; the kernel's hardware
// capability bits on Linux aarch64, sysctl on macOS): the single input to
// kernel dispatch (kernels::active_isa()).
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

}  // namespace tern
