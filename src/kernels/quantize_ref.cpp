// Reference quantizers: round-to-nearest per block, with the same block math
// as ggml's reference quantizers, so that test models built with them decode
// the way a ggml-made file would. Used to write test models, not at run time.
//
// Symmetric types (Q8_0, Q4_0, Q5_0) scale by the element of largest
// magnitude; asymmetric ones (Q4_1, Q5_1) map [min, max] onto [0, 2^bits - 1].
// The scale is stored as fp16 but the codes are computed from the unrounded
// scale, as ggml does.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "iq_codes.h"
#include "iq_grids.h"
#include "quantize_lowbit.h"
#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/kernels/dequant.h"

namespace tern::kernels {
namespace {

void store_f16(uint8_t* p, float f) {
  const uint16_t h = f32_to_fp16(f);
  std::memcpy(p, &h, 2);
}

// The element of largest magnitude, with its sign.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void quant_q8_0(const float* x, block::Q8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(b[i].d, d);
    for (int j = 0; j < 32; ++j) b[i].qs[j] = int8_t(std::round(x[j] * id));
  }
}

// Q4_0: d = max / -8 so the largest-magnitude element maps to code 0 (or 16,
// clamped to 15); codes are floor(x/d + 8.5).
void quant_q4_0(const float* x, block::Q4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    const float d = signed_absmax(x, 32) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(b[i].d, d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, int(x[j] * id + 8.5f));
      const int q1 = std::min(15, int(x[j + 16] * id + 8.5f));
      b[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void quant_q4_1(const float* x, block::Q4_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    const auto [lo, hi] = std::minmax_element(x, x + 32);
    const float min = *lo;
    const float d = (*hi - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(b[i].d, d);
    store_f16(b[i].m, min);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, int((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, int((x[j + 16] - min) * id + 0.5f));
      b[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

// Packs 32 five-bit codes into qs (low 4 bits, nibbles as Q4_0) and qh (bit 4).
void pack_q5(const int* q, uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
  for (int j = 0; j < 32; ++j) qh |= uint32_t((q[j] >> 4) & 1) << j;
  std::memcpy(qh_bytes, &qh, 4);
}

void quant_q5_0(const float* x, block::Q5_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    const float d = signed_absmax(x, 32) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(b[i].d, d);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = std::min(31, int(x[j] * id + 16.5f));
    pack_q5(q, b[i].qs, b[i].qh);
  }
}

void quant_q5_1(const float* x, block::Q5_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    const auto [lo, hi] = std::minmax_element(x, x + 32);
    const float min = *lo;
    const float d = (*hi - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_f16(b[i].d, d);
    store_f16(b[i].m, min);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = std::min(31, int((x[j] - min) * id + 0.5f));
    pack_q5(q, b[i].qs, b[i].qh);
  }
}

// The low-bit types below are round-to-nearest too, with none of ggml's
// search for better scales: good enough for test models (their decoding is
// what tests check), not for real weights.

// The scale of a sub-block or super-block as fp16, then read back: the codes
// are computed against the rounded value the decoder will see.
float stored_f16(uint8_t* p, float f) {
  store_f16(p, f);
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_f32(h);
}

int nearest_code(float v, int lo, int hi) {
  return std::clamp(int(std::lround(v)), lo, hi);
}

// Q2_K: sub-block s maps [min(x, 0), max(x)] onto 0..3: scale (max-min)/3
// and min -min(x, 0), both quantized to 4 bits against d = max scale / 15
// and dmin = max min / 15.
void quant_q2_k(const float* x, block::Q2_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float sc[16], mn[16], max_sc = 0.0f, max_mn = 0.0f;
    for (int s = 0; s < 16; ++s) {
      float lo = 0.0f, hi = x[16 * s];
      for (int j = 0; j < 16; ++j)
        lo = std::min(lo, x[16 * s + j]), hi = std::max(hi, x[16 * s + j]);
      sc[s] = (hi - lo) / 3.0f;
      mn[s] = -lo;
      max_sc = std::max(max_sc, sc[s]);
      max_mn = std::max(max_mn, mn[s]);
    }
    const float d = stored_f16(b[i].d, max_sc / 15.0f);
    const float dmin = stored_f16(b[i].dmin, max_mn / 15.0f);
    std::memset(b[i].qs, 0, sizeof b[i].qs);
    for (int s = 0; s < 16; ++s) {
      const int ls = d > 0.0f ? nearest_code(sc[s] / d, 0, 15) : 0;
      const int lm = dmin > 0.0f ? nearest_code(mn[s] / dmin, 0, 15) : 0;
      b[i].scales[s] = uint8_t(ls | (lm << 4));
      const float dl = d * float(ls), ml = dmin * float(lm);
      for (int j = 0; j < 16; ++j) {
        const int e = 16 * s + j;
        const int q = dl > 0.0f ? nearest_code((x[e] + ml) / dl, 0, 3) : 0;
        b[i].qs[32 * (e / 128) + e % 32] |= uint8_t(q << (2 * ((e % 128) / 32)));
      }
    }
  }
}

// Q3_K: sub-block s has scale max/-4 (its largest-magnitude element maps to
// -4), quantized to 6 bits signed against d = (largest scale)/-32.
void quant_q3_k(const float* x, block::Q3_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float sc[16];
    for (int s = 0; s < 16; ++s) sc[s] = signed_absmax(x + 16 * s, 16) / -4.0f;
    const float d = stored_f16(b[i].d, signed_absmax(sc, 16) / -32.0f);
    std::memset(b[i].hmask, 0, sizeof b[i].hmask);
    std::memset(b[i].qs, 0, sizeof b[i].qs);
    std::memset(b[i].scales, 0, sizeof b[i].scales);
    for (int s = 0; s < 16; ++s) {
      const int ls = d != 0.0f ? nearest_code(sc[s] / d, -32, 31) : 0;
      const int l = ls + 32;  // stored 0..63
      b[i].scales[s % 8] |= uint8_t((l & 0x0F) << (s < 8 ? 0 : 4));
      b[i].scales[8 + s % 4] |= uint8_t((l >> 4) << (2 * (s / 4)));
      const float dl = d * float(ls);
      for (int j = 0; j < 16; ++j) {
        const int e = 16 * s + j;
        const int u = (dl != 0.0f ? nearest_code(x[e] / dl, -4, 3) : 0) + 4;  // 0..7
        b[i].qs[32 * (e / 128) + e % 32] |= uint8_t((u & 3) << (2 * ((e % 128) / 32)));
        if (u >= 4) b[i].hmask[e % 32] |= uint8_t(1 << (4 * (e / 128) + (e % 128) / 32));
      }
    }
  }
}

// 32 values -> the nearest kIq4nl levels of x / dl (nibbles as Q4_0).
void iq4_codes(const float* x, float dl, uint8_t* qs) {
  const float id = dl != 0.0f ? 1.0f / dl : 0.0f;
  auto nearest = [](float v) {
    int best = 0;
    for (int k = 1; k < 16; ++k) {
      if (std::fabs(v - block::kIq4nl[k]) < std::fabs(v - block::kIq4nl[best])) best = k;
    }
    return best;
  };
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(nearest(x[j] * id) | (nearest(x[j + 16] * id) << 4));
}

// IQ4_NL: d = max / -127, the largest-magnitude element on level -127.
void quant_iq4_nl(const float* x, block::IQ4_NL* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    iq4_codes(x, stored_f16(b[i].d, signed_absmax(x, 32) / -127.0f), b[i].qs);
  }
}

// IQ4_XS: IQ4_NL's scale per sub-block of 32, quantized to 6 bits signed
// against d = (largest scale) / -32.
void quant_iq4_xs(const float* x, block::IQ4_XS* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float sc[8];
    for (int s = 0; s < 8; ++s) sc[s] = signed_absmax(x + 32 * s, 32) / -127.0f;
    const float d = stored_f16(b[i].d, signed_absmax(sc, 8) / -32.0f);
    uint16_t scales_h = 0;
    std::memset(b[i].scales_l, 0, sizeof b[i].scales_l);
    for (int s = 0; s < 8; ++s) {
      const int ls = d != 0.0f ? nearest_code(sc[s] / d, -32, 31) : 0;
      const int l = ls + 32;
      b[i].scales_l[s / 2] |= uint8_t((l & 0x0F) << (4 * (s % 2)));
      scales_h = uint16_t(scales_h | ((l >> 4) << (2 * s)));
      iq4_codes(x + 32 * s, d * float(ls), b[i].qs + 16 * s);
    }
    std::memcpy(b[i].scales_h, &scales_h, 2);
  }
}

// Ternary digits x / d in {-1, 0, 1}, stored as 0..2.
int trit(float x, float id) {
  return std::clamp(int(std::lround(x * id)), -1, 1) + 1;
}

// Up to five trits, most significant first, as one TQ1_0 byte: the base-3
// number scaled to 0..255 (rounded up) so that digit n is (uint8(b * 3^n) *
// 3) >> 8 (iq_codes.cpp). A byte of four trits carries a fifth, zero digit.
uint8_t tq1_byte(const int* t, int count) {
  int q = 0;
  for (int n = 0; n < 5; ++n) q = 3 * q + (n < count ? t[n] : 0);
  return uint8_t((q * 256 + 242) / 243);
}

// TQ1_0: element order as in iq_codes.cpp.
// A ternary block's scale d = amax of its 256 values, stored as fp16 at
// `d_field`; returns 1/d (0 for an all-zero block).
float ternary_scale(const float* x, uint8_t* d_field) {
  float amax = 0.0f;
  for (int e = 0; e < 256; ++e) amax = std::max(amax, std::fabs(x[e]));
  store_f16(d_field, amax);
  return amax != 0.0f ? 1.0f / amax : 0.0f;
}

void quant_tq1_0(const float* x, uint8_t* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256, b += 54) {
    const float id = ternary_scale(x, b + 52);
    int t[5];
    for (int m = 0; m < 32; ++m) {
      for (int n = 0; n < 5; ++n) t[n] = trit(x[32 * n + m], id);
      b[m] = tq1_byte(t, 5);
    }
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 5; ++n) t[n] = trit(x[160 + 16 * n + m], id);
      b[32 + m] = tq1_byte(t, 5);
    }
    for (int j = 0; j < 4; ++j) {
      for (int n = 0; n < 4; ++n) t[n] = trit(x[240 + 4 * n + j], id);
      b[48 + j] = tq1_byte(t, 4);
    }
  }
}

// TQ2_0: d = amax; element 128h + 32l + m in bits 2l.. of qs[32h + m].
void quant_tq2_0(const float* x, uint8_t* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 256, b += 66) {
    const float id = ternary_scale(x, b + 64);
    std::memset(b, 0, 64);
    for (int e = 0; e < 256; ++e) {
      b[32 * (e / 128) + e % 32] |= uint8_t(trit(x[e], id) << (2 * ((e % 128) / 32)));
    }
  }
}

// The kValuesFp4 index whose value times d is nearest v (the first of equals).
int fp4_index(float v, float d) {
  int best = 0;
  for (int k = 1; k < 16; ++k) {
    if (std::fabs(iq::kValuesFp4[k] * d - v) < std::fabs(iq::kValuesFp4[best] * d - v)) best = k;
  }
  return best;
}

// MXFP4, as ggml's reference: e = floor(log2 amax) - 2 + 127 (so the
// largest e2m1 value, 12 halved, lands near amax), codes the nearest
// kValuesFp4 entry of x / 2^(e-128).
void quant_mxfp4(const float* x, uint8_t* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32, b += 17) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const int e = amax > 0.0f ? std::clamp(int(std::floor(std::log2(amax))) - 2 + 127, 0, 254) : 0;
    const float d = std::ldexp(1.0f, e - 128);
    b[0] = uint8_t(e);
    for (int j = 0; j < 16; ++j)
      b[1 + j] = uint8_t(fp4_index(x[j], d) | (fp4_index(x[j + 16], d) << 4));
  }
}

// x > 0 as an unsigned E4M3 byte (4 exponent bits, bias 7, 3 mantissa bits),
// as ggml's ggml_fp32_to_ue4m3 rounds it: the mantissa rounded half up from
// its fourth bit (the bits below are dropped), subnormals (x < 2^-6) to the
// nearest multiple of 2^-9, anything from 448 up (and a carry past the top
// exponent) to 0x7E, 448; zero, negative and NaN to 0.
uint8_t ue4m3_from_f32(float x) {
  if (!(x > 0.0f)) return 0;
  x = std::min(x, 448.0f);
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  int exp = int((bits >> 23) & 0xFF) - 127 + 7;
  if (exp <= 0) return uint8_t(std::clamp(int(x * 512.0f + 0.5f), 0, 7));
  if (exp >= 15) return 0x7E;
  int man = int((bits >> 20) & 7) + int((bits >> 19) & 1);
  if (man > 7) man = 0, exp += 1;
  if (exp >= 15) return 0x7E;
  return uint8_t((exp << 3) | man);
}

// NVFP4, as ggml's reference: per 16 elements the E4M3 scale of amax / 6
// (the largest e2m1 value, 6, lands on amax), then the nearest kValuesFp4
// entry of x under that scale as decoded (m * 2^(e-11), iq_codes.h).
void quant_nvfp4(const float* x, uint8_t* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 36) {
    for (int s = 0; s < 4; ++s, x += 16) {
      float amax = 0.0f;
      for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(x[j]));
      b[s] = ue4m3_from_f32(amax / 6.0f);
      const Ue4m3 sc = nvfp4_scale(b[s]);
      const float d = std::ldexp(float(sc.m), sc.e - 11);
      for (int j = 0; j < 8; ++j) {
        b[4 + 8 * s + j] = uint8_t(fp4_index(x[j], d) | (fp4_index(x[j + 8], d) << 4));
      }
    }
  }
}

// Q1_0, as ggml's reference: d = mean |x| (summed in order), bit set for x >= 0.
void quant_q1_0(const float* x, uint8_t* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 128, b += 18) {
    float sum = 0.0f;
    for (int j = 0; j < 128; ++j) sum += std::fabs(x[j]);
    store_f16(b, sum / 128.0f);
    std::memset(b + 2, 0, 16);
    for (int j = 0; j < 128; ++j) {
      if (x[j] >= 0.0f) b[2 + j / 8] = uint8_t(b[2 + j / 8] | (1 << (j % 8)));
    }
  }
}

// Q2_0, as ggml's reference: d = amax, q = round(x / d) clamped to -1..2
// (from the unrounded 1/d, halves away from zero), stored as q + 1.
void quant_q2_0(const float* x, uint8_t* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 64, b += 18) {
    float amax = 0.0f;
    for (int j = 0; j < 64; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    store_f16(b, amax);
    std::memset(b + 2, 0, 16);
    for (int j = 0; j < 64; ++j) {
      const int q = std::clamp(int(std::round(x[j] * id)) + 1, 0, 3);
      b[2 + j / 4] = uint8_t(b[2 + j / 4] | (q << (2 * (j % 4))));
    }
  }
}

}  // namespace

bool can_quantize(DType type) {
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::TQ1_0:
    case DType::TQ2_0:
    case DType::MXFP4:
    case DType::NVFP4:
    case DType::Q1_0:
    case DType::Q2_0:
      return true;
    default:
      return is_lattice_type(type) || is_k_search_type(type);
  }
}

void quantize_row_ref(DType type, const float* src, void* dst, int64_t n) {
  assert(can_quantize(type) && "quantize_row_ref: unsupported type");
  if (!can_quantize(type)) return;
  const int64_t qk = dtype_traits(type).block_elems;
  assert(n >= 0 && n % qk == 0);
  const int64_t nb = n / qk;
  auto* p = static_cast<uint8_t*>(dst);
  switch (type) {
    case DType::F32:
      std::memcpy(p, src, size_t(n) * sizeof(float));
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) store_f16(p + 2 * i, src[i]);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case DType::Q8_0:
      quant_q8_0(src, reinterpret_cast<block::Q8_0*>(p), nb);
      break;
    case DType::Q4_0:
      quant_q4_0(src, reinterpret_cast<block::Q4_0*>(p), nb);
      break;
    case DType::Q4_1:
      quant_q4_1(src, reinterpret_cast<block::Q4_1*>(p), nb);
      break;
    case DType::Q5_0:
      quant_q5_0(src, reinterpret_cast<block::Q5_0*>(p), nb);
      break;
    case DType::Q5_1:
      quant_q5_1(src, reinterpret_cast<block::Q5_1*>(p), nb);
      break;
    case DType::Q2_K:
      quant_q2_k(src, reinterpret_cast<block::Q2_K*>(p), nb);
      break;
    case DType::Q3_K:
      quant_q3_k(src, reinterpret_cast<block::Q3_K*>(p), nb);
      break;
    case DType::IQ4_NL:
      quant_iq4_nl(src, reinterpret_cast<block::IQ4_NL*>(p), nb);
      break;
    case DType::IQ4_XS:
      quant_iq4_xs(src, reinterpret_cast<block::IQ4_XS*>(p), nb);
      break;
    case DType::TQ1_0:
      quant_tq1_0(src, p, nb);
      break;
    case DType::TQ2_0:
      quant_tq2_0(src, p, nb);
      break;
    case DType::MXFP4:
      quant_mxfp4(src, p, nb);
      break;
    case DType::NVFP4:
      quant_nvfp4(src, p, nb);
      break;
    case DType::Q1_0:
      quant_q1_0(src, p, nb);
      break;
    case DType::Q2_0:
      quant_q2_0(src, p, nb);
      break;
    default:
      if (is_lattice_type(type)) quantize_lattice(type, src, p, nb);
      if (is_k_search_type(type)) quantize_k_search(type, src, p, nb);
      break;
  }
}

std::vector<uint8_t> quantize_ref(DType type, std::span<const float> values) {
  if (!can_quantize(type)) {
    throw InvalidArgument("quantize_ref: cannot encode " + std::string(dtype_name(type)));
  }
  const int64_t n = int64_t(values.size());
  if (n % dtype_traits(type).block_elems != 0) {
    throw InvalidArgument("quantize_ref: " + std::to_string(n) + " values are not whole " +
                          std::string(dtype_name(type)) + " blocks");
  }
  std::vector<uint8_t> out(dtype_row_bytes(type, n));
  quantize_row_ref(type, values.data(), out.data(), n);
  return out;
}

}  // namespace tern::kernels
