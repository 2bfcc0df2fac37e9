// Repacking: the exact GGUF conversions reproduce the source weights bit for
// bit, and the lossy ones stay within their format's rounding bound.
#include <gtest/gtest.h>

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

// A random (n_out, n_in) matrix quantized to `type` with the reference quantizer.
std::vector<uint8_t> random_source(DType type, int n_out, int n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(size_t(n_in), 0.0f);
  const size_t rb = dtype_row_bytes(type, size_t(n_in));
  std::vector<uint8_t> out(rb * size_t(n_out));
  for (int r = 0; r < n_out; ++r) {
    for (auto& x : row) x = dist(rng) + (r % 3 == 0 ? 0.02f : 0.0f);
    quantize_row_ref(type, row.data(), out.data() + rb * size_t(r), n_in);
  }
  return out;
}

void expect_exact(DType type, WeightFormat fmt) {
  for (const auto& [n_out, n_in] : {std::pair{1, 32}, {8, 64}, {13, 96}, {24, 576}}) {
    const auto src = random_source(type, n_out, n_in, uint32_t(n_out * 1000 + n_in));
    const PackedMatrix w = pack_matrix(type, src.data(), n_out, n_in, fmt);
    EXPECT_EQ(w.bytes(), size_t(w.n_tiles()) * w.n_groups() * w.block_bytes());
    const size_t rb = dtype_row_bytes(type, size_t(n_in));
    std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
    for (int r = 0; r < n_out; ++r) {
      dequantize_row(type, src.data() + rb * size_t(r), want.data(), n_in);
      unpack_row(w, r, got.data());
      for (int k = 0; k < n_in; ++k) {
        ASSERT_EQ(want[size_t(k)], got[size_t(k)])
            << dtype_name(type) << " row " << r << " k " << k;
      }
    }
  }
}

TEST(Pack, Q4_1ToInt4IsLossless) {
  expect_exact(DType::Q4_1, WeightFormat::Int4Asym);
}
TEST(Pack, Q4_0ToInt4IsLossless) {
  expect_exact(DType::Q4_0, WeightFormat::Int4Asym);
}
TEST(Pack, Q8_0ToInt8IsLossless) {
  expect_exact(DType::Q8_0, WeightFormat::Int8Sym);
}

TEST(Pack, Q5_0ToInt5IsLossless) {
  expect_exact(DType::Q5_0, WeightFormat::Int5Sym);
  EXPECT_EQ(default_format_for(DType::Q5_0), WeightFormat::Int5Sym);
  EXPECT_EQ(sizeof(Int5Block) * 32 / (kTileRows * kGroup), dtype_row_bytes(DType::Q5_0, 32));
}

TEST(Pack, LossyConversionsStayWithinOneStep) {
  // F32 -> int4: error at most half a step d/2 per weight (plus fp16 rounding
  // of d and m); F32 -> int8 likewise with d = amax/127.
  const int n_out = 11, n_in = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(n_out) * n_in);
  for (auto& v : x) v = dist(rng);
  for (WeightFormat fmt : {WeightFormat::Int4Asym, WeightFormat::Int8Sym, WeightFormat::Int5Sym}) {
    const PackedMatrix w = pack_matrix(DType::F32, x.data(), n_out, n_in, fmt);
    std::vector<float> got(static_cast<size_t>(n_in));
    for (int r = 0; r < n_out; ++r) {
      unpack_row(w, r, got.data());
      for (int g = 0; g < n_in / kGroup; ++g) {
        const float* xg = x.data() + size_t(r) * n_in + g * kGroup;
        float lo = xg[0], hi = xg[0], amax = 0;
        for (int k = 0; k < kGroup; ++k) {
          lo = std::min(lo, xg[k]), hi = std::max(hi, xg[k]),
          amax = std::max(amax, std::fabs(xg[k]));
        }
        const float step = fmt == WeightFormat::Int4Asym  ? (hi - lo) / 15
                           : fmt == WeightFormat::Int5Sym ? amax / 15
                                                          : amax / 127;
        for (int k = 0; k < kGroup; ++k) {
          EXPECT_NEAR(got[size_t(g * kGroup + k)], xg[k], 0.51f * step + 2e-3f * amax)
              << "row " << r << " k " << g * kGroup + k;
        }
      }
    }
  }
}

// Random Q4_K super-blocks (n_out rows of n_in / 256 blocks): random codes,
// 6-bit scales and minimums, and fp16 d / dmin of realistic size.
std::vector<block::Q4_K> random_q4_k(int n_out, int n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-4f, 2e-3f);
  std::vector<block::Q4_K> b(size_t(n_out) * size_t(n_in / 256));
  for (auto& x : b) {
    const uint16_t d = f32_to_fp16(scale(rng)), dmin = f32_to_fp16(scale(rng));
    std::memcpy(x.d, &d, 2);
    std::memcpy(x.dmin, &dmin, 2);
    for (auto& s : x.scales) s = uint8_t(byte(rng));
    for (auto& q : x.qs) q = uint8_t(byte(rng));
  }
  return b;
}

// Q4_K -> int4 keeps every code; only the per-32 scale d*sc and minimum
// dmin*mn are rounded to fp16, so each weight is off by at most
// 15 * |d*sc| * 2^-11 + |dmin*mn| * 2^-11, far below the half step
// (d*sc / 2) that requantizing the dequantized values could cost.
TEST(Pack, Q4_KToInt4KeepsCodesAndRoundsOnlyScales) {
  for (const auto& [n_out, n_in] : {std::pair{1, 256}, {13, 512}, {24, 1024}}) {
    const auto src = random_q4_k(n_out, n_in, uint32_t(n_out + n_in));
    const PackedMatrix w =
        pack_matrix(DType::Q4_K, src.data(), n_out, n_in, default_format_for(DType::Q4_K));
    ASSERT_EQ(w.format, WeightFormat::Int4Asym);
    std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
    for (int r = 0; r < n_out; ++r) {
      const block::Q4_K* row = src.data() + size_t(r) * (n_in / 256);
      dequantize_row(DType::Q4_K, row, want.data(), n_in);
      unpack_row(w, r, got.data());
      for (int k = 0; k < n_in; ++k) {
        const block::Q4_K& sb = row[k / 256];
        uint8_t sc, mn;
        block::k_scale_min(sb.scales, (k % 256) / 32, &sc, &mn);
        uint16_t h;
        std::memcpy(&h, sb.d, 2);
        const float ds = fp16_to_f32(h) * sc;
        std::memcpy(&h, sb.dmin, 2);
        const float dm = fp16_to_f32(h) * mn;
        const float bound = (15.0f * ds + dm) * 0x1.0p-11f * 1.01f + 1e-9f;
        ASSERT_NEAR(got[size_t(k)], want[size_t(k)], bound) << "row " << r << " k " << k;
      }
    }
  }
}

// Q6_K goes to int8 (its 6-bit codes fit no smaller format), and Q5_K does
// when int8 is forced (by default it keeps its codes: pack_int5_test.cpp): the
// per-32 requantization adds at most half an int8 step (amax / 254) per
// weight, a small fraction of the sources' own steps.
TEST(Pack, Q5_KAndQ6_KToInt8StayWithinHalfAStep) {
  const int n_out = 5, n_in = 512;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (DType type : {DType::Q5_K, DType::Q6_K}) {
    const size_t rb = dtype_row_bytes(type, size_t(n_in));
    std::vector<uint8_t> src(rb * n_out);
    for (auto& b : src) b = uint8_t(byte(rng));
    // Sane fp16 super-block scales (random bytes could be inf / NaN).
    const size_t bb = dtype_traits(type).block_bytes;
    for (size_t off = 0; off < src.size(); off += bb) {
      const uint16_t d = f32_to_fp16(1e-3f);
      if (type == DType::Q6_K) {
        std::memcpy(&src[off + 208], &d, 2);
      } else {
        std::memcpy(&src[off], &d, 2);
        std::memcpy(&src[off + 2], &d, 2);
      }
    }
    ASSERT_EQ(default_format_for(type),
              type == DType::Q6_K ? WeightFormat::Int8Sym : WeightFormat::Int5Asym);
    const PackedMatrix w = pack_matrix(type, src.data(), n_out, n_in, WeightFormat::Int8Sym);
    std::vector<float> want(static_cast<size_t>(n_in)), got(static_cast<size_t>(n_in));
    for (int r = 0; r < n_out; ++r) {
      dequantize_row(type, src.data() + rb * r, want.data(), n_in);
      unpack_row(w, r, got.data());
      for (int g = 0; g < n_in / kGroup; ++g) {
        float amax = 0;
        for (int k = 0; k < kGroup; ++k) amax = std::max(amax, std::fabs(want[g * kGroup + k]));
        for (int k = 0; k < kGroup; ++k) {
          ASSERT_NEAR(got[g * kGroup + k], want[g * kGroup + k], amax / 254 * 1.01f + 1e-3f * amax)
              << dtype_name(type) << " row " << r << " k " << g * kGroup + k;
        }
      }
    }
  }
}

TEST(Pack, PaddingRowsOfTheLastTileAreZero) {
  const auto src = random_source(DType::Q4_1, 9, 32, 3);
  const PackedMatrix w = pack_matrix(DType::Q4_1, src.data(), 9, 32, WeightFormat::Int4Asym);
  ASSERT_EQ(w.n_tiles(), 2);
  const auto& b = *reinterpret_cast<const Int4Block*>(w.tile(1));
  for (int i = 1; i < kTileRows; ++i) {
    EXPECT_EQ(b.d[i], 0);
    EXPECT_EQ(b.m[i], 0);
    for (int k = 0; k < kGroup; ++k) EXPECT_EQ(int4_code(b, i, k), 0);
  }
}

}  // namespace
}  // namespace tern::kernels
