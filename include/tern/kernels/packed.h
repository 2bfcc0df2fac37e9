#pragma once
// Engine-native weight layout: every linear weight is repacked once at load
// into int4 (asymmetric, per group of 32 along the reduction axis) or int8
// (symmetric, per group of 32). Activations are quantized to int8 per group on
// the fly (see quantize_activations), so the hot loops are integer dot products.
//
// Layout (shared by the scalar reference and the fast kernels):
//   rows are grouped into tiles of kTileRows output channels. Within a tile,
//   for each group g along the reduction axis, the tile stores a Block:
//     Int4Asym: d[kTileRows] (f32 scale), m[kTileRows] (f32 minimum),
//               q[kTileRows][16] (two 4-bit codes a byte: low nibble = element j,
//               high nibble = element j+16 of the group; value = d*q + m)
//     Int8Sym:  d[kTileRows] (f32 scale), q[kTileRows][32] (value = d*q)
//   Tiles are stored one after the other: (n_out/kTileRows, n_in/32, Block).
//   The last tile is padded with zero rows when n_out is not a multiple of kTileRows.
//
// Why: a decode GEMV streams one tile's block (kTileRows rows x 32 inputs) with
// unit stride, so each cache line fetched is fully used, and the micro-kernel
// keeps kTileRows accumulators in registers while the 32 activation bytes of
// the group are loaded once and broadcast against all rows of the tile.
#include <cstddef>
#include <cstdint>

#include "tern/core/aligned.h"
#include "tern/core/dtype.h"

namespace tern::kernels {

constexpr int kGroup = 32;     // quantization group along the reduction axis
constexpr int kTileRows = 8;   // output channels per tile

enum class WeightFormat : uint8_t { Int4Asym, Int8Sym };

struct Int4Block {
  float d[kTileRows];
  float m[kTileRows];
  uint8_t q[kTileRows][kGroup / 2];
};
struct Int8Block {
  float d[kTileRows];
  int8_t q[kTileRows][kGroup];
};

// A repacked (n_out, n_in) weight matrix: y = W x computes n_out outputs from n_in inputs.
struct PackedMatrix {
  WeightFormat format = WeightFormat::Int4Asym;
  int n_out = 0;  // output channels (rows of W)
  int n_in = 0;   // reduction length (multiple of kGroup)
  AlignedBuffer<uint8_t> data;

  int n_tiles() const { return (n_out + kTileRows - 1) / kTileRows; }
  int n_groups() const { return n_in / kGroup; }
  size_t block_bytes() const {
    return format == WeightFormat::Int4Asym ? sizeof(Int4Block) : sizeof(Int8Block);
  }
  const uint8_t* tile(int t) const { return data.data() + size_t(t) * n_groups() * block_bytes(); }
  size_t bytes() const { return data.size(); }
};

// Which packed format a GGUF source type maps to by default: 4-bit sources
// stay 4-bit, everything else becomes int8.
WeightFormat default_format_for(DType src);

// Repack a GGUF tensor with rows of n_in elements (src: n_out rows of
// dtype_row_bytes(src_type, n_in) bytes). Q4_1 -> Int4Asym and Q8_0 -> Int8Sym
// are exact; other conversions dequantize and requantize (lossy).
PackedMatrix pack_matrix(DType src_type, const void* src, int n_out, int n_in, WeightFormat fmt);

// Read back row r as floats (n_in values): the exact values the kernels use.
void unpack_row(const PackedMatrix& w, int r, float* dst);

// Activations quantized per row, per group of 32: x ~= d * q. For Int4Asym
// weights the kernels also need s = d * sum(q) per group (the minimum's term).
// Scales are rounded to fp16 precision, as llama.cpp does for its Q8 activations.
struct QuantizedActs {
  int rows = 0;
  int n_in = 0;
  AlignedBuffer<int8_t> q;  // (rows, n_in)
  AlignedBuffer<float> d;   // (rows, n_in/32)
  AlignedBuffer<float> s;   // (rows, n_in/32)
  void resize(int rows, int n_in);  // grows only; no allocation when big enough
};

}  // namespace tern::kernels
