// Repacking: the exact GGUF conversions reproduce the source weights bit for
// bit, and the lossy ones stay within their format's rounding bound.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tern/core/dtype.h"
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

TEST(Pack, LossyConversionsStayWithinOneStep) {
  // F32 -> int4: error at most half a step d/2 per weight (plus fp16 rounding
  // of d and m); F32 -> int8 likewise with d = amax/127.
  const int n_out = 11, n_in = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(n_out) * n_in);
  for (auto& v : x) v = dist(rng);
  for (WeightFormat fmt : {WeightFormat::Int4Asym, WeightFormat::Int8Sym}) {
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
        const float step = fmt == WeightFormat::Int4Asym ? (hi - lo) / 15 : amax / 127;
        for (int k = 0; k < kGroup; ++k) {
          EXPECT_NEAR(got[size_t(g * kGroup + k)], xg[k], 0.51f * step + 2e-3f * amax)
              << "row " << r << " k " << g * kGroup + k;
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
