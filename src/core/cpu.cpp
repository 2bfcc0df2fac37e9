#include "tern/core/cpu.h"

#include <cstdio>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#include <cstring>
#include <string_view>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
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
#elif defined(__aarch64__) && defined(__linux__)
  // Bit numbers from the kernel's arch/arm64/include/uapi/asm/hwcap.h (glibc
  // 2.36 lacks some names, so they are spelled out). /proc/cpuinfo is not
  // read: under qemu-user it shows the host's CPU.
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.neon = hw & (1ul << 1);                          // ASIMD
  f.fp16 = (hw & (1ul << 9)) && (hw & (1ul << 10));  // FPHP, ASIMDHP
  f.dotprod = hw & (1ul << 20);                      // ASIMDDP
  f.sve = hw & (1ul << 22);                          // SVE
  f.sve2 = hw2 & (1ul << 1);                         // SVE2
  f.i8mm = hw2 & (1ul << 13);                        // I8MM
  f.bf16 = hw2 & (1ul << 14);                        // BF16
  if (FILE* m = std::fopen("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", "r")) {
    unsigned long long midr = 0;
    if (std::fscanf(m, "%llx", &midr) == 1) f.brand = arm_core_name(midr);
    std::fclose(m);
  }
#elif defined(__aarch64__) && defined(__APPLE__)
  // Not verified on a Mac (no Apple hardware here): the documented sysctl names.
  auto has = [](const char* name) {
    int v = 0;
    size_t len = sizeof(v);
    return sysctlbyname(name, &v, &len, nullptr, 0) == 0 && v != 0;
  };
  f.neon = true;
  f.fp16 = has("hw.optional.arm.FEAT_FP16");
  f.dotprod = has("hw.optional.arm.FEAT_DotProd");
  f.i8mm = has("hw.optional.arm.FEAT_I8MM");
  f.bf16 = has("hw.optional.arm.FEAT_BF16");
  char brand[128] = {};
  size_t blen = sizeof(brand) - 1;
  if (sysctlbyname("machdep.cpu.brand_string", brand, &blen, nullptr, 0) == 0) f.brand = brand;
#endif
  return f;
}

}  // namespace

std::string arm_core_name(uint64_t midr) {
  const unsigned implementer = unsigned(midr >> 24) & 0xff, part = unsigned(midr >> 4) & 0xfff;
  struct Core {
    unsigned implementer, part;
    const char* name;
  };
  static constexpr Core kCores[] = {
      {0x41, 0xd03, "Arm Cortex-A53"},      {0x41, 0xd04, "Arm Cortex-A35"},
      {0x41, 0xd05, "Arm Cortex-A55"},      {0x41, 0xd07, "Arm Cortex-A57"},
      {0x41, 0xd08, "Arm Cortex-A72"},      {0x41, 0xd09, "Arm Cortex-A73"},
      {0x41, 0xd0a, "Arm Cortex-A75"},      {0x41, 0xd0b, "Arm Cortex-A76"},
      {0x41, 0xd0c, "Arm Neoverse N1"},     {0x41, 0xd0d, "Arm Cortex-A77"},
      {0x41, 0xd40, "Arm Neoverse V1"},     {0x41, 0xd41, "Arm Cortex-A78"},
      {0x41, 0xd42, "Arm Cortex-A78AE"},    {0x41, 0xd44, "Arm Cortex-X1"},
      {0x41, 0xd46, "Arm Cortex-A510"},     {0x41, 0xd47, "Arm Cortex-A710"},
      {0x41, 0xd48, "Arm Cortex-X2"},       {0x41, 0xd49, "Arm Neoverse N2"},
      {0x41, 0xd4b, "Arm Cortex-A78C"},     {0x41, 0xd4f, "Arm Neoverse V2"},
      {0x41, 0xd80, "Arm Cortex-A520"},     {0x41, 0xd81, "Arm Cortex-A720"},
      {0x41, 0xd82, "Arm Cortex-X4"},       {0x41, 0xd84, "Arm Neoverse V3"},
      {0x41, 0xd8e, "Arm Neoverse N3"},     {0x46, 0x001, "Fujitsu A64FX"},
      {0x61, 0x022, "Apple M1 (Icestorm)"}, {0x61, 0x023, "Apple M1 (Firestorm)"},
      {0x61, 0x032, "Apple M2 (Blizzard)"}, {0x61, 0x033, "Apple M2 (Avalanche)"},
  };
  for (const Core& c : kCores) {
    if (c.implementer == implementer && c.part == part) return c.name;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "aarch64 implementer 0x%02x part 0x%03x", implementer, part);
  return buf;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace tern
