#pragma once
// Engine-native weight layout: every linear weight is repacked once at load
// into int4 (asymmetric, per group of 32 along the reduction axis) or int8
// (symmetric, per group of 32). Activations are quantized to int8 per group on
// the fly (see quantize_activations), so the hot loops are integer dot products.
//
// Layout (shared by the scalar reference and the fast kernels):
//   output channels are grouped into tiles of kTileRows = 8 rows. A tile stores,
//   for each group g of 32 inputs, one Block; tiles follow one another:
//   (n_out/8 tiles, n_in/32 groups, Block). The last tile is padded with zero
//   rows when n_out is not a multiple of 8.
//
//   Int4Block (160 bytes, the same 5 bits a weight as GGUF Q4_1):
//     d[8], m[8]  fp16 scale and minimum of each row: w = d*q + m
//     q[4][8][4]  q[c][i][j]: low nibble = element 4c+j of row i,
//                             high nibble = element 16+4c+j of row i
//   Int8Block (272 bytes):
//     d[8]        fp16 scale of each row: w = d*q
//     q[8][8][4]  q[c][i][j] = element 4c+j of row i
//   Int5Block (176 bytes, the same 5.5 bits a weight as GGUF Q5_0):
//     q[4][8][4]  the low 4 bits of each 5-bit code, as Int4Block's q
//     qh[8][4]    qh[i][j]: bit c = bit 4 of element 4c+j of row i,
//                 bit 4+c = bit 4 of element 16+4c+j (c = 0..3)
//     d[8]        fp16 scale of each row: w = d*(code - 16)
//   qh is laid out like one chunk of q, so the bits of chunk c move to bit 4
//   of the very byte that holds their low nibbles with one shift and mask.
//   Int5AsymBlock (192 bytes, 6 bits a weight, GGUF Q5_1's): an Int5Block
//   (same q, qh, d at the same offsets) followed by
//     m[8]        fp16 minimum of each row: w = d*code + m
//   Int5Sym's w = d*(code - 16) is the case m = -16 d, so both formats run
//   the same kernels (templates over the block type); only where the minimum
//   term's m comes from differs: computed from d, or loaded. 192 bytes is
//   three whole cache lines.
//   Code4Block (144 bytes, the same 4.5 bits a weight as GGUF IQ4_NL), for
//   the 4-bit codebook formats Nl4 (IQ4_NL's levels) and Fp4 (MXFP4's e2m1
//   values, doubled):
//     q[4][8][4]  indices into the format's codebook (codebook_of), nibbles
//                 as Int4Block's
//     d[8]        fp16 scale of each row: w = d*codebook[q]
//   The kernels look the 16-entry int8 codebook up in registers (vpshufb on
//   x86, tbl on NEON) and go on as for Int8Block: a W8A8 dot product at the
//   bytes of a 4-bit format.
//
// Why this interleave: the x86 integer dot products (vpmaddubsw + vpmaddwd on
// AVX2, vpdpbusd on AVX-VNNI) reduce 4 adjacent bytes into one 32-bit lane. With
// 4 bytes of each of the 8 rows side by side, one 32-byte load holds 4 inputs of
// all 8 rows, the 4 matching activation bytes are a single broadcast, and the 8
// lanes of the int32 result are the 8 rows of the tile -- no horizontal sums and
// no shuffles anywhere in the inner loop, and the fp16 row scales d[8] / m[8]
// convert (vcvtph2ps) straight into the 8 lanes they scale.
//
// Micro-kernels (AVX2, 16 ymm registers; see gemm_x86.inl):
//   GEMM, R = 4 activation rows x 8 output channels (one tile). Per group it
//   unpacks one 32-byte chunk at a time (2 registers: low and high nibbles)
//   and feeds it to all 4 rows, whose int16 partial sums (4 registers) and fp32
//   accumulators (4 registers) stay in registers, with d, m and 2 temporaries:
//   14 registers. R = 4 is the most rows that fit; more rows would spill the
//   accumulators, fewer would unpack each chunk for fewer rows. A task applies
//   each tile to all its rows (up to 64) while the tile sits in L1, so a batch
//   reads every weight from memory once per step.
//   GEMV (decode, one row): 1 row x 4 tiles (32 channels). With a single row a
//   tile has one accumulator chain (two dependent fmas a group); four tiles
//   give four independent chains, share each activation broadcast, and stream
//   640 contiguous bytes a group. Memory bound.
//   AVX-512 VNNI (32 zmm registers, gemm_avx512.cpp): two adjacent tiles in
//   one zmm, R = 8 rows x 16 channels, 22 registers; same layout.
// Measured on Sapphire Rapids (one core): GEMM 9 cycles per row x tile x group
// (256 MACs) on AVX2 (the vpmaddubsw/vpaddw/fp32-epilogue uops bound it at ~8),
// 7.5 on AVX-VNNI, 5.1 on AVX-512 VNNI; the GEMV runs at ~45 GB/s from L2.
//
// Int5Sym (GEMV and GEMM alike) unpacks the high bits into bit 4 of the
// nibbles (shift, and, or: three extra operations a 32-byte chunk) and feeds
// the 0..31 codes to the same unsigned-by-signed dot products as int4; the
// -16 offset is the int4 minimum term with m = -16 d. Int5Asym is the same
// code with m loaded from the block. On AVX2, vpmaddubsw
// pairs of 5-bit codes reach 2*31*127 = 7874, so the int16 partial sums are
// widened every chunk instead of every group.
//
// fp16 scales keep the bytes a weight at Q4_1's 0.625 (int4), Q5_0's 0.6875
// (int5), Q5_1's 0.75 (int5 asym) and Q8_0's 1.0625 (int8): decode reads every
// weight once per token, so bytes are time. The conversions Q4_1 -> Int4Asym,
// Q4_0 -> Int4Asym (m = -8d, exact in fp16), Q5_0 -> Int5Sym, Q5_1 -> Int5Asym
// and Q8_0 -> Int8Sym are lossless (Q5_0 keeps Int5Sym: 16 bytes a tile and
// group fewer, and its m = -16 d costs nothing to derive). Q4_K -> Int4Asym and
// Q5_K -> Int5Asym keep every 4- / 5-bit code and only round each 32-group's
// scale d*sc and minimum -dmin*mn to fp16 (relative error <= 2^-11 each,
// ~0.05%, while the products stay within fp16's range, as real weights'
// do). IQ4_NL -> Nl4 copies the indices and the block's fp16 scale:
// lossless; IQ4_XS -> Nl4 copies the indices and rounds each 32-group's scale
// d*(sc-32) to fp16 (<= 2^-11 relative, as Q4_K); MXFP4 -> Fp4 copies the
// indices under 2^(e-128) as fp16: lossless while fp16 holds it (a group whose
// scale it cannot hold is requantized into the codebook). (Forced to Int8Sym,
// IQ4_NL and IQ4_XS store their levels as int8 codes under the same scales,
// equally exact.) Q3_K -> Int8Sym stores sc*(q-4) under the super-block's d:
// lossless (the one product that does not fit int8, sc = -32 with q-4 = -4,
// sends its group to the requantization below). Q2_K's groups mix two (scale,
// min) pairs, which neither int4 nor int8 can carry exactly: it is requantized
// to Int8Sym (error <= amax/254 a weight, a few percent of Q2_K's own step of
// range/3). The lattice, ternary and fp4 types go to Int8Sym from their integer
// codes (src/kernels/iq_codes.h): TQ1_0, TQ2_0, Q1_0, Q2_0 (and MXFP4 when
// forced) losslessly; NVFP4 as IQ2_XS below;
// IQ3_XXS, IQ3_S, IQ2_XXS and IQ1_S keep their grid codes and round each
// group's scale to fp16 (2^-11 relative); IQ2_XS, IQ2_S and IQ1_M, whose
// half-groups of 16 have scales of their own, keep their codes where both
// halves fit int8 under one scale and are requantized elsewhere. Every other
// source is dequantized and requantized:
// Q6_K into Int8Sym (per-32 amax/127 scale; the added error is at
// most half an int8 step, amax/254, against the source's own step of about
// range/63, so a few percent of the source's quantization noise), anything
// else likewise. (Forced to Int8Sym, Q5_1 and Q5_K are requantized so too.)
//
// The float formats F16 and Bf16 (--weights f16 / bf16: an unquantized model
// at its own quality). No scales and no int8 activations: weights are 16-bit
// floats and the activations stay fp32 (QuantizedActs::x), so the only
// rounding is fp32 accumulation. 2 bytes a weight.
//   FloatBlock (512 bytes): w[k][i] = element k of the group of row i, as
//                           IEEE fp16 (F16) or bfloat16 (Bf16)
//   so a tile is its 8 rows transposed: n_in vectors of 8 values, element e
//   of row i at half e*8 + i of the tile. One k's 8 values (16 bytes) convert
//   straight into the 8 lanes of a ymm (vcvtph2ps; bf16: zero-extend and
//   shift left 16) or two q registers (fcvtl / fcvtl2; bf16: shll / shll2),
//   one lane an output row, and multiply a broadcast of activation e (NEON:
//   fmla by element from a register of 4 activations). Every lane is one
//   output accumulated by fma over e in order, exactly as the scalar twin, so
//   all tables agree bit for bit (the tests still allow a tolerance, so a
//   kernel may split the sum). No interleave of k: fp32 lanes hold one
//   product each, there is no 4-byte dot product to feed; AVX-512 puts two
//   tiles side by side in a zmm (16 lanes, one broadcast) as the int kernels
//   do. bf16 stays bf16 (it has fp32's exponent range; fp16 cannot hold its
//   values in general), converted with a shift; AVX512_BF16's vdpbf16ps
//   would round the activations to bf16 too, which is the precision the
//   format exists to keep, so it is not used. Sources: F16 -> F16 and
//   BF16 -> Bf16 are lossless; F32 rounds to the format asked for (f16: 11
//   significant bits; a tensor with a value beyond fp16's range goes to Bf16
//   instead, see float_format_for).
#include <cstddef>
#include <cstdint>
#include <utility>

#include "tern/core/aligned.h"
#include "tern/core/dtype.h"

namespace tern::kernels {

constexpr int kGroup = 32;    // quantization group along the reduction axis
constexpr int kTileRows = 8;  // output channels per tile

// Int5Asym last: the values of the others are part of a model's fingerprint
// (engine.cpp), which the prefix cache on disk is kept under.
enum class WeightFormat : uint8_t { Int4Asym, Int8Sym, Int5Sym, Nl4, Fp4, F16, Bf16, Int5Asym };

struct Int4Block {
  uint16_t d[kTileRows];  // fp16
  uint16_t m[kTileRows];  // fp16
  uint8_t q[4][kTileRows][4];
};
struct Int8Block {
  uint16_t d[kTileRows];  // fp16
  int8_t q[8][kTileRows][4];
};
struct Int5Block {
  uint8_t q[4][kTileRows][4];
  uint8_t qh[kTileRows][4];
  uint16_t d[kTileRows];  // fp16
};
struct Int5AsymBlock : Int5Block {
  uint16_t m[kTileRows];  // fp16
};
struct Code4Block {
  uint8_t q[4][kTileRows][4];
  uint16_t d[kTileRows];  // fp16
};
static_assert(sizeof(Int4Block) == 160 && sizeof(Int8Block) == 272 && sizeof(Int5Block) == 176);
static_assert(sizeof(Int5AsymBlock) == 192);
struct FloatBlock {
  uint16_t w[kGroup][kTileRows];  // fp16 (F16) or bfloat16 (Bf16) bits
};
static_assert(sizeof(Code4Block) == 144 && sizeof(FloatBlock) == 512);

// The formats whose weights are 16-bit floats multiplied by fp32 activations.
inline bool is_float(WeightFormat f) {
  return f == WeightFormat::F16 || f == WeightFormat::Bf16;
}

// The formats whose tiles are Int5Block (Int5Sym) or Int5AsymBlock.
inline bool is_int5(WeightFormat f) {
  return f == WeightFormat::Int5Sym || f == WeightFormat::Int5Asym;
}

// The codebooks of the Code4Block formats: index 0..15 -> int8 level.
inline constexpr int8_t kCodebookNl4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr int8_t kCodebookFp4[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};
inline bool is_codebook(WeightFormat f) {
  return f == WeightFormat::Nl4 || f == WeightFormat::Fp4;
}
inline const int8_t* codebook_of(WeightFormat f) {
  return f == WeightFormat::Fp4 ? kCodebookFp4 : kCodebookNl4;
}

// The 4-bit code of element k (0..31) of row i in an Int4Block.
inline int int4_code(const Int4Block& b, int i, int k) {
  const uint8_t byte = b.q[(k % 16) / 4][i][k % 4];
  return k < 16 ? (byte & 0xf) : (byte >> 4);
}
// The 5-bit code (0..31) of element k (0..31) of row i in an Int5Block (or
// an Int5AsymBlock: the same codes).
inline int int5_code(const Int5Block& b, int i, int k) {
  const uint8_t byte = b.q[(k % 16) / 4][i][k % 4];
  const int c = (k % 16) / 4 + (k < 16 ? 0 : 4);
  const int high = (b.qh[i][k % 4] >> c) & 1;
  return (k < 16 ? (byte & 0xf) : (byte >> 4)) | (high << 4);
}
// The codebook index (0..15) of element k (0..31) of row i in a Code4Block.
inline int code4_index(const Code4Block& b, int i, int k) {
  const uint8_t byte = b.q[(k % 16) / 4][i][k % 4];
  return k < 16 ? (byte & 0xf) : (byte >> 4);
}
// The int8 value of element k (0..31) of row i in an Int8Block.
inline int int8_value(const Int8Block& b, int i, int k) {
  return b.q[k / 4][i][k % 4];
}

// One region of memory for many packed matrices (a model's weights), backed
// by transparent huge pages where the OS allows (Linux, THP "madvise" or
// "always"; otherwise plain pages). Decode streams every weight once a
// token: with 4 KiB pages each page costs a TLB miss (a two-dimensional page
// walk in a VM) and the hardware prefetchers stop at every page boundary,
// and small matrices allocated one by one never get huge pages at all.
// Slices are handed out in order and live as long as the arena.
class WeightArena {
 public:
  WeightArena() = default;
  explicit WeightArena(size_t bytes);  // zeroed; throws std::bad_alloc
  ~WeightArena();
  WeightArena(WeightArena&& o) noexcept;
  WeightArena& operator=(WeightArena&& o) noexcept;
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;

  // The next `bytes` of the region (64-byte aligned, zeroed); asserts that
  // they fit. Not thread-safe: slices are planned before packing.
  uint8_t* take(size_t bytes);
  size_t size() const { return size_; }

 private:
  uint8_t* base_ = nullptr;  // the mapping (huge-page aligned inside)
  size_t mapped_ = 0;        // bytes mapped at base_
  uint8_t* begin_ = nullptr;
  size_t size_ = 0, used_ = 0;
};

// The bytes of a packed matrix: a buffer of its own, or a slice of a
// WeightArena that outlives it.
class PackedBytes {
 public:
  PackedBytes() = default;
  explicit PackedBytes(size_t n) : own_(n), p_(own_.data()), n_(n) {}
  PackedBytes(uint8_t* slice, size_t n) : p_(slice), n_(n) {}
  PackedBytes(PackedBytes&& o) noexcept
      : own_(std::move(o.own_)), p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PackedBytes& operator=(PackedBytes&& o) noexcept {
    own_ = std::move(o.own_);
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
    return *this;
  }
  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  AlignedBuffer<uint8_t> own_;  // empty for a slice
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

// A repacked (n_out, n_in) weight matrix: y = W x computes n_out outputs from n_in inputs.
struct PackedMatrix {
  WeightFormat format = WeightFormat::Int4Asym;
  int n_out = 0;  // output channels (rows of W)
  int n_in = 0;   // reduction length (multiple of kGroup)
  PackedBytes data;

  int n_tiles() const { return (n_out + kTileRows - 1) / kTileRows; }
  int n_groups() const { return n_in / kGroup; }
  size_t block_bytes() const {
    switch (format) {
      case WeightFormat::Int4Asym:
        return sizeof(Int4Block);
      case WeightFormat::Int5Sym:
        return sizeof(Int5Block);
      case WeightFormat::Int5Asym:
        return sizeof(Int5AsymBlock);
      case WeightFormat::Nl4:
      case WeightFormat::Fp4:
        return sizeof(Code4Block);
      case WeightFormat::F16:
      case WeightFormat::Bf16:
        return sizeof(FloatBlock);
      default:
        return sizeof(Int8Block);
    }
  }
  const uint8_t* tile(int t) const { return data.data() + size_t(t) * n_groups() * block_bytes(); }
  size_t bytes() const { return data.size(); }
};

// Which packed format a GGUF source type maps to by default: 4-bit sources
// stay 4-bit (IQ4_NL and IQ4_XS as Nl4, MXFP4 as Fp4: their codes kept), the
// 5-bit ones keep their 5-bit codes (Q5_0 as Int5Sym, Q5_1 and Q5_K as
// Int5Asym), everything else becomes int8.
WeightFormat default_format_for(DType src);

// The format of a float source (F16, BF16, F32) when the user asked for float
// tiles (want: F16 or Bf16): F16 stays F16 and BF16 stays Bf16 whatever was
// asked (both lossless; converting either to the other would round); F32
// takes `want`, except that an F32 tensor holding a finite value beyond
// fp16's range (|x| > 65504) goes to Bf16. Quantized sources: their
// default_format_for. src: n (elements) values of the tensor, read only for F32.
WeightFormat float_format_for(DType src_type, const void* src, size_t n, WeightFormat want);

// Repack a GGUF tensor with rows of n_in elements (src: n_out rows of
// dtype_row_bytes(src_type, n_in) bytes). Q4_1 / Q4_0 -> Int4Asym,
// Q5_0 -> Int5Sym, Q5_1 -> Int5Asym and Q8_0 -> Int8Sym are exact, Q4_K ->
// Int4Asym and Q5_K -> Int5Asym exact up to fp16 scales; other conversions
// dequantize and requantize (lossy).
// `dst`: packed_size() zeroed bytes to pack into, 64-byte aligned, that
// outlive the matrix (a WeightArena slice); null: a buffer of its own.
PackedMatrix pack_matrix(DType src_type, const void* src, int n_out, int n_in, WeightFormat fmt,
                         uint8_t* dst = nullptr);

// Bytes of a packed (n_out, n_in) matrix in format fmt (n_in a multiple of kGroup).
size_t packed_size(WeightFormat fmt, int n_out, int n_in);

// Read back row r as floats (n_in values): the exact values the kernels use.
void unpack_row(const PackedMatrix& w, int r, float* dst);

// Activations quantized per row, per group of 32: x ~= d * q. For Int4Asym
// and Int5 weights the kernels also need s = d * sum(q) per group (the
// minimum's term).
// Scales stay f32 (llama.cpp rounds them to fp16, which loses accuracy to the
// cancellation between the Int4Asym minimum term and the scale term).
struct QuantizedActs {
  int rows = 0;
  int n_in = 0;
  AlignedBuffer<int8_t> q;      // (rows, n_in)
  AlignedBuffer<float> d;       // (rows, n_in/32)
  AlignedBuffer<float> s;       // (rows, n_in/32)
  AlignedBuffer<int32_t> isum;  // (rows, n_in/32) sum(q), exact: for kernels that offset int8
                                // weights to unsigned, sum((w+128) q) - 128 sum(q) = sum(w q)
  // (rows, n_in) the fp32 rows these were quantized from, read by the float
  // formats (F16, Bf16). The caller's buffer, not a copy: it must hold the
  // same values while the acts are in use (quantize_activations sets it;
  // null for acts built otherwise, which must not meet float weights).
  const float* x = nullptr;
  void resize(int rows, int n_in);  // grows only; no allocation when big enough
};

}  // namespace tern::kernels
