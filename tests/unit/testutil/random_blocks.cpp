#include "random_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tern/core/half.h"
#include "tern/kernels/dequant.h"

namespace tern::test {
namespace {

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Sets the block scale of a block of type t to (about) d; false for a type
// without a known scale field.
bool set_scale(DType t, uint8_t* blk, float d) {
  switch (t) {
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::Q1_0:
    case DType::Q2_0:
      put_f16(blk, d);
      return true;
    case DType::TQ1_0:
      put_f16(blk + 52, d);
      return true;
    case DType::TQ2_0:
      put_f16(blk + 64, d);
      return true;
    case DType::IQ1_M: {  // fp16 nibble k in the top nibble of u16 scale k
      const uint16_t h = f32_to_fp16(d);
      for (int k = 0; k < 4; ++k) {
        uint8_t& hi = blk[49 + 2 * k];
        hi = uint8_t((hi & 0x0F) | (((h >> (4 * k)) & 0xF) << 4));
      }
      return true;
    }
    case DType::MXFP4:  // E8M0: 2^(e - 128) after the doubled e2m1 codes
      blk[0] = uint8_t(std::lround(std::log2(d)) + 128);
      return true;
    case DType::NVFP4:  // each 16's E4M3 scale (8+man) * 2^(x-11) near d, its mantissa kept
      for (int s = 0; s < 4; ++s) {
        const int man = blk[s] & 7;
        const long x = std::lround(std::log2(d) + 11 - std::log2(8.0 + man));
        blk[s] = uint8_t((std::clamp(x, 1L, 15L) << 3) | man);
      }
      return true;
    default:
      return false;
  }
}

}  // namespace

bool can_write_random_blocks(DType t) {
  uint8_t blk[256] = {};
  return set_scale(t, blk, 1.0f);
}

std::vector<uint8_t> random_blocks(DType t, size_t n, float rms, std::mt19937& rng) {
  const DTypeTraits tr = dtype_traits(t);
  std::vector<uint8_t> out(n / tr.block_elems * tr.block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : out) b = uint8_t(byte(rng));
  std::vector<float> y(tr.block_elems);
  for (size_t off = 0; off < out.size(); off += tr.block_bytes) {
    uint8_t* blk = out.data() + off;
    set_scale(t, blk, 1.0f);
    kernels::dequantize_row(t, blk, y.data(), tr.block_elems);
    double ss = 0;
    for (float v : y) ss += double(v) * v;
    const double r = std::sqrt(ss / double(y.size()));
    set_scale(t, blk, r > 0 ? float(rms / r) : 1.0f);
  }
  return out;
}

}  // namespace tern::test
