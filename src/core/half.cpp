#include "tern/core/half.h"

#include <cmath>

namespace tern {

float fp16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    if (mant == 0) return bits_to_f32(sign);
    // subnormal: value = mant * 2^-24
    float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_f32(sign | 0x7f800000u | (mant << 13));
  return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);  // inf/nan
  if (ax >= 0x477ff000u) return sign | 0x7c00;                                   // overflow
  if (ax < 0x38800000u) {                                                        // subnormal/zero
    const float af = bits_to_f32(ax);
    const float scaled = af * 16777216.0f;  // 2^24
    return sign | uint16_t(std::nearbyint(scaled));
  }
  uint32_t r = ax - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfff + ((r >> 13) & 1);   // round to nearest even
  return sign | uint16_t(r >> 13);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

float fp8e4m3_to_f32(uint8_t v) {
  const bool neg = v & 0x80;
  const int exp = (v >> 3) & 0xf;
  const int mant = v & 0x7;
  float r;
  if (exp == 0xf && mant == 0x7) {
    r = NAN;
  } else if (exp == 0) {
    r = std::ldexp(float(mant), -9);  // subnormal: mant/8 * 2^-6
  } else {
    r = std::ldexp(1.0f + float(mant) / 8.0f, exp - 7);
  }
  return neg ? -r : r;
}

uint8_t f32_to_fp8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a == 0.0f) return sign;
  if (a >= 448.0f) return sign | 0x7e;  // saturate to max finite
  // Find the code whose value is nearest (ties to even mantissa).
  int e;
  std::frexp(a, &e);    // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1 + 7;  // biased exponent for 1.xxx form
  if (exp < 1) {
    // subnormal range: step 2^-9
    float q = std::nearbyint(a * 512.0f);
    int m = int(q);
    if (m >= 8) return sign | 0x08;  // rounds up to smallest normal
    return sign | uint8_t(m);
  }
  float step = std::ldexp(1.0f, exp - 7 - 3);
  float q = std::nearbyint(a / step);  // in [8, 16]
  int m = int(q);
  if (m == 16) {
    m = 8;
    exp += 1;
  }
  if (exp > 15 || (exp == 15 && m - 8 == 7)) return sign | 0x7e;
  return sign | uint8_t(exp << 3) | uint8_t(m - 8);
}

}  // namespace tern
