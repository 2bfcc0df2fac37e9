// NEON block-attention kernels for aarch64: the AVX2 algorithm of
// kv_attend_avx2.cpp. Every entry point runs the tile kernel below: a
// block's keys and values are decoded once for all the query rows given,
// then each row gets its scores (8 keys a pass), one block max, one rescale
// of (l, acc), vectorised exps (4 lanes) and acc = acc * corr + sum_t p_t v_t
// with up to 64 dims in registers while the value rows stream past.
//
// Integer keys (int8, int4) score as exact int32 dot products against the
// row's query rounded to 15-bit codes with one scale, as on AVX2: by SMLAL
// (int16 x int16) in the "neon" table (armv8.0), by two SDOTs per 16 dims in
// "neon-dotprod" (kv_attend_dotprod.cpp). The two compute the same integers,
// and all else here is shared, so they give bit-identical results. F16 keys
// keep fp32 scores. Softmax is fp32.
#include <arm_neon.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "tern/core/half.h"
#include "tern/kv/kv_attend.h"

namespace tern::kv {

// kv_attend_dotprod.cpp (built with +dotprod): sums[t] = qc . ki[t] for
// t < np, int8 key rows of hd16 codes.
void sdot_key_sums(const int16_t* qc, const int8_t* ki, int hd16, int np, int32_t* sums);

namespace {

// Query codes: |c| <= 32512 = 127 * 256, so a code splits exactly into an
// int8 high part (-127..127) and an int8 low part (-128..127) for SDOT. With
// key codes |k| <= 128, an exact int32 sum holds up to 512 dims (512 x 32512
// x 128 < 2^31), KvLayout's largest head_dim.
inline constexpr float kQueryCodeMax = 32512.0f;
inline constexpr int kMaxHeadDim = 512;

// --- Vector helpers ---------------------------------------------------------

// e^x for x <= 0 (softmax weights e^(s - max)): Cephes' expf as in
// kernels/x86_simd.h's exp_neg (same reduction, polynomial and fused steps,
// about 2 ulp); exactly 0 below -87.3 and for -inf.
inline float32x4_t exp_neg(float32x4_t x) {
  const uint32x4_t tiny = vcltq_f32(x, vdupq_n_f32(-87.3f));
  x = vmaxq_f32(x, vdupq_n_f32(-87.3f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  const float32x4_t y = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t out = vmulq_f32(y, vreinterpretq_f32_s32(e));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(out), tiny));
}

// Scores sv of keys k0..k0+3: those at or past n (the causal edge) become
// -inf; stored at s + k0 and folded into the running max mx.
inline void store_scores(float32x4_t sv, int k0, int n, float* s, float32x4_t& mx) {
  if (k0 + 4 > n) {
    const int32x4_t idx = {0, 1, 2, 3};
    const uint32x4_t keep = vcltq_s32(idx, vdupq_n_s32(n - k0));
    sv = vbslq_f32(keep, sv, vdupq_n_f32(-std::numeric_limits<float>::infinity()));
  }
  mx = vmaxq_f32(mx, sv);
  vst1q_f32(s + k0, sv);
}

// Four keys' lane partial sums -> their 4 sums (keys in lane order).
inline float32x4_t reduce4(const float32x4_t* a) {
  return vpaddq_f32(vpaddq_f32(a[0], a[1]), vpaddq_f32(a[2], a[3]));
}
inline int32x4_t reduce4(const int32x4_t* a) {
  return vpaddq_s32(vpaddq_s32(a[0], a[1]), vpaddq_s32(a[2], a[3]));
}

// --- Decoding a block -------------------------------------------------------

// 8 fp16 codes / int8 codes / fp8 e4m3 codes at p as floats, two registers.
// fp8 values come out / 256: the byte sign-extended to 16 bits and shifted
// left by 7 puts the sign in bit 15 (a copy in bit 14, cleared) and the
// exponent and mantissa in bits 13..7, which read as fp16 are the value * 2^-8.
inline void load8_f16(const uint8_t* p, float32x4_t& lo, float32x4_t& hi) {
  const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(reinterpret_cast<const uint16_t*>(p)));
  lo = vcvt_f32_f16(vget_low_f16(h));
  hi = vcvt_high_f32_f16(h);
}
inline void load8_i8(const uint8_t* p, float32x4_t& lo, float32x4_t& hi) {
  const int16x8_t x = vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(p)));
  lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(x)));
  hi = vcvtq_f32_s32(vmovl_high_s16(x));
}
inline void load8_fp8(const uint8_t* p, float32x4_t& lo, float32x4_t& hi) {
  const int16x8_t x = vshll_n_s8(vld1_s8(reinterpret_cast<const int8_t*>(p)), 7);
  const float16x8_t h =
      vreinterpretq_f16_s16(vandq_s16(x, vreinterpretq_s16_u16(vdupq_n_u16(0xbf80))));
  lo = vcvt_f32_f16(vget_low_f16(h));
  hi = vcvt_high_f32_f16(h);
}

// Rows [0, n) of a block's fp16 keys, or of its values (codes of type T:
// fp16, int8 or fp8 / 256), as floats padded to hd8 dims; rows [n, n8) zeros.
template <KvType T>
void decode_rows(const uint8_t* base, size_t row_bytes, int n, int n8, int hd, int hd8,
                 float* out) {
  for (int t = 0; t < n; ++t) {
    const uint8_t* row = base + size_t(t) * row_bytes;
    float* o = out + size_t(t) * size_t(hd8);
    int j = 0;
    for (; j + 8 <= hd; j += 8) {
      float32x4_t lo, hi;
      if constexpr (T == KvType::F16)
        load8_f16(row + 2 * j, lo, hi);
      else if constexpr (T == KvType::Int8)
        load8_i8(row + j, lo, hi);
      else
        load8_fp8(row + j, lo, hi);
      vst1q_f32(o + j, lo);
      vst1q_f32(o + j + 4, hi);
    }
    for (; j < hd; ++j) {
      if constexpr (T == KvType::F16)
        o[j] = fp16_to_f32(uint16_t(row[2 * j] | (row[2 * j + 1] << 8)));
      else if constexpr (T == KvType::Int8)
        o[j] = float(int8_t(row[j]));
      else
        o[j] = fp8_decode(row[j]) * (1.0f / 256.0f);
    }
    for (; j < hd8; ++j) o[j] = 0.0f;
  }
  for (int t = n; t < n8; ++t) std::fill_n(out + size_t(t) * size_t(hd8), hd8, 0.0f);
}

// --- Scores -----------------------------------------------------------------

// s[0, n8) = the row's scores (qp: hd8 floats, zero-padded) against fp32 key
// rows kf (hd8 dims each), 8 keys a pass, 4 lanes of partial sums per key
// reduced pairwise; keys at or past n score -inf. Returns the block max.
inline float tile_scores_f32(const float* qp, const float* kf, int hd8, int n, float* s) {
  const int np = (n + 7) & ~7;
  float32x4_t mx = vdupq_n_f32(-std::numeric_limits<float>::infinity());
  for (int k0 = 0; k0 < np; k0 += 8) {
    float32x4_t a[8];
    for (int i = 0; i < 8; ++i) a[i] = vdupq_n_f32(0.0f);
    const float* kr = kf + size_t(k0) * size_t(hd8);
    for (int j = 0; j < hd8; j += 4) {
      const float32x4_t qv = vld1q_f32(qp + j);
      for (int i = 0; i < 8; ++i)
        a[i] = vfmaq_f32(a[i], qv, vld1q_f32(kr + size_t(i) * size_t(hd8) + j));
    }
    store_scores(reduce4(a), k0, n, s, mx);
    store_scores(reduce4(a + 4), k0 + 4, n, s, mx);
  }
  return vmaxvq_f32(mx);
}

// A row's query as int16 codes with one scale (amax / 32512, rounded to
// nearest even), padded to hd16 dims with zeros. Returns the scale.
inline float quantize_query(const float* q, int hd, int hd16, int16_t* out) {
  float32x4_t mx = vdupq_n_f32(0.0f);
  int j = 0;
  for (; j + 4 <= hd; j += 4) mx = vmaxq_f32(mx, vabsq_f32(vld1q_f32(q + j)));
  float amax = vmaxvq_f32(mx);
  for (; j < hd; ++j) amax = std::max(amax, std::fabs(q[j]));
  const float scale = amax / kQueryCodeMax;
  const float inv = amax > 0.0f ? kQueryCodeMax / amax : 0.0f;
  j = 0;
  for (; j + 8 <= hd; j += 8) {
    const int32x4_t lo = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(q + j), inv));
    const int32x4_t hi = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(q + j + 4), inv));
    vst1q_s16(out + j, vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi)));
  }
  for (; j < hd; ++j) out[j] = int16_t(std::nearbyint(q[j] * inv));
  for (; j < hd16; ++j) out[j] = 0;
  return scale;
}

// --- Integer keys -------------------------------------------------------------

// Key rows [0, n) (int8, or int4 nibbles: the low ones are dims j.., the
// high ones dims j + hd/2..) as codes of type C (int16 or int8) padded to
// hd16 dims; rows [n, n8) zeros.
template <KvType T, class C>
void stage_keys(const uint8_t* base, size_t row_bytes, int n, int n8, int hd, int hd16, C* out) {
  for (int t = 0; t < n; ++t) {
    const uint8_t* row = base + size_t(t) * row_bytes;
    C* o = out + size_t(t) * size_t(hd16);
    int j = 0;
    if constexpr (T == KvType::Int4Fp8) {
      const int half = hd / 2;
      const int8x8_t eight = vdup_n_s8(8);
      for (; j + 8 <= half; j += 8) {
        const uint8x8_t b = vld1_u8(row + j);
        const int8x8_t lo = vsub_s8(vreinterpret_s8_u8(vand_u8(b, vdup_n_u8(15))), eight);
        const int8x8_t hi = vsub_s8(vreinterpret_s8_u8(vshr_n_u8(b, 4)), eight);
        if constexpr (sizeof(C) == 2) {
          vst1q_s16(o + j, vmovl_s8(lo));
          vst1q_s16(o + half + j, vmovl_s8(hi));
        } else {
          vst1_s8(o + j, lo);
          vst1_s8(o + half + j, hi);
        }
      }
      for (; j < half; ++j) {
        o[j] = C(int(row[j] & 15) - 8);
        o[half + j] = C(int(row[j] >> 4) - 8);
      }
      j = hd;
    } else if constexpr (sizeof(C) == 2) {
      for (; j + 8 <= hd; j += 8)
        vst1q_s16(o + j, vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(row + j))));
      for (; j < hd; ++j) o[j] = C(int8_t(row[j]));
    } else {
      std::memcpy(o, row, size_t(hd));
      j = hd;
    }
    for (; j < hd16; ++j) o[j] = 0;
  }
  for (int t = n; t < n8; ++t) std::fill_n(out + size_t(t) * size_t(hd16), hd16, C(0));
}

// sums[t] = qc . ki[t] for t < np (a multiple of 8), int16 key rows: 8 keys
// a pass, each with 4 int32 lanes of partial sums (exact).
void smlal_key_sums(const int16_t* qc, const int16_t* ki, int hd16, int np, int32_t* sums) {
  for (int k0 = 0; k0 < np; k0 += 8) {
    int32x4_t a[8];
    for (int i = 0; i < 8; ++i) a[i] = vdupq_n_s32(0);
    const int16_t* kr = ki + size_t(k0) * size_t(hd16);
    for (int j = 0; j < hd16; j += 8) {
      const int16x8_t qv = vld1q_s16(qc + j);
      for (int i = 0; i < 8; ++i) {
        const int16x8_t kv = vld1q_s16(kr + size_t(i) * size_t(hd16) + j);
        a[i] = vmlal_high_s16(vmlal_s16(a[i], vget_low_s16(qv), vget_low_s16(kv)), qv, kv);
      }
    }
    vst1q_s32(sums + k0, reduce4(a));
    vst1q_s32(sums + k0 + 4, reduce4(a + 4));
  }
}

// The two ways to the same integer sums: the staged key code type and the
// dot-product loop.
struct SmlalKeys {
  using Code = int16_t;
  static constexpr auto sums = smlal_key_sums;
};
struct SdotKeys {
  using Code = int8_t;
  static constexpr auto sums = sdot_key_sums;
};

// s[0, np) = qscale * kscale[t] * sums[t]; keys at or past n score -inf.
// Returns the block max.
inline float int_scores(const int32_t* sums, float qscale, const float* kscale, int n, float* s) {
  const int np = (n + 7) & ~7;
  float32x4_t mx = vdupq_n_f32(-std::numeric_limits<float>::infinity());
  for (int k0 = 0; k0 < np; k0 += 4) {
    const float32x4_t sv =
        vmulq_f32(vmulq_n_f32(vcvtq_f32_s32(vld1q_s32(sums + k0)), qscale), vld1q_f32(kscale + k0));
    store_scores(sv, k0, n, s, mx);
  }
  return vmaxvq_f32(mx);
}

// --- Values -----------------------------------------------------------------

// acc[0, 4*S) (S strips of 4 dims; the last may be partial: `last` dims) =
// acc * corr + sum_{t < n} p[t] vf[t]; p is read 4 weights a load.
template <int S>
void accumulate_strips(const float* vf, int hd8, int n, const float* p, float corr, float* acc,
                       int last) {
  float32x4_t a[S];
  float tail[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i + 1 < S; ++i) a[i] = vmulq_n_f32(vld1q_f32(acc + 4 * i), corr);
  std::copy_n(acc + 4 * (S - 1), last, tail);
  a[S - 1] = vmulq_n_f32(vld1q_f32(tail), corr);
  int t = 0;
  for (; t + 4 <= n; t += 4) {
    const float32x4_t pv = vld1q_f32(p + t);
    const float* v = vf + size_t(t) * size_t(hd8);
    for (int i = 0; i < S; ++i) a[i] = vfmaq_laneq_f32(a[i], vld1q_f32(v + 4 * i), pv, 0);
    v += hd8;
    for (int i = 0; i < S; ++i) a[i] = vfmaq_laneq_f32(a[i], vld1q_f32(v + 4 * i), pv, 1);
    v += hd8;
    for (int i = 0; i < S; ++i) a[i] = vfmaq_laneq_f32(a[i], vld1q_f32(v + 4 * i), pv, 2);
    v += hd8;
    for (int i = 0; i < S; ++i) a[i] = vfmaq_laneq_f32(a[i], vld1q_f32(v + 4 * i), pv, 3);
  }
  for (; t < n; ++t) {
    const float* v = vf + size_t(t) * size_t(hd8);
    for (int i = 0; i < S; ++i) a[i] = vfmaq_n_f32(a[i], vld1q_f32(v + 4 * i), p[t]);
  }
  for (int i = 0; i + 1 < S; ++i) vst1q_f32(acc + 4 * i, a[i]);
  vst1q_f32(tail, a[S - 1]);
  std::copy_n(tail, last, acc + 4 * (S - 1));
}

using AccumulateFn = void (*)(const float*, int, int, const float*, float, float*, int);
template <int... S>
constexpr std::array<AccumulateFn, sizeof...(S)> accumulate_table(
    std::integer_sequence<int, S...>) {
  return {accumulate_strips<S + 1>...};
}
// Up to 64 dims (16 strips) stay in registers while the value rows stream past.
inline constexpr auto kAccumulate = accumulate_table(std::make_integer_sequence<int, 16>{});

// --- The tile ---------------------------------------------------------------

template <class Code>
struct TileBuffers {
  std::vector<float> kf, vf, q, s, ks;  // fp16 keys, values (rows of hd8), query, scores, scales
  std::vector<Code> ki;                 // integer keys (rows of hd16)
  std::vector<int16_t> qc;              // a row's query codes (hd16)
  std::vector<int32_t> sums;            // a row's integer scores
};

template <class Code>
TileBuffers<Code>& tile_buffers(size_t keys, size_t dims8, size_t dims16, bool int_keys) {
  thread_local TileBuffers<Code> b;
  if (b.vf.size() < keys * dims8) b.vf.resize(keys * dims8);
  if (int_keys && b.ki.size() < keys * dims16) b.ki.resize(keys * dims16);
  if (!int_keys && b.kf.size() < keys * dims8) b.kf.resize(keys * dims8);
  if (b.q.size() < dims8) b.q.resize(dims8);
  if (b.qc.size() < dims16) b.qc.resize(dims16);
  if (b.s.size() < keys) b.s.resize(keys), b.ks.resize(keys), b.sums.resize(keys);
  return b;
}

template <class IK, KvType T>
void attend_tile_neon(const KvLayout& L, const HeadBlock& hb, int nr, const int* n_tok,
                      const float* const* q, float* m_io, float* l_io, float* acc) {
  constexpr KvType VT = T == KvType::F16    ? KvType::F16
                        : T == KvType::Int8 ? KvType::Int8
                                            : KvType::Int8Fp8;
  constexpr bool int_keys = T != KvType::F16;
  const int hd = L.head_dim, hd8 = (hd + 7) & ~7, hd16 = (hd + 15) & ~15;
  assert(hd <= kMaxHeadDim);
  int n_max = 0;
  for (int r = 0; r < nr; ++r) n_max = std::max(n_max, n_tok[r]);
  if (n_max <= 0) return;
  const int n8 = (n_max + 7) & ~7;
  auto& B = tile_buffers<typename IK::Code>(size_t(n8), size_t(hd8), size_t(hd16), int_keys);
  float* s = B.s.data();
  if constexpr (int_keys) {
    stage_keys<T>(hb.k, L.k_row, n_max, n8, hd, hd16, B.ki.data());
    std::copy_n(hb.ks, n_max, B.ks.data());
    std::fill(B.ks.data() + n_max, B.ks.data() + n8, 1.0f);
  } else {
    decode_rows<KvType::F16>(hb.k, L.k_row, n_max, n8, hd, hd8, B.kf.data());
  }
  decode_rows<VT>(hb.v, L.v_row, n_max, n8, hd, hd8, B.vf.data());
  const float v_unit = VT == KvType::Int8Fp8 ? 256.0f : 1.0f;  // fp8 rows decode as value / 256
  for (int r = 0; r < nr; ++r) {
    const int n = n_tok[r];
    if (n <= 0) continue;
    const int np = (n + 7) & ~7;
    float block_max;
    if constexpr (int_keys) {
      const float qs = quantize_query(q[r], hd, hd16, B.qc.data());
      IK::sums(B.qc.data(), B.ki.data(), hd16, np, B.sums.data());
      block_max = int_scores(B.sums.data(), qs, B.ks.data(), n, s);
    } else {
      std::copy_n(q[r], hd, B.q.data());
      std::fill(B.q.data() + hd, B.q.data() + hd8, 0.0f);
      block_max = tile_scores_f32(B.q.data(), B.kf.data(), hd8, n, s);
    }
    const float m_new = std::max(m_io[r], block_max);
    const float corr = attend_rescale(m_io[r], m_new);
    const float32x4_t mv = vdupq_n_f32(m_new);
    float32x4_t sum = vdupq_n_f32(0.0f);
    for (int t = 0; t < np; t += 4) {
      const float32x4_t p = exp_neg(vsubq_f32(vld1q_f32(s + t), mv));
      sum = vaddq_f32(sum, p);
      vst1q_f32(s + t, p);
    }
    l_io[r] = l_io[r] * corr + vaddvq_f32(sum);
    m_io[r] = m_new;
    if constexpr (int_keys) {
      for (int t = 0; t < n; ++t) s[t] *= hb.vs[t] * v_unit;
    }
    float* a = acc + size_t(r) * size_t(hd);
    for (int j0 = 0; j0 < hd; j0 += 64) {
      const int dims = std::min(64, hd - j0);
      const int strips = (dims + 3) / 4, last = dims - 4 * (strips - 1);
      kAccumulate[size_t(strips - 1)](B.vf.data() + j0, hd8, n, s, corr, a + j0, last);
    }
  }
}

// Rows and single rows go through the tile, so every path computes alike.
template <class IK, KvType T>
void attend_rows_neon(const KvLayout& L, const HeadBlock& hb, int n_tok, int nr,
                      const float* const* q, float* m, float* l, float* acc) {
  int n[kMaxTileRows];
  for (int r0 = 0; r0 < nr; r0 += kMaxTileRows) {
    const int k = std::min(kMaxTileRows, nr - r0);
    std::fill_n(n, k, n_tok);
    attend_tile_neon<IK, T>(L, hb, k, n, q + r0, m + r0, l + r0, acc + size_t(r0) * L.head_dim);
  }
}

template <class IK, KvType T>
void attend_block_neon(const KvLayout& L, const HeadBlock& hb, int n_tok, const float* q, float* m,
                       float* l, float* acc) {
  attend_tile_neon<IK, T>(L, hb, 1, &n_tok, &q, m, l, acc);
}

template <class IK>
AttendKernels neon_table(const char* isa) {
  return AttendKernels{
      isa,
      {attend_block_neon<IK, KvType::F16>, attend_block_neon<IK, KvType::Int8>,
       attend_block_neon<IK, KvType::Int8Fp8>, attend_block_neon<IK, KvType::Int4Fp8>},
      {attend_rows_neon<IK, KvType::F16>, attend_rows_neon<IK, KvType::Int8>,
       attend_rows_neon<IK, KvType::Int8Fp8>, attend_rows_neon<IK, KvType::Int4Fp8>},
      {attend_tile_neon<IK, KvType::F16>, attend_tile_neon<IK, KvType::Int8>,
       attend_tile_neon<IK, KvType::Int8Fp8>, attend_tile_neon<IK, KvType::Int4Fp8>}};
}

}  // namespace

// The tables only: kv_attend.cpp checks that the CPU runs the ISA first.
// Dotprod-or-better gets the SDOT table (the same numbers, fewer instructions).
const AttendKernels* neon_attend_table(kernels::Isa isa) {
  if (isa == kernels::Isa::NeonDotprod || isa == kernels::Isa::NeonI8mm) {
    static const AttendKernels dotprod = neon_table<SdotKeys>("neon-dotprod");
    return &dotprod;
  }
  static const AttendKernels base = neon_table<SmlalKeys>("neon");
  return &base;
}

}  // namespace tern::kv
