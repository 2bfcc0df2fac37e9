// The AVX-VNNI kernel table: the AVX2 table with vpdpbusd dot products, which
// add 4-byte u8 x s8 products straight into int32 lanes (no int16 step, no
// saturation). Compiled with -mavxvnni on top of the AVX2 flags; chosen at run
// time only when CPUID reports AVX-VNNI (Alder Lake, Sapphire Rapids, Zen 5).
#include "dispatch.h"
#include "gemm_x86.inl"
#include "ops_avx2.h"

namespace tern::kernels {
namespace {

struct VnniDot {
  using Acc4 = __m256i;  // int32 lanes
  static __m256i zero4() { return _mm256_setzero_si256(); }
  static __m256i dot_u4(__m256i acc, __m256i w, __m256i a) {
    return _mm256_dpbusd_avx_epi32(acc, w, a);
  }
  static __m256i finish4(__m256i acc) { return acc; }
  // int8: w + 128 as unsigned (once per chunk, for all rows), then one vpdpbusd
  // a row; the group's sum is corrected by 128 * sum(a) (exact in int32).
  static __m256i prep8(__m256i w) { return _mm256_xor_si256(w, _mm256_set1_epi8(char(0x80))); }
  static __m256i dot_s8(__m256i acc, __m256i w_plus_128, __m256i, __m256i a) {
    return _mm256_dpbusd_avx_epi32(acc, w_plus_128, a);
  }
  static __m256i finish8(__m256i acc, int32_t isum) {
    return _mm256_sub_epi32(acc, _mm256_set1_epi32(128 * isum));
  }
  static __m256i dot_u5(__m256i acc, __m256i lo, __m256i a_lo, __m256i hi, __m256i a_hi) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, lo, a_lo), hi, a_hi);
  }
};

}  // namespace

const KernelTable* avxvnni_kernels() {
  static const KernelTable t = avx2::table("avxvnni", x86::gemm_tiles<VnniDot>);
  return &t;
}

}  // namespace tern::kernels
