// The machine's limits for the phases tern runs, measured on N threads:
//   - read bandwidth: streaming sums over a buffer far larger than any cache
//     (DRAM) and over a buffer the size of a small model's weights (what decode
//     re-reads every token; on big-L3 servers part of it may stay in cache);
//   - int8 multiply-accumulate peak, three instruction sequences:
//       madd:  vpmaddubsw + vpmaddwd + vpaddd   (the classic AVX2 int8 dot)
//       i16:   vpmaddubsw + vpaddw, one vpmaddwd per 8 (tern's AVX2 int4 kernel)
//       vnni:  vpdpbusd ymm                      (AVX-VNNI, when the CPU has it)
//       vnni512: vpdpbusd zmm                    (AVX-512 VNNI, when the CPU has it)
//   - fp32 FMA peak (vfmadd231ps ymm).
// On aarch64 the int8 sequences are the NEON ones tern's tables use:
//       smull:  smull + smlal2 + sadalp   (Armv8.0, the "neon" table)
//       sdot:   sdot v.4s                 (dotprod, when HWCAP says so)
//       smmla:  smmla v.4s                (i8mm, when HWCAP2 says so)
//   and fp32 FMA is fmla v.4s.
// Prints one JSON object. Standalone on purpose (no tern code): build with
//   g++ -O2 -std=c++20 -mavx2 -mfma -mavxvnni -pthread bench/roofline.cpp -o roofline
// (bench/compare.py does this; it adds -mavx512f -mavx512vnni when the compiler
// has them), or on aarch64 with no -m flags at all (the probes that need
// dotprod or i8mm carry their own target attribute and run only when the
// CPU's HWCAP bits say so). Usage: roofline [threads] [--quick]
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Runs fn(thread) on n threads started together; returns wall seconds.
double run_threads(int n, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < n; ++t) {
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) {
      }
      fn(t);
    });
  }
  while (ready.load() != n) {
  }
  const auto t0 = Clock::now();
  go.store(true);
  for (auto& t : ts) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

#if defined(__x86_64__)
// Sum of a buffer with 4 independent 256-bit accumulators (reads only).
__attribute__((noinline)) uint64_t read_sum(const uint8_t* p, size_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= bytes; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t v[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(v), s);
  return v[0] + v[1] + v[2] + v[3];
}
#else
// The same with 8 independent 64-bit accumulators (the compiler vectorises
// it: NEON ldp q / add v.2d on aarch64).
__attribute__((noinline)) uint64_t read_sum(const uint8_t* p, size_t bytes) {
  uint64_t a[8] = {};
  for (size_t i = 0; i + 64 <= bytes; i += 64) {
    const uint64_t* q = reinterpret_cast<const uint64_t*>(p + i);
    for (int j = 0; j < 8; ++j) a[j] += q[j];
  }
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}
#endif

// GB/s reading `total` bytes split over n threads, `passes` times (best of reps).
double bandwidth(int n, size_t total, int passes, int reps) {
  const size_t per = total / size_t(n) / 128 * 128;
  std::vector<uint8_t*> bufs(static_cast<size_t>(n));
  run_threads(n, [&](int t) {  // each thread first-touches its own buffer
    bufs[size_t(t)] = static_cast<uint8_t*>(std::aligned_alloc(64, per));
    std::memset(bufs[size_t(t)], t + 1, per);
  });
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double s = run_threads(n, [&](int t) {
      for (int p = 0; p < passes; ++p) sink.fetch_add(read_sum(bufs[size_t(t)], per));
    });
    best = std::max(best, double(per) * n * passes / s / 1e9);
  }
  for (auto* b : bufs) std::free(b);
  return best;
}

constexpr int64_t kIters = 20'000'000;

#if defined(__x86_64__)

// The compute loops are inline assembly so that the compiler can neither fold
// the loop-invariant products nor reorder them: what runs is what is counted.
// ymm14 and ymm15 hold the operands, ymm13 int16 ones.
#define U8(a, b)                                                                        \
  "vpmaddubsw %%ymm15, %%ymm14, %%ymm" #a "\n\tvpmaddwd %%ymm13, %%ymm" #a ", %%ymm" #a \
  "\n\tvpaddd %%ymm" #a ", %%ymm" #b ", %%ymm" #b "\n\t"
#define I16(a, b) \
  "vpmaddubsw %%ymm15, %%ymm14, %%ymm" #a "\n\tvpaddw %%ymm" #a ", %%ymm" #b ", %%ymm" #b "\n\t"
#define WIDEN(b, c) \
  "vpmaddwd %%ymm13, %%ymm" #b ", %%ymm" #b "\n\tvpaddd %%ymm" #b ", %%ymm" #c ", %%ymm" #c "\n\t"
#define VNNI(b) "vpdpbusd %%ymm15, %%ymm14, %%ymm" #b "\n\t"
#define FMA(b) "vfmadd231ps %%ymm15, %%ymm14, %%ymm" #b "\n\t"
#define CLOBBER                                                                            \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
      "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory"
#define SETUP                                                              \
  "vpcmpeqw %%ymm13, %%ymm13, %%ymm13\n\tvpsrlw $15, %%ymm13, %%ymm13\n\t" \
  "vpcmpeqb %%ymm14, %%ymm14, %%ymm14\n\tvpabsb %%ymm14, %%ymm14\n\t"      \
  "vpxor %%ymm15, %%ymm15, %%ymm15\n\t"

// vpmaddubsw + vpmaddwd + vpaddd, 6 independent chains: 6 x 32 MACs an iteration.
__attribute__((noinline)) int int8_madd(int64_t iters, int) {
  __asm__ volatile(SETUP "1:\n\t" U8(0, 1) U8(2, 3) U8(4, 5) U8(6, 7) U8(8, 9)
                       U8(10, 11) "dec %0\n\tjnz 1b\n\tvzeroupper"
                   : "+r"(iters)::CLOBBER);
  return 0;
}

// tern's AVX2 int4 inner loop: int16 sums of 8 vpmaddubsw, then one vpmaddwd,
// 4 chains: 8 x 4 x 32 MACs an iteration.
#define I16x4 I16(0, 4) I16(1, 5) I16(2, 6) I16(3, 7)
__attribute__((noinline)) int int8_i16(int64_t iters, int) {
  __asm__ volatile(SETUP "1:\n\t" I16x4 I16x4 I16x4 I16x4 I16x4 I16x4 I16x4 I16x4 WIDEN(4, 8)
                       WIDEN(5, 9) WIDEN(6, 10) WIDEN(7, 11) "dec %0\n\tjnz 1b\n\tvzeroupper"
                   : "+r"(iters)::CLOBBER);
  return 0;
}

#ifdef __AVXVNNI__
// vpdpbusd, 12 chains: 12 x 32 MACs an iteration.
__attribute__((noinline)) int int8_vnni(int64_t iters, int) {
  __asm__ volatile(SETUP "1:\n\t" VNNI(0) VNNI(1) VNNI(2) VNNI(3) VNNI(4) VNNI(5) VNNI(6) VNNI(7)
                       VNNI(8) VNNI(9) VNNI(10) VNNI(11) "dec %0\n\tjnz 1b\n\tvzeroupper"
                   : "+r"(iters)::CLOBBER);
  return 0;
}
#endif

#ifdef __AVX512VNNI__
#define VNNI512(b) "vpdpbusd %%zmm15, %%zmm14, %%zmm" #b "\n\t"
// vpdpbusd zmm, 12 chains: 12 x 64 MACs an iteration.
__attribute__((noinline)) int int8_vnni512(int64_t iters, int) {
  __asm__ volatile(
      "vpternlogd $0xff, %%zmm14, %%zmm14, %%zmm14\n\tvpxord %%zmm15, %%zmm15, %%zmm15\n\t"
      "1:\n\t" VNNI512(0) VNNI512(1) VNNI512(2) VNNI512(3) VNNI512(4) VNNI512(5) VNNI512(6)
          VNNI512(7) VNNI512(8) VNNI512(9) VNNI512(10) VNNI512(11) "dec %0\n\tjnz 1b\n\tvzeroupper"
      : "+r"(iters)::CLOBBER);
  return 0;
}
#endif

// vfmadd231ps ymm, 12 chains: 12 x 8 MACs an iteration.
__attribute__((noinline)) int fp32_fma(int64_t iters, int) {
  __asm__ volatile(SETUP "1:\n\t" FMA(0) FMA(1) FMA(2) FMA(3) FMA(4) FMA(5) FMA(6) FMA(7) FMA(8)
                       FMA(9) FMA(10) FMA(11) "dec %0\n\tjnz 1b\n\tvzeroupper"
                   : "+r"(iters)::CLOBBER);
  return 0;
}

#elif defined(__aarch64__)

// v30 and v31 hold the operands; 12 accumulator chains per loop.
#define A64_CLOBBER                                                                              \
  "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", \
      "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v30", "v31", "cc", "memory"
#define A64_SETUP "movi v30.16b, #3\n\tmovi v31.16b, #5\n\t"
#define SMULL(a, b)                                 \
  "smull v" #a ".8h, v30.8b, v31.8b\n\tsmlal2 v" #a \
  ".8h, v30.16b, v31.16b\n\t"                       \
  "sadalp v" #b ".4s, v" #a ".8h\n\t"
#define SDOT(b) "sdot v" #b ".4s, v30.16b, v31.16b\n\t"
#define SMMLA(b) "smmla v" #b ".4s, v30.16b, v31.16b\n\t"
#define FMLA(b) "fmla v" #b ".4s, v30.4s, v31.4s\n\t"
#define X12(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)

// smull + smlal2 + sadalp, 8 chains: 8 x 16 MACs an iteration.
__attribute__((noinline)) int int8_smull(int64_t iters, int) {
  __asm__ volatile(A64_SETUP "1:\n\t" SMULL(0, 8) SMULL(1, 9) SMULL(2, 10) SMULL(3, 11) SMULL(4, 12)
                       SMULL(5, 13) SMULL(6, 14) SMULL(7, 15) "subs %0, %0, #1\n\tb.ne 1b"
                   : "+r"(iters)::A64_CLOBBER);
  return 0;
}

// sdot, 12 chains: 12 x 16 MACs an iteration.
__attribute__((noinline, target("arch=armv8.2-a+dotprod"))) int int8_sdot(int64_t iters, int) {
  __asm__ volatile(A64_SETUP "1:\n\t" X12(SDOT) "subs %0, %0, #1\n\tb.ne 1b"
                   : "+r"(iters)::A64_CLOBBER);
  return 0;
}

// smmla (a 2x8 by 8x2 int8 product), 12 chains: 12 x 32 MACs an iteration.
__attribute__((noinline, target("arch=armv8.2-a+dotprod+i8mm"))) int int8_smmla(int64_t iters,
                                                                                int) {
  __asm__ volatile(A64_SETUP "1:\n\t" X12(SMMLA) "subs %0, %0, #1\n\tb.ne 1b"
                   : "+r"(iters)::A64_CLOBBER);
  return 0;
}

// fmla v.4s, 12 chains: 12 x 4 MACs an iteration.
__attribute__((noinline)) int fp32_fmla(int64_t iters, int) {
  __asm__ volatile(A64_SETUP "1:\n\t" X12(FMLA) "subs %0, %0, #1\n\tb.ne 1b"
                   : "+r"(iters)::A64_CLOBBER);
  return 0;
}

#endif

// Giga-MACs per second on n threads for a kernel doing `macs_per_iter` MACs an iteration.
template <typename F>
double gmacs(int n, F kernel, double macs_per_iter, int64_t iters, int reps) {
  std::atomic<int64_t> sink{0};
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double s = run_threads(n, [&](int t) { sink.fetch_add(int64_t(kernel(iters, t))); });
    best = std::max(best, macs_per_iter * double(iters) * n / s / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 2;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      n = std::max(1, std::atoi(argv[i]));
    }
  }
  const int reps = quick ? 2 : 5;
  const int64_t iters = quick ? kIters / 4 : kIters;
  const double dram = bandwidth(n, size_t(1) << 30, 2, reps);        // 1 GiB
  const double model_ws = bandwidth(n, size_t(96) << 20, 10, reps);  // ~ a 135M model's weights
#if defined(__x86_64__)
  const double madd = gmacs(n, int8_madd, 6 * 32, iters, reps);
  const double i16 = gmacs(n, int8_i16, 8 * 4 * 32, iters / 8, reps);
  __builtin_cpu_init();
#ifdef __AVXVNNI__
  const double vnni =
      __builtin_cpu_supports("avxvnni") ? gmacs(n, int8_vnni, 12 * 32, iters, reps) : 0;
#else
  const double vnni = 0;
#endif
#ifdef __AVX512VNNI__
  const double vnni512 =
      __builtin_cpu_supports("avx512vnni") ? gmacs(n, int8_vnni512, 12 * 64, iters, reps) : 0;
#else
  const double vnni512 = 0;
#endif
  const double fma = gmacs(n, fp32_fma, 12 * 8, iters, reps);
  std::printf(
      "{\"threads\": %d, \"dram_read_gbs\": %.2f, \"ws96mib_read_gbs\": %.2f, "
      "\"int8_madd_gmacs\": %.1f, \"int8_i16_gmacs\": %.1f, \"int8_vnni_gmacs\": %.1f, "
      "\"int8_vnni512_gmacs\": %.1f, \"fp32_fma_gmacs\": %.1f}\n",
      n, dram, model_ws, madd, i16, vnni, vnni512, fma);
#elif defined(__aarch64__)
#ifdef __linux__
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  const bool dotprod = hw & (1ul << 20), i8mm = hw2 & (1ul << 13);
#else
  const bool dotprod = false, i8mm = false;  // not probed off Linux
#endif
  const double smull = gmacs(n, int8_smull, 8 * 16, iters, reps);
  const double sdot = dotprod ? gmacs(n, int8_sdot, 12 * 16, iters, reps) : 0;
  const double smmla = i8mm ? gmacs(n, int8_smmla, 12 * 32, iters, reps) : 0;
  const double fma = gmacs(n, fp32_fmla, 12 * 4, iters, reps);
  std::printf(
      "{\"threads\": %d, \"dram_read_gbs\": %.2f, \"ws96mib_read_gbs\": %.2f, "
      "\"int8_smull_gmacs\": %.1f, \"int8_sdot_gmacs\": %.1f, \"int8_smmla_gmacs\": %.1f, "
      "\"fp32_fma_gmacs\": %.1f}\n",
      n, dram, model_ws, smull, sdot, smmla, fma);
#endif
  return 0;
}
