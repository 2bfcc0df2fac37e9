// Row codecs and block layout of the KV types: fp8 encoding agrees with the
// core converter everywhere (ties included), each codec stays within its
// rounding bound, and the layout's sizes match the numbers in the report.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tern/core/half.h"
#include "tern/kv/kv_layout.h"

namespace tern::kv {
namespace {

TEST(KvCodec, Fp8EncodeMatchesCoreConverter) {
  std::vector<float> xs = {0.0f,   -0.0f,         448.0f,       -448.0f,  460.0f,
                           500.0f, 1e30f,         -1e30f,       INFINITY, -INFINITY,
                           1e-30f, 0.0009765625f, 0.001953125f, 0.015625f};
  // Every code, and the midpoints between neighbours (round-to-even ties).
  for (int c = 0; c < 127; ++c) {
    const float a = fp8e4m3_to_f32(uint8_t(c)), b = fp8e4m3_to_f32(uint8_t(c + 1));
    for (float s : {1.0f, -1.0f}) {
      xs.push_back(s * a);
      xs.push_back(s * (a + b) / 2);
      xs.push_back(s * std::nextafter((a + b) / 2, 0.0f));
      xs.push_back(s * std::nextafter((a + b) / 2, 1000.0f));
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> e(-12.0f, 9.5f);
  for (int i = 0; i < 200000; ++i) xs.push_back((i & 1 ? -1.0f : 1.0f) * std::exp2(e(rng)));
  for (float x : xs) ASSERT_EQ(fp8_encode(x), f32_to_fp8e4m3(x)) << "x=" << x;
  EXPECT_EQ(fp8_encode(NAN) & 0x7f, 0x7f);
  for (int c = 0; c < 256; ++c) {
    const float want = fp8e4m3_to_f32(uint8_t(c));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(fp8_decode(uint8_t(c))));
    else
      EXPECT_EQ(fp8_decode(uint8_t(c)), want) << c;
  }
}

std::vector<float> random_row(int n, uint32_t seed, float amp) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, amp);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = d(rng);
  return x;
}

float absmax(const std::vector<float>& x) {
  float m = 0;
  for (float v : x) m = std::max(m, std::fabs(v));
  return m;
}

TEST(KvCodec, Int8RoundTripWithinHalfStep) {
  for (int n : {1, 7, 64, 129}) {
    auto x = random_row(n, uint32_t(n), 3.0f);
    std::vector<int8_t> q(static_cast<size_t>(n));
    float scale = 0;
    encode_int8(x.data(), n, q.data(), &scale);
    EXPECT_FLOAT_EQ(scale, absmax(x) / 127.0f);
    for (int i = 0; i < n; ++i)
      EXPECT_LE(std::fabs(q[size_t(i)] * scale - x[size_t(i)]), 0.5001f * scale);
  }
}

// The int8 codes are nearbyint's (round half to even) exactly, ties
// included: the codec rounds with an add-and-subtract of 1.5 x 2^23 instead
// of a libm call.
TEST(KvCodec, Int8CodesAreNearbyintsTiesIncluded) {
  std::vector<float> x = {127.0f};  // the absmax: inv = 1, codes = nearbyint(x)
  for (int k = -254; k <= 254; ++k) {
    const float h = 0.5f * float(k);  // every half step: the ties
    for (float v : {h, std::nextafter(h, 200.0f), std::nextafter(h, -200.0f)})
      if (std::fabs(v) <= 127.0f) x.push_back(v);
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-127.0f, 127.0f);
  for (int i = 0; i < 20000; ++i) x.push_back(u(rng));
  const int n = int(x.size());
  std::vector<int8_t> q(x.size());
  float scale = 0;
  encode_int8(x.data(), n, q.data(), &scale);
  ASSERT_EQ(scale, 1.0f);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(q[size_t(i)], int8_t(std::clamp(std::nearbyint(x[size_t(i)]), -127.0f, 127.0f)))
        << "x=" << x[size_t(i)];
}

TEST(KvCodec, Int4RoundTripWithinHalfStepAndPacksHalves) {
  for (int n : {2, 8, 64, 130}) {
    auto x = random_row(n, uint32_t(n) + 3, 1.0f);
    std::vector<uint8_t> q(size_t(n / 2));
    float scale = 0;
    encode_int4(x.data(), n, q.data(), &scale);
    for (int j = 0; j < n / 2; ++j) {
      const int lo = (q[size_t(j)] & 15) - 8, hi = (q[size_t(j)] >> 4) - 8;
      ASSERT_GE(lo, -7);
      ASSERT_GE(hi, -7);
      EXPECT_LE(std::fabs(lo * scale - x[size_t(j)]), 0.5001f * scale);
      EXPECT_LE(std::fabs(hi * scale - x[size_t(j + n / 2)]), 0.5001f * scale);
    }
  }
}

TEST(KvCodec, Fp8RowRelativeErrorBound) {
  for (int n : {1, 5, 64, 200}) {
    auto x = random_row(n, uint32_t(n) + 11, 0.02f);
    std::vector<uint8_t> q(static_cast<size_t>(n));
    float scale = 0;
    encode_fp8(x.data(), n, q.data(), &scale);
    for (int i = 0; i < n; ++i) {
      const float back = fp8_decode(q[size_t(i)]) * scale;
      // 3 mantissa bits: half an ulp is 1/16 relative; below 2^-6 (scaled) steps are 2^-9.
      const float bound = std::max(std::fabs(x[size_t(i)]) / 16.0f, scale * 0x1.0p-10f) * 1.0001f;
      EXPECT_LE(std::fabs(back - x[size_t(i)]), bound) << i;
    }
  }
}

TEST(KvCodec, ZeroRowsStayZero) {
  std::vector<float> z(64, 0.0f);
  std::vector<int8_t> q8(64, 5);
  std::vector<uint8_t> q(64, 5);
  float s = 1;
  encode_int8(z.data(), 64, q8.data(), &s);
  EXPECT_EQ(s, 0.0f);
  for (int8_t v : q8) EXPECT_EQ(v, 0);
  encode_fp8(z.data(), 64, q.data(), &s);
  EXPECT_EQ(s, 0.0f);
  for (uint8_t v : q) EXPECT_EQ(fp8_decode(v), 0.0f);
}

TEST(KvRotation, IsOrthonormalAndPreservesDotProducts) {
  EXPECT_TRUE(can_rotate(64));
  EXPECT_FALSE(can_rotate(80));
  EXPECT_FALSE(can_rotate(1));
  for (int n : {2, 16, 64, 256}) {
    auto q = random_row(n, uint32_t(n), 1.0f), k = random_row(n, uint32_t(n) + 1, 3.0f);
    std::vector<float> rq(static_cast<size_t>(n)), rk(static_cast<size_t>(n)),
        back(static_cast<size_t>(n));
    rotate(q.data(), n, rq.data());
    rotate(k.data(), n, rk.data());
    unrotate(rk.data(), n, back.data());
    double dot = 0, rdot = 0, nk = 0, nrk = 0;
    for (int i = 0; i < n; ++i) {
      dot += double(q[size_t(i)]) * k[size_t(i)];
      rdot += double(rq[size_t(i)]) * rk[size_t(i)];
      nk += double(k[size_t(i)]) * k[size_t(i)];
      nrk += double(rk[size_t(i)]) * rk[size_t(i)];
      EXPECT_NEAR(back[size_t(i)], k[size_t(i)], 1e-5f * 3.0f * std::sqrt(float(n)));
    }
    EXPECT_NEAR(rdot, dot, 1e-5 * std::sqrt(nk) * n);
    EXPECT_NEAR(nrk, nk, 1e-5 * nk);
    // In place works too.
    rotate(q.data(), n, q.data());
    for (int i = 0; i < n; ++i) EXPECT_EQ(q[size_t(i)], rq[size_t(i)]);
  }
  // An outlier channel is spread over every dim.
  std::vector<float> e(64, 0.0f), r(64);
  e[5] = 8.0f;
  rotate(e.data(), 64, r.data());
  for (float x : r) EXPECT_FLOAT_EQ(std::fabs(x), 1.0f);
}

TEST(KvLayout, DefaultModelSizes) {
  // 30 layers, 3 kv heads x 64: the numbers quoted in the report.
  struct {
    KvType t;
    size_t per_token;
  } want[] = {{KvType::F16, 23040},
              {KvType::Int8, 12240},
              {KvType::Int8Fp8, 12240},
              {KvType::Int4Fp8, 9360}};
  for (auto w : want) {
    const KvLayout L = KvLayout::make(30, 3, 64, 32, w.t);
    EXPECT_EQ(L.bytes_per_token(), w.per_token) << to_string(w.t);
    // 32-token blocks carry no padding for this shape.
    EXPECT_EQ(L.block_bytes, w.per_token * 32) << to_string(w.t);
  }
}

TEST(KvLayout, PartsAreAlignedAndDisjoint) {
  for (KvType t : {KvType::F16, KvType::Int8, KvType::Int8Fp8, KvType::Int4Fp8}) {
    for (int hd : {2, 6, 64, 130}) {
      for (int B : {1, 3, 32, 256}) {
        const KvLayout L = KvLayout::make(2, 3, hd, B, t);
        EXPECT_EQ(L.off_k % 64, 0u);
        EXPECT_EQ(L.off_v % 64, 0u);
        EXPECT_EQ(L.head_bytes % 64, 0u);
        EXPECT_GE(L.off_v, L.off_k + size_t(B) * L.k_row);
        EXPECT_GE(L.head_bytes, L.off_v + size_t(B) * L.v_row);
        if (L.scaled) {
          EXPECT_GE(L.off_vs, size_t(4 * B));
          EXPECT_GE(L.off_k, L.off_vs + size_t(4 * B));
        }
        EXPECT_EQ(L.block_bytes, 2 * 3 * L.head_bytes);
      }
    }
  }
}

TEST(KvLayout, RejectsBadShapes) {
  EXPECT_THROW(KvLayout::make(30, 3, 63, 32, KvType::Int4Fp8), InvalidArgument);
  EXPECT_THROW(KvLayout::make(0, 3, 64, 32, KvType::F16), InvalidArgument);
  EXPECT_THROW(KvLayout::make(30, 3, 64, 0, KvType::F16), InvalidArgument);
  EXPECT_THROW(KvLayout::make(30, 3, 64, 257, KvType::F16), InvalidArgument);
  EXPECT_THROW(KvLayout::make(30, 3, 513, 32, KvType::F16), InvalidArgument);
  EXPECT_NO_THROW(KvLayout::make(30, 3, 63, 32, KvType::Int8Fp8));
}

TEST(KvTypes, ParseNames) {
  EXPECT_EQ(parse_kv_type("f16"), KvType::F16);
  EXPECT_EQ(parse_kv_type("int8"), KvType::Int8);
  EXPECT_EQ(parse_kv_type("int8-fp8"), KvType::Int8Fp8);
  EXPECT_EQ(parse_kv_type("mixed"), KvType::Int8Fp8);
  EXPECT_EQ(parse_kv_type("int4-fp8"), KvType::Int4Fp8);
  EXPECT_THROW(parse_kv_type("q4_0"), InvalidArgument);
  for (KvType t : {KvType::F16, KvType::Int8, KvType::Int8Fp8, KvType::Int4Fp8}) {
    EXPECT_EQ(parse_kv_type(to_string(t)), t);
  }
}

}  // namespace
}  // namespace tern::kv
