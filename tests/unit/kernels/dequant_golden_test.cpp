// The reference dequantizers of Q2_K, Q3_K, IQ4_NL, IQ4_XS, the lattice
// types (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M), TQ1_0, TQ2_0,
// MXFP4, NVFP4, Q1_0 and Q2_0 against llama.cpp's own (tests/fixtures/dequant_golden.json, made
// by scripts/oracle/gen_dequant_golden.sh from ggml's to_float): seeded random
// blocks plus extreme codes and scales (all bits 0 / 1, negative, fp16 max,
// subnormal and zero super-scales). Also checks the DType table against
// ggml's: every id llama.cpp b11434 knows has tern's block size and bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
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

// The lattice, ternary, fp4 and 1/2-bit types: values are exact products of
// a power-of-two-scaled fp16 (or E4M3) and a small integer (src/kernels/iq_codes.h), so
// tern and llama.cpp must agree bit for bit whatever the compiler contracts.
bool exact_type(const std::string& name) {
  for (const char* t : {"IQ3_XXS", "IQ3_S", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M", "TQ1_0",
                        "TQ2_0", "MXFP4", "NVFP4", "Q1_0", "Q2_0"})
    if (name == t) return true;
  return false;
}

// Dequantizes every golden case of the types `pick` accepts and compares
// with llama.cpp's values; returns the number of cases checked.
template <typename Pick>
int check_cases(Pick pick, bool bit_exact) {
  int n_cases = 0;
  for (const json& c : golden().at("cases")) {
    const std::string name = c.at("type");
    if (!pick(name)) continue;
    const DType type = type_named(name);
    EXPECT_TRUE(can_dequantize(type)) << name;
    if (!can_dequantize(type)) continue;
    const std::vector<uint8_t> bytes = from_hex(c.at("bytes"));
    const int64_t n = c.at("n");
    EXPECT_EQ(bytes.size(), dtype_row_bytes(type, size_t(n))) << c.at("case");
    const std::vector<float> want = c.at("values").get<std::vector<float>>();
    EXPECT_EQ(want.size(), size_t(n));
    if (bytes.size() != dtype_row_bytes(type, size_t(n)) || want.size() != size_t(n)) continue;
    std::vector<float> got(size_t(n), -12345.0f);
    dequantize_row(type, bytes.data(), got.data(), n);
    // The K-quants and IQ4 agree bit for bit today too, but a llama.cpp build
    // may fuse d*sc*q - dmin*mn into one fma (GCC contracts by default) where
    // tern rounds each step: allow that one rounding, a few ulps of the
    // block's largest value, so regenerating the fixture elsewhere holds.
    float amax = 0.0f;
    for (float v : want) amax = std::max(amax, std::fabs(v));
    const float tol = bit_exact ? 0.0f : 4.0f * amax * std::ldexp(1.0f, -23);
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; ++i) {
      const float g = got[size_t(i)], w = want[size_t(i)];
      const bool ok = bit_exact ? std::memcmp(&g, &w, sizeof(float)) == 0 : std::fabs(g - w) <= tol;
      if (!ok) {
        ++bad;
        ADD_FAILURE() << name << " / " << c.at("case").get<std::string>() << ": element " << i
                      << " is " << g << ", llama.cpp says " << w;
      }
    }
    ++n_cases;
  }
  return n_cases;
}

TEST(DequantGolden, MatchesLlamaCpp) {
  EXPECT_EQ(check_cases([](const std::string& t) { return !exact_type(t); }, false), 4 * 8);
}

TEST(DequantGolden, LatticeTernaryAndFp4AreBitExact) {
  EXPECT_EQ(check_cases(exact_type, true), 13 * 8);
}

// The test quantizers of TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0 and Q2_0 write the very bytes ggml's
// reference quantizers write (so test models are what llama-quantize would
// make of the same values, without an importance matrix).
TEST(DequantGolden, TestQuantizersWriteGgmlBytes) {
  int n = 0;
  for (const json& c : golden().at("quantized")) {
    const DType type = type_named(upper(c.at("type")));
    const std::vector<float> x = c.at("values").get<std::vector<float>>();
    EXPECT_EQ(quantize_ref(type, x), from_hex(c.at("bytes"))) << c.at("type");
    ++n;
  }
  EXPECT_EQ(n, 6);
}

}  // namespace
}  // namespace tern::kernels
