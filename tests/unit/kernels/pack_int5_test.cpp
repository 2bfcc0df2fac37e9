// Repacking the asymmetric 5-bit types into Int5Asym tiles: Q5_1 bit for bit
// (its codes, d and m copied), Q5_K keeping every code and rounding only each
// 32-group's scale d*sc and minimum -dmin*mn to fp16 -- on random blocks with
// ordinary, huge and subnormal scales and minimums.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/core/half.h"
#include "tern/kernels/dequant.h"
#include "tern/kernels/packed.h"

namespace tern::kernels {
namespace {

// fp16 values from ordinary to extreme: the largest finite, the smallest
// normal and subnormal, zero, negative; others drawn around 1e-3.
uint16_t scale16(std::mt19937& rng, bool positive) {
  static const float kExtreme[] = {65504.0f, 1000.0f, 0x1.0p-14f, 0x1.0p-24f, 0x1.8p-20f, 0.0f};
  const int pick = std::uniform_int_distribution<int>(0, 11)(rng);
  float v = pick < 6 ? kExtreme[pick] : std::uniform_real_distribution<float>(1e-4f, 3e-3f)(rng);
  if (!positive && std::uniform_int_distribution<int>(0, 1)(rng)) v = -v;
  return f32_to_fp16(v);
}

// (n_out, n_in) random blocks of t (Q5_1 or Q5_K): random code and scale
// bytes, fp16 fields from scale16. Q5_K's d and dmin stay <= 1000, so that
// d*sc and dmin*mn (sc, mn <= 63) stay within fp16's range.
std::vector<uint8_t> random_blocks(DType t, int n_out, int n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> src(dtype_row_bytes(t, size_t(n_in)) * size_t(n_out));
  for (auto& b : src) b = uint8_t(byte(rng));
  const size_t bb = dtype_traits(t).block_bytes;
  for (size_t off = 0; off < src.size(); off += bb) {
    for (size_t f : {0, 2}) {  // Q5_1: d, m; Q5_K: d, dmin
      uint16_t h = scale16(rng, t == DType::Q5_K);
      if (t == DType::Q5_K && std::fabs(fp16_to_f32(h)) > 1000.0f) h = f32_to_fp16(1000.0f);
      std::memcpy(&src[off + f], &h, 2);
    }
  }
  return src;
}

// |fp16(x) - x|: what rounding x to fp16 costs (subnormals included).
double fp16_error(double x) {
  return std::fabs(double(fp16_to_f32(f32_to_fp16(float(x)))) - x);
}

TEST(PackInt5, FiveBitTypesKeepTheirCodes) {
  EXPECT_EQ(default_format_for(DType::Q5_0), WeightFormat::Int5Sym);
  EXPECT_EQ(default_format_for(DType::Q5_1), WeightFormat::Int5Asym);
  EXPECT_EQ(default_format_for(DType::Q5_K), WeightFormat::Int5Asym);
  // 6 bits a weight, as Q5_1 (Q5_K's file: 5.5).
  EXPECT_EQ(packed_size(WeightFormat::Int5Asym, 8, 256), dtype_row_bytes(DType::Q5_1, 256) * 8);
}

TEST(PackInt5, Q5_1ToInt5AsymIsLossless) {
  for (const auto& [n_out, n_in] : {std::pair{1, 32}, {8, 64}, {13, 96}, {24, 576}}) {
    const auto src = random_blocks(DType::Q5_1, n_out, n_in, uint32_t(n_out * 1000 + n_in));
    const PackedMatrix w =
        pack_matrix(DType::Q5_1, src.data(), n_out, n_in, WeightFormat::Int5Asym);
    EXPECT_EQ(w.bytes(), size_t(w.n_tiles()) * w.n_groups() * sizeof(Int5AsymBlock));
    const size_t rb = dtype_row_bytes(DType::Q5_1, size_t(n_in));
    std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
    for (int r = 0; r < n_out; ++r) {
      dequantize_row(DType::Q5_1, src.data() + rb * size_t(r), want.data(), n_in);
      unpack_row(w, r, got.data());
      for (int k = 0; k < n_in; ++k)
        ASSERT_EQ(want[size_t(k)], got[size_t(k)]) << "row " << r << " k " << k;
    }
  }
}

// Each weight is off by at most 31 |e_d| + |e_m|, e_d and e_m the fp16
// rounding errors of its group's d*sc and dmin*mn, plus the last-bit rounding
// of the two sides' float sums -- far below half a 5-bit step (d*sc / 2),
// which requantizing into int8 or int5 could cost.
TEST(PackInt5, Q5_KToInt5AsymKeepsCodesAndRoundsOnlyScales) {
  for (const auto& [n_out, n_in] : {std::pair{1, 256}, {13, 512}, {24, 1536}}) {
    const auto src = random_blocks(DType::Q5_K, n_out, n_in, uint32_t(n_out + n_in));
    const PackedMatrix w =
        pack_matrix(DType::Q5_K, src.data(), n_out, n_in, WeightFormat::Int5Asym);
    const size_t rb = dtype_row_bytes(DType::Q5_K, size_t(n_in));
    std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
    for (int r = 0; r < n_out; ++r) {
      const auto* row = reinterpret_cast<const block::Q5_K*>(src.data() + rb * size_t(r));
      dequantize_row(DType::Q5_K, row, want.data(), n_in);
      unpack_row(w, r, got.data());
      for (int k = 0; k < n_in; ++k) {
        const block::Q5_K& sb = row[k / 256];
        uint8_t sc, mn;
        block::k_scale_min(sb.scales, (k % 256) / 32, &sc, &mn);
        uint16_t h;
        std::memcpy(&h, sb.d, 2);
        const double ds = double(fp16_to_f32(h)) * sc;
        std::memcpy(&h, sb.dmin, 2);
        const double dm = double(fp16_to_f32(h)) * mn;
        const double bound = 31 * fp16_error(ds) + fp16_error(-dm) +
                             (31 * std::fabs(ds) + std::fabs(dm)) * 0x1.0p-22;
        ASSERT_LE(std::fabs(double(got[size_t(k)]) - want[size_t(k)]), bound)
            << "row " << r << " k " << k << " d*sc " << ds << " dmin*mn " << dm;
      }
    }
  }
}

// A source whose codes Int5Asym does not keep (here F32) is requantized:
// within half a step (range/31) and the fp16 rounding of d and m.
TEST(PackInt5, OtherSourcesAreRequantizedWithinHalfAStep) {
  const int n_out = 11, n_in = 96;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(n_out) * n_in);
  for (auto& v : x) v = dist(rng) + 0.5f;
  const PackedMatrix w = pack_matrix(DType::F32, x.data(), n_out, n_in, WeightFormat::Int5Asym);
  std::vector<float> got(static_cast<size_t>(n_in));
  for (int r = 0; r < n_out; ++r) {
    unpack_row(w, r, got.data());
    for (int g = 0; g < n_in / kGroup; ++g) {
      const float* xg = x.data() + size_t(r) * n_in + g * kGroup;
      float lo = xg[0], hi = xg[0];
      for (int k = 0; k < kGroup; ++k) lo = std::min(lo, xg[k]), hi = std::max(hi, xg[k]);
      const float step = (hi - lo) / 31, amax = std::max(std::fabs(lo), std::fabs(hi));
      for (int k = 0; k < kGroup; ++k) {
        EXPECT_NEAR(got[size_t(g * kGroup + k)], xg[k], 0.51f * step + 2e-3f * amax)
            << "row " << r << " k " << g * kGroup + k;
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels
