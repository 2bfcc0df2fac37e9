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
      return true;
    default:
      return false;
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
    default:
      break;  // unreachable: can_quantize() checked above
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
