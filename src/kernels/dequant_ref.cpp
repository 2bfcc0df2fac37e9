// Reference dequantizers: one plain loop per block format (layouts in
// include/tern/kernels/dequant.h). Speed is not the point; being obviously
// right is, because every fast kernel is checked against these.
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "iq_codes.h"
#include "iq_grids.h"
#include "load_le.h"
#include "tern/core/half.h"
#include "tern/kernels/dequant.h"

namespace tern::kernels {
namespace {

void dequant_f16(const uint8_t* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = load_f16(src + 2 * i);
}

void dequant_bf16(const uint8_t* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    y[i] = bf16_to_f32(h);
  }
}

void dequant_q8_0(const block::Q8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = load_f16(b[i].d);
    for (int j = 0; j < 32; ++j) y[j] = d * float(b[i].qs[j]);
  }
}

void dequant_q4_0(const block::Q4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = load_f16(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float((b[i].qs[j] & 0x0F) - 8);
      y[j + 16] = d * float((b[i].qs[j] >> 4) - 8);
    }
  }
}

void dequant_q4_1(const block::Q4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = load_f16(b[i].d);
    const float m = load_f16(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float(b[i].qs[j] & 0x0F) + m;
      y[j + 16] = d * float(b[i].qs[j] >> 4) + m;
    }
  }
}

// The 5-bit value of element j (0..31) of a Q5_0 / Q5_1 block.
int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  const int hi = int((qh >> j) & 1u) << 4;
  return lo | hi;
}

void dequant_q5_0(const block::Q5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = load_f16(b[i].d);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < 32; ++j) y[j] = d * float(q5_value(b[i].qs, qh, j) - 16);
  }
}

void dequant_q5_1(const block::Q5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) {
    const float d = load_f16(b[i].d);
    const float m = load_f16(b[i].m);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < 32; ++j) y[j] = d * float(q5_value(b[i].qs, qh, j)) + m;
  }
}

// Q4_K: 4 chunks of 64 elements; chunk c uses qs[32c .. 32c+32): the low
// nibbles are sub-block 2c, the high nibbles sub-block 2c+1.
void dequant_q4_k(const block::Q4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = load_f16(b[i].d);
    const float dmin = load_f16(b[i].dmin);
    for (int c = 0; c < 4; ++c) {
      uint8_t sc0, mn0, sc1, mn1;
      block::k_scale_min(b[i].scales, 2 * c, &sc0, &mn0);
      block::k_scale_min(b[i].scales, 2 * c + 1, &sc1, &mn1);
      const float d0 = d * sc0, m0 = dmin * mn0;
      const float d1 = d * sc1, m1 = dmin * mn1;
      const uint8_t* q = b[i].qs + 32 * c;
      float* out = y + 64 * c;
      for (int l = 0; l < 32; ++l) {
        out[l] = d0 * float(q[l] & 0x0F) - m0;
        out[l + 32] = d1 * float(q[l] >> 4) - m1;
      }
    }
  }
}

// Q5_K: as Q4_K, plus a fifth bit from qh: bit s of qh[l] belongs to
// element l of sub-block s.
void dequant_q5_k(const block::Q5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = load_f16(b[i].d);
    const float dmin = load_f16(b[i].dmin);
    for (int c = 0; c < 4; ++c) {
      uint8_t sc0, mn0, sc1, mn1;
      block::k_scale_min(b[i].scales, 2 * c, &sc0, &mn0);
      block::k_scale_min(b[i].scales, 2 * c + 1, &sc1, &mn1);
      const float d0 = d * sc0, m0 = dmin * mn0;
      const float d1 = d * sc1, m1 = dmin * mn1;
      const uint8_t* q = b[i].qs + 32 * c;
      float* out = y + 64 * c;
      for (int l = 0; l < 32; ++l) {
        const int h0 = ((b[i].qh[l] >> (2 * c)) & 1) << 4;
        const int h1 = ((b[i].qh[l] >> (2 * c + 1)) & 1) << 4;
        out[l] = d0 * float((q[l] & 0x0F) | h0) - m0;
        out[l + 32] = d1 * float((q[l] >> 4) | h1) - m1;
      }
    }
  }
}

// Q6_K: two halves of 128 elements. In half h, element 32k + l (k = 0..3,
// l = 0..31) takes its low 4 bits from ql[64h + l + 32*(k&1)] (low nibble for
// k < 2, high nibble otherwise) and its top 2 bits from bits 2k..2k+1 of
// qh[32h + l]. Scale index = element / 16.
void dequant_q6_k(const block::Q6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = load_f16(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      for (int k = 0; k < 4; ++k) {
        for (int l = 0; l < 32; ++l) {
          const uint8_t lo_byte = ql[l + 32 * (k & 1)];
          const int lo = k < 2 ? (lo_byte & 0x0F) : (lo_byte >> 4);
          const int hi = (qh[l] >> (2 * k)) & 3;
          const int e = 128 * h + 32 * k + l;
          y[e] = d * float(b[i].scales[e / 16]) * float((lo | (hi << 4)) - 32);
        }
      }
    }
  }
}

// Q2_K: 16 sub-blocks of 16; sub-block s has a 4-bit scale and a 4-bit
// min in scales[s]; x = d*sc*q - dmin*mn with q = 0..3.
void dequant_q2_k(const block::Q2_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = load_f16(b[i].d);
    const float dmin = load_f16(b[i].dmin);
    for (int e = 0; e < 256; ++e) {
      const uint8_t sm = b[i].scales[e / 16];
      const float dl = d * float(sm & 0x0F), ml = dmin * float(sm >> 4);
      y[e] = dl * float(block::k_q2(b[i].qs, e)) - ml;
    }
  }
}

// Q3_K: 16 sub-blocks of 16, signed 6-bit scales; x = d*sc*(q-4).
void dequant_q3_k(const block::Q3_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = load_f16(b[i].d);
    for (int e = 0; e < 256; ++e) {
      const float dl = d * float(block::q3_k_scale(b[i], e / 16));
      y[e] = dl * float(block::q3_k_value(b[i], e));
    }
  }
}

// 32 codebook values from 16 bytes (element j: low nibble of qs[j],
// element j+16: high nibble), times dl.
void iq4_group(const uint8_t* qs, float dl, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = dl * float(block::kIq4nl[qs[j] & 0x0F]);
    y[j + 16] = dl * float(block::kIq4nl[qs[j] >> 4]);
  }
}

void dequant_iq4_nl(const block::IQ4_NL* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 32) iq4_group(b[i].qs, load_f16(b[i].d), y);
}

void dequant_iq4_xs(const block::IQ4_XS* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += 256) {
    const float d = load_f16(b[i].d);
    for (int s = 0; s < 8; ++s) {
      iq4_group(b[i].qs + 16 * s, d * float(block::iq4_xs_scale(b[i], s)), y + 32 * s);
    }
  }
}

// NVFP4 as llama.cpp computes it, kValuesFp4 * scale per 16 elements, not
// through its integer codes: the values are the same, but a zero scale gives
// -0.0 for the negative codes here as there.
void dequant_nvfp4(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 36) {
    for (int s = 0; s < 4; ++s, y += 16) {
      const Ue4m3 sc = nvfp4_scale(b[s]);
      const float d = std::ldexp(float(sc.m), sc.e - 11);
      for (int j = 0; j < 8; ++j) {
        y[j] = float(iq::kValuesFp4[b[4 + 8 * s + j] & 15]) * d;
        y[j + 8] = float(iq::kValuesFp4[b[4 + 8 * s + j] >> 4]) * d;
      }
    }
  }
}

// The lattice, ternary, fp4 and 1/2-bit types: unit * q, block by block
// (iq_codes.h; the products are exact, so this is llama.cpp's value).
void dequant_integer_codes(DType type, const uint8_t* p, float* y, int64_t nb) {
  const DTypeTraits tr = dtype_traits(type);
  float unit[8];
  int32_t q[256];
  for (int64_t i = 0; i < nb; ++i, p += tr.block_bytes, y += tr.block_elems) {
    integer_codes(type, p, tr.block_elems, unit, q);
    for (uint32_t e = 0; e < tr.block_elems; ++e) y[e] = unit[e / 32] * float(q[e]);
  }
}

}  // namespace

bool can_dequantize(DType type) {
  if (has_integer_codes(type)) return true;
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

std::string loadable_types() {
  std::string s;
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const auto tr = dtype_traits(raw);
    if (!tr || !can_dequantize(DType(raw))) continue;
    s += (s.empty() ? "" : ", ") + std::string(tr->name);
  }
  return s;
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  if (!can_dequantize(type)) {
    assert(false && "dequantize_row: unsupported type");
    for (int64_t i = 0; i < n; ++i) dst[i] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const int64_t qk = dtype_traits(type).block_elems;
  assert(n >= 0 && n % qk == 0);
  const int64_t nb = n / qk;
  const auto* p = static_cast<const uint8_t*>(src);
  switch (type) {
    case DType::F32:
      std::memcpy(dst, p, size_t(n) * sizeof(float));
      break;
    case DType::F16:
      dequant_f16(p, dst, n);
      break;
    case DType::BF16:
      dequant_bf16(p, dst, n);
      break;
    case DType::Q8_0:
      dequant_q8_0(reinterpret_cast<const block::Q8_0*>(p), dst, nb);
      break;
    case DType::Q4_0:
      dequant_q4_0(reinterpret_cast<const block::Q4_0*>(p), dst, nb);
      break;
    case DType::Q4_1:
      dequant_q4_1(reinterpret_cast<const block::Q4_1*>(p), dst, nb);
      break;
    case DType::Q5_0:
      dequant_q5_0(reinterpret_cast<const block::Q5_0*>(p), dst, nb);
      break;
    case DType::Q5_1:
      dequant_q5_1(reinterpret_cast<const block::Q5_1*>(p), dst, nb);
      break;
    case DType::Q4_K:
      dequant_q4_k(reinterpret_cast<const block::Q4_K*>(p), dst, nb);
      break;
    case DType::Q5_K:
      dequant_q5_k(reinterpret_cast<const block::Q5_K*>(p), dst, nb);
      break;
    case DType::Q6_K:
      dequant_q6_k(reinterpret_cast<const block::Q6_K*>(p), dst, nb);
      break;
    case DType::Q2_K:
      dequant_q2_k(reinterpret_cast<const block::Q2_K*>(p), dst, nb);
      break;
    case DType::Q3_K:
      dequant_q3_k(reinterpret_cast<const block::Q3_K*>(p), dst, nb);
      break;
    case DType::IQ4_NL:
      dequant_iq4_nl(reinterpret_cast<const block::IQ4_NL*>(p), dst, nb);
      break;
    case DType::IQ4_XS:
      dequant_iq4_xs(reinterpret_cast<const block::IQ4_XS*>(p), dst, nb);
      break;
    case DType::NVFP4:
      dequant_nvfp4(p, dst, nb);
      break;
    default:
      dequant_integer_codes(type, p, dst, nb);  // can_dequantize() checked above
      break;
  }
}

}  // namespace tern::kernels
