#pragma once
// The lattice (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M), ternary
// (TQ1_0, TQ2_0), fp4 (MXFP4, NVFP4) and 1/2-bit (Q1_0, Q2_0) formats as
// integers: every value of such a row is an integer code times one scale per
// group of 32 elements,
//
//   x[32g + j] = unit[g] * q[32g + j]     exactly (as real numbers),
//
// with unit[g] a fp16 super-scale times a power of two (or MXFP4's E8M0
// scale) and q the product of the grid value, its sign and the sub-block's
// small integer scale. Both factors have few significant bits, so the float
// product is exact too: the reference dequantizer is unit * q, bit for bit
// llama.cpp's, and the repack to int8 (pack.cpp) starts from the same codes.
//
//   type     block bytes  layout (little-endian)                        unit   q
//   IQ2_XXS   256   66   d:f16 qs:u16[32]                                 d/8   (2s+1)*g*sign
//   IQ2_XS    256   74   d:f16 qs:u16[32] scales:u8[8]                    d/8   (2s+1)*g*sign
//   IQ2_S     256   82   d:f16 qs:u8[32] signs:u8[32] qh:u8[8] scales:u8[8]  d/8 (2s+1)*g*sign
//   IQ3_XXS   256   98   d:f16 qs:u8[64] scales_signs:u32[8]              d/4   (2s+1)*g*sign
//   IQ3_S     256  110   d:f16 qs:u8[64] qh:u8[8] signs:u8[32] scales:u8[4]  d   (2s+1)*g*sign
//   IQ1_S     256   50   d:f16 qs:u8[32] qh:u16[8]                        d/8   (2s+1)*(8g+-1)
//   IQ1_M     256   56   qs:u8[32] qh:u8[16] scales:u16[4] (d in their top nibbles)  d/8  as IQ1_S
//   TQ1_0     256   54   qs:u8[48] (5 base-3 digits a byte) qh:u8[4] d:f16  d     -1, 0, 1
//   TQ2_0     256   66   qs:u8[64] (2 bits each) d:f16                    d     -1, 0, 1, 2
//   MXFP4      32   17   e:E8M0 qs:u8[16] (nibbles as IQ4_NL)             2^(e-128)  kValuesFp4
//   NVFP4      64   36   d:UE4M3[4] qs:u8[32] (per 16: byte 8s+j holds elements 16s+j, +8)
//                                                                     2^(e-11)  kValuesFp4*m*2^k
//   Q1_0      128   18   d:f16 qs:u8[16] (element j: bit j%8 of qs[j/8])   d     -1 (bit 0), 1
//   Q2_0       64   18   d:f16 qs:u8[16] (element j: bits 2(j%4).. of qs[j/4])  d  q-1: -1..2
//
// NVFP4 gives each 16 elements an unsigned E4M3 scale (nvfp4_scale below:
// m * 2^(e-11), halved like MXFP4's so the doubled e2m1 values apply); a
// group of 32 takes the unit of its half with the smaller exponent, the
// other half's codes carry the difference (k): |q| <= 12*15*2^14.
// g is a grid value (iq_grids.h), s a 4-bit (IQ1: 3-bit) sub-block scale:
// one per 32 elements (IQ2_XXS, IQ3_XXS, IQ3_S, IQ1_S) or per 16 (IQ2_XS,
// IQ2_S, IQ1_M: the two halves of a group of 32 have scales of their own).
// |q| <= 31*62 = 1922 for the lattice types.
#include <cstdint>

#include "tern/core/dtype.h"

namespace tern::kernels {

// True for the thirteen types above.
bool has_integer_codes(DType t);

// An NVFP4 scale byte (llama.cpp's ggml_ue4m3_to_fp32, halved) as m * 2^(e-11):
// bits 3..6 the exponent x, bits 0..2 the mantissa; m = 8 + mantissa and
// e = x for x > 0, m = mantissa and e = 1 for the subnormals (x = 0). Bit 7
// is ignored and 0x7F (E4M3's NaN) reads as zero, as llama.cpp reads them.
struct Ue4m3 {
  int m;  // 0..15
  int e;  // 1..15
};
inline Ue4m3 nvfp4_scale(uint8_t s) {
  if (s == 0x7F) return {0, 1};
  const int x = (s >> 3) & 15, man = s & 7;
  return x == 0 ? Ue4m3{man, 1} : Ue4m3{8 + man, x};
}

// src: n elements of type t (n a multiple of its block size; t one of the
// types above) -> unit: float[n/32], q: int32[n].
void integer_codes(DType t, const uint8_t* src, int64_t n, float* unit, int32_t* q);

}  // namespace tern::kernels
