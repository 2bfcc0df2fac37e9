#pragma once
// Reference (scalar) dequantizers and quantizers for the ggml block formats.
//
// These are the oracle every fast kernel is tested against: they favour
// clarity over speed. A row of n elements of a block type is n / block_elems
// consecutive blocks. All multi-byte fields are little-endian and blocks are
// packed with no padding, so the structs below contain bytes only (alignment
// 1): a block may start at any address.
//
//   type  block  bytes  layout                                          value
//   Q8_0    32     34   d:f16 qs:i8[32]                                 d*q
//   Q4_0    32     18   d:f16 qs:u8[16]  (elem j: low nibble of qs[j],   d*(q-8)
//                                         elem j+16: high nibble)
//   Q4_1    32     20   d:f16 m:f16 qs:u8[16]  (nibbles as Q4_0)        d*q + m
//   Q5_0    32     22   d:f16 qh:u32 qs:u8[16]  (bit j of qh is bit 4   d*(q-16)
//                                         of elem j; nibbles as Q4_0)
//   Q5_1    32     24   d:f16 m:f16 qh:u32 qs:u8[16]                   d*q + m
//   Q4_K   256    144   d:f16 dmin:f16 scales:u8[12] qs:u8[128]         d*sc*q - dmin*mn
//   Q5_K   256    176   d:f16 dmin:f16 scales:u8[12] qh:u8[32] qs:u8[128]
//   Q6_K   256    210   ql:u8[128] qh:u8[64] scales:i8[16] d:f16        d*sc*(q-32)
//   Q2_K   256     84   scales:u8[16] qs:u8[64] d:f16 dmin:f16          d*sc*q - dmin*mn
//   Q3_K   256    110   hmask:u8[32] qs:u8[64] scales:u8[12] d:f16      d*(sc-32)*(q-4)
//   IQ4_NL  32     18   d:f16 qs:u8[16]  (nibbles as Q4_0)              d*kIq4nl[q]
//   IQ4_XS 256    136   d:f16 scales_h:u16 scales_l:u8[4] qs:u8[128]    d*(sc-32)*kIq4nl[q]
//
// K-quants split a 256-element super-block into sub-blocks of 32 (Q4_K, Q5_K:
// 6-bit scale and min each, packed into 12 bytes) or 16 (Q6_K: an int8 scale
// each). Sub-block s always covers elements [32s, 32s+32) resp. [16s, 16s+16).
//
// Q2_K and Q3_K have 16 sub-blocks of 16 and store 2-bit codes four to a byte:
// element e = 128h + 32j + l (half h = 0..1, j = 0..3, l = 0..31) sits in bits
// 2j..2j+1 of qs[32h + l]. Q2_K: scales[s] = sc (low nibble) | mn << 4, q in
// 0..3. Q3_K adds a third bit, bit 4h+j of hmask[l]; a set bit means q - 4 is
// q2 itself (0..3), a clear one q2 - 4 (-4..-1). Its 6-bit scales: low 4 bits
// in scales[s] (s < 8) or scales[s-8] >> 4 (s >= 8), top 2 bits in bits
// 2(s/4)..2(s/4)+1 of scales[8 + s%4]; the scale is that value minus 32.
//
// IQ4_NL / IQ4_XS store 4-bit indices into the non-linear codebook kIq4nl.
// IQ4_XS has 8 sub-blocks of 32, each laid out like one IQ4_NL block (qs[16s
// + j] holds elements j and j+16 of sub-block s) with a 6-bit scale: low 4
// bits in nibble s%2 of scales_l[s/2], top 2 in bits 2s..2s+1 of scales_h.
//
// The lattice (IQ3, IQ2, IQ1), ternary (TQ1_0, TQ2_0), fp4 (MXFP4, NVFP4) and
// 1/2-bit (Q1_0, Q2_0) layouts are described in src/kernels/iq_codes.h,
// which decodes them to integer codes.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tern/core/dtype.h"

namespace tern::kernels {

namespace block {

struct Q8_0 {
  uint8_t d[2];
  int8_t qs[32];
};
struct Q4_0 {
  uint8_t d[2];
  uint8_t qs[16];
};
struct Q4_1 {
  uint8_t d[2];
  uint8_t m[2];
  uint8_t qs[16];
};
struct Q5_0 {
  uint8_t d[2];
  uint8_t qh[4];
  uint8_t qs[16];
};
struct Q5_1 {
  uint8_t d[2];
  uint8_t m[2];
  uint8_t qh[4];
  uint8_t qs[16];
};
struct Q4_K {
  uint8_t d[2];
  uint8_t dmin[2];
  uint8_t scales[12];
  uint8_t qs[128];
};
struct Q5_K {
  uint8_t d[2];
  uint8_t dmin[2];
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct Q6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint8_t d[2];
};

static_assert(sizeof(Q8_0) == 34 && sizeof(Q4_0) == 18 && sizeof(Q4_1) == 20);
static_assert(sizeof(Q5_0) == 22 && sizeof(Q5_1) == 24);
struct Q2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint8_t d[2];
  uint8_t dmin[2];
};
struct Q3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint8_t d[2];
};
struct IQ4_NL {
  uint8_t d[2];
  uint8_t qs[16];
};
struct IQ4_XS {
  uint8_t d[2];
  uint8_t scales_h[2];
  uint8_t scales_l[4];
  uint8_t qs[128];
};

static_assert(sizeof(Q2_K) == 84 && sizeof(Q3_K) == 110);
static_assert(sizeof(IQ4_NL) == 18 && sizeof(IQ4_XS) == 136);
static_assert(sizeof(Q4_K) == 144 && sizeof(Q5_K) == 176 && sizeof(Q6_K) == 210);

// Scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block: the
// 12 bytes hold eight 6-bit scales and eight 6-bit mins.
//   j < 4:  sc = s[j] & 63,                        mn = s[j+4] & 63
//   j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4, mn = (s[j+4] >> 4) | (s[j] >> 6) << 4
inline void k_scale_min(const uint8_t* s, int j, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = uint8_t((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    *mn = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// The IQ4_NL / IQ4_XS codebook: index 0..15 -> int8 level.
inline constexpr int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

// The 2-bit code (0..3) of element e (0..255) of a Q2_K / Q3_K super-block.
inline int k_q2(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
// The signed 3-bit value q - 4 (-4..3) of element e of a Q3_K super-block.
inline int q3_k_value(const Q3_K& b, int e) {
  const int high = (b.hmask[e % 32] >> (4 * (e / 128) + (e % 128) / 32)) & 1;
  return k_q2(b.qs, e) - (high ? 0 : 4);
}
// The scale of sub-block s (0..15) of a Q3_K super-block, -32..31.
inline int q3_k_scale(const Q3_K& b, int s) {
  const int lo = s < 8 ? (b.scales[s] & 0x0F) : (b.scales[s - 8] >> 4);
  const int hi = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}
// The scale of sub-block s (0..7) of an IQ4_XS super-block, -32..31.
inline int iq4_xs_scale(const IQ4_XS& b, int s) {
  const int lo = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
  const int scales_h = b.scales_h[0] | (b.scales_h[1] << 8);
  const int hi = (scales_h >> (2 * s)) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace block

// src: n elements of `type` (n / block_elems blocks) -> dst: float[n].
// n must be a multiple of the type's block size and can_dequantize(type) true
// (asserted; in release an unsupported type fills dst with NaN).
// Types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS, and the lattice, ternary, fp4 and 1/2-bit
// types IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, TQ1_0, TQ2_0,
// MXFP4, NVFP4, Q1_0, Q2_0 (their layouts: src/kernels/iq_codes.h).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);
bool can_dequantize(DType type);
// The names of the types can_dequantize accepts, for messages: "F32, F16, ...".
std::string loadable_types();

// src: float[n] -> dst: n elements of `type`. n must be a multiple of the
// block size and can_quantize(type) true. Deterministic scalar code (the same
// bytes on every ISA), no importance matrix:
// - F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: round-to-nearest with
//   ggml's reference block math;
// - Q2_K, Q3_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0: plain
//   round-to-nearest, no scale search (the last six write the bytes ggml's
//   reference quantizers write);
// - Q4_K, Q5_K, Q6_K and the lattice types IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS,
//   IQ2_S, IQ1_S, IQ1_M: a few scale candidates per sub-block, refitted by
//   least squares, and the nearest grid point per chunk (quantize_lowbit.h).
void quantize_row_ref(DType type, const float* src, void* dst, int64_t n);
bool can_quantize(DType type);

// values (n) -> the bytes of n elements of `type`, by quantize_row_ref: for
// writing test models and fuzz seeds (GgufWriter::add_tensor). Throws
// InvalidArgument when can_quantize(type) is false or n is not a multiple of
// the block size.
std::vector<uint8_t> quantize_ref(DType type, std::span<const float> values);

}  // namespace tern::kernels
