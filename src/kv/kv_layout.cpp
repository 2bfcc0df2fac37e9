// Block layout and row codecs of the quantized KV types (see kv_layout.h).
#include "tern/kv/kv_layout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "tern/core/half.h"

namespace tern::kv {
namespace {

size_t round64(size_t n) {
  return (n + 63) / 64 * 64;
}

// Rounds to nearest, ties to even (nearbyint in the default rounding mode).
// Where nearbyint is one instruction (AArch64 frinti, x86 with SSE4.1) it is
// used; generic x86-64 makes it a libm call per element (0.4 % of a batch-16
// decode step), so there, for |v| < 2^22 (every code here), adding and taking
// away 1.5 x 2^23 gives the same value. (Not where FMA may be contracted
// into the add: x86-64 without SSE4.1 has no FMA.)
inline float round_even(float v) {
#if defined(__aarch64__) || defined(__SSE4_1__)
  return std::nearbyint(v);
#else
  constexpr float kShift = 12582912.0f;  // 1.5 x 2^23
  return (v + kShift) - kShift;
#endif
}

float absmax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

const std::array<float, 256>& fp8_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> r{};
    for (int i = 0; i < 256; ++i) r[size_t(i)] = fp8e4m3_to_f32(uint8_t(i));
    return r;
  }();
  return t;
}

}  // namespace

const char* to_string(KvType t) {
  switch (t) {
    case KvType::F16:
      return "f16";
    case KvType::Int8:
      return "int8";
    case KvType::Int8Fp8:
      return "int8-fp8";
    case KvType::Int4Fp8:
      return "int4-fp8";
  }
  return "?";
}

KvType parse_kv_type(std::string_view s) {
  if (s == "f16") return KvType::F16;
  if (s == "int8") return KvType::Int8;
  if (s == "int8-fp8" || s == "mixed") return KvType::Int8Fp8;
  if (s == "int4-fp8") return KvType::Int4Fp8;
  throw InvalidArgument("unknown KV type '" + std::string(s) +
                        "' (expected f16, int8, int8-fp8 or int4-fp8)");
}

std::string default_flash_dir() {
  std::error_code ec;
  std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  return (tmp / "tern-kv").string();
}

KvLayout KvLayout::make(int n_layers, int n_kv_heads, int head_dim, int block_tokens, KvType type) {
  if (n_layers < 1 || n_kv_heads < 1)
    throw InvalidArgument("KV: need at least one layer and one kv head");
  if (head_dim < 1 || head_dim > 512) {
    throw InvalidArgument("KV: head_dim " + std::to_string(head_dim) + " is outside 1..512");
  }
  if (type == KvType::Int4Fp8 && head_dim % 2 != 0) {
    throw InvalidArgument("KV: int4 keys need an even head_dim, got " + std::to_string(head_dim));
  }
  if (block_tokens < 1 || block_tokens > 256) {
    throw InvalidArgument("KV: block_tokens " + std::to_string(block_tokens) +
                          " is outside 1..256");
  }
  KvLayout L;
  L.type = type;
  L.n_layers = n_layers;
  L.n_kv_heads = n_kv_heads;
  L.head_dim = head_dim;
  L.block_tokens = block_tokens;
  const size_t hd = size_t(head_dim), B = size_t(block_tokens);
  switch (type) {
    case KvType::F16:
      L.k_row = L.v_row = 2 * hd;
      break;
    case KvType::Int8:
    case KvType::Int8Fp8:
      L.k_row = L.v_row = hd;
      break;
    case KvType::Int4Fp8:
      L.k_row = hd / 2, L.v_row = hd;
      break;
  }
  L.scaled = type != KvType::F16;
  L.rotated = type == KvType::Int4Fp8 && can_rotate(head_dim);
  size_t off = 0;
  if (L.scaled) {
    L.off_ks = 0;
    L.off_vs = round64(4 * B);
    off = round64(L.off_vs + 4 * B);
  }
  L.off_k = off;
  L.off_v = round64(L.off_k + B * L.k_row);
  L.head_bytes = round64(L.off_v + B * L.v_row);
  L.slice_bytes = size_t(n_kv_heads) * L.head_bytes;
  L.block_bytes = size_t(n_layers) * L.slice_bytes;
  return L;
}

size_t KvLayout::bytes_per_token() const {
  return size_t(n_layers) * size_t(n_kv_heads) * (k_row + v_row + (scaled ? 8 : 0));
}

bool can_rotate(int head_dim) {
  return head_dim >= 2 && (head_dim & (head_dim - 1)) == 0;
}

namespace {

// Pseudo-random +-1 per dim, the same for every call (part of the format).
float sign_of(int i) {
  uint64_t x = uint64_t(i) * 0x9e3779b97f4a7c15ull + 0x6a09e667f3bcc909ull;
  x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
  return (x >> 62) & 1 ? -1.0f : 1.0f;
}

// In-place fast Walsh-Hadamard transform, scaled by 1/sqrt(n): orthonormal.
void fwht(float* x, int n) {
  for (int h = 1; h < n; h *= 2) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float s = 1.0f / std::sqrt(float(n));
  for (int i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace

void rotate(const float* x, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = x[i] * sign_of(i);
  fwht(out, n);
}

void unrotate(const float* x, int n, float* out) {
  if (out != x) std::copy_n(x, n, out);
  fwht(out, n);  // H is its own inverse (orthonormal and symmetric)
  for (int i = 0; i < n; ++i) out[i] *= sign_of(i);
}

uint8_t fp8_encode(float f) {
  const uint32_t bits = f32_to_bits(f);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80);
  const uint32_t ax = bits & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7f;                              // NaN
  if (ax >= 0x43e00000u) return sign | 0x7e;                      // >= 448 (and inf): saturate
  if (ax < 0x3c800000u) {                                         // < 2^-6: subnormal steps of 2^-9
    return sign | uint8_t(round_even(bits_to_f32(ax) * 512.0f));  // 8 is the smallest normal
  }
  // Keep 3 mantissa bits, round to nearest even; a carry bumps the exponent.
  const uint32_t r = ax + 0x7ffffu + ((ax >> 20) & 1u);
  return sign | uint8_t((r >> 20) - (120u << 3));  // rebias 127 -> 7
}

float fp8_decode(uint8_t v) {
  return fp8_table()[v];
}

void encode_int8(const float* x, int n, int8_t* codes, float* scale) {
  const float m = absmax(x, n);
  if (m == 0.0f) {
    std::memset(codes, 0, size_t(n));
    *scale = 0.0f;
    return;
  }
  const float inv = 127.0f / m;
  for (int i = 0; i < n; ++i) {
    codes[i] = int8_t(std::clamp(round_even(x[i] * inv), -127.0f, 127.0f));
  }
  *scale = m / 127.0f;
}

void encode_int4(const float* x, int n, uint8_t* codes, float* scale) {
  const int half = n / 2;
  const float m = absmax(x, n);
  const float inv = m == 0.0f ? 0.0f : 7.0f / m;
  auto q = [&](float v) { return uint8_t(int(std::clamp(round_even(v * inv), -7.0f, 7.0f)) + 8); };
  for (int j = 0; j < half; ++j) codes[j] = uint8_t(q(x[j]) | (q(x[j + half]) << 4));
  *scale = m / 7.0f;
}

void encode_fp8(const float* x, int n, uint8_t* codes, float* scale) {
  const float m = absmax(x, n);
  const float inv = m == 0.0f ? 0.0f : 448.0f / m;
  for (int i = 0; i < n; ++i) codes[i] = fp8_encode(x[i] * inv);
  *scale = m / 448.0f;
}

void encode_f16(const float* x, int n, uint16_t* codes) {
  for (int i = 0; i < n; ++i) codes[i] = f32_to_fp16(x[i]);
}

void encode_token(const KvLayout& L, const float* x_k, const float* x_v, uint8_t* head, int t) {
  const int n = L.head_dim;
  uint8_t* k = head + L.off_k + size_t(t) * L.k_row;
  uint8_t* v = head + L.off_v + size_t(t) * L.v_row;
  float* ks = reinterpret_cast<float*>(head + L.off_ks) + t;
  float* vs = reinterpret_cast<float*>(head + L.off_vs) + t;
  switch (L.type) {
    case KvType::F16:  // rows are 2n bytes from a 64-byte aligned start: 2-byte aligned
      encode_f16(x_k, n, reinterpret_cast<uint16_t*>(k));
      encode_f16(x_v, n, reinterpret_cast<uint16_t*>(v));
      break;
    case KvType::Int8:
      encode_int8(x_k, n, reinterpret_cast<int8_t*>(k), ks);
      encode_int8(x_v, n, reinterpret_cast<int8_t*>(v), vs);
      break;
    case KvType::Int8Fp8:
      encode_int8(x_k, n, reinterpret_cast<int8_t*>(k), ks);
      encode_fp8(x_v, n, v, vs);
      break;
    case KvType::Int4Fp8:
      encode_int4(x_k, n, k, ks);
      encode_fp8(x_v, n, v, vs);
      break;
  }
}

void decode_k(const KvLayout& L, const HeadBlock& hb, int t, float* out) {
  const int n = L.head_dim;
  const uint8_t* k = hb.k + size_t(t) * L.k_row;
  switch (L.type) {
    case KvType::F16:
      for (int j = 0; j < n; ++j) {
        uint16_t h;
        std::memcpy(&h, k + 2 * j, 2);
        out[j] = fp16_to_f32(h);
      }
      break;
    case KvType::Int8:
    case KvType::Int8Fp8:
      for (int j = 0; j < n; ++j) out[j] = float(int8_t(k[j])) * hb.ks[t];
      break;
    case KvType::Int4Fp8:
      for (int j = 0; j < n / 2; ++j) {
        out[j] = float(int(k[j] & 15) - 8) * hb.ks[t];
        out[j + n / 2] = float(int(k[j] >> 4) - 8) * hb.ks[t];
      }
      break;
  }
}

void decode_v(const KvLayout& L, const HeadBlock& hb, int t, float* out) {
  const int n = L.head_dim;
  const uint8_t* v = hb.v + size_t(t) * L.v_row;
  switch (L.type) {
    case KvType::F16:
      for (int j = 0; j < n; ++j) {
        uint16_t h;
        std::memcpy(&h, v + 2 * j, 2);
        out[j] = fp16_to_f32(h);
      }
      break;
    case KvType::Int8:
      for (int j = 0; j < n; ++j) out[j] = float(int8_t(v[j])) * hb.vs[t];
      break;
    case KvType::Int8Fp8:
    case KvType::Int4Fp8:
      for (int j = 0; j < n; ++j) out[j] = fp8_decode(v[j]) * hb.vs[t];
      break;
  }
}

}  // namespace tern::kv
