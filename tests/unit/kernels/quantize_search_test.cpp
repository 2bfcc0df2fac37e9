// The searching quantizers (quantize_iq.cpp, quantize_k.cpp): what they write
// decodes with the golden-tested reference dequantizers within the noise
// each format's bits allow, on normal values and on adversarial blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "tern/kernels/dequant.h"

namespace tern::kernels {
namespace {

// The types and their largest relative RMS error on normal values (what
// they reached when written, plus a margin; the order follows their bits).
struct Case {
  DType type;
  double normal_limit;
};
constexpr Case kCases[] = {
    {DType::Q6_K, 0.022},   {DType::Q5_K, 0.042}, {DType::Q4_K, 0.085},  {DType::IQ3_S, 0.17},
    {DType::IQ3_XXS, 0.19}, {DType::IQ2_S, 0.30}, {DType::IQ2_XS, 0.32}, {DType::IQ2_XXS, 0.36},
    {DType::IQ1_M, 0.48},   {DType::IQ1_S, 0.50},
};

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  const std::vector<uint8_t> q = quantize_ref(t, x);
  EXPECT_EQ(q.size(), dtype_row_bytes(t, x.size()));
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), int64_t(x.size()));
  return y;
}

double relative_rms(const std::vector<float>& x, const std::vector<float>& y, size_t at, size_t n) {
  double err = 0, norm = 0;
  for (size_t i = at; i < at + n; ++i) {
    err += double(y[i] - x[i]) * double(y[i] - x[i]);
    norm += double(x[i]) * double(x[i]);
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

TEST(QuantizeSearch, NormalValuesRoundTripWithinTheirBits) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256 * 32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (0.5f + float(i / 256 % 7));
  for (const Case& c : kCases) {
    ASSERT_TRUE(can_quantize(c.type)) << dtype_name(c.type);
    const std::vector<float> y = round_trip(c.type, x);
    const double rel = relative_rms(x, y, 0, x.size());
    std::printf("%-8s relative RMS error %.4f (limit %.3f)\n",
                std::string(dtype_name(c.type)).c_str(), rel, c.normal_limit);
    EXPECT_LT(rel, c.normal_limit) << dtype_name(c.type);
  }
}

// Heavy tails (a Laplace-like spread, as trained weights have): the scale
// search must not let the outliers wash out the bulk.
TEST(QuantizeSearch, HeavyTailsStayUseful) {
  std::mt19937 rng(5);
  std::exponential_distribution<float> expo(1.0f);
  std::vector<float> x(256 * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = expo(rng) * (rng() % 2 ? 1.0f : -1.0f);
  for (const Case& c : kCases) {
    const double rel = relative_rms(x, round_trip(c.type, x), 0, x.size());
    EXPECT_LT(rel, 1.3 * c.normal_limit + 0.02) << dtype_name(c.type);
  }
}

// One block of 256 of each adversarial kind; each decodes finite and close.
TEST(QuantizeSearch, AdversarialBlocks) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  enum { kZeros, kSpike, kEqual, kNegEqual, kHuge, kTiny, kSpikeInNoise, kKinds };
  std::vector<float> x(256 * kKinds, 0.0f);
  auto block = [&](int k) { return x.begin() + 256 * k; };
  block(kSpike)[77] = -3.5f;
  std::fill(block(kEqual), block(kEqual) + 256, 0.75f);
  std::fill(block(kNegEqual), block(kNegEqual) + 256, -2.0f);
  for (int j = 0; j < 256; ++j) {
    block(kHuge)[j] = 1000.0f * normal(rng);
    block(kTiny)[j] = 0.01f * normal(rng);
    block(kSpikeInNoise)[j] = 0.05f * normal(rng);
  }
  block(kSpikeInNoise)[200] = 4.0f;
  for (const Case& c : kCases) {
    const std::vector<float> y = round_trip(c.type, x);
    const std::string name(dtype_name(c.type));
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << name;
    for (int j = 0; j < 256; ++j) ASSERT_EQ(y[size_t(j)], 0.0f) << name << " zeros";
    // A lone spike keeps its sign and most of its size (the IQ2 grids have
    // no zero: its chunk's other seven values pull the scale down).
    EXPECT_LT(y[256 * kSpike + 77], -0.4f * 3.5f) << name;
    EXPECT_GT(y[256 * kSpike + 77], -1.2f * 3.5f) << name;
    // Constant blocks: every value lands on one grid level (the IQ2 / IQ3
    // grids hold the all-equal point; IQ1's levels are 8g +- 1).
    EXPECT_LT(relative_rms(x, y, 256 * kEqual, 256), 1.2 * c.normal_limit + 0.1) << name;
    EXPECT_LT(relative_rms(x, y, 256 * kNegEqual, 256), 1.2 * c.normal_limit + 0.1) << name;
    // Scale does not matter while D fits fp16.
    EXPECT_LT(relative_rms(x, y, 256 * kHuge, 256), 1.5 * c.normal_limit) << name;
    EXPECT_LT(relative_rms(x, y, 256 * kTiny, 256), 1.5 * c.normal_limit) << name;
    // The spike survives and the block is no worse than zeroed: IQ2's and
    // IQ1's smallest nonzero level is a fifth of the largest, so the noise
    // around the spike is what they lose (the error weights favour the spike).
    EXPECT_GT(y[256 * kSpikeInNoise + 200], 0.4f * 4.0f) << name;
    EXPECT_LT(y[256 * kSpikeInNoise + 200], 1.2f * 4.0f) << name;
    EXPECT_LT(relative_rms(x, y, 256 * kSpikeInNoise, 256), 1.0) << name;
  }
}

// The same input always gives the same bytes (the CLI's fixtures hash them).
TEST(QuantizeSearch, Deterministic) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256 * 4);
  for (float& v : x) v = normal(rng);
  for (const Case& c : kCases) EXPECT_EQ(quantize_ref(c.type, x), quantize_ref(c.type, x));
}

}  // namespace
}  // namespace tern::kernels
