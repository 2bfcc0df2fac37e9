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
//
// K-quants split a 256-element super-block into sub-blocks of 32 (Q4_K, Q5_K:
// 6-bit scale and min each, packed into 12 bytes) or 16 (Q6_K: an int8 scale
// each). Sub-block s always covers elements [32s, 32s+32) resp. [16s, 16s+16).
#include <cstdint>
#include <span>
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

}  // namespace block

// src: n elements of `type` (n / block_elems blocks) -> dst: float[n].
// n must be a multiple of the type's block size and can_dequantize(type) true
// (asserted; in release an unsupported type fills dst with NaN).
// Types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);
bool can_dequantize(DType type);

// src: float[n] -> dst: n elements of `type`. Round-to-nearest with the same
// block math as ggml's reference quantizers (no search for better scales).
// n must be a multiple of the block size and can_quantize(type) true.
// Types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1.
void quantize_row_ref(DType type, const float* src, void* dst, int64_t n);
bool can_quantize(DType type);

// values (n) -> the bytes of n elements of `type`, by quantize_row_ref: for
// writing test models and fuzz seeds (GgufWriter::add_tensor). Throws
// InvalidArgument when can_quantize(type) is false or n is not a multiple of
// the block size.
std::vector<uint8_t> quantize_ref(DType type, std::span<const float> values);

}  // namespace tern::kernels
