// Repacking GGUF weights into the engine's tiled layouts (packed.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "iq_codes.h"
#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/kernels/dequant.h"
#include "tern/kernels/packed.h"

namespace tern::kernels {

namespace {

// GGUF block layouts used for the exact conversions.
struct Q4_1Src {
  uint16_t d, m;
  uint8_t qs[16];
};
struct Q4_0Src {
  uint16_t d;
  uint8_t qs[16];
};
struct Q8_0Src {
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(Q4_1Src) == 20 && sizeof(Q4_0Src) == 18 && sizeof(Q8_0Src) == 34);

// Quantize one group of 32 floats to asymmetric codes 0..qmax (int4: 15,
// int5: 31; round to nearest). The scale and minimum are rounded to fp16
// first and the codes computed from the rounded values, so the stored
// (d, m, q) reconstruct x as well as fp16 allows.
void quant_group_asym(const float* x, int qmax, uint16_t& d16, uint16_t& m16, int* q) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kGroup; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  d16 = f32_to_fp16((hi - lo) / float(qmax));
  m16 = f32_to_fp16(lo);
  const float d = fp16_to_f32(d16), m = fp16_to_f32(m16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kGroup; ++j) q[j] = std::clamp(int(std::lround((x[j] - m) * id)), 0, qmax);
}

// Symmetric codes: x ~ d*(q - offset), |q - offset| <= qmax, d = amax/qmax.
// int8: qmax 127, offset 0; int5: qmax 15, offset 16 (codes 1..31).
void quant_group_sym(const float* x, int qmax, int offset, uint16_t& d16, int* q) {
  float amax = 0.0f;
  for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::fabs(x[j]));
  d16 = f32_to_fp16(amax / float(qmax));
  const float d = fp16_to_f32(d16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kGroup; ++j) {
    q[j] = offset + int(std::clamp(std::lround(x[j] * id), -long(qmax), long(qmax)));
  }
}

// Group g (0..7 within its super-block) of a Q4_K / Q5_K row as int4 / int5
// asym: the codes are copied as they are (sub-block g: the low nibbles, g
// even, or high nibbles, g odd, of qs[32*(g/2) ..]; Q5_K adds bit g of qh[j]
// as bit 4 of element j); the group's scale d*sc and minimum -dmin*mn (fp16
// x 6-bit integer, up to 17 significant bits) are rounded to fp16. That
// rounding (relative error <= 2^-11 on each) is the only precision lost.
template <class KBlock>
void k_group(const KBlock& sb, int g, uint16_t& d16, uint16_t& m16, int* q) {
  uint16_t h;
  std::memcpy(&h, sb.d, 2);
  const float d = fp16_to_f32(h);
  std::memcpy(&h, sb.dmin, 2);
  const float dmin = fp16_to_f32(h);
  uint8_t sc, mn;
  block::k_scale_min(sb.scales, g, &sc, &mn);
  d16 = f32_to_fp16(d * float(sc));
  m16 = f32_to_fp16(-dmin * float(mn));
  const uint8_t* qs = sb.qs + 32 * (g / 2);
  for (int j = 0; j < kGroup; ++j) q[j] = g % 2 == 0 ? (qs[j] & 0x0F) : (qs[j] >> 4);
  if constexpr (std::is_same_v<KBlock, block::Q5_K>) {
    for (int j = 0; j < kGroup; ++j) q[j] |= ((sb.qh[j] >> g) & 1) << 4;
  }
}

// The 32 codes of a Q5_0 / Q5_1 block: qs[j] holds elements j (low nibble)
// and j+16 (high), bit j of qh bit 4 of element j.
void q5_codes(const uint8_t* qh_bytes, const uint8_t* qs, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 0xf) | int(((qh >> j) & 1) << 4);
    q[j + 16] = (qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
  }
}

// Whether fmt keeps the 5-bit codes of src (int5_group copies them):
// Q5_0 into Int5Sym, Q5_1 and Q5_K into Int5Asym.
bool keeps_int5_codes(DType src, WeightFormat fmt) {
  return fmt == WeightFormat::Int5Sym ? src == DType::Q5_0
                                      : src == DType::Q5_1 || src == DType::Q5_K;
}

// Group g of a Q5_0 / Q5_1 / Q5_K row as an Int5 row without requantizing:
// the codes, d16 and (Int5Asym, m16 non-null) the minimum. Q5_0 and Q5_1:
// their own fp16 scales (lossless); Q5_K: k_group.
void int5_group(DType src, const uint8_t* srow, int g, uint16_t& d16, uint16_t* m16, int* q) {
  if (src == DType::Q5_0) {
    const auto& b = reinterpret_cast<const block::Q5_0*>(srow)[g];
    std::memcpy(&d16, b.d, 2);
    q5_codes(b.qh, b.qs, q);
  } else if (src == DType::Q5_1) {
    const auto& b = reinterpret_cast<const block::Q5_1*>(srow)[g];
    std::memcpy(&d16, b.d, 2);
    std::memcpy(m16, b.m, 2);
    q5_codes(b.qh, b.qs, q);
  } else {
    k_group(reinterpret_cast<const block::Q5_K*>(srow)[g / 8], g % 8, d16, *m16, q);
  }
}

// Group g of a row of a codebook / 3-bit type as Int8Sym without
// requantizing: the int8 codes are the source's own levels and d16 its
// scale. IQ4_NL: d and kIq4nl[q] (lossless). Q3_K: d and sc*(q-4), which
// fits int8 unless sc = -32 meets q-4 = -4 (then false: the caller
// requantizes that group). IQ4_XS: kIq4nl[q] and d*(sc-32) rounded to fp16
// (relative error <= 2^-11, as Q4_K's scales); false if that overflows fp16.
bool int8_codes(DType src, const uint8_t* srow, int g, uint16_t& d16, int* q) {
  if (src == DType::IQ4_NL) {
    const auto& b = reinterpret_cast<const block::IQ4_NL*>(srow)[g];
    std::memcpy(&d16, b.d, 2);
    for (int j = 0; j < 16; ++j) {
      q[j] = block::kIq4nl[b.qs[j] & 0x0F];
      q[j + 16] = block::kIq4nl[b.qs[j] >> 4];
    }
    return true;
  }
  if (src == DType::IQ4_XS) {
    const auto& b = reinterpret_cast<const block::IQ4_XS*>(srow)[g / 8];
    const int s = g % 8;
    uint16_t h;
    std::memcpy(&h, b.d, 2);
    const float scale = fp16_to_f32(h) * float(block::iq4_xs_scale(b, s));
    d16 = f32_to_fp16(scale);
    if (!std::isfinite(fp16_to_f32(d16))) return false;
    const uint8_t* qs = b.qs + 16 * s;
    for (int j = 0; j < 16; ++j) {
      q[j] = block::kIq4nl[qs[j] & 0x0F];
      q[j + 16] = block::kIq4nl[qs[j] >> 4];
    }
    return true;
  }
  if (src == DType::Q3_K) {
    const auto& b = reinterpret_cast<const block::Q3_K*>(srow)[g / 8];
    const int e0 = 32 * (g % 8);
    std::memcpy(&d16, b.d, 2);
    for (int j = 0; j < kGroup; ++j) {
      q[j] = block::q3_k_scale(b, (e0 + j) / 16) * block::q3_k_value(b, e0 + j);
      if (q[j] > 127 || q[j] < -127) return false;
    }
    return true;
  }
  return false;
}

// A group of a lattice / ternary / fp4 row (iq_codes.h: x = unit * qc) as
// Int8Sym without requantizing. The codes are kept as they are when they fit
// int8 (then d = unit, a fp16 times a power of two: exact unless it leaves
// fp16's range); otherwise they are divided by the smallest common factor k
// that makes them fit and d = unit * k is rounded to fp16 (relative error <=
// 2^-11, as Q4_K's scales): that moves a group's one sub-block scale (2s+1)
// into d. False when no such k exists -- the two halves of an IQ2_XS / IQ2_S
// / IQ1_M group have scales of their own -- or d overflows fp16: the caller
// requantizes the group.
bool int8_from_codes(float unit, const int32_t* qc, uint16_t& d16, int* q) {
  int amax = 0, gcd = 0;
  for (int j = 0; j < kGroup; ++j) {
    amax = std::max(amax, std::abs(qc[j]));
    gcd = std::gcd(gcd, std::abs(qc[j]));
  }
  if (amax == 0) {
    d16 = 0;
    std::fill(q, q + kGroup, 0);
    return true;
  }
  // Of the factors that fit, the one whose scale fp16 holds best (exact if
  // any: small scales fall into fp16's subnormals, where a larger k helps).
  int best = 0;
  float best_err = 0.0f;
  for (int k = 1; k <= gcd; ++k) {
    if (gcd % k != 0 || amax / k > 127) continue;
    const float scale = unit * float(k);
    const float err = std::fabs(fp16_to_f32(f32_to_fp16(scale)) - scale) / scale;
    if (best == 0 || err < best_err) best = k, best_err = err;
    if (err == 0.0f) break;
  }
  if (best == 0) return false;
  d16 = f32_to_fp16(unit * float(best));
  if (!std::isfinite(fp16_to_f32(d16))) return false;
  for (int j = 0; j < kGroup; ++j) q[j] = qc[j] / best;
  return true;
}

// Group g of an IQ4_NL / IQ4_XS / MXFP4 row as a Code4Block row: the 4-bit
// indices copied as they are (the three share Q4_0's nibble order), the
// scale as fp16 -- IQ4_NL's own d (lossless), IQ4_XS's d*(sc-32) rounded
// (<= 2^-11 relative, as Q4_K), MXFP4's 2^(e-128) (exact while fp16 holds
// it, 2^-24 .. 2^15). False when the scale leaves fp16: the caller
// requantizes the group. `nibbles` receives the 16 index bytes.
bool code4_group(DType src, const uint8_t* srow, int g, uint16_t& d16, const uint8_t*& nibbles) {
  if (src == DType::IQ4_NL) {
    const auto& b = reinterpret_cast<const block::IQ4_NL*>(srow)[g];
    std::memcpy(&d16, b.d, 2);
    nibbles = b.qs;
    return true;
  }
  if (src == DType::IQ4_XS) {
    const auto& b = reinterpret_cast<const block::IQ4_XS*>(srow)[g / 8];
    uint16_t h;
    std::memcpy(&h, b.d, 2);
    d16 = f32_to_fp16(fp16_to_f32(h) * float(block::iq4_xs_scale(b, g % 8)));
    nibbles = b.qs + 16 * (g % 8);
    return std::isfinite(fp16_to_f32(d16));
  }
  if (src == DType::MXFP4) {
    const uint8_t* b = srow + size_t(g) * 17;
    const int e = int(b[0]) - 128;
    d16 = f32_to_fp16(std::ldexp(1.0f, e));
    nibbles = b + 1;
    return e >= -24 && e <= 15;
  }
  return false;
}

// Any 32 floats as a Code4Block row: d from the largest positive and negative
// values against the codebook's extremes, each index the nearest level.
void quant_group_code4(const float* x, const int8_t* cb, uint16_t& d16, int* q) {
  int cb_pos = 0, cb_neg = 0;
  for (int k = 0; k < 16; ++k)
    cb_pos = std::max(cb_pos, int(cb[k])), cb_neg = std::min(cb_neg, int(cb[k]));
  float pos = 0.0f, neg = 0.0f;
  for (int j = 0; j < kGroup; ++j) pos = std::max(pos, x[j]), neg = std::min(neg, x[j]);
  d16 = f32_to_fp16(std::max(pos / float(cb_pos), neg / float(cb_neg)));
  const float d = fp16_to_f32(d16);
  for (int j = 0; j < kGroup; ++j) {
    int best = 0;
    for (int k = 1; k < 16; ++k) {
      if (std::fabs(d * float(cb[k]) - x[j]) < std::fabs(d * float(cb[best]) - x[j])) best = k;
    }
    q[j] = best;
  }
}

// Store the 32 codes of row i of a block in the interleaved layout (packed.h).
void put_int4_row(Int4Block& b, int i, const int* q) {
  for (int k = 0; k < 16; ++k) b.q[k / 4][i][k % 4] = uint8_t(q[k] | (q[k + 16] << 4));
}
void put_int5_row(Int5Block& b, int i, const int* q) {
  for (int k = 0; k < 16; ++k)
    b.q[k / 4][i][k % 4] = uint8_t((q[k] & 0xf) | ((q[k + 16] & 0xf) << 4));
  for (int j = 0; j < 4; ++j) {
    uint8_t h = 0;
    for (int c = 0; c < 4; ++c) {
      h = uint8_t(h | (((q[4 * c + j] >> 4) & 1) << c) |
                  (((q[16 + 4 * c + j] >> 4) & 1) << (4 + c)));
    }
    b.qh[i][j] = h;
  }
}
void put_code4_row(Code4Block& b, int i, const int* q) {
  for (int k = 0; k < 16; ++k) b.q[k / 4][i][k % 4] = uint8_t(q[k] | (q[k + 16] << 4));
}
void put_int8_row(Int8Block& b, int i, const int* q) {
  for (int k = 0; k < kGroup; ++k) b.q[k / 4][i][k % 4] = int8_t(q[k]);
}

// A float format's tiles (FloatBlock): each row's values at w[k][i] of its
// tile's blocks, as the source holds them when it is of the format's own type
// (F16 -> F16, BF16 -> Bf16: the bits copied), else rounded to nearest even.
void pack_float_rows(DType src_type, const uint8_t* src, size_t src_row_bytes,
                     std::vector<float>& row, PackedMatrix& w) {
  const bool f16 = w.format == WeightFormat::F16;
  const bool copy = src_type == (f16 ? DType::F16 : DType::BF16);
  const int groups = w.n_groups();
  for (int r = 0; r < w.n_out; ++r) {
    const int t = r / kTileRows, i = r % kTileRows;
    const uint8_t* srow = src + size_t(r) * src_row_bytes;
    auto* blocks =
        reinterpret_cast<FloatBlock*>(w.data.data() + size_t(t) * groups * w.block_bytes());
    if (!copy) dequantize_row(src_type, srow, row.data(), w.n_in);
    for (int e = 0; e < w.n_in; ++e) {
      uint16_t& dst = blocks[e / kGroup].w[e % kGroup][i];
      if (copy) {
        std::memcpy(&dst, srow + 2 * size_t(e), 2);
      } else {
        dst = f16 ? f32_to_fp16(row[size_t(e)]) : f32_to_bf16(row[size_t(e)]);
      }
    }
  }
}

}  // namespace

WeightFormat default_format_for(DType src) {
  switch (src) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q4_K:
      return WeightFormat::Int4Asym;
    case DType::Q5_0:
      return WeightFormat::Int5Sym;
    case DType::Q5_1:
    case DType::Q5_K:
      return WeightFormat::Int5Asym;
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      return WeightFormat::Nl4;
    case DType::MXFP4:
      return WeightFormat::Fp4;
    default:
      return WeightFormat::Int8Sym;
  }
}

WeightFormat float_format_for(DType src_type, const void* src, size_t n, WeightFormat want) {
  switch (src_type) {
    case DType::F16:
      return WeightFormat::F16;
    case DType::BF16:
      return WeightFormat::Bf16;
    case DType::F32: {
      if (want == WeightFormat::Bf16) return want;
      const auto* x = static_cast<const float*>(src);
      for (size_t i = 0; i < n; ++i) {
        if (std::isfinite(x[i]) && std::fabs(x[i]) > 65504.0f) return WeightFormat::Bf16;
      }
      return WeightFormat::F16;
    }
    default:
      return default_format_for(src_type);
  }
}

size_t packed_size(WeightFormat fmt, int n_out, int n_in) {
  PackedMatrix w;
  w.format = fmt;
  w.n_out = n_out;
  w.n_in = n_in;
  return size_t(w.n_tiles()) * size_t(w.n_groups()) * w.block_bytes();
}

PackedMatrix pack_matrix(DType src_type, const void* src, int n_out, int n_in, WeightFormat fmt,
                         uint8_t* dst) {
  if (n_in % kGroup != 0) {
    throw FormatError("cannot repack a weight with rows of " + std::to_string(n_in) +
                      " elements: not a multiple of " + std::to_string(kGroup));
  }
  PackedMatrix w;
  w.format = fmt;
  w.n_out = n_out;
  w.n_in = n_in;
  const int groups = n_in / kGroup;
  const size_t bytes = packed_size(fmt, n_out, n_in);
  w.data = dst ? PackedBytes(dst, bytes) : PackedBytes(bytes);
  const size_t src_row_bytes = dtype_row_bytes(src_type, size_t(n_in));
  const auto* src_bytes = static_cast<const uint8_t*>(src);
  std::vector<float> row(static_cast<size_t>(n_in));
  if (is_float(fmt)) {
    pack_float_rows(src_type, src_bytes, src_row_bytes, row, w);
    return w;
  }
  // Lattice / ternary / fp4 sources into int8: the row's integer codes.
  const bool int_codes = fmt == WeightFormat::Int8Sym && has_integer_codes(src_type);
  std::vector<float> units(int_codes ? size_t(groups) : 0);
  std::vector<int32_t> codes(int_codes ? size_t(n_in) : 0);

  for (int r = 0; r < n_out; ++r) {
    const int t = r / kTileRows, i = r % kTileRows;
    const uint8_t* srow = src_bytes + size_t(r) * src_row_bytes;
    uint8_t* tile = w.data.data() + size_t(t) * groups * w.block_bytes();
    const bool exact4 =
        fmt == WeightFormat::Int4Asym && (src_type == DType::Q4_1 || src_type == DType::Q4_0);
    const bool exact8 = fmt == WeightFormat::Int8Sym && src_type == DType::Q8_0;
    const bool codes_q4k = fmt == WeightFormat::Int4Asym && src_type == DType::Q4_K;
    const bool codes5 = is_int5(fmt) && keeps_int5_codes(src_type, fmt);
    // Code4: IQ4_NL / IQ4_XS into Nl4 and MXFP4 into Fp4 keep their indices.
    const bool codes4 =
        (fmt == WeightFormat::Nl4 && (src_type == DType::IQ4_NL || src_type == DType::IQ4_XS)) ||
        (fmt == WeightFormat::Fp4 && src_type == DType::MXFP4);
    if (int_codes) {
      integer_codes(src_type, srow, n_in, units.data(), codes.data());
      for (int e = 0; e < n_in; ++e)
        row[size_t(e)] = units[size_t(e / kGroup)] * float(codes[size_t(e)]);
    } else if (!exact4 && !exact8 && !codes_q4k &&
               !codes5) {  // (codes4: for a group to requantize)
      dequantize_row(src_type, srow, row.data(), n_in);
    }
    int q[kGroup];
    for (int g = 0; g < groups; ++g) {
      if (is_codebook(fmt)) {
        auto& b = reinterpret_cast<Code4Block*>(tile)[g];
        const uint8_t* nibbles = nullptr;
        if (codes4 && code4_group(src_type, srow, g, b.d[i], nibbles)) {
          for (int c = 0; c < 4; ++c) std::memcpy(b.q[c][i], nibbles + 4 * c, 4);
        } else {
          quant_group_code4(row.data() + g * kGroup, codebook_of(fmt), b.d[i], q);
          put_code4_row(b, i, q);
        }
      } else if (is_int5(fmt)) {
        // Int5AsymBlock is an Int5Block followed by m: the same code for both.
        uint8_t* blk = tile + size_t(g) * w.block_bytes();
        auto& b = *reinterpret_cast<Int5Block*>(blk);
        uint16_t* m =
            fmt == WeightFormat::Int5Asym ? &reinterpret_cast<Int5AsymBlock*>(blk)->m[i] : nullptr;
        if (codes5) {
          int5_group(src_type, srow, g, b.d[i], m, q);
        } else if (m) {
          quant_group_asym(row.data() + g * kGroup, 31, b.d[i], *m, q);
        } else {
          quant_group_sym(row.data() + g * kGroup, 15, 16, b.d[i], q);
        }
        put_int5_row(b, i, q);
      } else if (fmt == WeightFormat::Int4Asym) {
        auto& b = reinterpret_cast<Int4Block*>(tile)[g];
        if (exact4) {
          // Q4_1 and Q4_0 share the nibble order (low = element j, high = j+16).
          const uint8_t* sb =
              srow + size_t(g) * (src_type == DType::Q4_1 ? sizeof(Q4_1Src) : sizeof(Q4_0Src));
          uint16_t d16, m16;
          std::memcpy(&d16, sb, 2);
          if (src_type == DType::Q4_1) {
            std::memcpy(&m16, sb + 2, 2);
          } else {
            m16 = f32_to_fp16(-8.0f * fp16_to_f32(d16));  // d*(q-8) == d*q + (-8d), exact
          }
          // Q4_x byte j holds elements j (low nibble) and j+16 (high): exactly
          // the byte the interleaved layout wants at q[j/4][i][j%4].
          const uint8_t* qs = sb + (src_type == DType::Q4_1 ? 4 : 2);
          for (int c = 0; c < 4; ++c) std::memcpy(b.q[c][i], qs + 4 * c, 4);
          b.d[i] = d16;
          b.m[i] = m16;
        } else if (codes_q4k) {
          const auto* sb = reinterpret_cast<const block::Q4_K*>(srow) + g / 8;
          k_group(*sb, g % 8, b.d[i], b.m[i], q);
          put_int4_row(b, i, q);
        } else {
          quant_group_asym(row.data() + g * kGroup, 15, b.d[i], b.m[i], q);
          put_int4_row(b, i, q);
        }
      } else {
        auto& b = reinterpret_cast<Int8Block*>(tile)[g];
        if (exact8) {
          const uint8_t* sb = srow + size_t(g) * sizeof(Q8_0Src);
          std::memcpy(&b.d[i], sb, 2);
          for (int c = 0; c < 8; ++c) std::memcpy(b.q[c][i], sb + 2 + 4 * c, 4);
        } else if (int_codes
                       ? int8_from_codes(units[size_t(g)], codes.data() + g * kGroup, b.d[i], q)
                       : int8_codes(src_type, srow, g, b.d[i], q)) {
          put_int8_row(b, i, q);
        } else {
          quant_group_sym(row.data() + g * kGroup, 127, 0, b.d[i], q);
          put_int8_row(b, i, q);
        }
      }
    }
  }
  return w;
}

void unpack_row(const PackedMatrix& w, int r, float* dst) {
  const int t = r / kTileRows, i = r % kTileRows;
  const uint8_t* tile = w.tile(t);
  for (int g = 0; g < w.n_groups(); ++g) {
    float* out = dst + g * kGroup;
    if (is_float(w.format)) {
      const auto& b = reinterpret_cast<const FloatBlock*>(tile)[g];
      for (int k = 0; k < kGroup; ++k)
        out[k] = w.format == WeightFormat::F16 ? fp16_to_f32(b.w[k][i]) : bf16_to_f32(b.w[k][i]);
    } else if (is_codebook(w.format)) {
      const auto& b = reinterpret_cast<const Code4Block*>(tile)[g];
      const int8_t* cb = codebook_of(w.format);
      const float d = fp16_to_f32(b.d[i]);
      for (int k = 0; k < kGroup; ++k) out[k] = d * float(cb[code4_index(b, i, k)]);
    } else if (is_int5(w.format)) {
      const uint8_t* blk = tile + size_t(g) * w.block_bytes();
      const auto& b = *reinterpret_cast<const Int5Block*>(blk);
      const float d = fp16_to_f32(b.d[i]);
      if (w.format == WeightFormat::Int5Asym) {
        const float m = fp16_to_f32(reinterpret_cast<const Int5AsymBlock*>(blk)->m[i]);
        for (int k = 0; k < kGroup; ++k) out[k] = d * float(int5_code(b, i, k)) + m;
      } else {
        for (int k = 0; k < kGroup; ++k) out[k] = d * float(int5_code(b, i, k) - 16);
      }
    } else if (w.format == WeightFormat::Int4Asym) {
      const auto& b = reinterpret_cast<const Int4Block*>(tile)[g];
      const float d = fp16_to_f32(b.d[i]), m = fp16_to_f32(b.m[i]);
      for (int k = 0; k < kGroup; ++k) out[k] = d * float(int4_code(b, i, k)) + m;
    } else {
      const auto& b = reinterpret_cast<const Int8Block*>(tile)[g];
      const float d = fp16_to_f32(b.d[i]);
      for (int k = 0; k < kGroup; ++k) out[k] = d * float(int8_value(b, i, k));
    }
  }
}

void QuantizedActs::resize(int new_rows, int new_n) {
  rows = new_rows;
  n_in = new_n;
  const size_t nq = size_t(new_rows) * size_t(new_n);
  const size_t ng = nq / kGroup;
  if (q.size() < nq) q = AlignedBuffer<int8_t>(nq);
  if (d.size() < ng) d = AlignedBuffer<float>(ng);
  if (s.size() < ng) s = AlignedBuffer<float>(ng);
  if (isum.size() < ng) isum = AlignedBuffer<int32_t>(ng);
}

}  // namespace tern::kernels
