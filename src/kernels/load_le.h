#pragma once
// Little-endian fields of ggml blocks, read from any address (blocks are
// byte-packed, so their u16 / u32 / fp16 fields may be unaligned).
#include <cstdint>
#include <cstring>

#include "tern/core/half.h"

namespace tern::kernels {

inline uint16_t load_u16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float load_f16(const uint8_t* p) {
  return fp16_to_f32(load_u16(p));
}

}  // namespace tern::kernels
