#pragma once
// Byte layout of a KV block and the per-row codecs of each KvType.
//
// A block holds block_tokens (B) consecutive positions of one sequence for
// every layer. Layer l's part of a block is one contiguous slice, so the flash
// tier can read exactly the layer attention needs next:
//
//   block = [slice layer 0][slice layer 1] ... [slice layer n_layers-1]
//   slice = [head 0][head 1] ... [head n_kv_heads-1]               (head_bytes each)
//   head  = [K scales (B) fp32][V scales (B) fp32][K codes (B, k_row)][V codes (B, v_row)]
//
// Each part starts on a 64-byte boundary; F16 has no scales. Token t's key
// codes for a head start at k + t*k_row, so attention streams one head's
// keys (then values) contiguously.
#include <cstddef>
#include <cstdint>

#include "tern/kv/kv_types.h"

namespace tern::kv {

struct KvLayout {
  KvType type = KvType::Int8Fp8;
  int n_layers = 0, n_kv_heads = 0, head_dim = 0, block_tokens = 0;
  size_t k_row = 0;      // bytes of one token's key codes for one head
  size_t v_row = 0;      // bytes of one token's value codes for one head
  bool scaled = false;   // rows carry an fp32 scale
  bool rotated = false;  // keys are stored rotated (see rotate()); queries must be too
  size_t off_ks = 0, off_vs = 0, off_k = 0, off_v = 0;  // within a head area
  size_t head_bytes = 0;                                // one head of one layer of one block
  size_t slice_bytes = 0;                               // one layer of one block
  size_t block_bytes = 0;                               // the whole block

  // Validates the shape (throws InvalidArgument) and computes the offsets.
  static KvLayout make(int n_layers, int n_kv_heads, int head_dim, int block_tokens, KvType type);

  // Bytes one token occupies, all layers and kv heads, K and V (no padding).
  size_t bytes_per_token() const;
};

// One kv head's rows in one layer slice of one block. ks/vs are null for F16.
struct HeadBlock {
  const uint8_t* k = nullptr;  // (B, k_row)
  const float* ks = nullptr;   // (B)
  const uint8_t* v = nullptr;  // (B, v_row)
  const float* vs = nullptr;   // (B)
};

inline HeadBlock head_block(const KvLayout& L, const uint8_t* slice, int kvh) {
  const uint8_t* h = slice + size_t(kvh) * L.head_bytes;
  HeadBlock hb;
  hb.k = h + L.off_k;
  hb.v = h + L.off_v;
  if (L.scaled) {
    hb.ks = reinterpret_cast<const float*>(h + L.off_ks);
    hb.vs = reinterpret_cast<const float*>(h + L.off_vs);
  }
  return hb;
}

// Asks for a block's head area (scales and codes, contiguous; hb as
// head_block() gave it) to be read into L2 ahead of its tile: consecutive
// blocks of a sequence lie a whole block (every layer) apart, so the hardware
// prefetcher does not run into the next one. Into L2 (prefetcht1): a decode
// tile on a cold SmolLM2-shaped block took 0.85 us of CPU with it, 1.08 us
// prefetching into L1 (its fill buffers then stall the loads of the block in
// hand), 1.33 us without.
inline void prefetch_head_area(const KvLayout& L, const HeadBlock& hb) {
  const uint8_t* head = hb.k - L.off_k;
  for (size_t o = 0; o < L.head_bytes; o += 64) __builtin_prefetch(head + o, 0, 2);
}

// Writes token t (0..B-1) of one head: x_k, x_v (head_dim floats each) are
// encoded into the head area starting at `head` (writable, head_bytes).
void encode_token(const KvLayout& L, const float* x_k, const float* x_v, uint8_t* head, int t);

// Row codecs (one token, one head, n = head_dim values).
//   int8:  scale = max|x| / 127, code = round(x / scale) in [-127, 127]
//   int4:  scale = max|x| / 7,   code = round(x / scale) + 8 in [1, 15]; byte j
//          holds element j (low nibble) and element j + n/2 (high nibble)
//   fp8:   scale = max|x| / 448, code = e4m3(x / scale), round to nearest even
// A row of zeros gets scale 0 (and decodes to zeros).
void encode_int8(const float* x, int n, int8_t* codes, float* scale);
void encode_int4(const float* x, int n, uint8_t* codes, float* scale);
void encode_fp8(const float* x, int n, uint8_t* codes, float* scale);
void encode_f16(const float* x, int n, uint16_t* codes);

// Decodes key / value rows of any type to floats (the reference for tests).
void decode_k(const KvLayout& L, const HeadBlock& hb, int t, float* out);
void decode_v(const KvLayout& L, const HeadBlock& hb, int t, float* out);

// Key rotation. Per-token key quantization suffers from outlier channels (a
// few dims far larger than the rest set the scale and crush the others). A
// fixed orthogonal transform R = H D / sqrt(n) (D: pseudo-random signs, H:
// Walsh-Hadamard) spreads every channel over all dims; applied to keys before
// they are stored and to queries before Q.K, it leaves every score unchanged
// (Rq . Rk = q . k) while making rows far easier to quantize. Needs a
// power-of-two head_dim; KvLayout::rotated says whether a layout uses it.
bool can_rotate(int head_dim);
void rotate(const float* x, int n, float* out);    // out = R x   (out may alias x)
void unrotate(const float* x, int n, float* out);  // out = R^T x (out may alias x)

// fp32 -> fp8 e4m3 (OCP FN), round to nearest even, saturating at +-448: the
// same result as tern::f32_to_fp8e4m3, without frexp/ldexp.
uint8_t fp8_encode(float f);
// fp8 e4m3 -> fp32 through a 256-entry table.
float fp8_decode(uint8_t v);

}  // namespace tern::kv
