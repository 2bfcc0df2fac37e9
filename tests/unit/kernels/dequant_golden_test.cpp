// The reference dequantizers of Q2_K, Q3_K, IQ4_NL and IQ4_XS against
// llama.cpp's own (tests/fixtures/dequant_golden.json, made by
// scripts/oracle/gen_dequant_golden.sh from ggml's to_float): seeded random
// blocks plus extreme codes and scales (all bits 0 / 1, negative, fp16 max,
// subnormal and zero super-scales). Also checks the DType table against
// ggml's: every id llama.cpp b11434 knows has tern's block size and bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tern/kernels/dequant.h"
#include "testutil.h"

namespace tern::kernels {
namespace {

using nlohmann::json;

const json& golden() {
  static const json j = [] {
    std::ifstream in(test::fixture_path("dequant_golden.json"));
    return json::parse(in);
  }();
  return j;
}

std::vector<uint8_t> from_hex(const std::string& s) {
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = uint8_t(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return out;
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

DType type_named(const std::string& name) {
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const auto tr = dtype_traits(raw);
    if (tr && tr->name == name) return DType(raw);
  }
  ADD_FAILURE() << "no DType named " << name;
  return DType::F32;
}

TEST(DequantGolden, TypeTableMatchesGgml) {
  const json& types = golden().at("types");
  ASSERT_GE(types.size(), 43u);
  for (const json& t : types) {
    const uint32_t id = t.at("id");
    const auto tr = dtype_traits(id);
    if (t.at("block_elems").get<int>() == 0) {  // an id llama.cpp has removed
      EXPECT_FALSE(tr) << "id " << id;
      EXPECT_NE(removed_dtype_name(id), "") << "id " << id;
      continue;
    }
    ASSERT_TRUE(tr) << "tern does not know ggml type " << id << " " << t.at("name");
    EXPECT_EQ(upper(std::string(tr->name)), upper(t.at("name").get<std::string>())) << id;
    EXPECT_EQ(tr->block_elems, t.at("block_elems").get<uint32_t>()) << tr->name;
    EXPECT_EQ(tr->block_bytes, t.at("block_bytes").get<uint32_t>()) << tr->name;
  }
}

TEST(DequantGolden, LabelsNameTypeAndNumber) {
  EXPECT_EQ(dtype_label(DType::IQ3_XXS), "IQ3_XXS (type 18)");
  EXPECT_EQ(dtype_label(DType::IQ4_NL), "IQ4_NL (type 20)");
  EXPECT_EQ(dtype_label(DType(99)), "type 99");
}

TEST(DequantGolden, MatchesLlamaCpp) {
  int n_cases = 0;
  for (const json& c : golden().at("cases")) {
    const DType type = type_named(c.at("type"));
    ASSERT_TRUE(can_dequantize(type)) << c.at("type");
    const std::vector<uint8_t> bytes = from_hex(c.at("bytes"));
    const int64_t n = c.at("n");
    ASSERT_EQ(bytes.size(), dtype_row_bytes(type, size_t(n))) << c.at("case");
    const std::vector<float> want = c.at("values").get<std::vector<float>>();
    ASSERT_EQ(want.size(), size_t(n));
    std::vector<float> got(size_t(n), -12345.0f);
    dequantize_row(type, bytes.data(), got.data(), n);
    // They agree bit for bit today (checked with tol = 0). A llama.cpp build
    // may fuse d*sc*q - dmin*mn into one fma (GCC contracts by default) where
    // tern rounds each step: allow that one rounding, a few ulps of the
    // block's largest value, so regenerating the fixture elsewhere holds.
    float amax = 0.0f;
    for (float v : want) amax = std::max(amax, std::fabs(v));
    const float tol = 4.0f * amax * std::ldexp(1.0f, -23);
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; ++i) {
      if (!(std::fabs(got[size_t(i)] - want[size_t(i)]) <= tol)) {
        ++bad;
        ADD_FAILURE() << c.at("type").get<std::string>() << " / " << c.at("case").get<std::string>()
                      << ": element " << i << " is " << got[size_t(i)] << ", llama.cpp says "
                      << want[size_t(i)];
      }
    }
    ++n_cases;
  }
  EXPECT_EQ(n_cases, 4 * 8);
}

}  // namespace
}  // namespace tern::kernels
