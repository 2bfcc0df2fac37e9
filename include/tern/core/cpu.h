#pragma once
// CPU features read once from CPUID at start-up; the single input to kernel dispatch.
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
  int logical_cores = 1;
  int physical_cores = 1;
  std::string brand;
};

const CpuFeatures& cpu_features();

}  // namespace tern
