// The float weight formats (F16, Bf16: 16-bit weights, fp32 activations):
// packing is exact for sources of the format's own type, unpack_row gives
// back the stored values, the scalar twin is the textbook fp32 dot product,
// and every fast table matches the twin within a tolerance derived from the
// row's sum of |w|*|a| (float sums need not be bit-identical across ISAs;
// today's kernels happen to be).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tern/core/half.h"
#include "tern/core/task_pool.h"
#include "tern/kernels/ops.h"
#include "test_tables.h"

namespace tern::kernels {
namespace {

using test::fast_tables;
using test::Floats;

constexpr WeightFormat kFloatFormats[] = {WeightFormat::F16, WeightFormat::Bf16};

// A random (n_out, n_in) matrix stored as the format's own GGUF type.
struct Source {
  DType type;
  std::vector<uint16_t> bits;  // (n_out, n_in)
  std::vector<float> values;   // the same, as fp32
};
Source random_source(WeightFormat fmt, int n_out, int n_in, std::mt19937& rng) {
  Source s{fmt == WeightFormat::F16 ? DType::F16 : DType::BF16, {}, {}};
  std::normal_distribution<float> dist(0.0f, 0.1f);
  for (size_t i = 0; i < size_t(n_out) * size_t(n_in); ++i) {
    const float x = dist(rng) * (i % 97 == 0 ? 100.0f : 1.0f);  // a few large weights
    const uint16_t b = fmt == WeightFormat::F16 ? f32_to_fp16(x) : f32_to_bf16(x);
    s.bits.push_back(b);
    s.values.push_back(fmt == WeightFormat::F16 ? fp16_to_f32(b) : bf16_to_f32(b));
  }
  return s;
}

// Acts over x (rows, n_in), quantized too (as the forward pass does).
QuantizedActs acts(const float* x, int rows, int n_in) {
  QuantizedActs qa;
  qa.resize(rows, n_in);
  scalar_kernels().quantize_rows(x, 0, rows, n_in, qa);
  qa.x = x;
  return qa;
}

TEST(GemmFloat, PackIsExactAndUnpacks) {
  std::mt19937 rng(1);
  for (WeightFormat fmt : kFloatFormats) {
    const int n_out = 13, n_in = 96;
    const Source s = random_source(fmt, n_out, n_in, rng);
    const PackedMatrix w = pack_matrix(s.type, s.bits.data(), n_out, n_in, fmt);
    EXPECT_EQ(w.bytes(), size_t(2) * 2 * kTileRows * n_in);  // 2 tiles, 2 bytes a weight
    EXPECT_EQ(w.bytes(), packed_size(fmt, n_out, n_in));
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int r = 0; r < n_out; ++r) {
      unpack_row(w, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), s.values.data() + size_t(r) * n_in, 4 * size_t(n_in)), 0)
          << int(fmt) << " row " << r;
    }
  }
}

TEST(GemmFloat, FormatPolicyKeepsSixteenBitSources) {
  EXPECT_EQ(float_format_for(DType::F16, nullptr, 0, WeightFormat::Bf16), WeightFormat::F16);
  EXPECT_EQ(float_format_for(DType::BF16, nullptr, 0, WeightFormat::F16), WeightFormat::Bf16);
  const float small[] = {1.0f, -65504.0f, 3.0f}, big[] = {1.0f, 70000.0f};
  EXPECT_EQ(float_format_for(DType::F32, small, 3, WeightFormat::F16), WeightFormat::F16);
  EXPECT_EQ(float_format_for(DType::F32, big, 2, WeightFormat::F16), WeightFormat::Bf16);
  EXPECT_EQ(float_format_for(DType::F32, small, 3, WeightFormat::Bf16), WeightFormat::Bf16);
  EXPECT_EQ(float_format_for(DType::Q4_1, nullptr, 0, WeightFormat::F16), WeightFormat::Int4Asym);
  EXPECT_EQ(float_format_for(DType::Q8_0, nullptr, 0, WeightFormat::F16), WeightFormat::Int8Sym);
  // F32 into F16 rounds to nearest even, as f32_to_fp16.
  const float x[32] = {0.1f, 1.0f / 3.0f, -2.5e-6f};
  const PackedMatrix w = pack_matrix(DType::F32, x, 1, 32, WeightFormat::F16);
  float back[32];
  unpack_row(w, 0, back);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[i], fp16_to_f32(f32_to_fp16(x[i])));
}

// Every table (scalar included) against a double-precision dot product of the
// stored weights, and every fast table against the scalar twin, within
// 1e-5 (resp. n_in * 2^-24, the fp32 sum's bound) of sum |w| |a|.
TEST(GemmFloat, TablesMatchTheTwinWithinTolerance) {
  const KernelTable& ref = scalar_kernels();
  const std::vector<const KernelTable*> tables = fast_tables();
  std::mt19937 rng(7);
  // rows, n_out, n_in: one row (GEMV), many rows, n_out not a multiple of 8,
  // tile counts not a multiple of 2 or 4.
  const int shapes[][3] = {{1, 8, 32},     {1, 1, 64},   {1, 45, 96},   {2, 9, 96},   {3, 17, 32},
                           {4, 24, 576},   {5, 7, 160},  {7, 40, 64},   {9, 65, 128}, {16, 33, 96},
                           {17, 16, 1536}, {33, 71, 64}, {1, 200, 256}, {12, 136, 32}};
  for (WeightFormat fmt : kFloatFormats) {
    for (const auto& sh : shapes) {
      const int rows = sh[0], n_out = sh[1], n_in = sh[2];
      const Source s = random_source(fmt, n_out, n_in, rng);
      const PackedMatrix w = pack_matrix(s.type, s.bits.data(), n_out, n_in, fmt);
      Floats x(rows * n_in, 1, rng, 2.0f);  // unaligned rows
      const QuantizedActs qa = acts(x.data(), rows, n_in);
      std::vector<float> want(size_t(rows) * n_out, -1.0f);
      ref.gemm_tiles(w, qa, want.data(), 0, rows, 0, w.n_tiles());
      for (int r = 0; r < rows; ++r) {
        for (int o = 0; o < n_out; ++o) {
          double exact = 0.0, mag = 0.0;
          for (int e = 0; e < n_in; ++e) {
            const double p =
                double(s.values[size_t(o) * n_in + e]) * x.data()[size_t(r) * n_in + e];
            exact += p, mag += std::fabs(p);
          }
          const size_t i = size_t(r) * n_out + o;
          ASSERT_NEAR(want[i], exact, double(n_in) * std::ldexp(1.0, -24) * mag + 1e-30)
              << "scalar fmt " << int(fmt) << " r " << r << " o " << o;
        }
      }
      for (const KernelTable* k : tables) {
        std::vector<float> got(size_t(rows) * n_out, -2.0f);
        k->gemm_tiles(w, qa, got.data(), 0, rows, 0, w.n_tiles());
        for (int r = 0; r < rows; ++r) {
          for (int o = 0; o < n_out; ++o) {
            double mag = 0.0;
            for (int e = 0; e < n_in; ++e)
              mag += std::fabs(double(s.values[size_t(o) * n_in + e]) *
                               x.data()[size_t(r) * n_in + e]);
            const size_t i = size_t(r) * n_out + o;
            ASSERT_NEAR(got[i], want[i], 1e-5 * mag)
                << k->isa << " fmt " << int(fmt) << " rows " << rows << " n_out " << n_out
                << " n_in " << n_in << " r " << r << " o " << o;
          }
        }
        // A sub-range of rows and tiles writes exactly those outputs.
        test::expect_subrange_writes_only_it(*k, w, qa, got, rows);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// matmul() over the pool (any split) gives the table's own numbers.
TEST(GemmFloat, MatmulOverThePoolMatchesTheTable) {
  std::mt19937 rng(3);
  TaskPool pool(3);
  for (WeightFormat fmt : kFloatFormats) {
    for (const int rows : {1, 6, 37}) {
      const int n_out = 83, n_in = 192;
      const Source s = random_source(fmt, n_out, n_in, rng);
      const PackedMatrix w = pack_matrix(s.type, s.bits.data(), n_out, n_in, fmt);
      Floats x(rows * n_in, 0, rng);
      QuantizedActs qa;
      quantize_activations(x.data(), rows, n_in, qa, pool);
      ASSERT_EQ(qa.x, x.data());
      std::vector<float> want(size_t(rows) * n_out), got(want.size());
      active_kernels().gemm_tiles(w, qa, want.data(), 0, rows, 0, w.n_tiles());
      matmul(w, qa, got.data(), pool);
      EXPECT_EQ(std::memcmp(want.data(), got.data(), 4 * want.size()), 0) << rows;
    }
  }
}

}  // namespace
}  // namespace tern::kernels
