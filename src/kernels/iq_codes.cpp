// Integer codes of the lattice, ternary, fp4 and 1/2-bit formats
// (iq_codes.h), one decoder a format, written from the block layouts of
// llama.cpp's ggml-common.h. Each decoder fills one block (256 elements;
// MXFP4 32, NVFP4 and Q2_0 64, Q1_0 128): unit[] for its groups of 32 and q[]
// for its elements.
#include "iq_codes.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "iq_grids.h"
#include "load_le.h"
#include "tern/core/half.h"

namespace tern::kernels {
namespace {

// 8 values of an IQ2 / IQ3 chunk: grid magnitudes g[0..7] with the sign
// pattern `signs` (bit j set: element j negative), times the sub-block's
// integer scale m.
void signed_chunk(const int* g, uint8_t signs, int m, int32_t* q) {
  for (int j = 0; j < 8; ++j) q[j] = m * g[j] * ((signs >> j) & 1 ? -1 : 1);
}
void grid8(uint64_t entry, int* g) {
  for (int j = 0; j < 8; ++j) g[j] = iq::grid_byte(entry, j);
}
// Two 4-value IQ3 grid entries side by side.
void grid4x2(uint32_t a, uint32_t b, int* g) {
  for (int j = 0; j < 4; ++j) g[j] = iq::grid_byte(a, j), g[j + 4] = iq::grid_byte(b, j);
}

// IQ2_XXS: group ib's 8 bytes are four grid indices and a u32 holding four
// 7-bit sign indices (bits 7l..7l+6) and the 4-bit scale (bits 28..31).
void iq2_xxs(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b);
  for (int ib = 0; ib < 8; ++ib, q += 32) {
    const uint8_t* p = b + 2 + 8 * ib;
    const uint32_t aux = load_u32(p + 4);
    unit[ib] = d * 0.125f;
    const int m = 2 * int(aux >> 28) + 1;
    int g[8];
    for (int l = 0; l < 4; ++l) {
      grid8(iq::kIq2xxsGrid[p[l]], g);
      signed_chunk(g, iq::kSignsIq2xs[(aux >> (7 * l)) & 127], m, q + 8 * l);
    }
  }
}

// IQ2_XS: each u16 is a 9-bit grid index and a 7-bit sign index; scales[ib]
// holds the 4-bit scales of the group's two halves (low nibble first).
void iq2_xs(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b);
  const uint8_t* scales = b + 66;
  for (int ib = 0; ib < 8; ++ib, q += 32) {
    unit[ib] = d * 0.125f;
    int g[8];
    for (int l = 0; l < 4; ++l) {
      const uint16_t v = load_u16(b + 2 + 2 * (4 * ib + l));
      const int s = l < 2 ? (scales[ib] & 15) : (scales[ib] >> 4);
      grid8(iq::kIq2xsGrid[v & 511], g);
      signed_chunk(g, iq::kSignsIq2xs[v >> 9], 2 * s + 1, q + 8 * l);
    }
  }
}

// IQ2_S: 10-bit grid indices (8 low bits in qs, 2 high bits of chunk l in
// bits 2l..2l+1 of qh[ib]) and a full sign byte per chunk; scales as IQ2_XS.
void iq2_s(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  const uint8_t* signs = b + 34;
  const uint8_t* qh = b + 66;
  const uint8_t* scales = b + 74;
  for (int ib = 0; ib < 8; ++ib, q += 32) {
    unit[ib] = d * 0.125f;
    int g[8];
    for (int l = 0; l < 4; ++l) {
      const int idx = qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300);
      const int s = l < 2 ? (scales[ib] & 15) : (scales[ib] >> 4);
      grid8(iq::kIq2sGrid[idx], g);
      signed_chunk(g, signs[4 * ib + l], 2 * s + 1, q + 8 * l);
    }
  }
}

// IQ3_XXS: two 8-bit indices into the 4-value grid per chunk; group ib's u32
// (after the 64 index bytes) holds four sign indices and the 4-bit scale.
void iq3_xxs(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int ib = 0; ib < 8; ++ib, q += 32) {
    const uint32_t aux = load_u32(b + 66 + 4 * ib);
    unit[ib] = d * 0.25f;
    const int m = 2 * int(aux >> 28) + 1;
    int g[8];
    for (int l = 0; l < 4; ++l) {
      grid4x2(iq::kIq3xxsGrid[qs[8 * ib + 2 * l]], iq::kIq3xxsGrid[qs[8 * ib + 2 * l + 1]], g);
      signed_chunk(g, iq::kSignsIq2xs[(aux >> (7 * l)) & 127], m, q + 8 * l);
    }
  }
}

// IQ3_S: 9-bit indices into the 4-value grid (the 9th bit of index k of
// group ib is bit k of qh[ib]), a sign byte per chunk, 4-bit scales two to a
// byte; x = d * (2s+1) * g.
void iq3_s(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  const uint8_t* qh = b + 66;
  const uint8_t* signs = b + 74;
  const uint8_t* scales = b + 106;
  for (int ib = 0; ib < 8; ++ib, q += 32) {
    unit[ib] = d;
    const int m = 2 * ((scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1;
    int g[8];
    for (int l = 0; l < 4; ++l) {
      const int i0 = qs[8 * ib + 2 * l] | ((qh[ib] << (8 - 2 * l)) & 256);
      const int i1 = qs[8 * ib + 2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256);
      grid4x2(iq::kIq3sGrid[i0], iq::kIq3sGrid[i1], g);
      signed_chunk(g, signs[4 * ib + l], m, q + 8 * l);
    }
  }
}

// 8 IQ1 values: dl * (g + delta) with g in {-1, 0, 1} and delta = +-1/8 is
// d/8 * (2s+1) * (8g +- 1).
void iq1_chunk(int idx, bool negative_delta, int m, int32_t* q) {
  const uint64_t entry = iq::kIq1sGrid[idx];
  for (int j = 0; j < 8; ++j) {
    const int g = int8_t(iq::grid_byte(entry, j));
    q[j] = m * (8 * g + (negative_delta ? -1 : 1));
  }
}

// IQ1_S: 11-bit grid indices (8 low bits in qs, 3 high bits of chunk l in
// bits 3l..3l+2 of the group's u16 qh), its 3-bit scale in bits 12..14 and
// the sign of delta in bit 15.
void iq1_s(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int ib = 0; ib < 8; ++ib, q += 32) {
    const uint16_t qh = load_u16(b + 34 + 2 * ib);
    unit[ib] = d * 0.125f;
    const int m = 2 * ((qh >> 12) & 7) + 1;
    for (int l = 0; l < 4; ++l) {
      iq1_chunk(qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8), qh & 0x8000, m, q + 8 * l);
    }
  }
}

// IQ1_M: the fp16 super-scale is spread over the top nibbles of the four
// u16 scales; each half of group ib has a 3-bit scale (bits 6(ib%2) ..
// +2 and +3 .. +5 of scales[ib/2]); chunk l takes its 3 high index bits and
// its delta sign from a nibble of qh[2ib + l/2] (low nibble for even l).
void iq1_m(const uint8_t* b, float* unit, int32_t* q) {
  const uint8_t* qs = b;
  const uint8_t* qh = b + 32;
  uint16_t sc[4];
  for (int k = 0; k < 4; ++k) sc[k] = load_u16(b + 48 + 2 * k);
  const uint16_t d16 = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                (sc[3] & 0xf000));
  const float d = fp16_to_f32(d16);
  for (int ib = 0; ib < 8; ++ib, q += 32) {
    unit[ib] = d * 0.125f;
    for (int l = 0; l < 4; ++l) {
      const int s = (sc[ib / 2] >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
      const int nib = (qh[2 * ib + l / 2] >> (4 * (l % 2))) & 15;
      iq1_chunk(qs[4 * ib + l] | ((nib & 7) << 8), nib & 8, 2 * s + 1, q + 8 * l);
    }
  }
}

// TQ1_0: base-3 digits, most significant first: digit n of byte x is
// (uint8(x * 3^n) * 3) >> 8. qs[0..31] give elements 32n + m (n = 0..4),
// qs[32..47] elements 160 + 16n + m, qh[0..3] (4 digits) elements 240 + 4n + j.
int tq1_digit(uint8_t x, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t shifted = uint8_t(x * kPow3[n]);
  return (shifted * 3) >> 8;
}
void tq1_0(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b + 52);
  for (int g = 0; g < 8; ++g) unit[g] = d;
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 32; ++m) q[32 * n + m] = tq1_digit(b[m], n) - 1;
    for (int m = 0; m < 16; ++m) q[160 + 16 * n + m] = tq1_digit(b[32 + m], n) - 1;
  }
  for (int n = 0; n < 4; ++n) {
    for (int j = 0; j < 4; ++j) q[240 + 4 * n + j] = tq1_digit(b[48 + j], n) - 1;
  }
}

// TQ2_0: element 128h + 32l + m is bits 2l..2l+1 of qs[32h + m], minus 1.
void tq2_0(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b + 64);
  for (int g = 0; g < 8; ++g) unit[g] = d;
  for (int e = 0; e < 256; ++e)
    q[e] = ((b[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) - 1;
}

// MXFP4: e2m1 codes (doubled, so integers) under the E8M0 scale 2^(e-127),
// halved to undo the doubling.
void mxfp4(const uint8_t* b, float* unit, int32_t* q) {
  unit[0] = std::ldexp(1.0f, int(b[0]) - 128);
  for (int j = 0; j < 16; ++j) {
    q[j] = iq::kValuesFp4[b[1 + j] & 15];
    q[j + 16] = iq::kValuesFp4[b[1 + j] >> 4];
  }
}

// NVFP4: group g of 32 is the block's sub-blocks 2g and 2g+1 of 16, each
// with its own E4M3 scale m * 2^(e-11). Trailing zero bits of m move into e
// (so m is odd), the group's unit is 2^(e-11) for the smaller e of its
// nonzero halves and each half's codes are kValuesFp4 * m * 2^(its e - that).
void nvfp4(const uint8_t* b, float* unit, int32_t* q) {
  for (int g = 0; g < 2; ++g) {
    Ue4m3 half[2];
    int e_min = 99;
    for (int h = 0; h < 2; ++h) {
      half[h] = nvfp4_scale(b[2 * g + h]);
      while (half[h].m != 0 && half[h].m % 2 == 0) half[h].m /= 2, half[h].e += 1;
      if (half[h].m != 0) e_min = std::min(e_min, half[h].e);
    }
    if (e_min == 99) e_min = 11;  // both halves zero: any unit
    unit[g] = std::ldexp(1.0f, e_min - 11);
    for (int h = 0; h < 2; ++h) {
      const int s = 2 * g + h;
      const int32_t m = half[h].m == 0 ? 0 : half[h].m << (half[h].e - e_min);
      const uint8_t* qs = b + 4 + 8 * s;
      int32_t* out = q + 32 * g + 16 * h;
      for (int j = 0; j < 8; ++j) {
        out[j] = iq::kValuesFp4[qs[j] & 15] * m;
        out[j + 8] = iq::kValuesFp4[qs[j] >> 4] * m;
      }
    }
  }
}

// Q1_0: one sign bit an element, d or -d.
void q1_0(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b);
  for (int g = 0; g < 4; ++g) unit[g] = d;
  for (int j = 0; j < 128; ++j) q[j] = (b[2 + j / 8] >> (j % 8)) & 1 ? 1 : -1;
}

// Q2_0: 2 bits an element, low bits first; d * (q - 1).
void q2_0(const uint8_t* b, float* unit, int32_t* q) {
  const float d = load_f16(b);
  for (int g = 0; g < 2; ++g) unit[g] = d;
  for (int j = 0; j < 64; ++j) q[j] = ((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1;
}

using BlockDecoder = void (*)(const uint8_t*, float*, int32_t*);

BlockDecoder decoder_for(DType t) {
  switch (t) {
    case DType::IQ2_XXS:
      return iq2_xxs;
    case DType::IQ2_XS:
      return iq2_xs;
    case DType::IQ2_S:
      return iq2_s;
    case DType::IQ3_XXS:
      return iq3_xxs;
    case DType::IQ3_S:
      return iq3_s;
    case DType::IQ1_S:
      return iq1_s;
    case DType::IQ1_M:
      return iq1_m;
    case DType::TQ1_0:
      return tq1_0;
    case DType::TQ2_0:
      return tq2_0;
    case DType::MXFP4:
      return mxfp4;
    case DType::NVFP4:
      return nvfp4;
    case DType::Q1_0:
      return q1_0;
    case DType::Q2_0:
      return q2_0;
    default:
      return nullptr;
  }
}

}  // namespace

bool has_integer_codes(DType t) {
  return decoder_for(t) != nullptr;
}

void integer_codes(DType t, const uint8_t* src, int64_t n, float* unit, int32_t* q) {
  const BlockDecoder decode = decoder_for(t);
  assert(decode);
  const DTypeTraits tr = dtype_traits(t);
  assert(n % tr.block_elems == 0);
  const int64_t nb = n / tr.block_elems;
  for (int64_t i = 0; i < nb; ++i) {
    decode(src + i * tr.block_bytes, unit + i * (tr.block_elems / 32), q + i * tr.block_elems);
  }
}

}  // namespace tern::kernels
