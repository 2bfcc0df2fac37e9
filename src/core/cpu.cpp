#include "tern/core/cpu.h"

#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#include <cstring>
#include <string_view>
#endif

namespace tern {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
  f.logical_cores = int(std::thread::hardware_concurrency());
  if (f.logical_cores <= 0) f.logical_cores = 1;
  f.physical_cores = f.logical_cores;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {  // vendor: EBX EDX ECX
    char v[13] = {};
    std::memcpy(v, &b, 4);
    std::memcpy(v + 4, &d, 4);
    std::memcpy(v + 8, &c, 4);
    f.amd = std::string_view(v) == "AuthenticAMD";
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    const bool osxsave = c & (1u << 27);
    f.fma = c & (1u << 12);
    f.f16c = c & (1u << 29);
    bool ymm_ok = false, zmm_ok = false;
    if (osxsave) {
      unsigned lo, hi;
      __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      ymm_ok = (lo & 0x6) == 0x6;
      zmm_ok = (lo & 0xe6) == 0xe6;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
      f.avx2 = ymm_ok && (b & (1u << 5));
      f.avx512f = zmm_ok && (b & (1u << 16));
      f.avx512bw = zmm_ok && (b & (1u << 30));
      f.avx512vnni = zmm_ok && (c & (1u << 11));
      f.avx512vl = zmm_ok && (b & (1u << 31));
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
      f.avxvnni = ymm_ok && (a & (1u << 4));
      f.avx512bf16 = zmm_ok && (a & (1u << 5));
    }
    if (!ymm_ok) f.fma = f.f16c = false;
  }
  unsigned max_ext = __get_cpuid_max(0x80000000, nullptr);
  if (max_ext >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002 + i, &a, &b, &c, &d);
      unsigned* p = reinterpret_cast<unsigned*>(brand + 16 * i);
      p[0] = a, p[1] = b, p[2] = c, p[3] = d;
    }
    f.brand = brand;
    while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
  }
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace tern
