// Repacking Q2_K, Q3_K, IQ4_NL, IQ4_XS and the lattice, ternary and fp4
// types into Int8Sym (and the 4-bit codebook types into their own Code4Block
// tiles, keeping their indices): IQ4_NL and Q3_K are
// lossless (Q3_K's one int8 overflow, sc = -32 with q-4 = -4, is requantized),
// IQ4_XS rounds only each group's scale to fp16, and Q2_K is requantized
// within half an int8 step. Also the test-model quantizers of these types.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "random_blocks.h"
#include "tern/core/dtype.h"
#include "tern/core/half.h"
#include "tern/kernels/dequant.h"
#include "tern/kernels/packed.h"

namespace tern::kernels {
namespace {

// Byte offsets of the fp16 super-scales in a block of each type.
std::vector<size_t> f16_fields(DType t) {
  switch (t) {
    case DType::Q2_K:
      return {80, 82};
    case DType::Q3_K:
      return {108};
    default:
      return {0};  // IQ4_NL, IQ4_XS
  }
}

// (n_out, n_in) random blocks: random code and scale bytes, sane fp16 scales.
std::vector<uint8_t> random_blocks(DType t, int n_out, int n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  std::vector<uint8_t> src(dtype_row_bytes(t, size_t(n_in)) * size_t(n_out));
  for (auto& b : src) b = uint8_t(byte(rng));
  const size_t bb = dtype_traits(t).block_bytes;
  for (size_t off = 0; off < src.size(); off += bb) {
    for (size_t f : f16_fields(t)) {
      const uint16_t h = f32_to_fp16(scale(rng));
      std::memcpy(&src[off + f], &h, 2);
    }
  }
  return src;
}

// Packs src into fmt (Int8Sym: what --weights int8 makes of any of these
// types) and compares every unpacked weight with the reference dequantizer
// within bound(amax of its 32-group).
template <typename Bound>
void expect_close(DType t, const std::vector<uint8_t>& src, int n_out, int n_in, Bound bound,
                  WeightFormat fmt = WeightFormat::Int8Sym) {
  const PackedMatrix w = pack_matrix(t, src.data(), n_out, n_in, fmt);
  const size_t rb = dtype_row_bytes(t, size_t(n_in));
  std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
  for (int r = 0; r < n_out; ++r) {
    dequantize_row(t, src.data() + rb * size_t(r), want.data(), n_in);
    unpack_row(w, r, got.data());
    for (int g = 0; g < n_in / kGroup; ++g) {
      float amax = 0;
      for (int k = 0; k < kGroup; ++k) amax = std::max(amax, std::fabs(want[g * kGroup + k]));
      for (int k = g * kGroup; k < (g + 1) * kGroup; ++k) {
        ASSERT_NEAR(got[size_t(k)], want[size_t(k)], bound(amax))
            << dtype_name(t) << " row " << r << " k " << k;
      }
    }
  }
}

TEST(PackLowBit, Iq4NlToInt8IsLossless) {
  const auto src = random_blocks(DType::IQ4_NL, 13, 96, 1);
  expect_close(DType::IQ4_NL, src, 13, 96, [](float) { return 0.0f; });
}

// By default the 4-bit codebook types keep their indices (Code4Block): IQ4_NL
// and MXFP4 losslessly, IQ4_XS rounding each group's scale to fp16.
TEST(PackLowBit, FourBitCodebookTypesKeepTheirCodes) {
  EXPECT_EQ(default_format_for(DType::IQ4_NL), WeightFormat::Nl4);
  EXPECT_EQ(default_format_for(DType::IQ4_XS), WeightFormat::Nl4);
  EXPECT_EQ(default_format_for(DType::MXFP4), WeightFormat::Fp4);
  expect_close(
      DType::IQ4_NL, random_blocks(DType::IQ4_NL, 13, 96, 21), 13, 96, [](float) { return 0.0f; },
      WeightFormat::Nl4);
  expect_close(
      DType::IQ4_XS, random_blocks(DType::IQ4_XS, 11, 512, 22), 11, 512,
      [](float amax) { return amax * std::ldexp(1.0f, -11) * 1.01f; }, WeightFormat::Nl4);
  std::mt19937 rng(23);
  const auto mx = test::random_blocks(DType::MXFP4, size_t(9) * 96, 0.02f, rng);
  expect_close(
      DType::MXFP4, mx, 9, 96, [](float) { return 0.0f; }, WeightFormat::Fp4);
  // 4.5 bits a weight, as the files.
  EXPECT_EQ(packed_size(WeightFormat::Nl4, 8, 256), dtype_row_bytes(DType::IQ4_NL, 256) * 8);
}

TEST(PackLowBit, Q3_KToInt8IsLossless) {
  auto src = random_blocks(DType::Q3_K, 9, 512, 2);
  // No scale of -32 (6-bit value 0): that one can overflow int8 (next test).
  auto* b = reinterpret_cast<block::Q3_K*>(src.data());
  for (int i = 0; i < 9 * 2; ++i) {
    for (int s = 0; s < 8; ++s) b[i].scales[s] |= 0x11;
  }
  expect_close(DType::Q3_K, src, 9, 512, [](float) { return 0.0f; });
}

// Scale -32 (all 6 bits 0) with every code at its lowest (qs and hmask 0):
// sc*(q-4) = 128 does not fit int8, so the group is requantized.
TEST(PackLowBit, Q3_KOverflowingGroupIsRequantized) {
  auto src = random_blocks(DType::Q3_K, 1, 256, 3);
  auto* b = reinterpret_cast<block::Q3_K*>(src.data());
  std::memset(b->scales, 0, sizeof b->scales);
  std::memset(b->qs, 0, sizeof b->qs);
  std::memset(b->hmask, 0, sizeof b->hmask);
  EXPECT_EQ(block::q3_k_scale(*b, 0), -32);
  EXPECT_EQ(block::q3_k_value(*b, 0), -4);
  expect_close(DType::Q3_K, src, 1, 256, [](float amax) { return amax / 254 * 1.01f; });
}

TEST(PackLowBit, Iq4XsToInt8RoundsOnlyTheScale) {
  const auto src = random_blocks(DType::IQ4_XS, 11, 512, 4);
  // Each weight is scale * level with |level| <= 127: rounding the scale to
  // fp16 moves it by at most 2^-11 of itself.
  expect_close(DType::IQ4_XS, src, 11, 512,
               [](float amax) { return amax * std::ldexp(1.0f, -11) * 1.01f; });
}

TEST(PackLowBit, Q2_KToInt8StaysWithinHalfAStep) {
  const auto src = random_blocks(DType::Q2_K, 10, 512, 5);
  expect_close(DType::Q2_K, src, 10, 512,
               [](float amax) { return amax / 254 * 1.01f + 1e-3f * amax; });
}

// The lattice, ternary, fp4 and 1/2-bit types into Int8Sym (pack.cpp's
// int8_from_codes): TQ1_0, TQ2_0, MXFP4, Q1_0 and Q2_0 keep their codes and scale
// (lossless); IQ3_XXS, IQ3_S, IQ2_XXS and IQ1_S, one sub-block scale per
// group of 32, keep their grid codes and round the group's scale to fp16;
// IQ2_XS, IQ2_S and IQ1_M, whose group halves have scales of their own, keep
// their codes only where both halves' products fit int8 and are requantized
// elsewhere. Prints the share of weights that came through bit for bit.
void expect_codes_packed(DType t, int n_out, int n_in, uint32_t seed, float (*bound)(float)) {
  std::mt19937 rng(seed);
  const auto src = test::random_blocks(t, size_t(n_out) * size_t(n_in), 0.02f, rng);
  expect_close(t, src, n_out, n_in, bound);
  const PackedMatrix w = pack_matrix(t, src.data(), n_out, n_in, WeightFormat::Int8Sym);
  std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
  size_t same = 0;
  for (int r = 0; r < n_out; ++r) {
    dequantize_row(t, src.data() + dtype_row_bytes(t, size_t(n_in)) * size_t(r), want.data(), n_in);
    unpack_row(w, r, got.data());
    for (int k = 0; k < n_in; ++k) same += got[size_t(k)] == want[size_t(k)];
  }
  std::printf("%s: %.1f%% of weights exact\n", std::string(dtype_name(t)).c_str(),
              100.0 * double(same) / (double(n_out) * n_in));
}

float exact(float) {
  return 0.0f;
}
// Half an ulp of a fp16 scale: 2^-11 of it, or half the subnormal step 2^-24
// below 2^-14, times an int8 code.
float fp16_scale(float amax) {
  return amax * std::ldexp(1.0f, -11) * 1.01f + 127 * std::ldexp(1.0f, -25);
}
float requantized(float amax) {
  return amax / 254 * 1.01f + amax * std::ldexp(1.0f, -11);
}

TEST(PackLowBit, TernaryAndMxfp4ToInt8AreLossless) {
  expect_codes_packed(DType::TQ1_0, 9, 512, 11, exact);
  expect_codes_packed(DType::TQ2_0, 9, 512, 12, exact);
  expect_codes_packed(DType::MXFP4, 9, 96, 13, exact);
  expect_codes_packed(DType::Q1_0, 9, 256, 16, exact);
  expect_codes_packed(DType::Q2_0, 9, 192, 17, exact);
}

// NVFP4's halves of 16 have E4M3 scales of their own, and one half's e2m1 x
// mantissa products already reach 12 * 15: its groups keep their codes only
// where they fit int8 under one scale, and are requantized elsewhere.
TEST(PackLowBit, Nvfp4ToInt8StaysWithinHalfAStep) {
  expect_codes_packed(DType::NVFP4, 9, 320, 18, requantized);
}

TEST(PackLowBit, OneScaleLatticeTypesRoundOnlyTheGroupScale) {
  for (DType t : {DType::IQ3_XXS, DType::IQ3_S, DType::IQ2_XXS, DType::IQ1_S}) {
    expect_codes_packed(t, 9, 512, 14, fp16_scale);
  }
}

TEST(PackLowBit, TwoScaleLatticeTypesStayWithinHalfAStep) {
  for (DType t : {DType::IQ2_XS, DType::IQ2_S, DType::IQ1_M}) {
    expect_codes_packed(t, 9, 512, 15, requantized);
  }
}

// The round-to-nearest test-model quantizers decode back within the noise
// their bits allow (relative RMS error over normal values of varying scale),
// keep an all-zero block at zero, and write blocks llama.cpp's layout reads
// (checked by decoding them with the golden-tested dequantizers).
TEST(PackLowBit, TestModelQuantizersRoundTrip) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 256 * 16;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = normal(rng) * (1.0f + float(i / 256 % 5));
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
  const std::pair<DType, double> limits[] = {
      {DType::Q2_K, 0.45},  {DType::Q3_K, 0.25},  {DType::IQ4_NL, 0.12}, {DType::IQ4_XS, 0.12},
      {DType::TQ1_0, 0.85}, {DType::TQ2_0, 0.85}, {DType::MXFP4, 0.2},   {DType::NVFP4, 0.2},
      {DType::Q1_0, 0.65},  {DType::Q2_0, 0.75}};
  for (const auto& [t, limit] : limits) {
    ASSERT_TRUE(can_quantize(t));
    const std::vector<uint8_t> q = quantize_ref(t, x);
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(t, q.data(), y.data(), n);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += double(y[size_t(i)] - x[size_t(i)]) * (y[size_t(i)] - x[size_t(i)]);
      norm += double(x[size_t(i)]) * x[size_t(i)];
    }
    const double rel = std::sqrt(err / norm);
    std::printf("%s: relative RMS error %.4f\n", std::string(dtype_name(t)).c_str(), rel);
    EXPECT_LT(rel, limit) << dtype_name(t);
    for (int i = 256; i < 512; ++i) ASSERT_EQ(y[size_t(i)], 0.0f) << dtype_name(t);
  }
}

}  // namespace
}  // namespace tern::kernels
