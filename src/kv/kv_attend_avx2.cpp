// AVX2 + FMA + F16C block-attention kernels. Built with TERN_AVX2_FLAGS and
// used only when kernels' dispatch point picked an AVX2-family table (see
// kv_attend.cpp). The exp polynomial and hsum come from kernels/x86_simd.h.
//
// Every entry point runs the tile kernel below: a block's keys and values are
// decoded once for all the query rows given, then each row gets its scores,
// one block max, one rescale of (l, acc), vectorised exps and
// acc += sum_t p_t v_t. A span (prefill and split-K segments) prepares the
// rows' queries once for all its blocks. From 8 rows on, integer scores are
// a small GEMM against the block's keys transposed into dim pairs (two rows
// per key load, no horizontal adds); the int32 sums are exact, so the scores
// are the same bits either way. Measured (kv_tile_bench, 64 rows, 32-token
// block, head 64, thread CPU time, EPYC Zen 4): 10.9 us a tile before, 6.7
// us a block in a span after, with AVX-512 at 5.9 us.
//
// Integer keys (int8, int4) score in int16 x int16 -> int32 (vpmaddwd, twice
// an FMA's multiply-adds) against the row's query rounded to 15-bit codes with
// one scale. Measured: score errors of 2.5e-4 median, 1e-3 worst (SmolLM2) and
// 2.9e-4 / 3.4e-3 (Gemma 3) against the fp32 scores; perplexity at c=1024
// (int8-fp8 KV) 30.338 -> 30.346 on SmolLM2, 28.833 -> 28.743 on Gemma 3
// (the KV's own int8-fp8 rounding moves Gemma's by -0.8% from f16); prefill
// of 512 at depth 4096 +11%. F16 keys keep the fp32 scores.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../kernels/x86_simd.h"  // private to the x86 files of kernels and kv
#include "tern/kv/kv_attend.h"

namespace tern::kv {
namespace {

using kernels::x86::exp_neg;
using kernels::x86::hsum;

// 8 consecutive codes of a row, as floats (fp8 values come out / 256: the
// e4m3 bits shifted into fp16 position read as fp16 are the value * 2^-8).
inline __m256 load8_f16(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8_i8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
// e4m3 byte b -> fp16 bits: sign-extend to 16 bits and shift left by 7: bit 15
// gets the sign (a copy of it), bits 13..7 the exponent and mantissa; bit 14
// also got the sign and is cleared.
inline __m256 load8_fp8(const uint8_t* p) {
  const __m128i x = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(x, 7), _mm_set1_epi16(int16_t(0xbf80))));
}

// Key codes of 8 dims j..j+7 (int4: the low nibbles are dims j.., the high
// nibbles dims j+n/2..).
template <KvType T>
inline __m256 load8_v(const uint8_t* row, int j) {
  if constexpr (T == KvType::F16)
    return load8_f16(row + 2 * j);
  else if constexpr (T == KvType::Int8)
    return load8_i8(row + j);
  else
    return load8_fp8(row + j);
}
template <KvType T>
inline float load1_v(const uint8_t* row, int j) {
  if constexpr (T == KvType::F16)
    return _cvtsh_ss(uint16_t(row[2 * j] | (row[2 * j + 1] << 8)));
  else if constexpr (T == KvType::Int8)
    return float(int8_t(row[j]));
  else
    return fp8_decode(row[j]) * (1.0f / 256.0f);
}

// --- Tiles: many rows against one block ------------------------------------
//
// The block's keys and values are decoded once into fp32 rows padded to a
// multiple of 8 dims (zeros beyond head_dim), shared by every row of the
// tile. Per row: scores 8 keys at a time (eight accumulators over the dims,
// reduced together), one block max, one rescale, vectorised exps, then
// acc = acc * corr + sum_t p_t v_t with up to 64 dims in registers while the
// value rows stream past. A row's every operation and its order depend only
// on its own query, its own token count and the block, never on the other
// rows: one row alone and the same row in a tile give bit-identical results.

struct TileBuffers {
  std::vector<float> kf, vf, s, ks, vsu;
  std::vector<int16_t> ki;  // integer keys as int16 (dims padded to 16)
  std::vector<int32_t> kp;  // the same transposed into dim pairs (transpose_keys_i16)
  // The rows' queries as the scores read them, made once per tile or span:
  // 15-bit codes and a scale per row (integer keys), or fp32 padded to 8
  // dims (f16 keys, or heads too wide for exact int32 sums).
  std::vector<int16_t> qi;
  std::vector<float> qf, qs;
};

TileBuffers& tile_buffers(size_t keys, size_t dims) {
  thread_local TileBuffers b;
  if (b.kf.size() < keys * dims) {
    b.kf.resize(keys * dims);
    b.vf.resize(keys * dims);
  }
  const size_t dims16 = (dims + 15) & ~size_t(15);
  if (b.ki.size() < keys * dims16) b.ki.resize(keys * dims16), b.kp.resize(keys * dims16 / 2);
  if (b.qi.size() < kMaxTileRows * dims16) {
    b.qi.resize(kMaxTileRows * dims16);
    b.qf.resize(kMaxTileRows * dims16);
    b.qs.resize(kMaxTileRows);
  }
  if (b.ks.size() < keys) b.s.resize(kMaxTileRows * keys), b.ks.resize(keys), b.vsu.resize(keys);
  return b;
}

// Decodes rows [0, n) of a block's keys or values (codes of type T) into
// floats, padded to hd8 dims; rows [n, n8) become zeros.
template <KvType T, bool Key>
void decode_block(const uint8_t* base, size_t row_bytes, int n, int n8, int hd, int hd8,
                  float* out) {
  for (int t = 0; t < n; ++t) {
    const uint8_t* row = base + size_t(t) * row_bytes;
    float* o = out + size_t(t) * size_t(hd8);
    int j = 0;
    if constexpr (Key && T == KvType::Int4Fp8) {
      const int half = hd / 2;
      const __m256i lo_mask = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
      for (; j + 8 <= half; j += 8) {
        const __m256i b =
            _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + j)));
        _mm256_storeu_ps(o + j,
                         _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(b, lo_mask), eight)));
        _mm256_storeu_ps(o + half + j,
                         _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b, 4), eight)));
      }
      for (; j < half; ++j) {
        o[j] = float(int(row[j] & 15) - 8);
        o[half + j] = float(int(row[j] >> 4) - 8);
      }
      j = hd;
    } else {
      constexpr KvType C = Key ? (T == KvType::F16 ? KvType::F16 : KvType::Int8)
                               : (T == KvType::F16    ? KvType::F16
                                  : T == KvType::Int8 ? KvType::Int8
                                                      : KvType::Int8Fp8);
      if constexpr (C == KvType::Int8Fp8) {  // 16 codes a step: one widening for two stores
        for (; j + 16 <= hd; j += 16) {
          const __m256i x =
              _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j)));
          const __m256i h =
              _mm256_and_si256(_mm256_slli_epi16(x, 7), _mm256_set1_epi16(int16_t(0xbf80)));
          _mm256_storeu_ps(o + j, _mm256_cvtph_ps(_mm256_castsi256_si128(h)));
          _mm256_storeu_ps(o + j + 8, _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)));
        }
      }
      for (; j + 8 <= hd; j += 8) _mm256_storeu_ps(o + j, load8_v<C>(row, j));
      for (; j < hd; ++j) o[j] = load1_v<C>(row, j);
    }
    for (; j < hd8; ++j) o[j] = 0.0f;
  }
  for (int t = n; t < n8; ++t) std::fill_n(out + size_t(t) * size_t(hd8), hd8, 0.0f);
}

#include "kv_tile_scores.inl"

// Integer keys (int8, or int4 stored as nibbles) of rows [0, n) as int16,
// padded to hd16 dims; rows [n, n8) become zeros.
template <KvType T>
void decode_keys_i16(const uint8_t* base, size_t row_bytes, int n, int n8, int hd, int hd16,
                     int16_t* out) {
  for (int t = 0; t < n; ++t) {
    const uint8_t* row = base + size_t(t) * row_bytes;
    int16_t* o = out + size_t(t) * size_t(hd16);
    int j = 0;
    if constexpr (T == KvType::Int4Fp8) {
      const int half = hd / 2;
      for (; j < half; ++j) {
        o[j] = int16_t(int(row[j] & 15) - 8);
        o[half + j] = int16_t(int(row[j] >> 4) - 8);
      }
      j = hd;
    } else if (hd == 64) {  // the usual head: one token's codes in four widening loads
      const __m128i* src = reinterpret_cast<const __m128i*>(row);
      __m256i* dst = reinterpret_cast<__m256i*>(o);
      const __m256i c0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(src));
      const __m256i c1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(src + 1));
      const __m256i c2 = _mm256_cvtepi8_epi16(_mm_loadu_si128(src + 2));
      const __m256i c3 = _mm256_cvtepi8_epi16(_mm_loadu_si128(src + 3));
      _mm256_storeu_si256(dst, c0);
      _mm256_storeu_si256(dst + 1, c1);
      _mm256_storeu_si256(dst + 2, c2);
      _mm256_storeu_si256(dst + 3, c3);
      j = hd;
    } else {
      for (; j + 16 <= hd; j += 16)
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(o + j),
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j))));
      for (; j < hd; ++j) o[j] = int16_t(int8_t(row[j]));
    }
    for (; j < hd16; ++j) o[j] = 0;
  }
  for (int t = n; t < n8; ++t) std::fill_n(out + size_t(t) * size_t(hd16), hd16, int16_t(0));
}

// A row's query as int16 codes with one scale (amax / 32767, rounded to
// nearest): 15 bits, far finer than the keys' own codes. Returns the scale.
inline float quantize_q_i16(const float* q, int hd, int hd16, int16_t* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 mx = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= hd; j += 8)
    mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(q + j), abs_mask));
  float amax = hsum_max(mx);
  for (; j < hd; ++j) amax = std::max(amax, std::fabs(q[j]));
  const float scale = amax / 32767.0f;
  const float inv = amax > 0.0f ? 32767.0f / amax : 0.0f;
  const __m256 iv = _mm256_set1_ps(inv);
  j = 0;
  for (; j + 16 <= hd; j += 16) {
    const __m256i lo = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(q + j), iv));
    const __m256i hi = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(q + j + 8), iv));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j),
                        _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xd8));
  }
  for (; j < hd; ++j) out[j] = int16_t(std::nearbyint(q[j] * inv));
  for (; j < hd16; ++j) out[j] = 0;
  return scale;
}

// acc[0, 8*S) (S strips of 8 dims; the last one may be partial: `last` dims)
// = acc * corr + sum_t p[t] vf[t]. A partial strip goes through a padded
// copy, so the loop itself has plain loads and stores only: with masked ones
// in it, GCC 12 kept the accumulators on the stack (a store of every one on
// every token, half the loop's time).
template <int S>
void accumulate_strips(const float* vf, int hd8, int n, const float* p, float corr, float* acc,
                       int last) {
  alignas(32) float pad[8 * S];
  float* dst = acc;
  if (last != 8) {
    std::copy_n(acc, 8 * (S - 1) + last, pad);
    dst = pad;
  }
  __m256 a[S];
  const __m256 c = _mm256_set1_ps(corr);
#pragma GCC unroll 8
  for (int i = 0; i < S; ++i) a[i] = _mm256_mul_ps(_mm256_loadu_ps(dst + 8 * i), c);
  for (int t = 0; t < n; ++t) {
    const __m256 pb = _mm256_broadcast_ss(p + t);
    const float* v = vf + size_t(t) * size_t(hd8);
#pragma GCC unroll 8
    for (int i = 0; i < S; ++i) a[i] = _mm256_fmadd_ps(pb, _mm256_loadu_ps(v + 8 * i), a[i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < S; ++i) _mm256_storeu_ps(dst + 8 * i, a[i]);
  if (last != 8) std::copy_n(pad, 8 * (S - 1) + last, acc);
}

// One row's tokens [t0, n) into its 4 strips (accumulate_pair4's tails).
inline void tail4(const float* vf, int hd8, const float* p, int t0, int n, __m256& a0, __m256& a1,
                  __m256& a2, __m256& a3) {
  for (int t = t0; t < n; ++t) {
    const __m256 pb = _mm256_broadcast_ss(p + t);
    const float* v = vf + size_t(t) * size_t(hd8);
    a0 = _mm256_fmadd_ps(pb, _mm256_loadu_ps(v), a0);
    a1 = _mm256_fmadd_ps(pb, _mm256_loadu_ps(v + 8), a1);
    a2 = _mm256_fmadd_ps(pb, _mm256_loadu_ps(v + 16), a2);
    a3 = _mm256_fmadd_ps(pb, _mm256_loadu_ps(v + 24), a3);
  }
}

// Two rows at once over 4 full strips (32 dims): each value load feeds both
// rows' FMAs (6 loads for 8 FMAs a token instead of 9 for 8). Each row's sums
// are taken in the same order as accumulate_strips: tokens [0, n_lo) for both,
// then the longer row's own tail, so the results are the same bits.
void accumulate_pair4(const float* vf, int hd8, const int* n, const float* const* p,
                      const float* corr, float* const* acc) {
  // Named accumulators, not arrays: GCC 12 kept arrays of them on the stack
  // (a store of all eight on every token).
  const __m256 c0 = _mm256_set1_ps(corr[0]), c1 = _mm256_set1_ps(corr[1]);
  __m256 a00 = _mm256_mul_ps(_mm256_loadu_ps(acc[0]), c0);
  __m256 a01 = _mm256_mul_ps(_mm256_loadu_ps(acc[0] + 8), c0);
  __m256 a02 = _mm256_mul_ps(_mm256_loadu_ps(acc[0] + 16), c0);
  __m256 a03 = _mm256_mul_ps(_mm256_loadu_ps(acc[0] + 24), c0);
  __m256 a10 = _mm256_mul_ps(_mm256_loadu_ps(acc[1]), c1);
  __m256 a11 = _mm256_mul_ps(_mm256_loadu_ps(acc[1] + 8), c1);
  __m256 a12 = _mm256_mul_ps(_mm256_loadu_ps(acc[1] + 16), c1);
  __m256 a13 = _mm256_mul_ps(_mm256_loadu_ps(acc[1] + 24), c1);
  // One register load of each value vector for both rows' FMAs (the empty
  // asm keeps GCC from folding the load into each FMA).
  auto load = [](const float* v) {
    __m256 x = _mm256_loadu_ps(v);
    __asm__("" : "+x"(x));
    return x;
  };
  const int n_lo = std::min(n[0], n[1]);
  int t = 0;
  for (; t < n_lo; ++t) {
    const __m256 p0 = _mm256_broadcast_ss(p[0] + t), p1 = _mm256_broadcast_ss(p[1] + t);
    const float* v = vf + size_t(t) * size_t(hd8);
    const __m256 x0 = load(v), x1 = load(v + 8), x2 = load(v + 16), x3 = load(v + 24);
    a00 = _mm256_fmadd_ps(p0, x0, a00);
    a10 = _mm256_fmadd_ps(p1, x0, a10);
    a01 = _mm256_fmadd_ps(p0, x1, a01);
    a11 = _mm256_fmadd_ps(p1, x1, a11);
    a02 = _mm256_fmadd_ps(p0, x2, a02);
    a12 = _mm256_fmadd_ps(p1, x2, a12);
    a03 = _mm256_fmadd_ps(p0, x3, a03);
    a13 = _mm256_fmadd_ps(p1, x3, a13);
  }
  tail4(vf, hd8, p[0], t, n[0], a00, a01, a02, a03);
  tail4(vf, hd8, p[1], t, n[1], a10, a11, a12, a13);
  _mm256_storeu_ps(acc[0], a00);
  _mm256_storeu_ps(acc[0] + 8, a01);
  _mm256_storeu_ps(acc[0] + 16, a02);
  _mm256_storeu_ps(acc[0] + 24, a03);
  _mm256_storeu_ps(acc[1], a10);
  _mm256_storeu_ps(acc[1] + 8, a11);
  _mm256_storeu_ps(acc[1] + 16, a12);
  _mm256_storeu_ps(acc[1] + 24, a13);
}

// acc = acc * corr + sum_t p[t] vf[t] over all hd dims for one row, in
// 64-dim passes of up to 8 strips (the last pass's last strip may be partial).
void accumulate_row(const float* vf, int hd, int hd8, int n, const float* s, float corr, float* a) {
  for (int j0 = 0; j0 < hd; j0 += 64) {
    const int dims = std::min(64, hd - j0);
    const int strips = (dims + 7) / 8, last = dims - 8 * (strips - 1);
    const float* v = vf + j0;
    using Strips = void (*)(const float*, int, int, const float*, float, float*, int);
    static constexpr Strips by_count[8] = {
        accumulate_strips<1>, accumulate_strips<2>, accumulate_strips<3>, accumulate_strips<4>,
        accumulate_strips<5>, accumulate_strips<6>, accumulate_strips<7>, accumulate_strips<8>};
    by_count[strips - 1](v, hd8, n, s, corr, a + j0, last);
  }
}

// Integer keys score in int16 x int16 -> int32 (vpmaddwd: twice the
// multiply-adds of an fp32 FMA a cycle) against the query's 15-bit codes;
// exact integer sums up to head_dim 256 (|sum| < 256 x 32767 x 128 < 2^31).
template <KvType T>
constexpr bool int_keys(int hd) {
  return T != KvType::F16 && hd <= kMaxIntScoreDims;
}

// Rows from which integer scores go through the transposed keys (the
// transpose costs about what 4 rows' scores do).
inline constexpr int kGemmScoreRows = 8;

// The rows' queries as tile_block reads them (B.qi / B.qs or B.qf).
template <KvType T>
void prepare_rows(const KvLayout& L, int nr, const float* const* q, TileBuffers& B) {
  const int hd = L.head_dim, hd8 = (hd + 7) & ~7, hd16 = (hd + 15) & ~15;
  for (int r = 0; r < nr; ++r) {
    if (int_keys<T>(hd)) {
      B.qs[size_t(r)] = quantize_q_i16(q[r], hd, hd16, B.qi.data() + size_t(r) * size_t(hd16));
    } else {
      float* qp = B.qf.data() + size_t(r) * size_t(hd8);
      std::copy_n(q[r], hd, qp);
      std::fill(qp + hd, qp + hd8, 0.0f);
    }
  }
}

// One block for rows prepared by prepare_rows.
template <KvType T>
void tile_block(const KvLayout& L, const HeadBlock& hb, int nr, const int* n_tok, TileBuffers& B,
                float* m_io, float* l_io, float* acc) {
  constexpr KvType VT = T == KvType::F16    ? KvType::F16
                        : T == KvType::Int8 ? KvType::Int8
                                            : KvType::Int8Fp8;
  const int hd = L.head_dim, hd8 = (hd + 7) & ~7, hd16 = (hd + 15) & ~15;
  int n_max = 0;
  for (int r = 0; r < nr; ++r) n_max = std::max(n_max, n_tok[r]);
  if (n_max <= 0) return;
  const int n8 = (n_max + 7) & ~7;
  const bool gemm_scores = int_keys<T>(hd) && nr >= kGemmScoreRows;
  float* kf = B.kf.data();
  float* vf = B.vf.data();
  float* s = B.s.data();
  if (int_keys<T>(hd) && !gemm_scores)
    decode_keys_i16<T>(hb.k, L.k_row, n_max, n8, hd, hd16, B.ki.data());
  if (!int_keys<T>(hd)) decode_block<T, true>(hb.k, L.k_row, n_max, n8, hd, hd8, kf);
  decode_block<T, false>(hb.v, L.v_row, n_max, n8, hd, hd8, vf);
  float* ks = B.ks.data();
  float* vsu = B.vsu.data();
  if constexpr (T != KvType::F16) {
    // Each token's value scale in the units vf holds (fp8 rows decode as
    // value / 256), padded with zeros: a weight is p * vsu[t].
    const float v_unit = VT == KvType::Int8Fp8 ? 256.0f : 1.0f;
    std::copy_n(hb.ks, n_max, ks);
    std::fill(ks + n_max, ks + n8, 1.0f);
    for (int t = 0; t < n_max; ++t) vsu[t] = hb.vs[t] * v_unit;
    std::fill(vsu + n_max, vsu + n8, 0.0f);
  }
  // Integer keys, many rows (prefill): every row's scores first, two rows
  // at a time against the transposed keys. A few rows (decode) score one at a
  // time against the rows as decoded. The sums are exact integers either way.
  float row_max[kMaxTileRows];
  if (gemm_scores) {
    decode_keys_i16<T>(hb.k, L.k_row, n_max, n8, hd, hd16, B.ki.data());
    transpose_keys_i16(B.ki.data(), hd16, n8, B.kp.data());
    int live[kMaxTileRows], n_live = 0;
    for (int r = 0; r < nr; ++r)
      if (n_tok[r] > 0) live[n_live++] = r;
    for (int i = 0; i < n_live; i += 2) {
      const int R = std::min(2, n_live - i);
      const int32_t* qp[2];
      float qs[2], mx[2];
      float* sr[2];
      int n[2];
      for (int j = 0; j < R; ++j) {
        const int r = live[i + j];
        qp[j] = reinterpret_cast<const int32_t*>(B.qi.data() + size_t(r) * size_t(hd16));
        qs[j] = B.qs[size_t(r)];
        sr[j] = s + size_t(r) * size_t(n8);
        n[j] = n_tok[r];
      }
      if (R == 2)
        rows_scores_i16<2>(qp, qs, B.kp.data(), ks, hd16 / 2, n8, n, sr, mx);
      else
        rows_scores_i16<1>(qp, qs, B.kp.data(), ks, hd16 / 2, n8, n, sr, mx);
      for (int j = 0; j < R; ++j) row_max[live[i + j]] = mx[j];
    }
  }
  // Many rows (scores already per row): the values go in after every row's
  // weights, two rows at a time (accumulate_pair4) where head_dim allows.
  const bool pair_rows = gemm_scores && hd % 32 == 0;
  float corr_of[kMaxTileRows];
  for (int r = 0; r < nr; ++r) {
    const int n = n_tok[r];
    if (n <= 0) continue;
    const int np = (n + 7) & ~7;
    float block_max;
    if (gemm_scores) {
      s = B.s.data() + size_t(r) * size_t(n8);
      block_max = row_max[r];
    } else if (int_keys<T>(hd)) {
      block_max = tile_scores_i16(B.qi.data() + size_t(r) * size_t(hd16), B.qs[size_t(r)],
                                  B.ki.data(), ks, hd16, n, s);
    } else {
      block_max = tile_scores(B.qf.data() + size_t(r) * size_t(hd8), kf,
                              T != KvType::F16 ? ks : nullptr, hd8, n, s);
    }
    const float m_new = std::max(m_io[r], block_max);
    // libm's expf (attend_rescale), kept: the vector polynomial here (1 ulp
    // from it) moved perplexity at c=4096 by -0.5% (14.4446 -> 14.3688 on
    // GPL-3 + Apache-2.0, SmolLM2), as did expf in double (14.3769): this
    // model's perplexity at depth swings by that much on ulps of the rescale
    // (why is not pinned down), so the kernels keep the numbers they had.
    const float corr = attend_rescale(m_io[r], m_new);
    const __m256 mv = _mm256_set1_ps(m_new);
    __m256 sum = _mm256_setzero_ps();
    for (int t = 0; t < np; t += 8) {
      const __m256 p = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(s + t), mv));
      sum = _mm256_add_ps(sum, p);
      _mm256_storeu_ps(s + t, T != KvType::F16 ? _mm256_mul_ps(p, _mm256_loadu_ps(vsu + t)) : p);
    }
    l_io[r] = l_io[r] * corr + hsum(sum);
    m_io[r] = m_new;
    if (pair_rows)
      corr_of[r] = corr;
    else
      accumulate_row(vf, hd, hd8, n, s, corr, acc + size_t(r) * size_t(hd));
  }
  if (!pair_rows) return;
  int live[kMaxTileRows], n_live = 0;
  for (int r = 0; r < nr; ++r)
    if (n_tok[r] > 0) live[n_live++] = r;
  int i = 0;
  for (; i + 2 <= n_live; i += 2) {
    const int r0 = live[i], r1 = live[i + 1];
    const int n[2] = {n_tok[r0], n_tok[r1]};
    const float* p[2] = {B.s.data() + size_t(r0) * size_t(n8),
                         B.s.data() + size_t(r1) * size_t(n8)};
    const float corr[2] = {corr_of[r0], corr_of[r1]};
    for (int j0 = 0; j0 < hd; j0 += 32) {
      float* a[2] = {acc + size_t(r0) * size_t(hd) + j0, acc + size_t(r1) * size_t(hd) + j0};
      accumulate_pair4(vf + j0, hd8, n, p, corr, a);
    }
  }
  if (i < n_live) {
    const int r = live[i];
    accumulate_row(vf, hd, hd8, n_tok[r], B.s.data() + size_t(r) * size_t(n8), corr_of[r],
                   acc + size_t(r) * size_t(hd));
  }
}

template <KvType T>
void attend_tile_avx2(const KvLayout& L, const HeadBlock& hb, int nr, const int* n_tok,
                      const float* const* q, float* m_io, float* l_io, float* acc) {
  int n_max = 0;
  for (int r = 0; r < nr; ++r) n_max = std::max(n_max, n_tok[r]);
  if (n_max <= 0) return;
  TileBuffers& B = tile_buffers(size_t((n_max + 7) & ~7), size_t((L.head_dim + 7) & ~7));
  prepare_rows<T>(L, nr, q, B);
  tile_block<T>(L, hb, nr, n_tok, B, m_io, l_io, acc);
}

// The tile block by block, the queries prepared once.
template <KvType T>
void attend_span_avx2(const KvLayout& L, const HeadBlock* hbs, int n_blocks, int nr, const int* ctx,
                      const float* const* q, float* m_io, float* l_io, float* acc) {
  const int bt = L.block_tokens;
  int ctx_max = 0;
  for (int r = 0; r < nr; ++r) ctx_max = std::max(ctx_max, ctx[r]);
  n_blocks = std::min(n_blocks, (ctx_max + bt - 1) / bt);
  if (n_blocks <= 0) return;
  TileBuffers& B = tile_buffers(size_t((bt + 7) & ~7), size_t((L.head_dim + 7) & ~7));
  prepare_rows<T>(L, nr, q, B);
  int n[kMaxTileRows];
  for (int i = 0; i < n_blocks; ++i) {
    if (i + 1 < n_blocks) prefetch_head_area(L, hbs[i + 1]);
    for (int r = 0; r < nr; ++r) n[r] = std::clamp(ctx[r] - i * bt, 0, bt);
    tile_block<T>(L, hbs[i], nr, n, B, m_io, l_io, acc);
  }
}

// Rows and single rows go through the tile, so every path computes alike.
template <KvType T>
void attend_rows_avx2(const KvLayout& L, const HeadBlock& hb, int n_tok, int nr,
                      const float* const* q, float* m, float* l, float* acc) {
  int n[kMaxTileRows];
  for (int r0 = 0; r0 < nr; r0 += kMaxTileRows) {
    const int k = std::min(kMaxTileRows, nr - r0);
    std::fill_n(n, k, n_tok);
    attend_tile_avx2<T>(L, hb, k, n, q + r0, m + r0, l + r0, acc + size_t(r0) * L.head_dim);
  }
}

template <KvType T>
void attend_block_avx2(const KvLayout& L, const HeadBlock& hb, int n_tok, const float* q, float* m,
                       float* l, float* acc) {
  attend_tile_avx2<T>(L, hb, 1, &n_tok, &q, m, l, acc);
}

}  // namespace

// The table only: kv_attend.cpp (generic code) asks kernels' dispatch point
// before using it, so no AVX2 instruction runs on a CPU without it.
const AttendKernels* avx2_attend_table() {
  static const AttendKernels k{
      "avx2",
      {attend_block_avx2<KvType::F16>, attend_block_avx2<KvType::Int8>,
       attend_block_avx2<KvType::Int8Fp8>, attend_block_avx2<KvType::Int4Fp8>},
      {attend_rows_avx2<KvType::F16>, attend_rows_avx2<KvType::Int8>,
       attend_rows_avx2<KvType::Int8Fp8>, attend_rows_avx2<KvType::Int4Fp8>},
      {attend_tile_avx2<KvType::F16>, attend_tile_avx2<KvType::Int8>,
       attend_tile_avx2<KvType::Int8Fp8>, attend_tile_avx2<KvType::Int4Fp8>},
      {attend_span_avx2<KvType::F16>, attend_span_avx2<KvType::Int8>,
       attend_span_avx2<KvType::Int8Fp8>, attend_span_avx2<KvType::Int4Fp8>}};
  return &k;
}

}  // namespace tern::kv
