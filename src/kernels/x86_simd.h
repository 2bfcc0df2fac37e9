#pragma once
// Small AVX2 helpers shared by the per-ISA kernel files, and the one home of
// the vector exp polynomial (kernels' ops and kv's block attention use it).
// Include only from files compiled with TERN_AVX2_FLAGS (*_avx2.cpp,
// *_avxvnni.cpp, *_avx512.cpp, in kernels/ or kv/; private, not under
// include/): the functions are static so every such file keeps its own copy,
// compiled with its own flags.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tern::kernels::x86 {

// The 4 bytes at p, broadcast to all 8 int32 lanes (vpbroadcastd from memory).
static inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// Round to fp16 precision and back (F16C, round to nearest even).
static inline float fp16_round(float x) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT)));
}

// 8 fp16 values at p (any alignment) as fp32.
static inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Cephes' expf, shared by exp() and exp_neg(): x = n ln2 + r with n =
// round(x / ln2), |r| <= ln2/2 (ln2 split in two for an exact reduction), and
// e^r = 1 + r + r^2 * P(r), P of degree 5 (exp_poly returns P(r)).
static inline __m256 exp_n(__m256 x) {
  return _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline __m256 exp_r(__m256 x, __m256 n) {
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  return _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
}
static inline __m256 exp_poly(__m256 r) {
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  return _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
}

// e^x for 8 lanes, relative error about 2 ulp over the whole float range.
// Inputs below -87.3 give 0, above 88.7 +inf.
static inline __m256 exp(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.7228f), lo = _mm256_set1_ps(-87.3365f);
  const __m256 big = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  const __m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = exp_n(x);
  const __m256 r = exp_r(x, n);
  const __m256 p =
      _mm256_fmadd_ps(_mm256_mul_ps(exp_poly(r), r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n for n in [-126, 128]: n = 128 only when x is near the top, split it.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 s1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 s2 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), big);
  return _mm256_andnot_ps(tiny, y);
}

// e^x for x <= 0 only (softmax weights e^(s - max)), about 2 ulp; exactly 0
// below -87.3. Cheaper than exp(): no overflow handling, 2^n in one step.
static inline __m256 exp_neg(__m256 x) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = exp_n(x);
  const __m256 r = exp_r(x, n);
  const __m256 y =
      _mm256_fmadd_ps(exp_poly(r), _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(tiny, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

}  // namespace tern::kernels::x86
