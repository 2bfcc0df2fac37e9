#pragma once
// Small NEON helpers for the aarch64 kernel files, and the NEON twin of
// x86_simd.h's exp: the same Cephes reduction and polynomial, so both ISAs
// meet the same error bounds. Armv8.0 Advanced SIMD only (any aarch64 file
// may include it); the functions are static so every file keeps its own copy.
#include <arm_neon.h>

#include <cstdint>

namespace tern::kernels::neon {

// Cephes' expf: x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2 (ln2 split
// in two for an exact reduction), and e^r = 1 + r + r^2 * P(r), P of degree 5.
static inline float32x4_t exp_poly(float32x4_t r) {
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  return vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
}

// e^x for 4 lanes, relative error about 2 ulp over the whole float range.
// Inputs below -87.3 give 0, above 88.7 +inf.
static inline float32x4_t exp(float32x4_t x) {
  const float32x4_t hi = vdupq_n_f32(88.7228f), lo = vdupq_n_f32(-87.3365f);
  const uint32x4_t big = vcgtq_f32(x, hi), tiny = vcltq_f32(x, lo);
  x = vminq_f32(vmaxq_f32(x, lo), hi);
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  const float32x4_t p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), vmulq_f32(exp_poly(r), r), r);
  // 2^n for n in [-126, 128]: n = 128 only when x is near the top, split it.
  const int32x4_t ni = vcvtq_s32_f32(n);
  const int32x4_t half = vshrq_n_s32(ni, 1);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(half, vdupq_n_s32(127)), 23));
  const float32x4_t s2 =
      vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vsubq_s32(ni, half), vdupq_n_s32(127)), 23));
  float32x4_t y = vmulq_f32(vmulq_f32(p, s1), s2);
  y = vbslq_f32(big, vdupq_n_f32(__builtin_inff()), y);
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), tiny));
}

static inline float hsum(float32x4_t v) {
  return vaddvq_f32(v);
}
static inline float hmax(float32x4_t v) {
  return vmaxvq_f32(v);
}

// 4 fp16 values at p (any alignment) as fp32.
static inline float32x4_t load_f16x4(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

}  // namespace tern::kernels::neon
