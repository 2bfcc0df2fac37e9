#pragma once
// Scalar conversions between fp32 and the narrow float formats tern stores:
// IEEE fp16, bfloat16 and fp8 e4m3 (OCP "FN" variant: no infinities, max 448).
#include <cstdint>
#include <cstring>

namespace tern {

inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);  // round to nearest even

inline float bf16_to_f32(uint16_t h) {
  return bits_to_f32(uint32_t(h) << 16);
}
uint16_t f32_to_bf16(float f);  // round to nearest even

float fp8e4m3_to_f32(uint8_t v);
uint8_t f32_to_fp8e4m3(float f);  // round to nearest even, saturating at +-448

}  // namespace tern
