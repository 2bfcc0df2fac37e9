#include "tern/core/half.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tern {

TEST(Half, Fp16RoundTripsEveryFiniteCode) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t code = uint16_t(h);
    if ((code & 0x7c00) == 0x7c00) continue;  // inf/nan
    const float f = fp16_to_f32(code);
    EXPECT_EQ(f32_to_fp16(f), code) << std::hex << h;
  }
}

TEST(Half, Fp16KnownValues) {
  EXPECT_EQ(fp16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);                      // rounds to inf
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
}

TEST(Half, Bf16) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-3.5f), 0xc060);
}

TEST(Half, Fp8E4M3RoundTripsEveryFiniteCode) {
  for (uint32_t c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // nan
    const float f = fp8e4m3_to_f32(uint8_t(c));
    if (c == 0x80) continue;  // -0 maps to -0 code, fine either way
    EXPECT_EQ(f32_to_fp8e4m3(f), uint8_t(c)) << c << " " << f;
  }
  EXPECT_EQ(fp8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f32_to_fp8e4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_fp8e4m3(-1e6f), 0xfe);
}

TEST(Half, Fp8E4M3RoundsToNearest) {
  // Between 1.0 (0x38) and 1.125 (0x39): 1.05 -> 1.0, 1.07 -> 1.125
  EXPECT_EQ(f32_to_fp8e4m3(1.05f), 0x38);
  EXPECT_EQ(f32_to_fp8e4m3(1.07f), 0x39);
}

}  // namespace tern
