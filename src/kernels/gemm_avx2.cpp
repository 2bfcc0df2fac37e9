// The AVX2 kernel table: matrix products with vpmaddubsw + vpmaddwd.
//
// int4 x int8: vpmaddubsw(w (0..15, unsigned), a (signed)) adds pairs into
// int16 lanes; each pair is at most 2*15*127 = 3810, so the 8 products of a
// group (4 chunks x low/high nibbles) add up in int16 without overflow
// (8*3810 = 30480) and one vpmaddwd with ones widens them to int32 per group.
// int8 x int8: vpmaddubsw needs one unsigned operand, so |w| and sign(a, w);
// a pair reaches 2*128*127 = 32512, so every product is widened at once.
// int5 x int8: a pair reaches 2*31*127 = 7874, so the low and high halves of
// a chunk share one int16 add (15748) and are widened together.
#include "dispatch.h"
#include "gemm_x86.inl"
#include "ops_avx2.h"

namespace tern::kernels {
namespace {

// The empty asm pins each running sum in a register: without it GCC
// re-associates the integer adds into a tree over all 32 products of a group
// (R rows x 8), which needs 32 live registers and spills them to the stack
// (measured: 13 instead of 7.5 cycles per row and group).
inline __m256i keep(__m256i v) {
  __asm__("" : "+x"(v));
  return v;
}

struct Avx2Dot {
  using Acc4 = __m256i;  // int16 lanes
  static __m256i zero4() { return _mm256_setzero_si256(); }
  static __m256i dot_u4(__m256i acc, __m256i w, __m256i a) {
    return keep(_mm256_add_epi16(acc, _mm256_maddubs_epi16(w, a)));
  }
  static __m256i finish4(__m256i acc) { return _mm256_madd_epi16(acc, _mm256_set1_epi16(1)); }
  static __m256i prep8(__m256i w) { return _mm256_abs_epi8(w); }
  static __m256i dot_s8(__m256i acc, __m256i wabs, __m256i w, __m256i a) {
    const __m256i p = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a, w));
    return keep(_mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1))));
  }
  static __m256i finish8(__m256i acc, int32_t) { return acc; }
  static __m256i dot_u5(__m256i acc, __m256i lo, __m256i a_lo, __m256i hi, __m256i a_hi) {
    const __m256i p =
        _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
    return keep(_mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1))));
  }
};

}  // namespace

const KernelTable* avx2_kernels() {
  static const KernelTable t = avx2::table("avx2", x86::gemm_tiles<Avx2Dot>);
  return &t;
}

}  // namespace tern::kernels
