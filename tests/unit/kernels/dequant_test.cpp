// Reference dequantizers against blocks built by hand (expected values worked
// out in the comments), and quantize -> dequantize round trips within each
// format's error bound.
#include "tern/kernels/dequant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tern/core/half.h"

namespace tern::kernels {
namespace {

void put_f16(uint8_t* p, uint16_t h) {
  std::memcpy(p, &h, 2);
}

std::vector<float> dequant(DType t, const void* src, int64_t n) {
  std::vector<float> out(size_t(n), -12345.0f);
  dequantize_row(t, src, out.data(), n);
  return out;
}

TEST(Dequant, SupportedTypesMatchDTypeTraits) {
  for (uint32_t raw = 0; raw < 64; ++raw) {
    auto tr = dtype_traits(raw);
    if (!tr) continue;
    EXPECT_EQ(can_dequantize(DType(raw)), tr->dequantizable) << tr->name;
    if (can_quantize(DType(raw))) EXPECT_TRUE(can_dequantize(DType(raw))) << tr->name;
  }
}

TEST(Dequant, F32IsACopy) {
  const float x[3] = {1.5f, -0.0f, 3e38f};
  auto y = dequant(DType::F32, x, 3);
  EXPECT_EQ(std::memcmp(x, y.data(), sizeof x), 0);
}

TEST(Dequant, F16HandValues) {
  // 0x3c00 = 1.0; 0xc000 = -2.0; 0x3555 = 1.0101010101b * 2^-2 = 0.333251953125;
  // 0x0001 = 2^-24 (smallest subnormal); 0x7c00 = +inf; 0x8000 = -0.0.
  const uint16_t h[6] = {0x3c00, 0xc000, 0x3555, 0x0001, 0x7c00, 0x8000};
  auto y = dequant(DType::F16, h, 6);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 0.333251953125f);
  EXPECT_EQ(y[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(y[4]) && y[4] > 0);
  EXPECT_TRUE(y[5] == 0.0f && std::signbit(y[5]));
}

TEST(Dequant, Bf16HandValues) {
  // bf16 is the top half of an f32: 0x3f80 = 1.0; 0xc040 = -3.0;
  // 0x4049 = 1.5703125 * 2 = 3.140625; 0x7f80 = +inf.
  const uint16_t h[4] = {0x3f80, 0xc040, 0x4049, 0x7f80};
  auto y = dequant(DType::BF16, h, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  EXPECT_EQ(y[2], 3.140625f);
  EXPECT_TRUE(std::isinf(y[3]));
}

TEST(Dequant, Q8_0HandBlock) {
  block::Q8_0 b{};
  put_f16(b.d, 0x3800);  // d = 0.5
  const int8_t q[6] = {0, 1, -1, 127, -128, 10};
  std::memcpy(b.qs, q, 6);
  auto y = dequant(DType::Q8_0, &b, 32);
  // x = d * q: 0, 0.5, -0.5, 63.5, -64, 5, then zeros.
  const float want[6] = {0.0f, 0.5f, -0.5f, 63.5f, -64.0f, 5.0f};
  for (int j = 0; j < 6; ++j) EXPECT_EQ(y[j], want[j]) << j;
  for (int j = 6; j < 32; ++j) EXPECT_EQ(y[j], 0.0f) << j;
}

TEST(Dequant, Q4_0HandBlock) {
  block::Q4_0 b{};
  put_f16(b.d, 0x4000);         // d = 2
  std::memset(b.qs, 0x88, 16);  // code 8 everywhere -> (8 - 8) * 2 = 0
  b.qs[0] = 0x9F;  // elem 0: low nibble 15 -> (15-8)*2 = 14;  elem 16: high nibble 9 -> (9-8)*2 = 2
  b.qs[1] = 0x08;  // elem 1: 8 -> 0;                           elem 17: 0 -> (0-8)*2 = -16
  b.qs[15] = 0x3C;  // elem 15: 12 -> 8;                         elem 31: 3 -> -10
  auto y = dequant(DType::Q4_0, &b, 32);
  std::vector<float> want(32, 0.0f);
  want[0] = 14;
  want[16] = 2;
  want[1] = 0;
  want[17] = -16;
  want[15] = 8;
  want[31] = -10;
  EXPECT_EQ(y, want);
}

TEST(Dequant, Q4_1HandBlock) {
  block::Q4_1 b{};
  put_f16(b.d, 0x3c00);  // d = 1
  put_f16(b.m, 0xbc00);  // m = -1: every zero code gives -1
  b.qs[0] = 0x5A;        // elem 0: 10*1 - 1 = 9;   elem 16: 5 - 1 = 4
  b.qs[7] = 0xF0;        // elem 7: 0 - 1 = -1;     elem 23: 15 - 1 = 14
  auto y = dequant(DType::Q4_1, &b, 32);
  std::vector<float> want(32, -1.0f);
  want[0] = 9;
  want[16] = 4;
  want[23] = 14;
  EXPECT_EQ(y, want);
}

TEST(Dequant, Q5_0HandBlock) {
  block::Q5_0 b{};
  put_f16(b.d, 0x3800);                        // d = 0.5; zero codes give (0 - 16) * 0.5 = -8
  const uint32_t qh = (1u << 0) | (1u << 17);  // 5th bit set for elems 0 and 17
  std::memcpy(b.qh, &qh, 4);
  b.qs[0] = 0x3C;  // elem 0: 12 | 16 = 28 -> (28-16)*0.5 = 6;   elem 16: 3 -> (3-16)*0.5 = -6.5
  b.qs[1] = 0x21;  // elem 1: 1 -> -7.5;                          elem 17: 2 | 16 = 18 -> 1
  auto y = dequant(DType::Q5_0, &b, 32);
  std::vector<float> want(32, -8.0f);
  want[0] = 6;
  want[16] = -6.5f;
  want[1] = -7.5f;
  want[17] = 1;
  EXPECT_EQ(y, want);
}

TEST(Dequant, Q5_1HandBlock) {
  block::Q5_1 b{};
  put_f16(b.d, 0x3400);          // d = 0.25
  put_f16(b.m, 0x4000);          // m = 2: zero codes give 2
  const uint32_t qh = 1u << 31;  // 5th bit of elem 31
  std::memcpy(b.qh, &qh, 4);
  b.qs[15] = 0xF0;  // elem 15: 0 -> 2;  elem 31: 15 | 16 = 31 -> 31*0.25 + 2 = 9.75
  b.qs[2] = 0x04;   // elem 2: 4 -> 3
  auto y = dequant(DType::Q5_1, &b, 32);
  std::vector<float> want(32, 2.0f);
  want[31] = 9.75f;
  want[2] = 3.0f;
  EXPECT_EQ(y, want);
}

TEST(Dequant, Q4_KHandBlock) {
  block::Q4_K b{};
  put_f16(b.d, 0x3c00);     // d = 1
  put_f16(b.dmin, 0x3800);  // dmin = 0.5
  // 6-bit (scale, min) per 32-element sub-block s:
  //   s=0: sc = s[0]&63 = 2,  mn = s[4]&63 = 3
  //   s=1: sc = s[1]&63 = 5,  mn = s[5]&63 = 1
  //   s=4: sc = (s[8]&15) | (s[0]>>6)<<4 = 1 | 16 = 17,  mn = (s[8]>>4) | (s[4]>>6)<<4 = 2 | 32 =
  //   34 s=5: sc = (s[9]&15) | (s[1]>>6)<<4 = 4,            mn = (s[9]>>4) | (s[5]>>6)<<4 = 1
  //   others 0.
  b.scales[0] = 0x42;
  b.scales[4] = 0x83;
  b.scales[1] = 5;
  b.scales[5] = 1;
  b.scales[8] = 0x21;
  b.scales[9] = 0x14;
  const float mn[8] = {3, 1, 0, 0, 34, 1, 0, 0};
  // A zero code gives -dmin*mn of its sub-block.
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) want[e] = -0.5f * mn[e / 32];
  b.qs[0] = 0x37;   // elem 0 (s=0, low nibble 7): 2*7 - 1.5 = 12.5;  elem 32 (s=1, high 3): 5*3 -
                    // 0.5 = 14.5
  b.qs[64] = 0x32;  // elem 128 (s=4, low 2): 17*2 - 17 = 17;          elem 160 (s=5, high 3): 4*3 -
                    // 0.5 = 11.5
  b.qs[95] = 0x0F;  // elem 159 (s=4, low 15): 17*15 - 17 = 238
  want[0] = 12.5f;
  want[32] = 14.5f;
  want[128] = 17;
  want[160] = 11.5f;
  want[159] = 238;
  EXPECT_EQ(dequant(DType::Q4_K, &b, 256), want);
}

TEST(Dequant, Q5_KHandBlock) {
  block::Q5_K b{};
  put_f16(b.d, 0x3c00);     // d = 1
  put_f16(b.dmin, 0x3c00);  // dmin = 1
  //   s=0: sc = 1, mn = 2;  s=1: sc = 3, mn = 0
  //   s=7: sc = (s[11]&15) | (s[3]>>6)<<4 = 2 | 48 = 50,  mn = (s[11]>>4) | (s[7]>>6)<<4 = 0
  //   s=3: sc = s[3]&63 = 0, mn = 0
  b.scales[0] = 1;
  b.scales[4] = 2;
  b.scales[1] = 3;
  b.scales[3] = 0xC0;
  b.scales[11] = 0x02;
  std::vector<float> want(256, 0.0f);
  for (int e = 0; e < 32; ++e) want[e] = -2.0f;  // s=0 zero codes: -dmin*2
  // The 5th bit of element l of sub-block s is bit s of qh[l].
  b.qs[0] = 0x5F;
  b.qh[0] = 0x01;  // elem 0: 15 | 16 = 31 -> 1*31 - 2 = 29;  elem 32: 5 (bit 1 clear) -> 3*5 = 15
  b.qs[97] = 0x10;
  b.qh[1] = 0x80;  // elem 225 (s=7, l=1, high nibble 1 | 16 = 17) -> 50*17 = 850
  want[0] = 29;
  want[32] = 15;
  want[225] = 850;
  EXPECT_EQ(dequant(DType::Q5_K, &b, 256), want);
}

TEST(Dequant, Q6_KHandBlock) {
  block::Q6_K b{};
  put_f16(b.d, 0x3800);  // d = 0.5
  // Scale j covers elements [16j, 16j+16). Zero bits give q - 32 = -32 -> 0.5*sc*-32 = -16*sc.
  b.scales[0] = 2;
  b.scales[2] = -1;
  b.scales[4] = 3;
  b.scales[6] = 1;
  b.scales[9] = 4;
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) want[e] = -16.0f * b.scales[e / 16];
  // elem 0  (half 0, k=0, l=0): low nibble of ql[0] = 0xA, bits 0-1 of qh[0] = 2 -> 42-32 = 10 ->
  // 0.5*2*10 = 10 elem 64 (k=2, l=0): high nibble of ql[0] = 5, bits 4-5 of qh[0] = 3 -> 53-32 = 21
  // -> 0.5*3*21 = 31.5 elem 32 (k=1, l=0): low nibble of ql[32] = 15, bits 2-3 of qh[0] = 0 -> -17
  // -> 0.5*-1*-17 = 8.5 elem 96 (k=3, l=0): high nibble of ql[32] = 0, bits 6-7 = 0 -> -32 ->
  // 0.5*1*-32 = -16 (default)
  b.ql[0] = 0x5A;
  b.ql[32] = 0x0F;
  b.qh[0] = 0x32;
  // elem 145 (half 1, k=0, l=17): ql[64+17] low = 3, qh[32+17] bits 0-1 = 1 -> 19-32 = -13 ->
  // 0.5*4*-13 = -26
  b.ql[81] = 0x03;
  b.qh[49] = 0x01;
  want[0] = 10;
  want[64] = 31.5f;
  want[32] = 8.5f;
  want[145] = -26;
  EXPECT_EQ(dequant(DType::Q6_K, &b, 256), want);
}

TEST(Dequant, MultipleBlocksAdvance) {
  block::Q8_0 b[2]{};
  put_f16(b[0].d, 0x3c00);  // 1
  put_f16(b[1].d, 0x4000);  // 2
  b[0].qs[31] = 7;
  b[1].qs[0] = -3;
  auto y = dequant(DType::Q8_0, b, 64);
  EXPECT_EQ(y[31], 7.0f);
  EXPECT_EQ(y[32], -6.0f);
}

TEST(Dequant, UnalignedSource) {
  // Blocks may start at any address (e.g. inside a mapped file).
  std::vector<uint8_t> buf(1 + sizeof(block::Q4_1));
  block::Q4_1 b{};
  put_f16(b.d, 0x3c00);
  put_f16(b.m, 0x3c00);
  b.qs[3] = 0x21;
  std::memcpy(buf.data() + 1, &b, sizeof b);
  auto y = dequant(DType::Q4_1, buf.data() + 1, 32);
  EXPECT_EQ(y[3], 2.0f);   // 1*1 + 1
  EXPECT_EQ(y[19], 3.0f);  // 1*2 + 1
}

TEST(Quantize, Q4_0HandBlock) {
  // x_j = (j%16 - 8) * 0.5: the largest magnitude is -4, so d = -4 / -8 = 0.5
  // and code = floor(x/0.5 + 8.5) = j%16: elem j and j+16 share a nibble value.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j % 16 - 8) * 0.5f;
  block::Q4_0 b{};
  quantize_row_ref(DType::Q4_0, x, &b, 32);
  uint16_t d;
  std::memcpy(&d, b.d, 2);
  EXPECT_EQ(d, 0x3800);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4))) << j;
}

TEST(Quantize, Q8_0HandBlock) {
  // x_j = j - 16: amax 16, d = 16/127; -16 -> -127, 0 -> 0, 15 -> round(15*127/16 = 119.06) = 119.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j - 16);
  block::Q8_0 b{};
  quantize_row_ref(DType::Q8_0, x, &b, 32);
  uint16_t d;
  std::memcpy(&d, b.d, 2);
  EXPECT_EQ(d, f32_to_fp16(16.0f / 127.0f));
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[16], 0);
  EXPECT_EQ(b.qs[31], 119);
}

// Largest error quantize -> dequantize may make on a block, from the block's
// values: half a step (a full step where a clamp can cut the top code), plus
// the fp16 rounding of the stored scale and min.
float block_bound(DType t, const float* x, int n) {
  float amax = 0, lo = x[0], hi = x[0];
  for (int j = 0; j < n; ++j) {
    amax = std::max(amax, std::fabs(x[j]));
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float fp16_err = amax * std::ldexp(1.0f, -9);
  switch (t) {
    case DType::Q8_0:
      return 0.5f * amax / 127 + fp16_err;
    case DType::Q4_0:
      return amax / 8 + fp16_err;
    case DType::Q5_0:
      return amax / 16 + fp16_err;
    case DType::Q4_1:
      return 0.5f * (hi - lo) / 15 + fp16_err;
    case DType::Q5_1:
      return 0.5f * (hi - lo) / 31 + fp16_err;
    default:
      return 0;
  }
}

TEST(Quantize, RoundTripsWithinTheFormatBound) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 32 * 64;  // 64 blocks of 32 (8 of 256)
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = normal(rng) * (1.0f + float(i / 32 % 7));  // varying scale per block
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;      // an all-zero block: d = 0
  for (int j = 0; j < 32; ++j) x[64 + j] = 3.0f;      // a constant block

  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                  DType::Q5_0, DType::Q5_1}) {
    ASSERT_TRUE(can_quantize(t));
    std::vector<uint8_t> q(dtype_row_bytes(t, n));
    quantize_row_ref(t, x.data(), q.data(), n);
    std::vector<float> y(n);
    dequantize_row(t, q.data(), y.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      const float* xb = x.data() + 32 * b;
      const float bound = block_bound(t, xb, 32);
      for (int j = 0; j < 32; ++j) {
        const float xv = xb[j], yv = y[32 * b + j];
        float tol = bound;
        if (t == DType::F16)
          tol = std::max(std::fabs(xv) * std::ldexp(1.0f, -11),
                         std::ldexp(1.0f, -25));  // half an ulp (subnormals: 2^-25)
        if (t == DType::BF16)
          tol = std::fabs(xv) * std::ldexp(1.0f, -8);  // half an ulp of 8 significant bits
        ASSERT_LE(std::fabs(yv - xv), tol) << dtype_name(t) << " block " << b << " elem " << j;
      }
    }
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[32 + j], 0.0f) << dtype_name(t);  // zeros stay exact
  }
}

TEST(Quantize, EveryLoadableWeightTypeIsQuantizable) {
  // The K-quants and lattice types are tested in quantize_search_test.cpp,
  // Q2_K, Q3_K, IQ4_* and the ternary / fp4 / 1-2 bit ones in pack_lowbit_test.cpp.
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ2_XXS, DType::IQ1_M})
    EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
  EXPECT_FALSE(can_quantize(DType::Q8_1));  // an activation type, not a weight type
}

}  // namespace
}  // namespace tern::kernels
